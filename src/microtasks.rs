//! The futures executor's wake-ups as promise jobs, not `queueMicrotask` calls.
//!
//! js-sys's executor (behind `wasm_bindgen_futures`) schedules each round of task polls with
//! the global `queueMicrotask` when there is one, else with `Promise.resolve().then(...)`: both
//! run the round as a microtask. In workerd `queueMicrotask` wraps every callback in a new
//! function first (to carry the async context), dearer than `then`, and every awaited promise
//! wakes the task once: what it cost `/test` is in docs/measured.md, "Figures behind the code" (`bench/cpu.mjs`).
//!
//! The executor looks for `queueMicrotask` once, when it is first used. So at startup this hides
//! it for exactly that look and then puts it back: everything else sees the runtime's own.

use js_sys::Reflect;
use wasm_bindgen::{JsCast, JsValue};

/// Makes the executor schedule with promise jobs (see the module). It takes effect only before
/// the executor's first use (the worker's start hook); later, or where the global will not let
/// `queueMicrotask` be hidden, the executor keeps using it: the same, only slower.
/// (`wasm_tests::the_executor_does_not_call_queue_microtask` checks it took effect.)
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
