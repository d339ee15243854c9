//! The `do` store's client: a stub's `fetch` per call, the object chosen by `do_scope` and placed
//! by `do_location` (the protocol: `kvbench_core::stores::durable`).

use async_trait::async_trait;
use kvbench_core::spec::env::BENCH_DO;
use kvbench_core::stores::durable;
use kvbench_core::stores::store::{Deferred, Fetched, Options};
use kvbench_core::{Store, StoreError, Value};
use worker::durable::{ObjectNamespace, Stub};
use worker::{Env, Request, Response};

use crate::bindings::{body_len, missing_binding, runtime};
use crate::js_copy::JsCopy;

// The class lives in the main worker; a fleet member binds it by script name.
#[cfg(feature = "main-worker")]
mod object;
#[cfg(feature = "main-worker")]
pub use object::BenchObject;

/// The worker's side: one stub `fetch` per read or write.
pub struct DoBinding {
    namespace: ObjectNamespace,
}

impl DoBinding {
    pub fn from_env(env: &Env) -> Result<Self, StoreError> {
        let namespace = env
            .durable_object(BENCH_DO)
            .map_err(|_| missing_binding("Durable Object namespace", BENCH_DO))?;
        Ok(DoBinding { namespace })
    }

    fn stub(&self, key: &str, options: &Options) -> Result<Stub, StoreError> {
        let name = options.object_name(key);
        match options.do_location {
            Some(hint) => self
                .namespace
                .get_by_name_with_location_hint(&name, hint.as_str()),
            None => self.namespace.get_by_name(&name),
        }
        .map_err(runtime)
    }

    fn put_request(
        key: &str,
        value: &worker::js_sys::Uint8Array,
        ttl_s: u32,
    ) -> Result<Request, StoreError> {
        let url = durable::url(key, Some(ttl_s));
        crate::bindings::js_request("PUT", &url, &[], Some(value), false).map_err(runtime)
    }
}

/// A non-success answer of the object, with its text.
async fn failure(mut response: Response) -> StoreError {
    let status = response.status_code();
    let text = response.text().await.unwrap_or_default();
    StoreError::http_status(status, &text)
}

#[async_trait(?Send)]
impl Store for DoBinding {
    /// The write's request, built before the first span (it holds a copy of the value).
    type Prepared = Request;

    async fn get(&self, key: &str, options: &Options) -> Result<Fetched, StoreError> {
        let stub = self.stub(key, options)?;
        let response = stub
            .fetch_with_str(&durable::url(key, None))
            .await
            .map_err(runtime)?;
        match response.status_code() {
            200 => Ok(Fetched::Hit(Deferred::ready(body_len(response).await?))),
            404 => Ok(Fetched::Miss),
            _ => Err(failure(response).await),
        }
    }

    /// The write's request ([`DoBinding::put_request`]), its body the value's JS copy.
    fn prepare(&self, key: &str, value: &Value, ttl_s: u32) -> Result<Request, StoreError> {
        Self::put_request(key, &JsCopy::of(value).bytes, ttl_s)
    }

    async fn put(
        &self,
        key: &str,
        _ttl_s: u32,
        request: Request,
        options: &Options,
    ) -> Result<(), StoreError> {
        let response = self
            .stub(key, options)?
            .fetch_with_request(request)
            .await
            .map_err(runtime)?;
        match response.status_code() {
            200..=299 => Ok(()),
            _ => Err(failure(response).await),
        }
    }
}
