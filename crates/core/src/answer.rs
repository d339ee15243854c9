//! The JSON answer of `/test`. Field names and units are a public contract documented in the
//! README; `kvLatency`/`redisLatency` keep the original benchmark's consumers working.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{ErrorKind, StoreError};
use crate::store::StoreId;

/// Which operation of a store failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorBody {
    pub kind: ErrorKind,
    pub message: String,
    pub op: Op,
}

impl ErrorBody {
    pub fn new(error: StoreError, op: Op) -> Self {
        Self {
            kind: error.kind,
            message: error.message,
            op,
        }
    }
}

/// What one store did in one request.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct StoreResult {
    /// Milliseconds from just before the read until the value was in hand (or the read failed).
    pub read_ms: Option<f64>,
    /// `true` = the key had a value, `false` = miss, `null` = the read failed.
    pub hit: Option<bool>,
    /// Bytes read on a hit, bytes written (or attempted) on a miss.
    pub value_bytes: Option<u64>,
    /// Milliseconds the write-on-miss took; `null` when no write happened.
    pub write_ms: Option<f64>,
    /// Milliseconds of connection setup done in this request before the timed calls (Deno KV's
    /// metadata exchange, cached per isolate; Redis's connection, per request); omitted when
    /// none happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_ms: Option<f64>,
    pub error: Option<ErrorBody>,
    /// A call that timed out, waited for afterwards outside any span (a binding call is not
    /// cancelled by a timeout): whether it finished and how long it was waited for. Omitted when
    /// no call timed out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abandoned: Option<Abandoned>,
}

/// What became of a call after its timeout (see [`crate::probe`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Abandoned {
    /// It completed within the wait; `false`: still running when the wait ended (dropped then).
    pub finished: bool,
    /// Milliseconds waited after the timeout, before the next store started.
    pub waited_ms: f64,
}

impl StoreResult {
    /// The read time, if the read succeeded: what the legacy `*Latency` fields report.
    pub fn ok_read_ms(&self) -> Option<f64> {
        match &self.error {
            Some(e) if e.op == Op::Read => None,
            _ => self.read_ms,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    pub key: String,
    /// `request.cf.colo`, or `"local"` when the platform gives none.
    pub colo: String,
    /// The order in which the stores were measured in this request.
    pub order: Vec<StoreId>,
    /// Requests this isolate has served, this one included (1 = cold isolate).
    pub isolate_requests: u64,
    /// Other requests of this isolate in flight at some moment of this one. On a deployed
    /// worker their CPU (parsing, encoding, decoding) may be counted in this request's spans:
    /// 0 means none could be.
    pub concurrent: u32,
    pub stores: BTreeMap<StoreId, StoreResult>,
    #[serde(rename = "kvLatency")]
    pub kv_latency: Option<f64>,
    #[serde(rename = "redisLatency")]
    pub redis_latency: Option<f64>,
}

impl Answer {
    pub fn new(key: String, colo: String, isolate_requests: u64) -> Self {
        Self {
            key,
            colo,
            order: Vec::new(),
            concurrent: 0,
            isolate_requests,
            stores: BTreeMap::new(),
            kv_latency: None,
            redis_latency: None,
        }
    }

    /// Records one store's result, in measurement order.
    pub fn push(&mut self, id: StoreId, result: StoreResult) {
        match id {
            StoreId::Kv => self.kv_latency = result.ok_read_ms(),
            StoreId::Upstash => self.redis_latency = result.ok_read_ms(),
            _ => {}
        }
        self.order.push(id);
        self.stores.insert(id, result);
    }

    pub fn to_json(&self) -> String {
        // Serializing plain structs of strings and numbers cannot fail; keep a valid answer anyway.
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!(r#"{{"error":{{"parameter":null,"message":"serialize: {e}"}}}}"#)
        })
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
    fn serializes_the_documented_shape() {
        let mut a = Answer::new("417".into(), "FRA".into(), 12);
        a.push(
            StoreId::Upstash,
            StoreResult {
                read_ms: Some(3.0),
                hit: Some(false),
                value_bytes: Some(40_000),
                write_ms: Some(2.0),
                connect_ms: None,
                error: None,
                abandoned: None,
            },
        );
        a.push(
            StoreId::Kv,
            StoreResult {
                read_ms: Some(12.0),
                hit: Some(true),
                value_bytes: Some(23_456),
                write_ms: None,
                connect_ms: None,
                error: None,
                abandoned: None,
            },
        );
        a.push(
            StoreId::DenoKv,
            StoreResult {
                read_ms: Some(4.0),
                hit: Some(true),
                value_bytes: Some(10),
                connect_ms: Some(7.5),
                ..Default::default()
            },
        );
        let v: serde_json::Value = serde_json::from_str(&a.to_json()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "key": "417", "colo": "FRA", "order": ["upstash", "kv", "denokv"], "isolate_requests": 12, "concurrent": 0,
                "stores": {
                    "denokv": {"read_ms": 4.0, "hit": true, "value_bytes": 10, "write_ms": null, "connect_ms": 7.5, "error": null},
                    "kv": {"read_ms": 12.0, "hit": true, "value_bytes": 23456, "write_ms": null, "error": null},
                    "upstash": {"read_ms": 3.0, "hit": false, "value_bytes": 40000, "write_ms": 2.0, "error": null}
                },
                "kvLatency": 12.0, "redisLatency": 3.0
            })
        );
    }

    #[test]
    fn failed_reads_have_no_legacy_latency() {
        let mut a = Answer::new("1".into(), "local".into(), 1);
        a.push(
            StoreId::Kv,
            StoreResult {
                read_ms: Some(10_000.0),
                error: Some(ErrorBody::new(
                    StoreError::new(ErrorKind::Timeout, "t"),
                    Op::Read,
                )),
                ..Default::default()
            },
        );
        assert_eq!(a.kv_latency, None);
        assert_eq!(round_ms(1.234_567_8), 1.235);
    }
}
