//! The futures executor's wake-ups as promise jobs, not `queueMicrotask` calls: in workerd
//! `queueMicrotask` wraps each callback to carry the async context, dearer than `then` (the cost
//! to `/test`: docs/measured.md, `bench/cpu.mjs`). The executor looks for it once, so it is
//! hidden for that look only.

use js_sys::Reflect;
use wasm_bindgen::{JsCast, JsValue};

/// Makes the executor schedule with promise jobs. Effective only before its first use (the
/// start hook); otherwise it keeps `queueMicrotask`, only slower
/// (`wasm_tests::the_executor_does_not_call_queue_microtask` checks it).
pub fn prefer_promise_jobs() {
    let global: js_sys::Object = js_sys::global().unchecked_into();
    let key = JsValue::from_str("queueMicrotask");
    let own = !js_sys::Object::get_own_property_descriptor(&global, &key).is_undefined();
    let Ok(saved) = Reflect::get(&global, &key) else {
        return;
    };
    if !Reflect::set(&global, &key, &JsValue::UNDEFINED).unwrap_or(false) {
        return;
    }
    // The executor's first use: it reads `globalThis.queueMicrotask` now, and only now.
    worker::wasm_bindgen_futures::spawn_local(async {});
    // Put back as it was: the runtime's method (on the global scope's prototype) shows again.
    let _ = if own {
        Reflect::set(&global, &key, &saved)
    } else {
        Reflect::delete_property(&global, &key)
    };
}
