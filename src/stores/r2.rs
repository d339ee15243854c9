//! The `r2` store: an object per key, its expiry in custom metadata (deleted by the cron's
//! [`sweep`]). An expired read is a miss, body unread; a live body stays a JS `ArrayBuffer`.
//! Through `worker_sys` directly: two calls, where the builder API doubles the bundle share.

use async_trait::async_trait;
use kvbench_core::spec::env::BENCH_R2;
use kvbench_core::stores::sql;
use kvbench_core::stores::store::{Deferred, Fetched, Options};
use kvbench_core::{Clock, Store, StoreError, Value};
use wasm_bindgen::{JsCast, JsValue};
use worker::js_sys::{ArrayBuffer, Object, Reflect, Uint8Array};
use worker::wasm_bindgen_futures::JsFuture;
use worker::worker_sys::{R2Bucket, R2ObjectBody};
use worker::Env;

use crate::bindings::{js_text, missing_binding, JsClock};
use crate::js_copy::JsCopy;

#[cfg(feature = "main-worker")]
pub(crate) mod sweep;

pub use kvbench_core::stores::sweep::EXPIRES_AT;

pub struct R2Binding {
    bucket: R2Bucket,
}

impl R2Binding {
    pub fn from_env(env: &Env) -> Result<Self, StoreError> {
        Ok(R2Binding {
            bucket: bucket(env)?,
        })
    }
}

/// The `BENCH_R2` bucket, or why it is not there.
pub(crate) fn bucket(env: &Env) -> Result<R2Bucket, StoreError> {
    Reflect::get(env, &BENCH_R2.into())
        .ok()
        .filter(|b| b.is_object())
        .map(Object::from)
        .filter(|b| b.constructor().name() == "R2Bucket")
        .map(JsCast::unchecked_into)
        .ok_or_else(|| missing_binding("R2 bucket", BENCH_R2))
}

/// An R2 failure, classified from the binding's text like KV's.
pub(crate) fn r2_error(e: JsValue) -> StoreError {
    let text = js_text(&e);
    StoreError::new(kvbench_core::error::classify_binding_error(&text), text)
}

/// An object's [`EXPIRES_AT`] field, as stored.
pub(crate) fn expires_at_field(object: &worker::worker_sys::R2Object) -> Option<String> {
    object
        .custom_metadata()
        .ok()
        .and_then(|m| Reflect::get(&m, &EXPIRES_AT.into()).ok())
        .and_then(|v| v.as_string())
}

#[async_trait(?Send)]
impl Store for R2Binding {
    /// The value as a `Uint8Array`, copied out of wasm before the first span.
    type Prepared = Uint8Array;

    async fn get(&self, key: &str, _options: &Options) -> Result<Fetched, StoreError> {
        let promise = self
            .bucket
            .get(key.to_string(), JsValue::UNDEFINED)
            .map_err(r2_error)?;
        let object = JsFuture::from(promise).await.map_err(r2_error)?;
        if object.is_null() || object.is_undefined() {
            return Ok(Fetched::Miss);
        }
        let object: R2ObjectBody = object.unchecked_into();
        // An object without the field was not written by this benchmark: it never expires.
        if kvbench_core::stores::sweep::is_expired(
            expires_at_field(&object).as_deref(),
            JsClock.now_ms(),
        ) {
            // Its body is not wanted: release the stream instead of leaving it to the runtime.
            if let Ok(body) = object.body() {
                let _ = body.cancel();
            }
            return Ok(Fetched::Miss);
        }
        let body = object.array_buffer().map_err(r2_error)?;
        let body = JsFuture::from(body).await.map_err(r2_error)?;
        let len = body.unchecked_ref::<ArrayBuffer>().byte_length();
        Ok(Fetched::Hit(Deferred::ready(u64::from(len))))
    }

    /// The value's JS copy.
    fn prepare(&self, _key: &str, value: &Value, _ttl_s: u32) -> Result<Uint8Array, StoreError> {
        Ok(JsCopy::of(value).bytes)
    }

    async fn put(
        &self,
        key: &str,
        ttl_s: u32,
        value: Uint8Array,
        _options: &Options,
    ) -> Result<(), StoreError> {
        let expires_at = sql::expires_at_ms(JsClock.now_ms(), ttl_s).to_string();
        let metadata = Object::new();
        let options = Object::new();
        Reflect::set(&metadata, &EXPIRES_AT.into(), &expires_at.into()).map_err(r2_error)?;
        Reflect::set(&options, &"customMetadata".into(), &metadata).map_err(r2_error)?;
        let promise = self
            .bucket
            .put(key.to_string(), value.into(), options.into())
            .map_err(r2_error)?;
        JsFuture::from(promise).await.map_err(r2_error)?;
        Ok(())
    }
}
