//! RESP replies rendered as the JSON Upstash returns: nil → null, integers and doubles → numbers,
//! strings → strings (base64 when the client asked for it), arrays nested, maps flattened as RESP2 does.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use redis::Value;
use serde_json::Value as Json;

/// How string results are written, chosen by the `Upstash-Encoding` request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Strings as UTF-8, bytes that are not UTF-8 replaced with U+FFFD.
    Utf8,
    /// Every string base64-encoded except the status reply `OK`.
    Base64,
}

impl Encoding {
    /// The encoding a request asks for through its `Upstash-Encoding` header value.
    pub fn from_header(value: Option<&[u8]>) -> Self {
        match value {
            Some(v) if v.eq_ignore_ascii_case(b"base64") => Self::Base64,
            _ => Self::Utf8,
        }
    }

    fn string(self, bytes: &[u8]) -> Json {
        match self {
            Self::Utf8 => Json::String(String::from_utf8_lossy(bytes).into_owned()),
            Self::Base64 => Json::String(BASE64.encode(bytes)),
        }
    }
}

/// The message of a Redis error reply as redis-server wrote it, e.g. `WRONGTYPE Operation against ...`.
pub fn server_error_message(err: &redis::ServerError) -> String {
    match err.details() {
        Some(detail) => format!("{} {}", err.code(), detail),
        None => err.code().to_owned(),
    }
}

/// Renders one reply. A nested error reply (only possible inside arrays) becomes its message string.
pub fn to_json(value: &Value, encoding: Encoding) -> Json {
    match value {
        Value::Nil => Json::Null,
        Value::Int(i) => Json::from(*i),
        Value::BulkString(bytes) => encoding.string(bytes),
        Value::SimpleString(s) => encoding.string(s.as_bytes()),
        Value::Okay => Json::String("OK".to_owned()),
        Value::Array(items) | Value::Set(items) => array(items, encoding),
        Value::Push { data, .. } => array(data, encoding),
        Value::Map(pairs) => Json::Array(
            pairs
                .iter()
                .flat_map(|(k, v)| [to_json(k, encoding), to_json(v, encoding)])
                .collect(),
        ),
        Value::Attribute { data, .. } => to_json(data, encoding),
        // RESP2, which Upstash speaks, has no doubles: a non-finite one cannot be a JSON number,
        // so it is written the way Redis writes it as a string.
        Value::Double(d) => serde_json::Number::from_f64(*d)
            .map(Json::Number)
            .unwrap_or_else(|| {
                encoding.string(if *d > 0.0 {
                    b"inf"
                } else if *d < 0.0 {
                    b"-inf"
                } else {
                    b"nan"
                })
            }),
        // RESP2 answers booleans as integers 1 and 0.
        Value::Boolean(b) => Json::from(i64::from(*b)),
        Value::VerbatimString { text, .. } => encoding.string(text.as_bytes()),
        Value::BigNumber(digits) => encoding.string(digits),
        Value::ServerError(err) => Json::String(server_error_message(err)),
        // `Value` is non-exhaustive; a future reply type is shown rather than dropped.
        #[allow(unreachable_patterns)]
        other => Json::String(format!("{other:?}")),
    }
}

fn array(items: &[Value], encoding: Encoding) -> Json {
    Json::Array(items.iter().map(|v| to_json(v, encoding)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_reply_type_maps_to_upstash_json() {
        let e = Encoding::Utf8;
        let cases = [
            (Value::Nil, json!(null)),
            (Value::Int(-7), json!(-7)),
            (Value::BulkString(b"v".to_vec()), json!("v")),
            (Value::BulkString(vec![b'a', 0xFF]), json!("a\u{FFFD}")),
            (Value::SimpleString("PONG".into()), json!("PONG")),
            (Value::Okay, json!("OK")),
            (
                Value::Array(vec![Value::Int(1), Value::Array(vec![Value::Nil])]),
                json!([1, [null]]),
            ),
            (
                Value::Map(vec![(Value::BulkString(b"f".to_vec()), Value::Int(2))]),
                json!(["f", 2]),
            ),
            (
                Value::Set(vec![Value::BulkString(b"m".to_vec())]),
                json!(["m"]),
            ),
            (Value::Double(1.5), json!(1.5)),
            (Value::Double(f64::INFINITY), json!("inf")),
            (Value::Boolean(true), json!(1)),
        ];
        for (value, want) in cases {
            assert_eq!(to_json(&value, e), want, "{value:?}");
        }
    }

    #[test]
    fn base64_encodes_every_string_but_ok() {
        let e = Encoding::Base64;
        assert_eq!(to_json(&Value::Okay, e), json!("OK"));
        assert_eq!(
            to_json(&Value::BulkString(b"OK".to_vec()), e),
            json!("T0s=")
        );
        assert_eq!(
            to_json(&Value::SimpleString("PONG".into()), e),
            json!("UE9ORw==")
        );
        assert_eq!(
            to_json(
                &Value::Array(vec![Value::BulkString(vec![0, 255]), Value::Int(3)]),
                e
            ),
            json!(["AP8=", 3])
        );
    }

    #[test]
    fn encoding_header_is_case_insensitive() {
        assert_eq!(Encoding::from_header(Some(b"BASE64")), Encoding::Base64);
        assert_eq!(Encoding::from_header(Some(b"utf8")), Encoding::Utf8);
        assert_eq!(Encoding::from_header(None), Encoding::Utf8);
    }
}
