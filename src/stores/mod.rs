//! Every store of this deployment, built from the environment for one request: the store, or
//! why it is not configured. Adding a store is one field here plus its glue module: one per
//! binding (`cache`, `d1`, `durable` with the `do` store's class, `r2` with the cron's sweep),
//! `socket` for the TCP stores and `postgres` for POSTGRES_URL and BENCH_HYPERDRIVE; `kv` is
//! the `BENCH_KV` namespace's.

pub mod cache;
pub mod d1;
pub mod durable;
pub mod kv;
pub mod postgres;
pub mod r2;
pub mod socket;

use std::cell::OnceCell;

use kvbench_core::{
    DenoKvStore, DynStore, MetadataCache, PostgresStore, RedisStore, Store, StoreError, StoreId,
    StoreSet, UpstashStore,
};
use worker::Env;

use crate::bindings::{deno_kv_store, upstash_store, FetchTransport};
use crate::stores::cache::CacheBinding;
use crate::stores::d1::D1Binding;
use crate::stores::durable::DoBinding;
use crate::stores::kv::KvBinding;
use crate::stores::postgres::{hyperdrive_store, postgres_store};
use crate::stores::r2::R2Binding;
use crate::stores::socket::{redis_store, SocketConnector};

type Entry<S> = Result<S, StoreError>;

/// Every store of this deployment for one request, each built from the environment the first
/// time the request asks for it: a request that measures two stores builds two (each build
/// reads bindings and vars across JS).
pub struct Stores<'a> {
    env: Env,
    /// The request's URL, for the Cache API (its origin; parsed only when the cache is used),
    /// or why there is no cache.
    cache_for: Result<&'a str, StoreError>,
    deno_meta: &'a MetadataCache,
    kv: OnceCell<Entry<KvBinding>>,
    upstash: OnceCell<Entry<UpstashStore<FetchTransport>>>,
    denokv: OnceCell<Entry<DenoKvStore<'a, FetchTransport>>>,
    durable: OnceCell<Entry<DoBinding>>,
    d1: OnceCell<Entry<D1Binding>>,
    r2: OnceCell<Entry<R2Binding>>,
    cache: OnceCell<Entry<CacheBinding>>,
    redis: OnceCell<Entry<RedisStore<SocketConnector>>>,
    postgres: OnceCell<Entry<PostgresStore<SocketConnector>>>,
    hyperdrive: OnceCell<Entry<PostgresStore<SocketConnector>>>,
}

impl<'a> Stores<'a> {
    /// The stores of `env` for a request to `cache_for` (or why the cache cannot be measured);
    /// `deno_meta` is the isolate's KV Connect metadata.
    pub fn from_env(
        env: &Env,
        cache_for: Result<&'a str, StoreError>,
        deno_meta: &'a MetadataCache,
    ) -> Self {
        Stores {
            env: env.clone(),
            cache_for,
            deno_meta,
            kv: OnceCell::new(),
            upstash: OnceCell::new(),
            denokv: OnceCell::new(),
            durable: OnceCell::new(),
            d1: OnceCell::new(),
            r2: OnceCell::new(),
            cache: OnceCell::new(),
            redis: OnceCell::new(),
            postgres: OnceCell::new(),
            hyperdrive: OnceCell::new(),
        }
    }

    /// Every store, built: what `GET /` lists.
    pub fn all(&self) -> Vec<(StoreId, Result<&dyn DynStore, StoreError>)> {
        StoreId::ALL
            .into_iter()
            .map(|id| (id, self.store(id)))
            .collect()
    }

    /// Releases what a request holds open (the TCP stores' connections), after the
    /// measurement.
    pub async fn finish(&self) {
        if let Some(Ok(redis)) = self.redis.get() {
            redis.close().await;
        }
        for pg in [&self.postgres, &self.hyperdrive] {
            if let Some(Ok(pg)) = pg.get() {
                pg.close().await;
            }
        }
    }
}

impl StoreSet for Stores<'_> {
    fn store(&self, id: StoreId) -> Result<&dyn DynStore, StoreError> {
        let env = &self.env;
        match id {
            StoreId::Kv => entry(self.kv.get_or_init(|| KvBinding::from_env(env))),
            StoreId::Upstash => entry(self.upstash.get_or_init(|| upstash_store(env))),
            StoreId::DenoKv => entry(
                self.denokv
                    .get_or_init(|| deno_kv_store(env, self.deno_meta)),
            ),
            StoreId::Do => entry(self.durable.get_or_init(|| DoBinding::from_env(env))),
            StoreId::D1 => entry(self.d1.get_or_init(|| D1Binding::from_env(env))),
            StoreId::R2 => entry(self.r2.get_or_init(|| R2Binding::from_env(env))),
            StoreId::Cache => entry(self.cache.get_or_init(|| match &self.cache_for {
                Ok(url) => CacheBinding::for_request(url),
                Err(e) => Err(e.clone()),
            })),
            StoreId::Redis => entry(self.redis.get_or_init(|| redis_store(env))),
            StoreId::Postgres => entry(self.postgres.get_or_init(|| postgres_store(env))),
            StoreId::Hyperdrive => entry(self.hyperdrive.get_or_init(|| hyperdrive_store(env))),
        }
    }
}

/// A store as the measurement takes it: the store, or why it is not configured.
fn entry<S: Store>(store: &Result<S, StoreError>) -> Result<&dyn DynStore, StoreError>
where
    S::Prepared: 'static,
{
    store
        .as_ref()
        .map(|s| s as &dyn DynStore)
        .map_err(Clone::clone)
}
