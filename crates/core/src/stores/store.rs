//! The store seam: one read and one write per store, whatever the protocol behind it.

use crate::error::StoreError;
use crate::stores::durable::{DoScope, LocationHint};
use crate::stores::sql::D1Session;
use crate::stores::value::Value;
use async_trait::async_trait;
use futures::future::LocalBoxFuture;

pub use crate::spec::StoreId;

/// Consistency of a Deno KV read (`?consistency=`); strong is Deno's own default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Consistency {
    #[default]
    Strong,
    Eventual,
}

impl Consistency {
    pub fn as_str(self) -> &'static str {
        match self {
            Consistency::Strong => "strong",
            Consistency::Eventual => "eventual",
        }
    }

    pub fn parse(name: &str) -> Option<Consistency> {
        [Consistency::Strong, Consistency::Eventual]
            .into_iter()
            .find(|c| c.as_str() == name)
    }
}

/// Per-request options that only some stores understand, given to every read and write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Cloudflare KV `cacheTtl` in seconds.
    pub cache_ttl_s: Option<u32>,
    /// Deno KV read consistency.
    pub consistency: Consistency,
    /// Which Durable Object holds a key.
    pub do_scope: DoScope,
    /// Where a new Durable Object should be placed.
    pub do_location: Option<LocationHint>,
    /// D1 Sessions API constraint; `None`: plain queries, no session.
    pub d1_session: Option<D1Session>,
    /// The colo the request runs in, for `do_scope=colo` (`None` for the other scopes).
    pub colo: Option<String>,
}

impl Options {
    /// The `do` store's object for `store_key` under these options.
    pub fn object_name(&self, store_key: &str) -> String {
        crate::stores::durable::object_name(
            self.do_scope,
            self.do_location,
            self.colo.as_deref(),
            store_key,
        )
    }
}

/// The CPU-heavy rest of a read (decoding a large answer), run after every timed span: a
/// deployed clock would count it in the next call.
pub struct Deferred(Box<dyn FnOnce() -> Result<u64, StoreError>>);

impl Deferred {
    /// A hit whose size is already known.
    pub fn ready(value_bytes: u64) -> Deferred {
        Deferred(Box::new(move || Ok(value_bytes)))
    }

    /// A hit whose answer still has to be decoded: `decode` yields the value's size in bytes.
    pub fn later(decode: impl FnOnce() -> Result<u64, StoreError> + 'static) -> Deferred {
        Deferred(Box::new(decode))
    }

    /// Runs the deferred decoding.
    pub fn finish(self) -> Result<u64, StoreError> {
        (self.0)()
    }
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Deferred")
    }
}

/// What a read found. Deciding hit or miss is cheap and happens at once (a miss is followed by a
/// write); measuring a hit's value may be deferred.
#[derive(Debug)]
pub enum Fetched {
    Miss,
    Hit(Deferred),
}

/// A key-value store as the benchmark sees it. A write's [`Store::Prepared`] value is made by
/// [`Store::prepare`] before the first span and taken by [`Store::put`], the timed call.
#[async_trait(?Send)]
pub trait Store {
    /// A write of this store, ready to send.
    type Prepared;
    /// Setup before the timed calls (Deno KV's metadata, Redis's connection) when due;
    /// `Ok(true)`: it did network work, reported as `connect_ms`.
    async fn connect(&self) -> Result<bool, StoreError> {
        Ok(false)
    }
    /// What the store reported (D1's `meta`, KV's `cacheStatus`), taken after every span.
    fn reported(&self) -> crate::stores::meta::Reported {
        crate::stores::meta::Reported::default()
    }
    /// Reads `key` until the whole answer is in hand; decoding a hit may be deferred.
    async fn get(&self, key: &str, options: &Options) -> Result<Fetched, StoreError>;
    /// Makes the write of `value` under `key`, expiring after `ttl_s` seconds, ready to send
    /// (CPU), before any timed span.
    fn prepare(&self, key: &str, value: &Value, ttl_s: u32) -> Result<Self::Prepared, StoreError>;
    /// Sends the write [`Store::prepare`] made for `key` and `ttl_s`.
    async fn put(
        &self,
        key: &str,
        ttl_s: u32,
        prepared: Self::Prepared,
        options: &Options,
    ) -> Result<(), StoreError>;
}

/// A [`Store`] whose prepared write is kept inside a [`Write`], so stores of different write
/// types sit side by side.
pub trait DynStore {
    fn connect(&self) -> LocalBoxFuture<'_, Result<bool, StoreError>>;
    fn reported(&self) -> crate::stores::meta::Reported;
    fn get<'a>(
        &'a self,
        key: &'a str,
        options: &'a Options,
    ) -> LocalBoxFuture<'a, Result<Fetched, StoreError>>;
    /// [`Store::prepare`], as a [`Write`] of `key` that [`Write::put`] sends.
    fn prepare<'a>(
        &'a self,
        key: &'a str,
        value: &Value,
        ttl_s: u32,
    ) -> Result<Write<'a>, StoreError>;
}

/// One store's write, prepared: [`Write::put`] sends it ([`Store::put`] with the value
/// [`Store::prepare`] made).
pub struct Write<'a>(WriteFn<'a>);

type WriteFn<'a> = Box<dyn FnOnce(&'a Options) -> LocalBoxFuture<'a, Result<(), StoreError>> + 'a>;

impl<'a> Write<'a> {
    /// The store's `put` of this write.
    pub fn put(self, options: &'a Options) -> LocalBoxFuture<'a, Result<(), StoreError>> {
        (self.0)(options)
    }
}

impl std::fmt::Debug for Write<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Write")
    }
}

impl<S: Store> DynStore for S
where
    S::Prepared: 'static,
{
    fn connect(&self) -> LocalBoxFuture<'_, Result<bool, StoreError>> {
        Store::connect(self)
    }

    fn reported(&self) -> crate::stores::meta::Reported {
        Store::reported(self)
    }

    fn get<'a>(
        &'a self,
        key: &'a str,
        options: &'a Options,
    ) -> LocalBoxFuture<'a, Result<Fetched, StoreError>> {
        Store::get(self, key, options)
    }

    fn prepare<'a>(
        &'a self,
        key: &'a str,
        value: &Value,
        ttl_s: u32,
    ) -> Result<Write<'a>, StoreError> {
        let prepared = Store::prepare(self, key, value, ttl_s)?;
        Ok(Write(Box::new(move |options| {
            Store::put(self, key, ttl_s, prepared, options)
        })))
    }
}
