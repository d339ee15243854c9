//! The `cache` store: `caches.default` on the worker's own origin, entries expiring by
//! `Cache-Control: max-age`. On `*.workers.dev` the Cache API does nothing, so there the store is
//! `not_configured` with the reason, instead of reporting fast misses of nothing.

use async_trait::async_trait;
use kvbench_core::stores::cache;
use kvbench_core::stores::store::{Deferred, Fetched, Options};
use kvbench_core::{ErrorKind, Store, StoreError, Value};
use worker::{Cache, Response};

use crate::bindings::{body_len, js_text, runtime};
use crate::stores::prepared::PreparedWrite;

pub struct CacheBinding {
    cache: Cache,
    /// The request's origin: cache keys live on it.
    origin: String,
    /// The write's response, built before the first span (it holds a copy of the value).
    write: PreparedWrite<Response>,
}

impl CacheBinding {
    /// The default cache for a request to `url`, unless the Cache API does nothing there.
    pub fn for_request(url: &str) -> Result<Self, StoreError> {
        let url = worker::Url::parse(url).map_err(|e| {
            StoreError::new(ErrorKind::NotConfigured, format!("the request URL: {e}"))
        })?;
        if let Some(why) = cache::unavailable(url.host_str().unwrap_or("")) {
            return Err(StoreError::new(ErrorKind::NotConfigured, why));
        }
        Ok(CacheBinding {
            cache: Cache::default(),
            origin: url.origin().ascii_serialization(),
            write: PreparedWrite::default(),
        })
    }

    /// The entry to put: a JS `Response` whose body is already a JS copy of the value, so the
    /// put (inside the write span) copies nothing. (A `worker::Response` built from bytes keeps
    /// them in wasm and copies them into JS when it is put.)
    pub(crate) fn entry(value: &js_sys::Uint8Array, ttl_s: u32) -> Result<Response, StoreError> {
        let headers = worker::web_sys::Headers::new().map_err(|e| runtime(js_text(&e)))?;
        headers
            .set("Cache-Control", &cache::cache_control(ttl_s))
            .map_err(|e| runtime(js_text(&e)))?;
        headers
            .set("Content-Type", "application/octet-stream")
            .map_err(|e| runtime(js_text(&e)))?;
        let init = worker::web_sys::ResponseInit::new();
        init.set_headers(&headers);
        worker::web_sys::Response::new_with_opt_buffer_source_and_init(Some(value), &init)
            .map(Response::from)
            .map_err(|e| runtime(js_text(&e)))
    }
}

#[async_trait(?Send)]
impl Store for CacheBinding {
    async fn get(&self, key: &str, _options: &Options) -> Result<Fetched, StoreError> {
        let url = cache::url(&self.origin, key);
        match self.cache.get(url, false).await.map_err(runtime)? {
            None => Ok(Fetched::Miss),
            Some(response) => Ok(Fetched::Hit(Deferred::ready(body_len(response).await?))),
        }
    }

    fn encode_put(&self, _key: &str, value: &Value, ttl_s: u32) -> Result<Vec<u8>, StoreError> {
        self.write.set(Self::entry(
            &crate::stores::prepared::JsCopy::of(value).bytes,
            ttl_s,
        )?);
        Ok(Vec::new())
    }

    async fn put(
        &self,
        key: &str,
        value: &[u8],
        ttl_s: u32,
        _body: Vec<u8>,
        _options: &Options,
    ) -> Result<(), StoreError> {
        let response = self
            .write
            .take_or(|| Self::entry(&js_sys::Uint8Array::from(value), ttl_s))?;
        self.cache
            .put(cache::url(&self.origin, key), response)
            .await
            .map_err(runtime)
    }
}
