//! The worker's `/test` answer as the report reads it: the wire's shape
//! ([`kvbench_wire::answer`]) validated, its times in microseconds. Anything that does not
//! conform is reported as `malformed` with the reason, never dropped.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;

use crate::hist::ms_to_us;

type WireAnswer<'a> = kvbench_wire::answer::Answer<'a, kvbench_wire::Name<'a>>;
type WireStoreResult<'a> = kvbench_wire::answer::StoreResult<'a>;

/// Why a 200 body is not a `/test` answer.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("body is not the expected JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Invalid(String),
}

/// One `/test` answer, times already converted to integer microseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub key: Option<String>,
    pub colo: String,
    pub stores: BTreeMap<String, StoreResult>,
    /// Other requests of the isolate in flight during this one (`None`: not reported).
    pub concurrent: Option<u32>,
    /// The first answer of a new instance (`isolate_requests` 1; a kept line's `cold`): its
    /// store calls opened connections and exchanged metadata afresh. Its latencies are kept
    /// apart from the warm ones (`cold_*`).
    pub cold: bool,
}

/// A store call that failed: a data point, not an HTTP error (the wire's shape, owned).
pub type StoreError = kvbench_wire::answer::ErrorBody<'static>;

/// What one store did during the request: the wire's [`kvbench_wire::answer::StoreResult`]
/// with its times in microseconds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StoreResult {
    pub read_us: Option<u64>,
    pub hit: Option<bool>,
    pub value_bytes: Option<u64>,
    pub write_us: Option<u64>,
    pub connect_us: Option<u64>,
    pub error: Option<StoreError>,
    /// A call that timed out was waited for before the next store (`Some(finished)`).
    pub abandoned: Option<bool>,
    /// The store's own time of the read and of the write, when it reported one (D1's SQL time,
    /// `read_meta.sql_ms` / `write_meta.sql_ms`), µs.
    pub read_sql_us: Option<u64>,
    pub write_sql_us: Option<u64>,
}

/// An answer as parsed, borrowing its names from the body (no allocation for them): what the
/// collector records. [`parse`] is the same parse, owned.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerRef<'a> {
    pub key: Option<Cow<'a, str>>,
    pub colo: Cow<'a, str>,
    /// Sorted by store name, each name once (the last one wins, as in a JSON object).
    pub stores: Vec<(Cow<'a, str>, StoreResult)>,
    pub concurrent: Option<u32>,
    pub cold: bool,
}

impl AnswerRef<'_> {
    pub fn into_owned(self) -> Answer {
        Answer {
            key: self.key.map(Cow::into_owned),
            colo: self.colo.into_owned(),
            stores: self
                .stores
                .into_iter()
                .map(|(name, r)| (name.into_owned(), r))
                .collect(),
            concurrent: self.concurrent,
            cold: self.cold,
        }
    }
}

fn time(store: &str, field: &str, ms: Option<f64>) -> Result<Option<u64>, AnswerError> {
    match ms {
        None => Ok(None),
        Some(ms) => ms_to_us(ms).map(Some).ok_or_else(|| {
            AnswerError::Invalid(format!("stores.{store}.{field} is not a duration: {ms}"))
        }),
    }
}

/// One store's wire result in microseconds. Every field of the wire's shape is named here, so
/// one added there does not compile until this reader decides what it means.
fn store_result(name: &str, wire: WireStoreResult<'_>) -> Result<StoreResult, AnswerError> {
    let WireStoreResult {
        read_ms,
        hit,
        value_bytes,
        write_ms,
        connect_ms,
        error,
        abandoned,
        // Where the object was placed: the kept line's label already says which probe.
        location_hint: _,
        near_colo: _,
        // Of what a store reported about its calls, the report shows its own time; where the
        // call ran, its cache status and its retries stay in the kept answers.
        read_meta,
        read_retried: _,
        write_meta,
    } = wire;
    let sql_ms = |meta: &Option<kvbench_wire::answer::CallMeta>| meta.as_ref()?.sql_ms;
    Ok(StoreResult {
        read_us: time(name, "read_ms", read_ms)?,
        hit,
        value_bytes,
        write_us: time(name, "write_ms", write_ms)?,
        connect_us: time(name, "connect_ms", connect_ms)?,
        error: error.map(kvbench_wire::answer::ErrorBody::into_owned),
        abandoned: abandoned.map(|a| a.finished),
        read_sql_us: time(name, "read_meta.sql_ms", sql_ms(&read_meta))?,
        write_sql_us: time(name, "write_meta.sql_ms", sql_ms(&write_meta))?,
    })
}

/// Parses a 200 body, borrowing names from it.
pub fn parse_ref(body: &[u8]) -> Result<AnswerRef<'_>, AnswerError> {
    let WireAnswer {
        key,
        colo,
        // What the report does not show: the measurement order and the legacy copies of two
        // stores' reads.
        order: _,
        isolate_requests,
        concurrent,
        stores,
        kv_latency: _,
        redis_latency: _,
    } = WireAnswer::parse(body)?;
    if stores.is_empty() {
        return Err(AnswerError::Invalid("stores is empty".into()));
    }
    let stores = stores
        .0
        .into_iter()
        .map(|(name, s)| {
            let result = store_result(&name, s)?;
            Ok((name.0, result))
        })
        .collect::<Result<Vec<_>, AnswerError>>()?;
    Ok(AnswerRef {
        key: key.map(|k| k.0),
        colo: colo.0,
        stores,
        concurrent,
        cold: isolate_requests == 1,
    })
}

/// Parses a 200 body.
pub fn parse(body: &[u8]) -> Result<Answer, AnswerError> {
    parse_ref(body).map(AnswerRef::into_owned)
}

/// A one-line description of a non-200 body, e.g. `limit: must be at most 1000` for the worker's
/// `{"error": {"parameter", "message"}}` shape; the raw (shortened) text otherwise.
pub fn describe_error_body(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Wire {
        error: serde_json::Value,
    }
    if let Ok(w) = serde_json::from_slice::<Wire>(body) {
        return match w.error {
            serde_json::Value::String(s) => s,
            serde_json::Value::Object(o) => {
                let text = |k: &str| o.get(k).and_then(|v| v.as_str()).unwrap_or("");
                match (text("parameter"), text("message")) {
                    ("", m) => m.to_string(),
                    (p, m) => format!("{p}: {m}"),
                }
            }
            other => other.to_string(),
        };
    }
    shorten(&String::from_utf8_lossy(body))
}

/// At most 120 characters, on one line.
pub fn shorten(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > 120 {
        let cut: String = one_line.chars().take(117).collect();
        format!("{cut}...")
    } else {
        one_line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"{
      "key": "417", "colo": "FRA", "order": ["upstash", "kv"], "isolate_requests": 12,
      "stores": {
        "kv":      {"read_ms": 12.0, "hit": true,  "value_bytes": 23456, "write_ms": null, "error": null},
        "upstash": {"read_ms": 3.0,  "hit": false, "value_bytes": 40000, "write_ms": 2.0,
                    "error": {"kind": "timeout", "message": "slow", "op": "write"}},
        "denokv":  {"read_ms": 5.5, "hit": null, "connect_ms": 5.0}
      },
      "kvLatency": 12.0, "redisLatency": 3.0
    }"#;

    #[test]
    fn parses_the_contract_example() {
        let a = parse(FULL.as_bytes()).unwrap();
        assert_eq!(a.colo, "FRA");
        assert_eq!(a.key.as_deref(), Some("417"));
        let kv = &a.stores["kv"];
        assert_eq!(
            (kv.read_us, kv.hit, kv.value_bytes),
            (Some(12_000), Some(true), Some(23456))
        );
        assert_eq!(kv.write_us, None);
        let up = &a.stores["upstash"];
        assert_eq!(up.write_us, Some(2_000));
        assert_eq!(up.error.as_ref().unwrap().key(), "timeout/write");
        assert_eq!(a.stores["denokv"].connect_us, Some(5_000));
    }

    #[test]
    fn rejects_non_conforming_bodies_table() {
        let cases = [
            ("", "JSON"),
            ("<html>", "JSON"),
            ("[]", "JSON"),
            (r#"{"colo":"FRA"}"#, "stores"),
            (r#"{"stores":{}}"#, "stores is empty"),
            (r#"{"stores":{"kv":{"read_ms":-1}}}"#, "read_ms"),
            (r#"{"stores":{"kv":{"read_ms":"fast"}}}"#, "JSON"),
            (
                r#"{"stores":{"kv":{"error":{"kind":"x","op":"delete"}}}}"#,
                "expected `read` or `write`",
            ),
        ];
        for (body, needle) in cases {
            let err = parse(body.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(needle) || needle == "JSON", "{body}: {err}");
        }
    }

    #[test]
    fn missing_colo_is_unknown_and_numeric_key_is_text() {
        let a = parse(br#"{"key":417,"stores":{"kv":{"read_ms":1}}}"#).unwrap();
        assert_eq!(a.colo, "unknown");
        assert_eq!(a.key.as_deref(), Some("417"));
    }

    #[test]
    fn describes_error_bodies_table() {
        let cases = [
            (
                r#"{"error":{"parameter":"size","message":"too big"}}"#,
                "size: too big",
            ),
            (r#"{"error":{"message":"no token"}}"#, "no token"),
            (r#"{"error":"unauthorized"}"#, "unauthorized"),
            ("plain\ntext", "plain text"),
        ];
        for (body, want) in cases {
            assert_eq!(describe_error_body(body.as_bytes()), want);
        }
        assert_eq!(shorten(&"x".repeat(300)).len(), 120);
    }
}
