//! The Redis wire protocol (RESP2) as far as the gateway speaks it: commands go out as arrays of
//! bulk strings, and replies are read straight into the JSON Upstash answers with. Nothing is held
//! twice, and the size of what a request gets back is counted against a budget *before* each
//! string is read, so a pipeline of `GET`s of huge values is refused instead of filling memory.
//!
//! RESP2 → JSON, as Upstash answers: nil → `null`, integer → number, bulk and status strings →
//! strings (base64 when asked, except the status `OK`), arrays nested, an error nested in an array
//! → its message as a string. A top-level error reply stays an error (400 `{"error": ...}`).

use std::io;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

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

/// Why a reply could not be read. Every one of these leaves the connection unusable.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
    #[error("the reply is over {limit} bytes")]
    TooLarge { limit: usize },
}

/// Bytes a request may still get back, shared by every reply of a pipeline or transaction.
/// What is counted is the JSON the client will receive, plus [`ENTRY_OVERHEAD`] per reply.
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
    fn check(&self, pending: usize) -> Result<(), ReadError> {
        match self.spent.checked_add(pending) {
            Some(total) if total <= self.limit => Ok(()),
            _ => Err(ReadError::TooLarge { limit: self.limit }),
        }
    }

    fn spend(&mut self, n: usize) -> Result<(), ReadError> {
        self.check(n)?;
        self.spent += n;
        Ok(())
    }

    fn remaining(&self) -> usize {
        self.limit.saturating_sub(self.spent)
    }
}

/// Appends one command as RESP: an array of bulk strings.
pub fn encode_command(out: &mut Vec<u8>, args: &[Vec<u8>]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// The first line of a reply.
#[derive(Debug, PartialEq)]
enum Header {
    Status(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    /// `None` is the nil bulk string `$-1`.
    Bulk(Option<usize>),
    /// `None` is the nil array `*-1`.
    Array(Option<usize>),
}

/// Header lines are short; error and status lines are text Redis (or a script) wrote, so their
/// length is bounded by the budget instead, plus this slack for the type byte and CRLF.
const LINE_SLACK: usize = 64;

/// Reads one reply: a top-level error stays an error, anything else is rendered as JSON.
pub async fn read_reply<R>(
    r: &mut R,
    encoding: Encoding,
    budget: &mut Budget,
) -> Result<Reply, ReadError>
where
    R: AsyncBufRead + Unpin,
{
    let header = read_header(r, budget).await?;
    finish_reply(r, header, encoding, budget).await
}

async fn finish_reply<R>(
    r: &mut R,
    header: Header,
    encoding: Encoding,
    budget: &mut Budget,
) -> Result<Reply, ReadError>
where
    R: AsyncBufRead + Unpin,
{
    if let Header::Error(message) = header {
        let message = String::from_utf8_lossy(&message).into_owned();
        budget.spend(message.len() + ENTRY_OVERHEAD)?;
        return Ok(Reply::Error(message));
    }
    let mut out = Vec::new();
    render(r, header, encoding, budget, &mut out).await?;
    budget.spend(out.len() + ENTRY_OVERHEAD)?;
    Ok(Reply::Json(out))
}

/// Reads the reply to `EXEC`: `Ok` with one reply per queued command, or `Err` with the message
/// of a transaction Redis discarded as a whole (`EXECABORT ...`).
pub async fn read_exec_reply<R>(
    r: &mut R,
    encoding: Encoding,
    budget: &mut Budget,
) -> Result<Result<Vec<Reply>, String>, ReadError>
where
    R: AsyncBufRead + Unpin,
{
    match read_header(r, budget).await? {
        Header::Array(Some(n)) => {
            let mut replies = Vec::with_capacity(n.min(4096));
            for _ in 0..n {
                replies.push(read_reply(r, encoding, budget).await?);
            }
            Ok(Ok(replies))
        }
        Header::Array(None) => Ok(Err("EXECABORT Transaction discarded".to_owned())),
        Header::Error(message) => Ok(Err(String::from_utf8_lossy(&message).into_owned())),
        other => Err(ReadError::Protocol(format!(
            "EXEC answered {other:?} instead of an array"
        ))),
    }
}

/// Writes the value that starts with `first` as JSON into `out`, reading the rest of it from
/// `r`. Iterative (an explicit count of open arrays), so deep nesting cannot overflow the stack;
/// the loop ends when the outermost array closes, and every turn reads one more element.
async fn render<R>(
    r: &mut R,
    first: Header,
    encoding: Encoding,
    budget: &mut Budget,
    out: &mut Vec<u8>,
) -> Result<(), ReadError>
where
    R: AsyncBufRead + Unpin,
{
    let mut open: Vec<usize> = Vec::new();
    let mut header = first;
    loop {
        match header {
            Header::Status(text) if text == b"OK" => out.extend_from_slice(b"\"OK\""),
            Header::Status(text) => encoding.write_string(out, &text),
            Header::Error(text) => write_json_str(out, &String::from_utf8_lossy(&text)),
            Header::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
            Header::Bulk(None) | Header::Array(None) => out.extend_from_slice(b"null"),
            Header::Bulk(Some(len)) => {
                // Refused before a byte of it is read or allocated: the JSON string is at
                // least as long as the raw bytes, whatever the encoding.
                budget.check(out.len().saturating_add(len))?;
                let mut data = vec![0u8; len];
                r.read_exact(&mut data).await?;
                expect_crlf(r).await?;
                encoding.write_string(out, &data);
            }
            Header::Array(Some(0)) => out.extend_from_slice(b"[]"),
            Header::Array(Some(n)) => {
                out.push(b'[');
                open.push(n);
                budget.check(out.len())?;
                header = read_header(r, budget).await?;
                continue;
            }
        }
        budget.check(out.len())?;
        // One value is complete: close every array it completes, or move to the next element.
        loop {
            match open.last_mut() {
                None => return Ok(()),
                Some(left) => {
                    *left -= 1;
                    if *left == 0 {
                        open.pop();
                        out.push(b']');
                    } else {
                        out.push(b',');
                        break;
                    }
                }
            }
        }
        header = read_header(r, budget).await?;
    }
}

async fn read_header<R>(r: &mut R, budget: &Budget) -> Result<Header, ReadError>
where
    R: AsyncBufRead + Unpin,
{
    let line = read_line(
        r,
        budget.remaining().saturating_add(LINE_SLACK),
        budget.limit,
    )
    .await?;
    let (kind, rest) = line
        .split_first()
        .ok_or_else(|| ReadError::Protocol("empty line".into()))?;
    let number = || -> Result<i64, ReadError> {
        std::str::from_utf8(rest)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(|| ReadError::Protocol(format!("bad number {:?}", escape(rest))))
    };
    let length = || -> Result<Option<usize>, ReadError> {
        match number()? {
            -1 => Ok(None),
            n => usize::try_from(n)
                .map(Some)
                .map_err(|_| ReadError::Protocol(format!("bad length {n}"))),
        }
    };
    Ok(match kind {
        b'+' => Header::Status(rest.to_vec()),
        b'-' => Header::Error(rest.to_vec()),
        b':' => Header::Int(number()?),
        b'$' => Header::Bulk(length()?),
        b'*' => Header::Array(length()?),
        other => {
            return Err(ReadError::Protocol(format!(
                "unknown reply type {:?}",
                char::from(*other)
            )))
        }
    })
}

/// One CRLF-terminated line without its CRLF; longer than `max` bytes is [`ReadError::TooLarge`].
/// Each turn of the loop consumes at least one buffered byte or returns.
async fn read_line<R>(r: &mut R, max: usize, limit: usize) -> Result<Vec<u8>, ReadError>
where
    R: AsyncBufRead + Unpin,
{
    let mut line = Vec::new();
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                line.extend_from_slice(&buf[..=i]);
                r.consume(i + 1);
                break;
            }
            None => {
                let n = buf.len();
                line.extend_from_slice(buf);
                r.consume(n);
            }
        }
        if line.len() > max {
            return Err(ReadError::TooLarge { limit });
        }
    }
    if line.len() > max {
        return Err(ReadError::TooLarge { limit });
    }
    match line.strip_suffix(b"\r\n") {
        Some(text) => Ok(text.to_vec()),
        None => Err(ReadError::Protocol("line not ended by CRLF".into())),
    }
}

async fn expect_crlf<R>(r: &mut R) -> Result<(), ReadError>
where
    R: AsyncBufRead + Unpin,
{
    let mut crlf = [0u8; 2];
    r.read_exact(&mut crlf).await?;
    if &crlf == b"\r\n" {
        Ok(())
    } else {
        Err(ReadError::Protocol("bulk string not ended by CRLF".into()))
    }
}

/// Writes `text` as a JSON string literal.
pub fn write_json_str(out: &mut Vec<u8>, text: &str) {
    // Writing into a Vec cannot fail, and a &str always serialises.
    let _ = serde_json::to_writer(out, text);
}

/// Short, printable rendering of bytes for error messages and logs.
fn escape(bytes: &[u8]) -> String {
    bytes
        .iter()
        .take(40)
        .flat_map(|b| b.escape_ascii())
        .map(char::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads one reply from `wire` with a generous budget.
    async fn one(wire: &[u8], encoding: Encoding) -> Reply {
        let mut r = wire;
        let reply = read_reply(&mut r, encoding, &mut Budget::new(1 << 20))
            .await
            .unwrap();
        assert!(r.is_empty(), "bytes left after the reply: {:?}", escape(r));
        reply
    }

    fn json(text: &str) -> Reply {
        Reply::Json(text.as_bytes().to_vec())
    }

    #[tokio::test]
    async fn every_reply_type_maps_to_upstash_json() {
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
            assert_eq!(&one(wire, Encoding::Utf8).await, want, "{}", escape(wire));
        }
    }

    #[tokio::test]
    async fn base64_encodes_every_string_but_ok() {
        let e = Encoding::Base64;
        assert_eq!(one(b"+OK\r\n", e).await, json("\"OK\""));
        assert_eq!(one(b"$2\r\nOK\r\n", e).await, json("\"T0s=\""));
        assert_eq!(one(b"+PONG\r\n", e).await, json("\"UE9ORw==\""));
        assert_eq!(
            one(b"*2\r\n$2\r\n\x00\xFF\r\n:3\r\n", e).await,
            json(r#"["AP8=",3]"#)
        );
        // Errors stay plain.
        assert_eq!(one(b"-ERR x\r\n", e).await, Reply::Error("ERR x".into()));
    }

    #[tokio::test]
    async fn deep_nesting_does_not_recurse() {
        let depth = 100_000;
        let mut wire = b"*1\r\n".repeat(depth);
        wire.extend_from_slice(b":1\r\n");
        let Reply::Json(out) = one(&wire, Encoding::Utf8).await else {
            panic!("expected JSON")
        };
        assert_eq!(out.len(), 2 * depth + 1);
    }

    #[tokio::test]
    async fn the_budget_refuses_a_string_before_reading_it() {
        // The bulk claims 1 GB but only its header is present: refusing must not read or
        // allocate it.
        let mut r: &[u8] = b"$1000000000\r\n";
        let err = read_reply(&mut r, Encoding::Utf8, &mut Budget::new(1000))
            .await
            .unwrap_err();
        assert!(matches!(err, ReadError::TooLarge { limit: 1000 }), "{err}");

        // The budget is shared across replies: each fits, the sum does not.
        let wire = b"$400\r\n"
            .iter()
            .copied()
            .chain([b'x'; 400])
            .chain(*b"\r\n");
        let wire: Vec<u8> = wire.collect::<Vec<u8>>().repeat(3);
        let mut r = wire.as_slice();
        let mut budget = Budget::new(1000);
        read_reply(&mut r, Encoding::Utf8, &mut budget)
            .await
            .unwrap();
        read_reply(&mut r, Encoding::Utf8, &mut budget)
            .await
            .unwrap();
        assert!(matches!(
            read_reply(&mut r, Encoding::Utf8, &mut budget).await,
            Err(ReadError::TooLarge { .. })
        ));

        // Many small elements count too.
        let mut wire = b"*100000\r\n".to_vec();
        wire.extend_from_slice(&b":1\r\n".repeat(100_000));
        let mut r = wire.as_slice();
        assert!(matches!(
            read_reply(&mut r, Encoding::Utf8, &mut Budget::new(10_000)).await,
            Err(ReadError::TooLarge { .. })
        ));
    }

    #[tokio::test]
    async fn malformed_replies_are_protocol_errors() {
        for wire in [
            &b"?x\r\n"[..],
            b":abc\r\n",
            b"$-2\r\n",
            b"$1\r\nab\r\n",
            b"+OK\n",
        ] {
            let mut r = wire;
            let err = read_reply(&mut r, Encoding::Utf8, &mut Budget::new(100))
                .await
                .unwrap_err();
            assert!(
                matches!(err, ReadError::Protocol(_)),
                "{}: {err}",
                escape(wire)
            );
        }
        let mut r: &[u8] = b"$5\r\nab";
        assert!(matches!(
            read_reply(&mut r, Encoding::Utf8, &mut Budget::new(100)).await,
            Err(ReadError::Io(_))
        ));
    }

    #[tokio::test]
    async fn exec_replies_split_into_entries() {
        let mut r: &[u8] = b"*3\r\n+OK\r\n-ERR not an integer\r\n$1\r\nx\r\n";
        let replies = read_exec_reply(&mut r, Encoding::Utf8, &mut Budget::new(1000))
            .await
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
        let mut r: &[u8] = b"-EXECABORT Transaction discarded\r\n";
        let refused = read_exec_reply(&mut r, Encoding::Utf8, &mut Budget::new(1000))
            .await
            .unwrap();
        assert_eq!(refused, Err("EXECABORT Transaction discarded".into()));
    }

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        encode_command(&mut out, &[b"SET".to_vec(), b"k".to_vec(), vec![0, 255]]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\n\x00\xFF\r\n");
    }

    #[test]
    fn encoding_header_is_case_insensitive() {
        assert_eq!(Encoding::from_header(Some(b"BASE64")), Encoding::Base64);
        assert_eq!(Encoding::from_header(Some(b"utf8")), Encoding::Utf8);
        assert_eq!(Encoding::from_header(None), Encoding::Utf8);
    }

    /// Whatever bytes arrive where a reply should be, the reader answers or fails with a
    /// [`ReadError`]; it never panics (a panic would end the request's task with no answer).
    mod arbitrary_bytes {
        use super::*;
        use proptest::prelude::*;

        fn pieces() -> impl Strategy<Value = Vec<u8>> {
            let piece = prop_oneof![
                Just(b"+".to_vec()),
                Just(b"-".to_vec()),
                Just(b":".to_vec()),
                Just(b"$".to_vec()),
                Just(b"*".to_vec()),
                Just(b"\r\n".to_vec()),
                Just(b"\n".to_vec()),
                Just(b"-1".to_vec()),
                Just(b"\xff".to_vec()),
                (0u64..20).prop_map(|n| n.to_string().into_bytes()),
                any::<i64>().prop_map(|n| n.to_string().into_bytes()),
                prop::collection::vec(any::<u8>(), 0..8),
            ];
            prop::collection::vec(piece, 0..40).prop_map(|p| p.concat())
        }

        fn read_all(wire: &[u8], limit: usize) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            rt.block_on(async {
                for encoding in [Encoding::Utf8, Encoding::Base64] {
                    let mut r = wire;
                    let mut budget = Budget::new(limit);
                    while read_reply(&mut r, encoding, &mut budget).await.is_ok() {}
                    let mut r = wire;
                    let _ = read_exec_reply(&mut r, encoding, &mut Budget::new(limit)).await;
                }
            });
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: 1000,
                failure_persistence: None,
                ..ProptestConfig::default()
            })]

            #[test]
            fn any_bytes(wire in prop::collection::vec(any::<u8>(), 0..200), limit in 0usize..4096) {
                read_all(&wire, limit);
            }

            #[test]
            fn resp_like_bytes(wire in pieces(), limit in 0usize..4096) {
                read_all(&wire, limit);
            }
        }
    }
}
