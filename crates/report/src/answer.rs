//! The worker's `/test` answer: parsing and validation of the JSON contract. Anything that does
//! not conform is reported as `malformed` with the reason, never dropped.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

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
    /// Other requests of the isolate in flight during this one (`None`: not reported).
    pub concurrent: Option<u32>,
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
    /// A call that timed out was waited for before the next store (`Some(finished)`).
    pub abandoned: Option<bool>,
}

/// `abandoned` as the worker writes it.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
struct WireAbandoned {
    finished: bool,
    #[allow(dead_code)]
    #[serde(default)]
    waited_ms: f64,
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

/// An answer as parsed, borrowing its names from the body (no allocation for them): what the
/// collector records. [`parse`] is the same parse, owned.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerRef<'a> {
    pub key: Option<Cow<'a, str>>,
    pub colo: Cow<'a, str>,
    /// Sorted by store name, each name once (the last one wins, as in a JSON object).
    pub stores: Vec<(Cow<'a, str>, StoreResult)>,
    pub concurrent: Option<u32>,
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
        }
    }
}

/// A JSON string, borrowed from the body unless it had escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// `key`: a string, or any other JSON value as its JSON text (a numeric key reads `417`).
struct Key<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Key<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(v)))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(serde_json::Value::from(v).to_string())))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, a: A) -> Result<Key<'a>, A::Error> {
                let v = serde_json::Value::deserialize(
                    serde::de::value::SeqAccessDeserializer::new(a),
                )?;
                Ok(Key(Cow::Owned(v.to_string())))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, a: A) -> Result<Key<'a>, A::Error> {
                let v = serde_json::Value::deserialize(
                    serde::de::value::MapAccessDeserializer::new(a),
                )?;
                Ok(Key(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// `stores`: the object's entries in body order (duplicates included; [`parse_ref`] resolves them).
struct Stores<'a>(Vec<(Cow<'a, str>, WireStore)>);

impl<'de: 'a, 'a> Deserialize<'de> for Stores<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Stores<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of stores")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Stores<'a>, A::Error> {
                let mut stores = Vec::with_capacity(a.size_hint().unwrap_or(4));
                while let Some((Text(name), store)) = a.next_entry::<Text<'a>, WireStore>()? {
                    stores.push((name, store));
                }
                Ok(Stores(stores))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct WireAnswer<'a> {
    #[serde(default, borrow)]
    key: Option<Key<'a>>,
    #[serde(default, borrow)]
    colo: Option<Text<'a>>,
    #[serde(borrow)]
    stores: Stores<'a>,
    #[serde(default)]
    concurrent: Option<u32>,
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
    #[serde(default)]
    abandoned: Option<WireAbandoned>,
}

fn time(store: &str, field: &str, ms: Option<f64>) -> Result<Option<u64>, AnswerError> {
    match ms {
        None => Ok(None),
        Some(ms) => ms_to_us(ms).map(Some).ok_or_else(|| {
            AnswerError::Invalid(format!("stores.{store}.{field} is not a duration: {ms}"))
        }),
    }
}

/// Parses a 200 body, borrowing names from it.
pub fn parse_ref(body: &[u8]) -> Result<AnswerRef<'_>, AnswerError> {
    let wire: WireAnswer<'_> = serde_json::from_slice(body)?;
    let mut wire_stores = wire.stores.0;
    if wire_stores.is_empty() {
        return Err(AnswerError::Invalid("stores is empty".into()));
    }
    // Stable sort, then keep the last of equal names: what a JSON object (a map) means.
    wire_stores.sort_by(|a, b| a.0.cmp(&b.0));
    wire_stores.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            std::mem::swap(later, kept);
        }
        same
    });
    // Converted in place (same layout), so an answer costs one vector.
    let stores = wire_stores
        .into_iter()
        .map(|(name, s)| {
            if let Some(op) = s.error.as_ref().and_then(|e| e.op.as_ref()) {
                if op != "read" && op != "write" {
                    return Err(AnswerError::Invalid(format!(
                        "stores.{name}.error.op must be \"read\" or \"write\", got {op:?}"
                    )));
                }
            }
            let result = StoreResult {
                read_us: time(&name, "read_ms", s.read_ms)?,
                hit: s.hit,
                value_bytes: s.value_bytes,
                write_us: time(&name, "write_ms", s.write_ms)?,
                connect_us: time(&name, "connect_ms", s.connect_ms)?,
                error: s.error,
                abandoned: s.abandoned.map(|a| a.finished),
            };
            Ok((name, result))
        })
        .collect::<Result<Vec<_>, AnswerError>>()?;
    Ok(AnswerRef {
        key: wire.key.map(|k| k.0),
        colo: wire.colo.map_or(Cow::Borrowed("unknown"), |c| c.0),
        stores,
        concurrent: wire.concurrent,
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
