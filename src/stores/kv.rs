//! The `kv` store: the `BENCH_KV` binding called directly (`getWithMetadata`, `put` with
//! `expirationTtl`).

use async_trait::async_trait;
use kvbench_core::spec::env::BENCH_KV as KV_BINDING;
use kvbench_core::stores::store::{Deferred, Fetched, Options};
use kvbench_core::{Store, StoreError, Value};
use wasm_bindgen::{JsCast, JsValue};
use worker::Env;

use crate::bindings::{js_text, missing_binding, runtime};
use crate::js_copy::JsCopy;
use crate::js_strings::name;

/// The `kv` store. A read asks for an `ArrayBuffer` and reads only its length (the SDK's
/// `.bytes()` would copy it into wasm); its `cacheStatus` is read after every span.
pub struct KvBinding {
    namespace: KvNamespace,
    /// This request's read result (`{ value, metadata, cacheStatus }`), kept unread until
    /// `Store::reported`.
    read: std::cell::RefCell<Option<JsValue>>,
}

#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    /// A KV namespace binding, as the runtime passes it in the environment.
    type KvNamespace;

    /// `namespace.getWithMetadata(key, options)`.
    #[wasm_bindgen(method, catch, js_name = getWithMetadata)]
    fn get_with_metadata(
        this: &KvNamespace,
        key: &str,
        options: &JsValue,
    ) -> Result<js_sys::Promise, JsValue>;

    /// `namespace.put(key, value, options)`.
    #[wasm_bindgen(method, catch)]
    fn put(
        this: &KvNamespace,
        key: &str,
        value: &js_sys::Uint8Array,
        options: &JsValue,
    ) -> Result<js_sys::Promise, JsValue>;
}

impl KvBinding {
    pub fn from_env(env: &Env) -> Result<Self, StoreError> {
        let namespace = js_sys::Reflect::get(env, &name(KV_BINDING))
            .ok()
            .filter(JsValue::is_object)
            .ok_or_else(|| missing_binding("KV namespace", KV_BINDING))?;
        Ok(KvBinding {
            namespace: namespace.unchecked_into(),
            read: Default::default(),
        })
    }

    async fn call(promise: Result<js_sys::Promise, JsValue>) -> Result<JsValue, StoreError> {
        let promise = promise.map_err(|e| kv_error(js_text(&e)))?;
        worker::wasm_bindgen_futures::JsFuture::from(promise)
            .await
            .map_err(|e| kv_error(js_text(&e)))
    }

    /// `namespace.getWithMetadata(key, { type: "arrayBuffer", cacheTtl })`: `{ value, metadata,
    /// cacheStatus }`.
    async fn get_buffer(&self, key: &str, options: &Options) -> Result<JsValue, StoreError> {
        let opts = kv_options(
            || {
                let mut opts = vec![("type", name("arrayBuffer"))];
                if let Some(ttl) = options.cache_ttl_s {
                    opts.push(("cacheTtl", f64::from(ttl).into()));
                }
                opts
            },
            ("get", options.cache_ttl_s),
        )?;
        Self::call(self.namespace.get_with_metadata(key, &opts)).await
    }
}

/// Which KV call an options object is for, and its number (`None`: that option left out).
type KvOptionsOf = (&'static str, Option<u32>);

/// The options object of a KV call, made once per isolate for each call and number (`get` and
/// its `cacheTtl`, `put` and its `expirationTtl`): the runtime reads it and keeps nothing of it.
fn kv_options(
    entries: impl FnOnce() -> Vec<(&'static str, JsValue)>,
    of: KvOptionsOf,
) -> Result<JsValue, StoreError> {
    thread_local! {
        static MADE: std::cell::RefCell<Vec<(KvOptionsOf, JsValue)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    MADE.with(|made| {
        let mut made = made.borrow_mut();
        if let Some((_, opts)) = made.iter().find(|(k, _)| *k == of) {
            return Ok(opts.clone());
        }
        let opts = js_sys::Object::new();
        for (k, v) in entries() {
            js_sys::Reflect::set(&opts, &name(k), &v).map_err(|e| runtime(js_text(&e)))?;
        }
        let opts: JsValue = opts.into();
        // A handful in practice (one per TTL in use); bounded all the same.
        if made.len() == 16 {
            made.remove(0);
        }
        made.push((of, opts.clone()));
        Ok(opts)
    })
}

#[async_trait(?Send)]
impl Store for KvBinding {
    /// The value as a JS copy ([`JsCopy`]), made before the first span.
    type Prepared = js_sys::Uint8Array;

    async fn get(&self, key: &str, options: &Options) -> Result<Fetched, StoreError> {
        self.read.replace(None);
        let result = self.get_buffer(key, options).await?;
        let value =
            js_sys::Reflect::get(&result, &name("value")).map_err(|e| kv_error(js_text(&e)))?;
        self.read.replace(Some(result));
        if value.is_null() || value.is_undefined() {
            return Ok(Fetched::Miss);
        }
        let buffer = value
            .dyn_into::<js_sys::ArrayBuffer>()
            .map_err(|_| runtime("KV get returned no ArrayBuffer"))?;
        Ok(Fetched::Hit(Deferred::ready(u64::from(
            buffer.byte_length(),
        ))))
    }

    fn reported(&self) -> kvbench_core::stores::meta::Reported {
        let read = self.read.take().map(|result| {
            let status = js_sys::Reflect::get(&result, &name("cacheStatus")).ok();
            kvbench_core::stores::meta::kv(status.and_then(|s| s.as_string()))
        });
        kvbench_core::stores::meta::Reported { read, write: None }
    }

    /// The value's JS copy.
    fn prepare(
        &self,
        _key: &str,
        value: &Value,
        _ttl_s: u32,
    ) -> Result<js_sys::Uint8Array, StoreError> {
        Ok(JsCopy::of(value).bytes)
    }

    /// `namespace.put(key, value, { expirationTtl })` with the value copied before the span.
    async fn put(
        &self,
        key: &str,
        ttl_s: u32,
        bytes: js_sys::Uint8Array,
        _options: &Options,
    ) -> Result<(), StoreError> {
        let opts = kv_options(
            || vec![("expirationTtl", f64::from(ttl_s).into())],
            ("put", Some(ttl_s)),
        )?;
        Self::call(self.namespace.put(key, &bytes, &opts))
            .await
            .map(|_| ())
    }
}

/// A KV binding error, classified from what the binding raised (e.g. `KV PUT failed: 429 Too Many
/// Requests` when a key is written more than once a second).
fn kv_error(e: impl std::fmt::Display) -> StoreError {
    let text = e.to_string();
    StoreError::new(kvbench_core::error::classify_binding_error(&text), text)
}
