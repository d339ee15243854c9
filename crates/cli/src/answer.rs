//! The worker's `/test` answer: parsing and validation of the JSON contract. Anything that does
//! not conform is reported as `malformed` with the reason, never dropped.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::hist::ms_to_us;

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
}

/// What one store did during the request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StoreResult {
    pub read_us: Option<u64>,
    pub hit: Option<bool>,
    pub value_bytes: Option<u64>,
    pub write_us: Option<u64>,
    pub connect_us: Option<u64>,
    pub error: Option<StoreError>,
}

/// A store call that failed: a data point, not an HTTP error.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StoreError {
    pub kind: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub op: Option<String>,
}

impl StoreError {
    /// `kind/op` (or `kind` when the op is unknown): the key errors are counted under.
    pub fn key(&self) -> String {
        match &self.op {
            Some(op) => format!("{}/{}", self.kind, op),
            None => self.kind.clone(),
        }
    }

    pub fn is_write(&self) -> bool {
        self.op.as_deref() == Some("write")
    }
}

#[derive(Deserialize)]
struct WireAnswer {
    #[serde(default)]
    key: Option<serde_json::Value>,
    #[serde(default)]
    colo: Option<String>,
    stores: BTreeMap<String, WireStore>,
}

#[derive(Deserialize)]
struct WireStore {
    #[serde(default)]
    read_ms: Option<f64>,
    #[serde(default)]
    hit: Option<bool>,
    #[serde(default)]
    value_bytes: Option<u64>,
    #[serde(default)]
    write_ms: Option<f64>,
    #[serde(default)]
    connect_ms: Option<f64>,
    #[serde(default)]
    error: Option<StoreError>,
}

fn time(store: &str, field: &str, ms: Option<f64>) -> Result<Option<u64>, AnswerError> {
    match ms {
        None => Ok(None),
        Some(ms) => ms_to_us(ms).map(Some).ok_or_else(|| {
            AnswerError::Invalid(format!("stores.{store}.{field} is not a duration: {ms}"))
        }),
    }
}

/// Parses a 200 body.
pub fn parse(body: &[u8]) -> Result<Answer, AnswerError> {
    let wire: WireAnswer = serde_json::from_slice(body)?;
    if wire.stores.is_empty() {
        return Err(AnswerError::Invalid("stores is empty".into()));
    }
    let mut stores = BTreeMap::new();
    for (name, s) in wire.stores {
        if let Some(e) = &s.error {
            if let Some(op) = &e.op {
                if op != "read" && op != "write" {
                    return Err(AnswerError::Invalid(format!(
                        "stores.{name}.error.op must be \"read\" or \"write\", got {op:?}"
                    )));
                }
            }
        }
        let result = StoreResult {
            read_us: time(&name, "read_ms", s.read_ms)?,
            hit: s.hit,
            value_bytes: s.value_bytes,
            write_us: time(&name, "write_ms", s.write_ms)?,
            connect_us: time(&name, "connect_ms", s.connect_ms)?,
            error: s.error,
        };
        stores.insert(name, result);
    }
    let key = wire.key.map(|k| match k {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    });
    Ok(Answer {
        key,
        colo: wire.colo.unwrap_or_else(|| "unknown".into()),
        stores,
    })
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
                "op",
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
