//! Every store of this deployment, built from the environment for one request: the store, or
//! why it is not configured. Adding a store is one field here plus its glue module.

use kvbench_core::{
    DenoKvStore, MetadataCache, RedisStore, Store, StoreError, StoreId, StoreSet, UpstashStore,
};
use worker::Env;

use crate::bindings::{deno_kv_store, upstash_store, FetchTransport, KvBinding};
use crate::cache::CacheBinding;
use crate::d1::D1Binding;
use crate::durable::DoBinding;
use crate::r2::R2Binding;
use crate::socket::{redis_store, SocketConnector};

type Entry<S> = Result<S, StoreError>;

/// A binding's write prepared before the request's first timed span (`Store::encode_put`): the
/// JS object the call takes, built while no span is open, then taken by `put`. When `put` runs
/// without it (a store used outside the probe), it is built then.
pub struct Prepared<T>(std::cell::RefCell<Option<T>>);

impl<T> Default for Prepared<T> {
    fn default() -> Self {
        Prepared(std::cell::RefCell::new(None))
    }
}

impl<T> Prepared<T> {
    pub fn set(&self, value: T) {
        *self.0.borrow_mut() = Some(value);
    }

    /// The prepared value, or `build()`'s.
    pub fn take_or<E>(&self, build: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let prepared = self.0.borrow_mut().take();
        match prepared {
            Some(value) => Ok(value),
            None => build(),
        }
    }
}

/// The request's value as one JS `Uint8Array`, shared by every binding write that takes bytes:
/// KV's and R2's `put`, the Cache API's `Response` and the Durable Object's `Request` are all
/// built from it before the first span. The bindings only read it (none transfers or detaches it:
/// `binding_tests` writes one value through all of them and reads each back), so one JS copy
/// serves them all, where each used to hold its own. It lives as long as the request's stores,
/// and the probe gives them one value that lives as long; the copy is keyed by that value's
/// address and length, so bytes of another length or at another address get a fresh copy.
#[derive(Default)]
pub struct SharedValue(std::cell::RefCell<Option<((usize, usize), js_sys::Uint8Array)>>);

impl SharedValue {
    /// The JS copy of `value`, made on first use.
    pub fn get(&self, value: &[u8]) -> js_sys::Uint8Array {
        let id = (value.as_ptr() as usize, value.len());
        let mut slot = self.0.borrow_mut();
        match &*slot {
            Some((of, copy)) if *of == id => copy.clone(),
            _ => {
                let copy = js_sys::Uint8Array::from(value);
                *slot = Some((id, copy.clone()));
                copy
            }
        }
    }
}

/// A binding whose writes take the request's [`SharedValue`].
pub trait Shares: Sized {
    fn sharing(self, value: &std::rc::Rc<SharedValue>) -> Self;
}

/// `store` sharing `value`, when it is configured.
fn shared<S: Shares>(store: Entry<S>, value: &std::rc::Rc<SharedValue>) -> Entry<S> {
    store.map(|s| s.sharing(value))
}

pub struct Stores<'a> {
    kv: Entry<KvBinding>,
    upstash: Entry<UpstashStore<FetchTransport>>,
    denokv: Entry<DenoKvStore<'a, FetchTransport>>,
    durable: Entry<DoBinding>,
    d1: Entry<D1Binding>,
    r2: Entry<R2Binding>,
    cache: Entry<CacheBinding>,
    redis: Entry<RedisStore<SocketConnector>>,
}

impl<'a> Stores<'a> {
    /// The stores of `env`, with `cache` (the request's, or why there is none); `deno_meta` is
    /// the isolate's KV Connect metadata.
    pub fn from_env(
        env: &Env,
        cache: Result<CacheBinding, StoreError>,
        deno_meta: &'a MetadataCache,
    ) -> Self {
        let value = std::rc::Rc::new(SharedValue::default());
        Stores {
            kv: shared(KvBinding::from_env(env), &value),
            upstash: upstash_store(env),
            denokv: deno_kv_store(env, deno_meta),
            durable: shared(DoBinding::from_env(env), &value),
            d1: D1Binding::from_env(env),
            r2: shared(R2Binding::from_env(env), &value),
            cache: shared(cache, &value),
            redis: redis_store(env),
        }
    }

    /// The stores as the probe takes them.
    pub fn set(&self) -> StoreSet<'_> {
        StoreId::ALL
            .into_iter()
            .map(|id| (id, self.get(id)))
            .collect()
    }

    fn get(&self, id: StoreId) -> Result<&dyn Store, StoreError> {
        match id {
            StoreId::Kv => entry(&self.kv),
            StoreId::Upstash => entry(&self.upstash),
            StoreId::DenoKv => entry(&self.denokv),
            StoreId::Do => entry(&self.durable),
            StoreId::D1 => entry(&self.d1),
            StoreId::R2 => entry(&self.r2),
            StoreId::Cache => entry(&self.cache),
            StoreId::Redis => entry(&self.redis),
        }
    }

    /// Releases what a request holds open (the Redis connection), after the measurement.
    pub async fn finish(&self) {
        if let Ok(redis) = &self.redis {
            redis.close().await;
        }
    }
}

/// A store as the probe takes it: the store, or why it is not configured.
fn entry<S: Store>(store: &Result<S, StoreError>) -> Result<&dyn Store, StoreError> {
    store
        .as_ref()
        .map(|s| s as &dyn Store)
        .map_err(Clone::clone)
}
