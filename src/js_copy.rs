//! What the writes are built from ahead of the measurement's first span, shared by every
//! binding's glue and the fetch transport: a value's JS copies, made once per value.

use kvbench_core::StoreError;

/// A value's JS copies, kept with the value (`Value::outside`): one `Uint8Array` every write is
/// built from, and its text for D1, made once per value, not per store. The writes only read
/// it (`binding_tests` writes one value through all of them).
#[derive(Clone)]
pub struct JsCopy {
    pub bytes: js_sys::Uint8Array,
    text: std::rc::Rc<std::cell::OnceCell<wasm_bindgen::JsValue>>,
}

impl JsCopy {
    /// `value`'s copies.
    pub fn of(value: &kvbench_core::Value) -> JsCopy {
        value.outside(|bytes| JsCopy {
            bytes: js_sys::Uint8Array::from(bytes),
            text: Default::default(),
        })
    }

    /// The value as a JS string, when it is UTF-8 text (made by `text` on first use).
    pub fn text(
        &self,
        text: impl FnOnce() -> Result<wasm_bindgen::JsValue, StoreError>,
    ) -> Result<wasm_bindgen::JsValue, StoreError> {
        if let Some(t) = self.text.get() {
            return Ok(t.clone());
        }
        let t = text()?;
        Ok(self.text.get_or_init(|| t).clone())
    }
}
