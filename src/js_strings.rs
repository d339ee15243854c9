//! JS values the worker makes once per isolate: names it passes to JS on every request and its
//! `fetch` header sets (each `&str` handed to JS is a new JS string, about a microsecond).

use std::cell::RefCell;

use wasm_bindgen::JsValue;

/// A header set and the `Headers` object made for it.
type HeaderSet = (Vec<(String, String)>, worker::web_sys::Headers);

thread_local! {
    static NAMES: RefCell<Vec<(&'static str, JsValue)>> = const { RefCell::new(Vec::new()) };
    static HEADERS: RefCell<Vec<HeaderSet>> = const { RefCell::new(Vec::new()) };
}

/// `name` as a JS string, made on first use.
pub fn name(name: &'static str) -> JsValue {
    NAMES.with(|names| {
        let mut names = names.borrow_mut();
        // A few dozen names: a scan of pointers beats hashing the text.
        if let Some((_, js)) = names
            .iter()
            .find(|(n, _)| std::ptr::eq(*n, name) || *n == name)
        {
            return js.clone();
        }
        let js = JsValue::from_str(name);
        names.push((name, js.clone()));
        js
    })
}

/// The most header sets kept (Upstash's read and write, Deno KV's with its current token).
const HEADER_SETS: usize = 8;

/// A JS `Headers` holding exactly `pairs`, made on first use (a request copies the headers it
/// is given). `Err` names the invalid header, never its value.
pub fn headers(pairs: &[(String, String)]) -> Result<worker::web_sys::Headers, String> {
    HEADERS.with(|sets| {
        let mut sets = sets.borrow_mut();
        if let Some((_, headers)) = sets.iter().find(|(p, _)| p.as_slice() == pairs) {
            return Ok(headers.clone());
        }
        let headers =
            worker::web_sys::Headers::new().map_err(|_| "a Headers object".to_string())?;
        for (name, value) in pairs {
            headers
                .set(name, value)
                .map_err(|_| format!("invalid header {name}"))?;
        }
        if sets.len() == HEADER_SETS {
            sets.remove(0);
        }
        sets.push((pairs.to_vec(), headers.clone()));
        Ok(headers)
    })
}
