//! The store seam: one read and one write per store, whatever the protocol behind it.

use async_trait::async_trait;
use serde::Serialize;

use crate::error::StoreError;

/// The stores this benchmark knows. The wire name is what appears in `stores`, `order` and `?stores=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreId {
    Kv,
    Upstash,
    #[serde(rename = "denokv")]
    DenoKv,
}

impl StoreId {
    pub const ALL: [StoreId; 3] = [StoreId::Kv, StoreId::Upstash, StoreId::DenoKv];

    pub fn as_str(self) -> &'static str {
        match self {
            StoreId::Kv => "kv",
            StoreId::Upstash => "upstash",
            StoreId::DenoKv => "denokv",
        }
    }

    pub fn parse(name: &str) -> Option<StoreId> {
        StoreId::ALL.into_iter().find(|id| id.as_str() == name)
    }
}

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

/// Options of one read that only some stores understand.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Cloudflare KV `cacheTtl` in seconds.
    pub cache_ttl_s: Option<u32>,
    /// Deno KV read consistency.
    pub consistency: Consistency,
}

/// A key-value store as the benchmark sees it.
#[async_trait(?Send)]
pub trait Store {
    /// Per-isolate setup the store needs before its timed calls (Deno KV's metadata exchange),
    /// done only when due. `Ok(true)` = it did network work in this call, so the probe reports
    /// that time as `connect_ms` instead of counting it in the read or write.
    async fn connect(&self) -> Result<bool, StoreError> {
        Ok(false)
    }
    /// Reads `key`; `Ok(None)` is a miss. A hit returns the whole value, fully read.
    async fn get(&self, key: &str, options: ReadOptions) -> Result<Option<Vec<u8>>, StoreError>;
    /// Writes `value` under `key`, expiring after `ttl_s` seconds.
    async fn put(&self, key: &str, value: &[u8], ttl_s: u32) -> Result<(), StoreError>;
}
