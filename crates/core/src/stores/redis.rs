//! Redis over TCP (RESP2): `GET`, and `SET key value EX ttl` on a miss, on a connection per
//! request (Workers cannot keep a socket across requests); connect, TLS, `AUTH` and `SELECT`
//! are `connect_ms`. A bulk value is read to its end but only counted, never copied.

use std::cell::RefCell;

use async_trait::async_trait;
use percent_encoding::percent_decode_str;

use crate::error::{quote, ErrorKind, StoreError};
use crate::stores::secret::redact;
use crate::stores::socket::{Connection, Connector};
use crate::stores::store::{Deferred, Fetched, Options, Store};
use crate::stores::value::Value;

/// A parsed `redis://` or `rediss://` URL (`REDIS_URL`). Its `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl {
    pub host: String,
    pub port: u16,
    pub tls: bool,
    pub username: Option<String>,
    password: Option<String>,
    /// The database number of the path (`/2`); 0 needs no `SELECT`.
    pub db: u32,
}

impl std::fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisUrl")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "[redacted]"))
            .field("db", &self.db)
            .finish()
    }
}

impl RedisUrl {
    /// Parses `redis[s]://[[user]:password@]host[:port][/db]`. Errors never quote the URL (it
    /// holds the password).
    pub fn parse(text: &str) -> Result<RedisUrl, StoreError> {
        let bad = |why: &str| {
            StoreError::new(
                ErrorKind::NotConfigured,
                format!("REDIS_URL is not a usable redis:// or rediss:// URL: {why}"),
            )
        };
        let url = url::Url::parse(text.trim())
            .map_err(|e| bad(crate::stores::http::url_unparsable(e)))?;
        let tls = match url.scheme() {
            "redis" => false,
            "rediss" => true,
            _ => return Err(bad("the scheme must be redis or rediss")),
        };
        let host = crate::stores::http::socket_host(&url).map_err(bad)?;
        let decode = |s: &str| {
            percent_decode_str(s)
                .decode_utf8()
                .map(|s| s.into_owned())
                .map_err(|_| bad("the user or password is not UTF-8"))
        };
        let username = Some(decode(url.username())?).filter(|u| !u.is_empty());
        let password = url.password().map(decode).transpose()?;
        let db = match url.path().trim_start_matches('/') {
            "" => 0,
            n => n
                .parse()
                .map_err(|_| bad("the path must be a database number"))?,
        };
        Ok(RedisUrl {
            host,
            port: url.port().unwrap_or(6379),
            tls,
            username,
            password,
            db,
        })
    }
}

/// A command as RESP: an array of bulk strings.
pub fn command(args: &[&[u8]]) -> Vec<u8> {
    let size: usize = args.iter().map(|a| a.len() + 16).sum();
    let mut out = Vec::with_capacity(size + 16);
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// One reply, as far as this client needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    /// A bulk string's length (its bytes were read and dropped); `None` is nil.
    Bulk(Option<u64>),
}

/// The longest status, error or length line accepted (a misbehaving server cannot make the
/// client buffer without bound).
const MAX_LINE: usize = 64 * 1024;
const READ_CHUNK: usize = 64 * 1024;

/// A connection with its read buffer.
struct Conn<T> {
    io: T,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

/// A connection that could not be opened, or was lost mid-exchange: `connect`, as Postgres
/// names it (the runtime's socket errors come as `runtime`).
fn lost(mut e: StoreError) -> StoreError {
    if e.kind == ErrorKind::Runtime {
        e.kind = ErrorKind::Connect;
    }
    e
}

/// A server that broke RESP (as Postgres's client names a broken protocol).
fn protocol(message: impl Into<String>) -> StoreError {
    StoreError::new(ErrorKind::Protocol, message)
}

impl<T: Connection> Conn<T> {
    fn new(io: T) -> Conn<T> {
        Conn {
            io,
            buf: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
        }
    }

    /// Reads more bytes after the buffered ones.
    async fn fill(&mut self) -> Result<(), StoreError> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let free = self
            .buf
            .get_mut(self.end..)
            .ok_or_else(|| protocol("reader state out of bounds"))?;
        let n = self.io.read(free).await.map_err(lost)?;
        if n == 0 {
            return Err(StoreError::new(
                ErrorKind::Connect,
                "the server closed the connection",
            ));
        }
        self.end += n;
        Ok(())
    }

    /// The next line, without its CRLF, as bytes: a server may send anything, and only the
    /// text of a status or error is ever shown (lossily).
    async fn line(&mut self) -> Result<Vec<u8>, StoreError> {
        loop {
            let pending = self
                .buf
                .get(self.start..self.end)
                .ok_or_else(|| protocol("reader state out of bounds"))?;
            if let Some(i) = pending.windows(2).position(|w| w == b"\r\n") {
                let line = pending.get(..i).unwrap_or_default().to_vec();
                self.start += i + 2;
                return Ok(line);
            }
            if pending.len() > MAX_LINE {
                return Err(protocol("a reply line longer than 64 KiB"));
            }
            self.fill().await?;
        }
    }

    /// Consumes `n` bytes without keeping them.
    async fn skip(&mut self, mut n: u64) -> Result<(), StoreError> {
        loop {
            let have = (self.end - self.start) as u64;
            if have >= n {
                self.start += n as usize;
                return Ok(());
            }
            n -= have;
            (self.start, self.end) = (0, 0);
            self.fill().await?;
        }
    }

    async fn reply(&mut self) -> Result<Reply, StoreError> {
        let line = self.line().await?;
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        // Numbers are ASCII digits; anything else (a sign Rust's parser would take, a byte
        // that is not UTF-8) is malformed.
        let number = |bytes: &[u8], what: &str| {
            std::str::from_utf8(bytes)
                .ok()
                .filter(|s| !s.starts_with('+'))
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or_else(|| protocol(format!("a malformed {what}")))
        };
        match line.split_first() {
            Some((b'+', rest)) => Ok(Reply::Simple(text(rest))),
            Some((b'-', rest)) => Ok(Reply::Error(text(rest))),
            Some((b':', rest)) => number(rest, "integer reply").map(Reply::Integer),
            Some((b'$', b"-1")) => Ok(Reply::Bulk(None)),
            Some((b'$', rest)) => {
                let len = u64::try_from(number(rest, "bulk length")?)
                    .map_err(|_| protocol("a malformed bulk length"))?;
                self.skip(len).await?;
                match self.line().await?.as_slice() {
                    b"" => Ok(Reply::Bulk(Some(len))),
                    _ => Err(protocol("a bulk string longer than its length")),
                }
            }
            _ => Err(protocol(format!(
                "an unexpected reply {}",
                quote(
                    &line
                        .iter()
                        .take(40)
                        .flat_map(|b| b.escape_ascii())
                        .map(char::from)
                        .collect::<String>()
                )
            ))),
        }
    }

    async fn call(&mut self, request: &[u8]) -> Result<Reply, StoreError> {
        self.io.write_all(request).await.map_err(lost)?;
        self.reply().await
    }
}

/// The `redis` store: a [`Connector`] and the URL's credentials.
pub struct RedisStore<C: Connector> {
    url: RedisUrl,
    connector: C,
    /// The request's connection, once open. Taken out for each exchange and put back only when
    /// the reply was read whole, so an exchange cut short (a timeout) never leaves it half-read.
    conn: RefCell<Option<Conn<C::Conn>>>,
}

impl<C: Connector> RedisStore<C> {
    pub fn new(url: RedisUrl, connector: C) -> Self {
        Self {
            url,
            connector,
            conn: RefCell::new(None),
        }
    }

    /// Closes the request's connection, if one is open.
    pub async fn close(&self) {
        let conn = self.conn.borrow_mut().take();
        if let Some(mut conn) = conn {
            conn.io.close().await;
        }
    }

    fn error(&self, text: &str, during_auth: bool) -> StoreError {
        let secrets: Vec<&str> = self.url.password.as_deref().into_iter().collect();
        let text = redact(text, &secrets);
        let upper = text.to_ascii_uppercase();
        let kind = if during_auth || upper.starts_with("NOAUTH") || upper.starts_with("WRONGPASS") {
            ErrorKind::Auth
        } else if upper.contains("MAX REQUESTS LIMIT")
            || upper.contains("MAX DAILY REQUEST LIMIT")
            || upper.contains("MAX CONCURRENT CONNECTIONS")
        {
            ErrorKind::RateLimited
        } else {
            ErrorKind::Http
        };
        StoreError::new(kind, format!("Redis: {}", quote(&text)))
    }

    fn take(&self) -> Result<Conn<C::Conn>, StoreError> {
        self.conn.borrow_mut().take().ok_or_else(|| {
            StoreError::new(
                ErrorKind::Runtime,
                "no open connection (a previous call failed)",
            )
        })
    }

    fn expect_ok(&self, reply: Reply, what: &str, during_auth: bool) -> Result<(), StoreError> {
        match reply {
            Reply::Simple(s) if s == "OK" => Ok(()),
            Reply::Error(e) => Err(self.error(&e, during_auth)),
            other => Err(protocol(format!("{what} answered {other:?}, not OK"))),
        }
    }
}

#[async_trait(?Send)]
impl<C: Connector> Store for RedisStore<C> {
    /// The `SET key value EX ttl` command, encoded.
    type Prepared = Vec<u8>;

    async fn connect(&self) -> Result<bool, StoreError> {
        if self.conn.borrow().is_some() {
            return Ok(false);
        }
        // A connection that cannot be opened (or upgraded to TLS) is `connect`, as Postgres's.
        let io = self
            .connector
            .connect(&self.url.host, self.url.port, self.url.tls)
            .await
            .map_err(lost)?;
        let mut conn = Conn::new(io);
        if let Some(password) = &self.url.password {
            let auth = match &self.url.username {
                Some(user) => command(&[b"AUTH", user.as_bytes(), password.as_bytes()]),
                None => command(&[b"AUTH", password.as_bytes()]),
            };
            let reply = conn.call(&auth).await?;
            self.expect_ok(reply, "AUTH", true)?;
        }
        if self.url.db != 0 {
            let reply = conn
                .call(&command(&[b"SELECT", self.url.db.to_string().as_bytes()]))
                .await?;
            self.expect_ok(reply, "SELECT", false)?;
        }
        *self.conn.borrow_mut() = Some(conn);
        Ok(true)
    }

    async fn get(&self, key: &str, _options: &Options) -> Result<Fetched, StoreError> {
        let mut conn = self.take()?;
        let reply = conn.call(&command(&[b"GET", key.as_bytes()])).await?;
        *self.conn.borrow_mut() = Some(conn);
        match reply {
            Reply::Bulk(None) => Ok(Fetched::Miss),
            Reply::Bulk(Some(len)) => Ok(Fetched::Hit(Deferred::ready(len))),
            Reply::Error(e) => Err(self.error(&e, false)),
            other => Err(protocol(format!("GET answered {other:?}"))),
        }
    }

    fn prepare(&self, key: &str, value: &Value, ttl_s: u32) -> Result<Vec<u8>, StoreError> {
        Ok(command(&[
            b"SET",
            key.as_bytes(),
            value.bytes(),
            b"EX",
            ttl_s.to_string().as_bytes(),
        ]))
    }

    async fn put(
        &self,
        _key: &str,
        _ttl_s: u32,
        body: Vec<u8>,
        _options: &Options,
    ) -> Result<(), StoreError> {
        let mut conn = self.take()?;
        let reply = conn.call(&body).await?;
        *self.conn.borrow_mut() = Some(conn);
        self.expect_ok(reply, "SET", false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn urls_parse_and_never_show_the_password() {
        let u = RedisUrl::parse("rediss://default:s3cr%40t@eu1-x.upstash.io:6379").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.tls, u.username.as_deref(), u.db),
            ("eu1-x.upstash.io", 6379, true, Some("default"), 0)
        );
        assert_eq!(u.password.as_deref(), Some("s3cr@t"));
        assert!(!format!("{u:?}").contains("s3cr"));
        let u = RedisUrl::parse("redis://127.0.0.1/3").unwrap();
        assert_eq!((u.port, u.tls, u.db, u.password), (6379, false, 3, None));
        let u = RedisUrl::parse("redis://:pw@[::1]:7000").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 7000));
        assert_eq!(u.username, None);
        for bad in [
            "http://host",
            "redis://",
            "not a url",
            "redis://h/x",
            "redis://u:secret@h/x",
        ] {
            let e = RedisUrl::parse(bad).unwrap_err();
            assert_eq!(e.kind, ErrorKind::NotConfigured, "{bad}");
            assert!(!e.message.contains("secret"));
        }
        let e = RedisUrl::parse("redis://:secret@b\u{fc}cher.example").unwrap_err();
        assert!(e.message.contains("punycode"), "{}", e.message);
        assert!(!e.message.contains("secret"));
    }

    #[test]
    fn commands_are_resp_arrays() {
        assert_eq!(
            command(&[b"GET", b"k"]),
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec()
        );
    }

    /// Answers with scripted bytes, a few at a time, then closes.
    pub(super) struct Scripted(pub(super) VecDeque<u8>);

    #[async_trait(?Send)]
    impl Connection for Scripted {
        async fn write_all(&mut self, _: &[u8]) -> Result<(), StoreError> {
            Ok(())
        }
        async fn read(&mut self, buf: &mut [u8]) -> Result<usize, StoreError> {
            let n = buf.len().min(self.0.len()).min(3);
            for b in buf.iter_mut().take(n) {
                *b = self.0.pop_front().unwrap();
            }
            Ok(n)
        }
        async fn close(&mut self) {}
    }

    /// Every reply in `bytes` up to the first error (the reader stops there, as the store does).
    pub(super) fn replies(bytes: &[u8]) -> Vec<Result<Reply, StoreError>> {
        let mut conn = Conn::new(Scripted(bytes.iter().copied().collect()));
        let mut out = Vec::new();
        futures::executor::block_on(async {
            loop {
                let r = conn.reply().await;
                let stop = r.is_err();
                out.push(r);
                if stop {
                    break;
                }
            }
        });
        out
    }

    #[test]
    fn replies_parse_across_chunk_boundaries() {
        let big = format!("${}\r\n{}\r\n", 100_000, "x".repeat(100_000));
        let stream = format!("+OK\r\n-ERR wrong\r\n:42\r\n$-1\r\n$0\r\n\r\n{big}");
        let r = replies(stream.as_bytes());
        assert_eq!(r[0], Ok(Reply::Simple("OK".into())));
        assert_eq!(r[1], Ok(Reply::Error("ERR wrong".into())));
        assert_eq!(r[2], Ok(Reply::Integer(42)));
        assert_eq!(r[3], Ok(Reply::Bulk(None)));
        assert_eq!(r[4], Ok(Reply::Bulk(Some(0))));
        assert_eq!(r[5], Ok(Reply::Bulk(Some(100_000))));
        assert_eq!(r[6].as_ref().unwrap_err().kind, ErrorKind::Connect, "EOF");
        for bad in ["*1\r\n", "$abc\r\n", "$2\r\nabc\r\n", ":x\r\n"] {
            let r = replies(bad.as_bytes());
            assert_eq!(
                r[0].as_ref().unwrap_err().kind,
                ErrorKind::Protocol,
                "{bad}"
            );
        }
    }
}

#[cfg(test)]
mod hostile_replies {
    //! Whatever a server (or something posing as one) sends, the reader answers with a reply or
    //! an error of the store, never a panic: a panic in the worker ends the isolate and every
    //! request in flight in it.
    use super::*;
    use proptest::prelude::*;

    use super::tests::{replies, Scripted};

    /// A connector whose one connection answers every command with the scripted bytes.
    struct Answers(Vec<u8>);

    #[async_trait(?Send)]
    impl Connector for Answers {
        type Conn = Scripted;
        async fn connect(&self, _: &str, _: u16, _: bool) -> Result<Scripted, StoreError> {
            Ok(Scripted(self.0.iter().copied().collect()))
        }
    }

    #[test]
    fn a_first_byte_above_ascii_is_a_decode_error() {
        for bad in [
            &b"\xff\r\n"[..],
            "érror\r\n".as_bytes(),
            b"\x80\r\n",
            b"\xc3\r\n",
        ] {
            let r = replies(bad);
            assert_eq!(r.len(), 1);
            let e = r[0].as_ref().unwrap_err();
            assert_eq!(e.kind, ErrorKind::Protocol, "{bad:?}: {e:?}");
        }
        // Non-UTF-8 after a valid type byte is the server's text, shown lossily.
        assert_eq!(
            replies(b"-ERR \xff\r\n")[0],
            Ok(Reply::Error("ERR \u{FFFD}".into()))
        );
        assert_eq!(
            replies(b":\xff1\r\n")[0].as_ref().unwrap_err().kind,
            ErrorKind::Protocol
        );
    }

    /// The reply to AUTH, SELECT and GET alike: a garbled first byte fails the store's call.
    #[test]
    fn a_garbled_reply_to_auth_select_or_get_fails_that_call() {
        use futures::executor::block_on as block;
        for reply in [&b"\xff\r\n"[..], "érror\r\n".as_bytes()] {
            let answers = || Answers(reply.to_vec());
            let auth = RedisStore::new(RedisUrl::parse("redis://:pw@h").unwrap(), answers());
            assert_eq!(block(auth.connect()).unwrap_err().kind, ErrorKind::Protocol);
            let select = RedisStore::new(RedisUrl::parse("redis://h/2").unwrap(), answers());
            assert_eq!(
                block(select.connect()).unwrap_err().kind,
                ErrorKind::Protocol
            );
            let get = RedisStore::new(RedisUrl::parse("redis://h").unwrap(), answers());
            assert_eq!(block(get.connect()), Ok(true));
            let e = block(get.get("k", &Options::default())).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Protocol);
        }
    }

    /// Pieces RESP is made of, so random streams reach the parser's deeper branches.
    fn resp_ish() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"+".to_vec()),
            Just(b"-".to_vec()),
            Just(b":".to_vec()),
            Just(b"$".to_vec()),
            Just(b"*".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"-1".to_vec()),
            Just(b"\xff".to_vec()),
            Just("é".as_bytes().to_vec()),
            (0u64..20).prop_map(|n| n.to_string().into_bytes()),
            any::<u64>().prop_map(|n| n.to_string().into_bytes()),
            prop::collection::vec(any::<u8>(), 0..8),
        ];
        prop::collection::vec(piece, 0..40).prop_map(|p| p.concat())
    }

    /// A well-formed reply and its wire form.
    fn reply() -> impl Strategy<Value = (Reply, Vec<u8>)> {
        let text = "[ -~&&[^\r\n]]{0,20}";
        prop_oneof![
            text.prop_map(|s| (Reply::Simple(s.clone()), format!("+{s}\r\n").into_bytes())),
            text.prop_map(|s| (Reply::Error(s.clone()), format!("-{s}\r\n").into_bytes())),
            any::<i64>().prop_map(|i| (Reply::Integer(i), format!(":{i}\r\n").into_bytes())),
            Just((Reply::Bulk(None), b"$-1\r\n".to_vec())),
            prop::collection::vec(any::<u8>(), 0..300).prop_map(|v| {
                let mut wire = format!("${}\r\n", v.len()).into_bytes();
                wire.extend_from_slice(&v);
                wire.extend_from_slice(b"\r\n");
                (Reply::Bulk(Some(v.len() as u64)), wire)
            }),
        ]
    }

    fn only_store_errors(r: &[Result<Reply, StoreError>]) -> Result<(), TestCaseError> {
        for e in r.iter().filter_map(|r| r.as_ref().err()) {
            prop_assert!(
                matches!(e.kind, ErrorKind::Protocol | ErrorKind::Connect),
                "{e:?}"
            );
        }
        Ok(())
    }

    /// redis-rs's reader (the gateway's client) as the reference for the first reply: a reply
    /// both read is the same reply; where they part, ours is the stricter (a `+` or spaces in a
    /// number, a negative bulk length but -1, a type it does not read) or, on a status or error
    /// line that is not UTF-8, shows the text lossily where redis-rs refuses it.
    #[cfg(not(target_arch = "wasm32"))]
    fn agrees_with_redis_rs(bytes: &[u8]) -> Result<(), TestCaseError> {
        use redis::Value as V;
        let line = bytes
            .windows(2)
            .position(|w| w == b"\r\n")
            .map_or(bytes, |i| &bytes[..i]);
        let (kind, rest) = line.split_first().map_or((0, &[][..]), |(k, r)| (*k, r));
        let canonical =
            std::str::from_utf8(rest).is_ok_and(|s| s.trim() == s && !s.starts_with('+'));
        let reference = |v: V| match v {
            V::Okay => Some(Reply::Simple("OK".into())),
            V::SimpleString(s) => Some(Reply::Simple(s)),
            V::ServerError(e) => Some(Reply::Error(match e.details() {
                Some(d) => format!("{} {d}", e.code()),
                None => e.code().into(),
            })),
            V::Int(i) => Some(Reply::Integer(i)),
            V::BulkString(b) => Some(Reply::Bulk(Some(b.len() as u64))),
            V::Nil => Some(Reply::Bulk(None)),
            _ => None,
        };
        match (
            replies(bytes).swap_remove(0),
            redis::parse_redis_value(bytes),
        ) {
            (Ok(ours), Ok(theirs)) => prop_assert_eq!(Some(ours), reference(theirs)),
            (Err(_), Err(_)) => {}
            (Ok(ours), Err(e)) => prop_assert!(
                std::str::from_utf8(line).is_err(),
                "ours {ours:?}, redis-rs {e:?}"
            ),
            (Err(e), Ok(theirs)) => prop_assert!(
                !b"+-:$".contains(&kind) || !canonical || (kind == b'$' && theirs == V::Nil),
                "ours {e:?}, redis-rs {theirs:?}"
            ),
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2000,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            only_store_errors(&replies(&bytes))?;
        }

        #[test]
        fn resp_like_streams_never_panic(bytes in resp_ish()) {
            only_store_errors(&replies(&bytes))?;
        }

        /// A complete line whose type byte is none of RESP's is a decode error, whatever follows.
        #[test]
        fn an_unknown_type_byte_is_a_decode_error(
            first in any::<u8>().prop_filter("not a type byte", |b| !b"+-:$".contains(b)),
            rest in prop::collection::vec(any::<u8>(), 0..50),
        ) {
            let mut line = vec![first];
            line.extend_from_slice(&rest);
            line.extend_from_slice(b"\r\n");
            let r = replies(&line);
            prop_assert_eq!(r.len(), 1);
            prop_assert_eq!(r[0].as_ref().unwrap_err().kind, ErrorKind::Protocol);
        }

        /// Well-formed replies read back as themselves, then the closed connection.
        #[test]
        fn well_formed_replies_round_trip(rs in prop::collection::vec(reply(), 0..10)) {
            let wire: Vec<u8> = rs.iter().flat_map(|(_, w)| w.clone()).collect();
            let got = replies(&wire);
            prop_assert_eq!(got.len(), rs.len() + 1);
            for ((want, _), got) in rs.iter().zip(&got) {
                prop_assert_eq!(got.as_ref().unwrap(), want);
            }
            prop_assert_eq!(got[rs.len()].as_ref().unwrap_err().kind, ErrorKind::Connect);
        }

        #[cfg(not(target_arch = "wasm32"))]
        #[test]
        fn reads_as_redis_rs_does(
            bytes in prop_oneof![
                resp_ish(),
                prop::collection::vec(reply(), 1..4)
                    .prop_map(|rs| rs.into_iter().flat_map(|(_, w)| w).collect()),
            ],
        ) {
            agrees_with_redis_rs(&bytes)?;
        }
    }
}
