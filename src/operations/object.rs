//! Talking to a Durable Object and keeping its state: the worker's calls to an object (`GET` and
//! `POST` on [`ORIGIN`], JSON answers read by `serde_json`), an object's values in its storage as
//! JSON text, and the times its alarm is set for.

use serde::de::DeserializeOwned;
use serde::Serialize;
use wasm_bindgen::JsValue;
use worker::durable::{ScheduledTime, Storage, Stub};
use worker::{Env, Request, Response, Result};

use crate::bindings::JsClock;
use crate::operations::kept_table::ORIGIN;
use kvbench_core::Clock;
use kvbench_wire::object::ObjectCall;

/// A value an object keeps in its storage, as JSON text (`serde_json`, the messages' serializer,
/// not a second one compiled per stored type).
pub async fn load<T: DeserializeOwned>(storage: &Storage, key: &str) -> Result<Option<T>> {
    match storage.get::<String>(key).await? {
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| worker::Error::RustError(format!("stored {key}: {e}"))),
        None => Ok(None),
    }
}

/// Keeps `value` under `key` ([`load`] reads it).
pub async fn save<T: Serialize>(storage: &Storage, key: &str, value: &T) -> Result<()> {
    storage.put(key, serde_json::to_string(value)?).await
}

/// A JSON body, read as text and parsed by `serde_json` (the SDK's `json()` goes through a JS
/// object and `serde_wasm_bindgen`).
pub fn json_of<T: DeserializeOwned>(text: Result<String>) -> Result<T> {
    Ok(serde_json::from_str(&text?)?)
}

/// Now, epoch ms, on the runtime's clock.
pub(crate) fn now_ms() -> f64 {
    JsClock.now_ms()
}

/// An alarm's time.
pub(crate) fn at(epoch_ms: f64) -> ScheduledTime {
    ScheduledTime::new(js_sys::Date::new(&JsValue::from(epoch_ms)))
}

/// A `GET` call of an object ([`ObjectCall`]): its JSON answer, for the message's own reader.
pub async fn get_json(stub: &Stub, call: impl ObjectCall) -> Result<serde_json::Value, String> {
    let path = call.path();
    let mut r = stub
        .fetch_with_str(&format!("{ORIGIN}{path}"))
        .await
        .map_err(|e| e.to_string())?;
    json_of(r.text().await).map_err(|e| format!("{path}: {e}"))
}

/// A `POST` call of an object ([`ObjectCall`]) with `body`; a non-2xx answer is an error with
/// its status and text.
pub async fn post(stub: &Stub, call: impl ObjectCall, body: &str) -> Result<Response, String> {
    let request = crate::bindings::js_request(
        call.method(),
        &format!("{ORIGIN}{}", call.path()),
        &[],
        Some(&JsValue::from_str(body)),
        false,
    )?;
    let mut response = stub
        .fetch_with_request(request)
        .await
        .map_err(|e| e.to_string())?;
    if response.status_code() >= 300 {
        let text = response.text().await.unwrap_or_default();
        return Err(format!("{}: {text}", response.status_code()));
    }
    Ok(response)
}

/// The test-only var that makes each object log every call it answers, so an e2e test counts
/// what a route asks of the objects (tests/e2e/probes.test.mjs).
pub const CALL_LOG_VAR: &str = "OBJECT_CALL_LOG";

thread_local! {
    /// [`CALL_LOG_VAR`] is `true` in this isolate's objects.
    static CALL_LOG: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Reads [`CALL_LOG_VAR`] as an object is made (its `new`).
pub fn call_log_from(env: &Env) {
    if crate::bindings::env_text(env, CALL_LOG_VAR).as_deref() == Some("true") {
        CALL_LOG.with(|c| c.set(true));
    }
}

/// Logs a call an object answers, when [`CALL_LOG_VAR`] asks for it.
pub fn log_call(class: &str, req: &Request) {
    if CALL_LOG.with(std::cell::Cell::get) {
        worker::console_log!(
            "kvbench-object-call {class} {} {}",
            req.method().as_ref(),
            req.path()
        );
    }
}
