//! Deno KV over KV Connect (Deno Deploy and self-hosted `denokv`): the key `k` is `[k]`, values
//! raw bytes expiring via `expire_at_ms`, so any Deno KV client sees the same entries.

pub mod client;
pub mod key;
pub mod proto;

use async_trait::async_trait;

pub use client::{KvConnect, Metadata, MetadataCache};

use crate::clock::Clock;
use crate::error::{ErrorKind, StoreError};
use crate::stores::http::HttpTransport;
use crate::stores::store::{Deferred, Fetched, Options, Store};

/// The `denokv` store: a [`KvConnect`] client with the benchmark's key and value conventions.
pub struct DenoKvStore<'a, T> {
    client: KvConnect<'a, T>,
}

/// An answer up to this size is decoded as soon as it arrives (a miss's answer is a few bytes);
/// a larger one — a hit carrying its value — after every span of the request.
const DECODE_NOW_BYTES: usize = 256;

impl<'a, T: HttpTransport> DenoKvStore<'a, T> {
    /// `url` is the KV Connect URL (`DENO_KV_URL`), `access_token` its secret
    /// (`DENO_KV_ACCESS_TOKEN`); `cache` must outlive the request (one per isolate).
    pub fn new(
        url: impl Into<String>,
        access_token: impl Into<String>,
        transport: T,
        clock: &'a dyn Clock,
        cache: &'a MetadataCache,
    ) -> Self {
        Self {
            client: KvConnect::new(url, access_token, transport, clock, cache),
        }
    }

    pub fn client(&self) -> &KvConnect<'a, T> {
        &self.client
    }
}

/// The `Mutation` that sets `[key]` to the bytes `value`, expiring at `expire_at_ms`.
pub fn set_mutation(key: &str, value: &[u8], expire_at_ms: i64) -> proto::Mutation {
    proto::Mutation {
        key: key::encode(&[key]),
        value: Some(proto::KvValue {
            data: value.to_vec(),
            encoding: proto::ValueEncoding::VeBytes as i32,
        }),
        mutation_type: proto::MutationType::MSet as i32,
        expire_at_ms,
        ..Default::default()
    }
}

/// The size of the one entry a `get_range` read answered (`None`: none); a V8-serialized value
/// written by Deno code is still a hit, at its stored size.
fn entry(mut ranges: Vec<proto::ReadRangeOutput>, want: &[u8]) -> Result<Option<u64>, StoreError> {
    let values = ranges.pop().map(|r| r.values).unwrap_or_default();
    let Some(entry) = values.into_iter().next() else {
        return Ok(None);
    };
    if entry.key != want {
        return Err(StoreError::new(
            ErrorKind::Decode,
            "snapshot_read: answered an entry for another key",
        ));
    }
    Ok(Some(entry.value.len() as u64))
}

/// The `ReadRange` that holds exactly `[key]`.
pub fn get_range(key: &str) -> proto::ReadRange {
    let start = key::encode(&[key]);
    proto::ReadRange {
        end: key::range_end(&start),
        start,
        limit: 1,
        reverse: false,
    }
}

#[async_trait(?Send)]
impl<T: HttpTransport> Store for DenoKvStore<'_, T> {
    /// The `AtomicWrite`, encoded, as the transport took it if it did.
    type Prepared = client::Payload;

    async fn connect(&self) -> Result<bool, StoreError> {
        self.client.metadata().await.map(|(_, exchanged)| exchanged)
    }

    async fn get(&self, key: &str, options: &Options) -> Result<Fetched, StoreError> {
        let range = get_range(key);
        let want = range.start.clone();
        let raw = self
            .client
            .snapshot_read_raw(vec![range], options.consistency)
            .await?;
        if raw.body.len() <= DECODE_NOW_BYTES {
            let ranges = raw.decode().map_err(|r| self.client.refused(r))?;
            return Ok(match entry(ranges, &want)? {
                None => Fetched::Miss,
                Some(bytes) => Fetched::Hit(Deferred::ready(bytes)),
            });
        }
        // A hit's value is decoded (copied into wasm) only after every span; a refusal found
        // then is this read's error.
        Ok(Fetched::Hit(Deferred::later(move || {
            let ranges = raw.decode().map_err(|r| r.error)?;
            entry(ranges, &want)?.ok_or_else(|| {
                StoreError::new(
                    ErrorKind::Decode,
                    "a large snapshot_read answer held no entry",
                )
            })
        })))
    }

    fn prepare(
        &self,
        key: &str,
        value: &crate::stores::value::Value,
        ttl_s: u32,
    ) -> Result<client::Payload, StoreError> {
        // TTL is seconds in our API; Deno KV wants an absolute time in milliseconds.
        let expire_at_ms = self.client.now_ms().floor() as i64 + i64::from(ttl_s) * 1000;
        let write = proto::AtomicWrite {
            mutations: vec![set_mutation(key, value.bytes(), expire_at_ms)],
            ..Default::default()
        };
        let body = prost::Message::encode_to_vec(&write);
        Ok(match self.client.transport().prepare(&body) {
            Some(prepared) => client::Payload::Prepared(prepared),
            None => client::Payload::Bytes(body),
        })
    }

    async fn put(
        &self,
        _key: &str,
        _ttl_s: u32,
        body: client::Payload,
        _options: &Options,
    ) -> Result<(), StoreError> {
        self.client.atomic_write_encoded(body).await.map(|_| ())
    }
}
