//! Redis replies rendered as Upstash's JSON (nil → `null`, integer → number, strings → strings,
//! base64 when asked except `OK`, arrays nested, a nested error → its message; a top-level error
//! a 400), and the budget that caps one request's JSON.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use redis::{ServerError, Value};

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

    fn write_string(self, out: &mut Vec<u8>, bytes: &[u8]) {
        match self {
            Self::Utf8 => write_json_str(out, &String::from_utf8_lossy(bytes)),
            Self::Base64 => {
                // Base64 needs no JSON escaping.
                out.push(b'"');
                out.extend_from_slice(BASE64.encode(bytes).as_bytes());
                out.push(b'"');
            }
        }
    }
}

/// The answer to one command: its result already rendered as JSON, or a Redis error reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A JSON value (`"OK"`, `3`, `null`, `["a",1]`, ...), ready to be placed after `"result":`.
    Json(Vec<u8>),
    /// The message of a Redis error reply, e.g. `WRONGTYPE Operation against ...`.
    Error(String),
}

/// Why a reply cannot be given to the client.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
    #[error("the reply is over {limit} bytes")]
    TooLarge { limit: usize },
}

/// Bytes a request may still get back (its JSON plus [`ENTRY_OVERHEAD`] per reply), shared by a
/// pipeline's replies and checked as each is rendered.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    spent: usize,
}

/// Charged per reply for its `{"result":...},` envelope, so a million tiny replies count too.
pub const ENTRY_OVERHEAD: usize = 16;

impl Budget {
    pub fn new(limit: usize) -> Self {
        Self { limit, spent: 0 }
    }

    /// Fails when `pending` more bytes on top of what is spent would pass the limit.
    fn check(&self, pending: usize) -> Result<(), RenderError> {
        match self.spent.checked_add(pending) {
            Some(total) if total <= self.limit => Ok(()),
            _ => Err(RenderError::TooLarge { limit: self.limit }),
        }
    }

    fn spend(&mut self, n: usize) -> Result<(), RenderError> {
        self.check(n)?;
        self.spent += n;
        Ok(())
    }
}

/// Redis' error line, as it sent it: the crate splits it at the first space into a code and the
/// rest (`None` when there was no space).
pub fn error_message(err: &ServerError) -> String {
    match err.details() {
        Some(detail) => format!("{} {detail}", err.code()),
        None => err.code().to_owned(),
    }
}

/// One reply: a top-level error stays an error, anything else is rendered as JSON, within
/// `budget`.
pub fn render(
    value: &Value,
    encoding: Encoding,
    budget: &mut Budget,
) -> Result<Reply, RenderError> {
    if let Value::ServerError(err) = value {
        let message = error_message(err);
        budget.spend(message.len() + ENTRY_OVERHEAD)?;
        return Ok(Reply::Error(message));
    }
    let mut out = Vec::new();
    write_value(value, encoding, budget, &mut out)?;
    budget.spend(out.len() + ENTRY_OVERHEAD)?;
    Ok(Reply::Json(out))
}

/// The reply to `EXEC`: `Ok` with one reply per queued command, or `Err` with the message of a
/// transaction Redis discarded as a whole (`EXECABORT ...`).
pub fn render_exec(
    value: &Value,
    encoding: Encoding,
    budget: &mut Budget,
) -> Result<Result<Vec<Reply>, String>, RenderError> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|item| render(item, encoding, budget))
            .collect::<Result<_, _>>()
            .map(Ok),
        Value::Nil => Ok(Err("EXECABORT Transaction discarded".to_owned())),
        Value::ServerError(err) => Ok(Err(error_message(err))),
        other => Err(RenderError::Protocol(format!(
            "EXEC answered {other:?} instead of an array"
        ))),
    }
}

/// Writes `value` as JSON into `out`. Recursion is bounded: the crate refuses replies nested
/// deeper than 100 arrays. The budget is checked after each element, so a huge array stops early.
fn write_value(
    value: &Value,
    encoding: Encoding,
    budget: &Budget,
    out: &mut Vec<u8>,
) -> Result<(), RenderError> {
    match value {
        Value::Okay => out.extend_from_slice(b"\"OK\""),
        Value::SimpleString(text) => encoding.write_string(out, text.as_bytes()),
        Value::BulkString(bytes) => encoding.write_string(out, bytes),
        Value::ServerError(err) => write_json_str(out, &error_message(err)),
        Value::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, encoding, budget, out)?;
                budget.check(out.len())?;
            }
            out.push(b']');
        }
        // RESP3 types: the gateway connects with RESP2 (see `pool`), where Redis sends none.
        other => {
            return Err(RenderError::Protocol(format!(
                "a RESP3 value in a RESP2 reply: {other:?}"
            )))
        }
    }
    budget.check(out.len())
}

/// Writes `text` as a JSON string literal.
pub fn write_json_str(out: &mut Vec<u8>, text: &str) {
    // Writing into a Vec cannot fail, and a &str always serialises.
    let _ = serde_json::to_writer(out, text);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `wire` with the `redis` crate's own parser, as a connection would.
    fn parse(wire: &[u8]) -> Value {
        redis::parse_redis_value(wire).unwrap()
    }

    fn one(wire: &[u8], encoding: Encoding) -> Reply {
        render(&parse(wire), encoding, &mut Budget::new(1 << 20)).unwrap()
    }

    fn json(text: &str) -> Reply {
        Reply::Json(text.as_bytes().to_vec())
    }

    #[test]
    fn every_reply_type_maps_to_upstash_json() {
        let cases: &[(&[u8], Reply)] = &[
            (b"+OK\r\n", json("\"OK\"")),
            (b"+PONG\r\n", json("\"PONG\"")),
            (b":-7\r\n", json("-7")),
            (b":9223372036854775807\r\n", json("9223372036854775807")),
            (b"$1\r\nv\r\n", json("\"v\"")),
            (b"$0\r\n\r\n", json("\"\"")),
            (b"$-1\r\n", json("null")),
            (b"*-1\r\n", json("null")),
            (b"*0\r\n", json("[]")),
            (b"$2\r\na\xFF\r\n", json("\"a\u{FFFD}\"")),
            (b"$3\r\n\"\n\\\r\n", json(r#""\"\n\\""#)),
            (
                b"*3\r\n:1\r\n*2\r\n$1\r\na\r\n*1\r\n$-1\r\n$1\r\nc\r\n",
                json(r#"[1,["a",[null]],"c"]"#),
            ),
            (b"*2\r\n-ERR inner\r\n:1\r\n", json(r#"["ERR inner",1]"#)),
            (
                b"-WRONGTYPE Operation against a key\r\n",
                Reply::Error("WRONGTYPE Operation against a key".into()),
            ),
        ];
        for (wire, want) in cases {
            let shown = String::from_utf8_lossy(wire);
            assert_eq!(&one(wire, Encoding::Utf8), want, "{shown:?}");
        }
    }

    #[test]
    fn error_lines_come_back_exactly_as_redis_sent_them() {
        for line in [
            "ERR unknown command 'X'",
            "ERR",
            "ERR  two spaces",
            "EXECABORT Transaction discarded because of: BUSY Redis is busy",
            "NOSCRIPT No matching script.",
            "BUSY Redis is busy running a script.",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            "MYCODE",
        ] {
            let wire = format!("-{line}\r\n");
            assert_eq!(
                one(wire.as_bytes(), Encoding::Utf8),
                Reply::Error(line.into())
            );
            let nested = format!("*1\r\n-{line}\r\n");
            let mut want = b"[".to_vec();
            write_json_str(&mut want, line);
            want.push(b']');
            assert_eq!(one(nested.as_bytes(), Encoding::Base64), Reply::Json(want));
        }
    }

    #[test]
    fn base64_encodes_every_string_but_the_status_ok() {
        let e = Encoding::Base64;
        assert_eq!(one(b"+OK\r\n", e), json("\"OK\""));
        // A bulk string that reads OK is data, not the status.
        assert_eq!(one(b"$2\r\nOK\r\n", e), json("\"T0s=\""));
        assert_eq!(one(b"+PONG\r\n", e), json("\"UE9ORw==\""));
        assert_eq!(
            one(b"*2\r\n$2\r\n\x00\xFF\r\n:3\r\n", e),
            json(r#"["AP8=",3]"#)
        );
        // Errors stay plain.
        assert_eq!(one(b"-ERR x\r\n", e), Reply::Error("ERR x".into()));
    }

    #[test]
    fn the_budget_is_shared_across_replies_and_counts_small_elements() {
        let big = parse(&[b"$400\r\n".as_slice(), &[b'x'; 400], b"\r\n"].concat());
        let mut budget = Budget::new(1000);
        render(&big, Encoding::Utf8, &mut budget).unwrap();
        render(&big, Encoding::Utf8, &mut budget).unwrap();
        assert_eq!(
            render(&big, Encoding::Utf8, &mut budget),
            Err(RenderError::TooLarge { limit: 1000 })
        );

        let many = Value::Array(vec![Value::Int(1); 100_000]);
        assert_eq!(
            render(&many, Encoding::Utf8, &mut Budget::new(10_000)),
            Err(RenderError::TooLarge { limit: 10_000 })
        );
        // Errors count too.
        let err = parse(b"-ERR 0123456789\r\n");
        assert!(render(&err, Encoding::Utf8, &mut Budget::new(20)).is_err());
        assert!(render(&err, Encoding::Utf8, &mut Budget::new(40)).is_ok());
    }

    #[test]
    fn exec_replies_split_into_entries() {
        let replies = render_exec(
            &parse(b"*3\r\n+OK\r\n-ERR not an integer\r\n$1\r\nx\r\n"),
            Encoding::Utf8,
            &mut Budget::new(1000),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            replies,
            [
                json("\"OK\""),
                Reply::Error("ERR not an integer".into()),
                json("\"x\"")
            ]
        );
        let refused = render_exec(
            &parse(b"-EXECABORT Transaction discarded\r\n"),
            Encoding::Utf8,
            &mut Budget::new(1000),
        );
        assert_eq!(refused, Ok(Err("EXECABORT Transaction discarded".into())));
        let nil = render_exec(&Value::Nil, Encoding::Utf8, &mut Budget::new(1000));
        assert_eq!(nil, Ok(Err("EXECABORT Transaction discarded".into())));
        assert!(render_exec(&Value::Int(1), Encoding::Utf8, &mut Budget::new(1000)).is_err());
    }

    #[test]
    fn resp3_values_are_refused_not_guessed() {
        for value in [Value::Double(1.5), Value::Boolean(true), Value::Set(vec![])] {
            let got = render(&value, Encoding::Utf8, &mut Budget::new(1000));
            assert!(matches!(got, Err(RenderError::Protocol(_))), "{value:?}");
        }
    }

    #[test]
    fn encoding_header_is_case_insensitive() {
        assert_eq!(Encoding::from_header(Some(b"BASE64")), Encoding::Base64);
        assert_eq!(Encoding::from_header(Some(b"utf8")), Encoding::Utf8);
        assert_eq!(Encoding::from_header(None), Encoding::Utf8);
    }
}
