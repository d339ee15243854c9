//! The JSON answer of `/test`, a public contract (docs/answer.md). Generic over a store's name:
//! the worker writes `Answer<StoreId>`, kvbench reads `Answer<Name>` (keeping stores a newer
//! worker adds).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::text::{Key, Name};

/// Which operation of a store failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
}

/// A store call that failed: a data point, not an HTTP error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody<'a> {
    /// The error's kind (`timeout`, `auth`, `http`, `decode`, `rate_limited`,
    /// `not_configured`, `runtime`; a reader keeps any other as text).
    #[serde(borrow)]
    pub kind: Name<'a>,
    #[serde(default, borrow)]
    pub message: Name<'a>,
    /// Always written; a reader takes an answer without it (the op is then unknown).
    #[serde(default)]
    pub op: Option<Op>,
}

impl ErrorBody<'_> {
    pub fn new(kind: &'static str, message: String, op: Op) -> ErrorBody<'static> {
        ErrorBody {
            kind: Name::from(kind),
            message: Name::from(message),
            op: Some(op),
        }
    }

    /// `kind/op` (or `kind` when the op is unknown): the key errors are counted under.
    pub fn key(&self) -> String {
        match self.op {
            Some(Op::Read) => format!("{}/read", self.kind),
            Some(Op::Write) => format!("{}/write", self.kind),
            None => self.kind.to_string(),
        }
    }

    pub fn is_write(&self) -> bool {
        self.op == Some(Op::Write)
    }

    pub fn into_owned(self) -> ErrorBody<'static> {
        ErrorBody {
            kind: self.kind.into_owned(),
            message: self.message.into_owned(),
            op: self.op,
        }
    }
}

/// What became of a call after its timeout (see `kvbench_core::measurement::measure`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Abandoned {
    /// It completed within the wait; `false`: still running when the wait ended (dropped then).
    pub finished: bool,
    /// Milliseconds waited after the timeout, before the next store started.
    #[serde(default)]
    pub waited_ms: f64,
}

/// What a store reported about one call (D1's `meta`, KV's `cacheStatus`): each field only when
/// the runtime gave it, the object omitted when empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CallMeta<'a> {
    /// The colo of the database instance that ran the query (D1 `served_by_colo`).
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub served_by_colo: Option<Name<'a>>,
    /// `true` = the primary ran it, `false` = a read replica (D1 `served_by_primary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_by_primary: Option<bool>,
    /// Milliseconds the database spent in SQL, no network (D1 `timings.sql_duration_ms`; a
    /// write's batch: the sum over its statements).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql_ms: Option<f64>,
    /// How many times D1 ran the call, its own retries included (D1 `total_attempts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// KV's `cacheStatus` of a read, as the runtime gave it.
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub cache_status: Option<Name<'a>>,
}

impl CallMeta<'_> {
    /// Nothing was reported: the answer leaves the object out.
    pub fn is_empty(&self) -> bool {
        *self == CallMeta::default()
    }

    /// The store ran the call more than once (its time includes the retries).
    pub fn retried(&self) -> bool {
        self.attempts.is_some_and(|n| n > 1)
    }

    pub fn into_owned(self) -> CallMeta<'static> {
        CallMeta {
            served_by_colo: self.served_by_colo.map(Name::into_owned),
            served_by_primary: self.served_by_primary,
            sql_ms: self.sql_ms,
            attempts: self.attempts,
            cache_status: self.cache_status.map(Name::into_owned),
        }
    }
}

/// What one store did in one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StoreResult<'a> {
    /// Milliseconds from just before the read until the value was in hand (or the read failed).
    #[serde(default)]
    pub read_ms: Option<f64>,
    /// `true` = the key had a value, `false` = miss, `null` = the read failed.
    #[serde(default)]
    pub hit: Option<bool>,
    /// Bytes read on a hit, bytes written (or attempted) on a miss.
    #[serde(default)]
    pub value_bytes: Option<u64>,
    /// Milliseconds the write-on-miss took; `null` when no write happened.
    #[serde(default)]
    pub write_ms: Option<f64>,
    /// Milliseconds of connection setup done in this request before the timed calls (Deno KV's
    /// metadata exchange, cached per isolate; Redis's connection, per request); omitted when
    /// none happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_ms: Option<f64>,
    #[serde(default, borrow)]
    pub error: Option<ErrorBody<'a>>,
    /// A call that timed out, waited for afterwards outside any span: whether it finished and
    /// how long it was waited for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abandoned: Option<Abandoned>,
    /// The location hint the store's object was created with (`do` with `do_location`).
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub location_hint: Option<Name<'a>>,
    /// The colo whose own object the store used (`do` with `do_scope=colo`, which every fleet
    /// member measures with): an object created near where the request ran. Omitted otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub near_colo: Option<Name<'a>>,
    /// What the store reported about the read (see [`CallMeta`]); omitted when it reported
    /// nothing.
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub read_meta: Option<CallMeta<'a>>,
    /// `true` when the store ran the read more than once (`read_meta.attempts` > 1): `read_ms`
    /// holds every attempt. Omitted otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_retried: Option<bool>,
    /// What the store reported about the write-on-miss; omitted when it reported nothing.
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub write_meta: Option<CallMeta<'a>>,
}

impl StoreResult<'_> {
    /// The read time, if the read succeeded: what the legacy `*Latency` fields report.
    pub fn ok_read_ms(&self) -> Option<f64> {
        match &self.error {
            Some(e) if e.op == Some(Op::Read) => None,
            _ => self.read_ms,
        }
    }
}

/// The legacy field that mirrors a store's successful read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Legacy {
    /// `kvLatency`: Cloudflare KV.
    Kv,
    /// `redisLatency`: Upstash over REST.
    Redis,
}

/// How an answer names its stores.
pub trait StoreName: Ord {
    /// The legacy field this store's read is mirrored in, if any.
    fn legacy(&self) -> Option<Legacy>;
}

impl StoreName for Name<'_> {
    fn legacy(&self) -> Option<Legacy> {
        match self.as_str() {
            "kv" => Some(Legacy::Kv),
            "upstash" => Some(Legacy::Redis),
            _ => None,
        }
    }
}

/// `stores`: each store's result, written as a JSON object in the vector's order. A writer's
/// [`Answer::push`] keeps it sorted by name, each once; a reader gets the body's entries in body
/// order, duplicates included, and [`Stores::resolve`] makes them what a JSON object means.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stores<'a, S>(pub Vec<(S, StoreResult<'a>)>);

impl<'a, S: Ord> Stores<'a, S> {
    /// Sorted by name, the last of equal names kept (as a JSON object's last key wins).
    pub fn resolve(&mut self) {
        self.0.sort_by(|a, b| a.0.cmp(&b.0));
        self.0.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(later, kept);
            }
            same
        });
    }

    pub fn get(&self, id: &S) -> Option<&StoreResult<'a>> {
        self.0.iter().find(|(s, _)| s == id).map(|(_, r)| r)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &(S, StoreResult<'a>)> {
        self.0.iter()
    }
}

impl<S: Serialize> Serialize for Stores<'_, S> {
    fn serialize<Ser: Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, result) in &self.0 {
            map.serialize_entry(name, result)?;
        }
        map.end()
    }
}

impl<'de: 'a, 'a, S: Deserialize<'de>> Deserialize<'de> for Stores<'a, S> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a, S>(PhantomData<(&'a (), S)>);
        impl<'de: 'a, 'a, S: Deserialize<'de>> Visitor<'de> for V<'a, S> {
            type Value = Stores<'a, S>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of stores")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Stores<'a, S>, A::Error> {
                let mut stores = Vec::with_capacity(a.size_hint().unwrap_or(4).min(64));
                while let Some(entry) = a.next_entry::<S, StoreResult<'a>>()? {
                    stores.push(entry);
                }
                Ok(Stores(stores))
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// The answer of one `/test` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(bound(serialize = "S: Serialize", deserialize = "S: Deserialize<'de>"))]
pub struct Answer<'a, S> {
    /// Always written; a reader takes any JSON value (as its text) or none.
    #[serde(default, borrow)]
    pub key: Option<Key<'a>>,
    /// `request.cf.colo`, or `"local"` when the platform gives none (`"unknown"` when absent).
    #[serde(default = "Name::unknown", borrow)]
    pub colo: Name<'a>,
    /// The order in which the stores were measured in this request.
    #[serde(default = "Vec::new")]
    pub order: Vec<S>,
    /// Requests this isolate has served, this one included (1 = cold isolate).
    #[serde(default)]
    pub isolate_requests: u64,
    /// Other requests of this isolate in flight at some moment of this one. On a deployed
    /// worker their CPU (parsing, encoding, decoding) may be counted in this request's spans:
    /// 0 means none could be. Always written; `None` when a reader found none.
    #[serde(default)]
    pub concurrent: Option<u32>,
    #[serde(borrow)]
    pub stores: Stores<'a, S>,
    #[serde(rename = "kvLatency", default)]
    pub kv_latency: Option<f64>,
    #[serde(rename = "redisLatency", default)]
    pub redis_latency: Option<f64>,
}

impl<'a, S: StoreName> Answer<'a, S> {
    pub fn new(key: String, colo: String, isolate_requests: u64) -> Self {
        Self {
            key: Some(Key::from(key)),
            colo: Name::from(colo),
            order: Vec::new(),
            isolate_requests,
            concurrent: Some(0),
            stores: Stores(Vec::new()),
            kv_latency: None,
            redis_latency: None,
        }
    }

    /// Records one store's result, in measurement order (`stores` stays sorted by name).
    pub fn push(&mut self, id: S, result: StoreResult<'a>)
    where
        S: Clone,
    {
        match id.legacy() {
            Some(Legacy::Kv) => self.kv_latency = result.ok_read_ms(),
            Some(Legacy::Redis) => self.redis_latency = result.ok_read_ms(),
            None => {}
        }
        self.order.push(id.clone());
        match self.stores.0.binary_search_by(|(s, _)| s.cmp(&id)) {
            Ok(i) => {
                if let Some(entry) = self.stores.0.get_mut(i) {
                    entry.1 = result;
                }
            }
            Err(i) => self.stores.0.insert(i, (id, result)),
        }
    }

    pub fn store(&self, id: &S) -> Option<&StoreResult<'a>> {
        self.stores.get(id)
    }
}

impl<S: Serialize> Answer<'_, S> {
    pub fn to_json(&self) -> String {
        // Serializing plain structs of strings and numbers cannot fail; keep a valid answer anyway.
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!(r#"{{"error":{{"parameter":null,"message":"serialize: {e}"}}}}"#)
        })
    }
}

impl<'a> Answer<'a, Name<'a>> {
    /// Reads an answer, borrowing its names from `body`; `stores` resolved (sorted, each once).
    pub fn parse(body: &'a [u8]) -> Result<Self, serde_json::Error> {
        let mut answer: Self = serde_json::from_slice(body)?;
        answer.stores.resolve();
        Ok(answer)
    }
}

/// Rounds a duration to whole microseconds, so answers carry no float noise.
pub fn round_ms(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pushed_answer_reads_back_the_same() {
        let mut a: Answer<Name> = Answer::new("417".into(), "FRA".into(), 2);
        a.push(
            Name::from("upstash"),
            StoreResult {
                read_ms: Some(3.0),
                error: Some(ErrorBody::new("timeout", "slow".into(), Op::Write)),
                ..Default::default()
            },
        );
        a.push(
            Name::from("kv"),
            StoreResult {
                read_ms: Some(12.0),
                hit: Some(true),
                ..Default::default()
            },
        );
        let json = a.to_json();
        assert!(json.contains(r#""stores":{"kv":"#), "{json}");
        let back = Answer::parse(json.as_bytes()).unwrap();
        assert_eq!(back, a);
        assert_eq!((a.kv_latency, a.redis_latency), (Some(12.0), Some(3.0)));
        assert_eq!(
            back.store(&"upstash".into())
                .unwrap()
                .error
                .as_ref()
                .unwrap()
                .key(),
            "timeout/write"
        );
    }

    #[test]
    fn a_reader_resolves_duplicates_as_an_object_does() {
        let body = br#"{"stores":{"kv":{"read_ms":1},"do":{"read_ms":2},"kv":{"read_ms":3}}}"#;
        let a = Answer::parse(body).unwrap();
        let names: Vec<&str> = a.stores.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["do", "kv"]);
        assert_eq!(a.store(&"kv".into()).unwrap().read_ms, Some(3.0));
        assert_eq!(
            (a.colo.as_str(), a.concurrent, a.key),
            ("unknown", None, None)
        );
    }

    #[test]
    fn an_unknown_op_is_not_an_answer() {
        let body = br#"{"stores":{"kv":{"error":{"kind":"x","op":"delete"}}}}"#;
        let err = Answer::parse(body).unwrap_err().to_string();
        assert!(err.contains("delete"), "{err}");
        assert_eq!(round_ms(1.234_567_8), 1.235);
    }
}
