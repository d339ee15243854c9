//! Implementations of the core's seams on the Workers runtime shared by every store: the
//! environment, `fetch` with an abort signal (the HTTP transport of Upstash and Deno KV, built
//! here from the environment), `Date.now()` and JS timers, the per-isolate CSPRNG seed, and the
//! errors of a binding call.

use std::time::Duration;

use async_trait::async_trait;
use kvbench_core::error::ParamError;
use kvbench_core::spec::env::{
    DENO_KV_ACCESS_TOKEN, DENO_KV_URL, UPSTASH_REDIS_REST_TOKEN as UPSTASH_TOKEN,
    UPSTASH_REDIS_REST_URL as UPSTASH_URL,
};
use kvbench_core::stores::http::{
    body_too_large, Body, OutsideBody, PreparedBody, MAX_RESPONSE_BYTES,
};
use kvbench_core::{
    Clock, Defaults, DenoKvStore, ErrorKind, HttpRequest, HttpResponse, HttpTransport,
    MetadataCache, StoreError, Timer, UpstashStore, Value, ValueGen,
};
use wasm_bindgen::{JsCast, JsValue};

use crate::js_strings::name;
use worker::{AbortController, Delay, Env, Response};

/// Origin of the requests a worker sends its Durable Objects (a stub routes them; it is never
/// resolved).
pub const OBJECT_ORIGIN: &str = "https://kvbench.probe";

/// A request built on the runtime's own `Request` and `RequestInit`, not the SDK's
/// `Request::new_with_init` (which converts every init field across JS and weighs on the bundle,
/// docs/measured.md). `redirect_manual`: a redirect is answered as it is.
pub fn js_request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&JsValue>,
    redirect_manual: bool,
) -> Result<worker::Request, String> {
    let init = worker::web_sys::RequestInit::new();
    init.set_method(method);
    if !headers.is_empty() {
        let h = worker::web_sys::Headers::new().map_err(|e| js_text(&e))?;
        for (name, value) in headers {
            h.set(name, value).map_err(|e| js_text(&e))?;
        }
        init.set_headers(&h);
    }
    if let Some(body) = body {
        init.set_body(body);
    }
    if redirect_manual {
        init.set_redirect(worker::web_sys::RequestRedirect::Manual);
    }
    worker::web_sys::Request::new_with_str_and_init(url, &init)
        .map(worker::Request::from)
        .map_err(|e| js_text(&e))
}

/// What is read of one environment object: each var or secret by name, and the defaults.
struct EnvRead {
    of: JsValue,
    values: std::collections::HashMap<String, Option<String>>,
    defaults: Option<Result<Defaults, ParamError>>,
}

thread_local! {
    static READ: std::cell::RefCell<Option<EnvRead>> = const { std::cell::RefCell::new(None) };
}

/// `f` on what is read of `env`, started afresh when `env` is another object than last time.
fn env_read<R>(env: &Env, f: impl FnOnce(&mut EnvRead) -> R) -> R {
    let env_object: &JsValue = env.as_ref();
    READ.with(|read| {
        let mut read = read.borrow_mut();
        let read = match &mut *read {
            Some(r) if js_sys::Object::is(&r.of, env_object) => r,
            other => other.insert(EnvRead {
                of: env_object.clone(),
                values: Default::default(),
                defaults: None,
            }),
        };
        f(read)
    })
}

/// A var or secret exactly as stored, `None` when unset; read once per isolate and environment
/// (they cannot change under a running isolate, and a request reads some twenty).
pub fn env_raw(env: &Env, name: &str) -> Option<String> {
    if let Some(value) = env_read(env, |r| r.values.get(name).cloned()) {
        return value;
    }
    let value = env
        .secret(name)
        .map(|s| s.to_string())
        .or_else(|_| env.var(name).map(|v| v.to_string()))
        .ok();
    env_read(env, |r| r.values.insert(name.to_string(), value.clone()));
    value
}

/// The deployment's defaults (`[vars]`, `Defaults::from_vars`), parsed once per isolate and
/// environment like the vars themselves.
pub fn defaults(env: &Env) -> Result<Defaults, ParamError> {
    if let Some(defaults) = env_read(env, |r| r.defaults.clone()) {
        return defaults;
    }
    let defaults = Defaults::from_vars(|name| env_text(env, name));
    env_read(env, |r| r.defaults = Some(defaults.clone()));
    defaults
}

/// A var or secret as text, trimmed (a secret saved with a trailing newline or space works);
/// blank counts as unset.
pub fn env_text(env: &Env, name: &str) -> Option<String> {
    env_raw(env, name)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// `request.cf.colo`, read defensively: locally there is no `cf`, and the SDK's getter panics then.
pub fn colo(req: &worker::web_sys::Request) -> String {
    js_sys::Reflect::get(req, &name("cf"))
        .ok()
        .filter(|cf| cf.is_object())
        .and_then(|cf| js_sys::Reflect::get(&cf, &name("colo")).ok())
        .and_then(|c| c.as_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "local".to_string())
}

pub fn seeded_gen() -> ValueGen {
    let mut seed = [0u8; 32];
    if getrandom::fill(&mut seed).is_err() {
        // crypto.getRandomValues always exists on Workers; this only keeps a broken runtime alive.
        for chunk in seed.chunks_mut(4) {
            let r = (js_sys::Math::random() * f64::from(u32::MAX)) as u32;
            chunk.copy_from_slice(&r.to_le_bytes());
        }
    }
    ValueGen::from_seed(seed)
}

pub fn runtime(e: impl std::fmt::Display) -> StoreError {
    StoreError::new(ErrorKind::Runtime, e.to_string())
}

/// A binding that is missing from the environment.
pub fn missing_binding(what: &str, name: &str) -> StoreError {
    StoreError::new(
        ErrorKind::NotConfigured,
        format!("{what} binding {name} is missing"),
    )
}

/// The length of a response's whole body, read as one `ArrayBuffer` that never enters wasm
/// memory: the body is in hand when this returns, and nothing is copied.
pub async fn body_len(response: Response) -> Result<u64, StoreError> {
    let response: worker::web_sys::Response = response.into();
    let buffer = response.array_buffer().map_err(|e| runtime(js_text(&e)))?;
    let buffer = worker::wasm_bindgen_futures::JsFuture::from(buffer)
        .await
        .map_err(|e| runtime(js_text(&e)))?;
    Ok(buffer
        .dyn_into::<js_sys::ArrayBuffer>()
        .map_err(|_| runtime("a body that is not an ArrayBuffer"))?
        .byte_length() as u64)
}

/// A JS exception's message.
pub fn js_text(value: &wasm_bindgen::JsValue) -> String {
    value
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| value.as_string())
        .unwrap_or_else(|| format!("{value:?}"))
}

fn missing(name: &str) -> StoreError {
    StoreError::new(ErrorKind::NotConfigured, format!("{name} is not set"))
}

/// The Upstash store, or why it is not configured.
pub fn upstash_store(env: &Env) -> Result<UpstashStore<FetchTransport>, StoreError> {
    let url = env_text(env, UPSTASH_URL).ok_or_else(|| missing(UPSTASH_URL))?;
    let token = env_text(env, UPSTASH_TOKEN).ok_or_else(|| missing(UPSTASH_TOKEN))?;
    Ok(UpstashStore::new(url, token, FetchTransport))
}

/// The Deno KV store, or why it is not configured. `cache` is the isolate's metadata slot.
pub fn deno_kv_store<'a>(
    env: &Env,
    cache: &'a MetadataCache,
) -> Result<DenoKvStore<'a, FetchTransport>, StoreError> {
    let url = env_text(env, DENO_KV_URL).ok_or_else(|| missing(DENO_KV_URL))?;
    let token = env_text(env, DENO_KV_ACCESS_TOKEN).ok_or_else(|| missing(DENO_KV_ACCESS_TOKEN))?;
    Ok(DenoKvStore::new(
        url,
        token,
        FetchTransport,
        &JsClock,
        cache,
    ))
}

/// Aborts the fetch it guards when dropped before completion (i.e. when a timeout wins the race).
struct AbortOnDrop(Option<AbortController>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(controller) = self.0.take() {
            controller.abort();
        }
    }
}

#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    /// The global `fetch(input, init)`.
    #[wasm_bindgen(js_name = fetch)]
    fn global_fetch(input: &str, init: &worker::web_sys::RequestInit) -> js_sys::Promise;
}

pub struct FetchTransport;

/// A body without a `Content-Length`, read chunk by chunk into one buffer, refused once it is
/// over [`MAX_RESPONSE_BYTES`] (the reader is cancelled there, so the rest is never read).
async fn read_bounded(web: &worker::web_sys::Response) -> Result<js_sys::Uint8Array, StoreError> {
    let Some(body) = web.body() else {
        return Ok(js_sys::Uint8Array::new_with_length(0));
    };
    let reader: worker::web_sys::ReadableStreamDefaultReader = body.get_reader().unchecked_into();
    let chunks = js_sys::Array::new();
    let mut total = 0usize;
    loop {
        let next = worker::wasm_bindgen_futures::JsFuture::from(reader.read())
            .await
            .map_err(|e| runtime(js_text(&e)))?;
        let done = js_sys::Reflect::get(&next, &JsValue::from_str("done"))
            .map(|d| d.is_truthy())
            .unwrap_or(true);
        if done {
            break;
        }
        let chunk: js_sys::Uint8Array = js_sys::Reflect::get(&next, &JsValue::from_str("value"))
            .map_err(|e| runtime(js_text(&e)))?
            .unchecked_into();
        total += chunk.length() as usize;
        if total > MAX_RESPONSE_BYTES {
            let _ = reader.cancel();
            return Err(body_too_large(None));
        }
        chunks.push(&chunk);
    }
    let out = js_sys::Uint8Array::new_with_length(total as u32);
    let mut at = 0u32;
    for chunk in chunks.iter() {
        let chunk: js_sys::Uint8Array = chunk.unchecked_into();
        out.set(&chunk, at);
        at += chunk.length();
    }
    Ok(out)
}

#[async_trait(?Send)]
impl HttpTransport for FetchTransport {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, StoreError> {
        let headers = crate::js_strings::headers(&request.headers).map_err(runtime)?;
        let init = worker::web_sys::RequestInit::new();
        init.set_method(request.method);
        init.set_headers(&headers);
        // A body prepared before the first span is a JS copy already; any other is copied now.
        let prepared = request
            .prepared
            .as_ref()
            .and_then(|p| p.0.downcast_ref::<js_sys::Uint8Array>());
        match prepared {
            Some(body) => init.set_body(body),
            None => init.set_body(&js_sys::Uint8Array::from(request.body.as_slice())),
        }
        let controller = AbortController::default();
        init.set_signal(Some(&controller.signal()));
        let mut guard = AbortOnDrop(Some(controller));
        // `fetch(url, init)`, not `fetch(new Request(..))`: the runtime builds the request once
        // (docs/measured.md).
        let response =
            worker::wasm_bindgen_futures::JsFuture::from(global_fetch(&request.url, &init))
                .await
                .map_err(|e| runtime(js_text(&e)))?;
        let web: worker::web_sys::Response = response.unchecked_into();
        let status = web.status();
        let announced = web
            .headers()
            .get("content-length")
            .ok()
            .flatten()
            .and_then(|v| v.trim().parse::<u64>().ok());
        let buffer = match announced {
            // Over the limit by its own account: refused unread (the guard aborts the fetch).
            Some(n) if n > MAX_RESPONSE_BYTES as u64 => return Err(body_too_large(Some(n))),
            // The body in one `arrayBuffer()` (the SDK's `.bytes()` crosses JS per chunk), kept
            // a JS `ArrayBuffer` until the store asks for its bytes (`http::Body`).
            Some(_) => {
                let buffer = web.array_buffer().map_err(|e| runtime(js_text(&e)))?;
                worker::wasm_bindgen_futures::JsFuture::from(buffer)
                    .await
                    .map_err(|e| runtime(js_text(&e)))?
            }
            // No length (chunked, or read to the close): chunk by chunk, cut at the limit.
            None => read_bounded(&web).await?.buffer().into(),
        };
        let bytes = js_sys::Uint8Array::new(&buffer);
        guard.0 = None;
        let len = bytes.length() as usize;
        Ok(HttpResponse {
            status,
            body: Body::outside(len, Box::new(JsBody(bytes))),
        })
    }

    fn prepare(&self, body: &[u8]) -> Option<PreparedBody> {
        Some(PreparedBody(std::rc::Rc::new(js_sys::Uint8Array::from(
            body,
        ))))
    }

    fn prepare_value(&self, value: &Value) -> Option<PreparedBody> {
        Some(PreparedBody(std::rc::Rc::new(
            crate::js_copy::JsCopy::of(value).bytes,
        )))
    }
}

/// A response body still in JS.
struct JsBody(js_sys::Uint8Array);

impl OutsideBody for JsBody {
    fn copy_in(&self) -> Vec<u8> {
        self.0.to_vec()
    }

    fn copy_range(&self, start: usize, end: usize) -> Vec<u8> {
        self.0.subarray(start as u32, end as u32).to_vec()
    }
}

pub struct JsClock;

impl Clock for JsClock {
    fn now_ms(&self) -> f64 {
        js_sys::Date::now()
    }
}

pub struct JsTimer;

#[async_trait(?Send)]
impl Timer for JsTimer {
    async fn sleep_ms(&self, ms: u64) {
        Delay::from(Duration::from_millis(ms)).await;
    }
}
