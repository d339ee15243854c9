//! The `cache` store: `caches.default` on the worker's origin, expiring by `max-age`;
//! `not_configured` on `*.workers.dev`, where the Cache API does nothing.

use async_trait::async_trait;
use kvbench_core::stores::cache;
use kvbench_core::stores::store::{Deferred, Fetched, Options};
use kvbench_core::{ErrorKind, Store, StoreError, Value};
use worker::{Cache, Response};

use crate::bindings::{body_len, js_text, runtime};
use crate::js_copy::JsCopy;

pub struct CacheBinding {
    cache: Cache,
    /// The request's origin: cache keys live on it.
    origin: String,
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
        })
    }

    /// The entry to put, its body already the value's JS copy, so the put copies nothing.
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
    /// The entry to put, built before the first span (it holds a copy of the value).
    type Prepared = Response;

    async fn get(&self, key: &str, _options: &Options) -> Result<Fetched, StoreError> {
        let url = cache::url(&self.origin, key);
        match self.cache.get(url, false).await.map_err(runtime)? {
            None => Ok(Fetched::Miss),
            Some(response) => Ok(Fetched::Hit(Deferred::ready(body_len(response).await?))),
        }
    }

    /// The entry ([`CacheBinding::entry`]), its body the value's JS copy.
    fn prepare(&self, _key: &str, value: &Value, ttl_s: u32) -> Result<Response, StoreError> {
        Self::entry(&JsCopy::of(value).bytes, ttl_s)
    }

    async fn put(
        &self,
        key: &str,
        _ttl_s: u32,
        response: Response,
        _options: &Options,
    ) -> Result<(), StoreError> {
        self.cache
            .put(cache::url(&self.origin, key), response)
            .await
            .map_err(runtime)
    }
}
