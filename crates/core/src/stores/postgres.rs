//! PostgreSQL over TCP as a key-value store (one row per key in `kvbench_values`), driving
//! `postgres-protocol`'s codec over a [`Connector`] so the same client runs in the worker and
//! natively in tests. A write's upsert also deletes up to [`EXPIRED_PER_WRITE`] expired rows
//! through the expiry index (no scans; the table stays within one TTL's writes).

use std::cell::RefCell;
use std::io;

use crate::stores::scram::{self, Scram};
use async_trait::async_trait;
use bytes::{Buf, BytesMut};
use fallible_iterator::FallibleIterator;
use percent_encoding::percent_decode_str;
use postgres_protocol::message::backend::{
    AuthenticationSaslBody, AuthenticationSaslContinueBody, ErrorResponseBody, Message,
};
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;

use crate::error::{quote, ErrorKind, StoreError};
use crate::stores::secret::redact;
use crate::stores::socket::{Connection, Connector};
use crate::stores::store::{Deferred, Fetched, Options, Store};
use crate::stores::value::Value;

/// The table every Postgres store reads and writes (the migration creates it).
pub const TABLE: &str = "kvbench_values";

/// A read of an unexpired row. `clock_timestamp()`, not `now()`: volatile, so Hyperdrive never
/// caches it (checked against `pg_proc` in tests/tests/postgres_server.rs).
pub const READ_SQL: &str =
    "SELECT v FROM kvbench_values WHERE k = $1 AND expires_at > clock_timestamp()";

/// A write: the key's row (upserted) expiring after `$3` seconds, and up to
/// [`EXPIRED_PER_WRITE`] other expired rows (never the key's own: one statement must not change
/// a row twice).
pub const WRITE_SQL: &str = "WITH expired AS (\
     DELETE FROM kvbench_values WHERE k IN (\
       SELECT k FROM kvbench_values WHERE expires_at <= now() AND k <> $1 \
       ORDER BY expires_at LIMIT 16 FOR UPDATE SKIP LOCKED)) \
     INSERT INTO kvbench_values (k, v, expires_at) \
     VALUES ($1, $2, now() + make_interval(secs => $3)) \
     ON CONFLICT (k) DO UPDATE SET v = excluded.v, expires_at = excluded.expires_at";

/// Expired rows a write deletes at most (the `LIMIT` of [`WRITE_SQL`]).
pub const EXPIRED_PER_WRITE: u32 = 16;

/// The longest message accepted: a 1 MiB value with room; longer (or a non-Postgres server's
/// bytes read as a length) is refused before it is buffered.
pub const MAX_MESSAGE: usize = 2 << 20;

const READ_CHUNK: usize = 64 * 1024;
/// The most data rows one statement may answer: a read by primary key has one or none.
const MAX_ROWS: usize = 1;

// Type oids of the statements' parameters.
const TEXT: u32 = 25;
const BYTEA: u32 = 17;
const FLOAT8: u32 = 701;

/// What the URL's `sslmode` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// `disable` (and `allow`, which tries plain first): plain TCP.
    Disable,
    /// `prefer`, libpq's default: TLS if the server offers it, plain if it does not.
    Prefer,
    /// `require`, `verify-ca`, `verify-full`: TLS or no connection (the runtime's TLS verifies
    /// the certificate in every case).
    Require,
}

/// A parsed `postgres://` or `postgresql://` URL (`POSTGRES_URL`, or a Hyperdrive binding's
/// connection string). Its `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct PgUrl {
    pub host: String,
    pub port: u16,
    pub user: String,
    password: Option<String>,
    pub database: String,
    pub ssl: SslMode,
}

impl std::fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgUrl")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "[redacted]"))
            .field("database", &self.database)
            .field("ssl", &self.ssl)
            .finish()
    }
}

impl PgUrl {
    /// Parses `postgres[ql]://user[:password]@host[:port][/database][?sslmode=...]`; `what`
    /// names where the URL came from in errors, which never quote it (it holds the password).
    pub fn parse(text: &str, what: &str) -> Result<PgUrl, StoreError> {
        let bad = |why: &str| {
            StoreError::new(
                ErrorKind::NotConfigured,
                format!("{what} is not a usable postgres:// URL: {why}"),
            )
        };
        let url = url::Url::parse(text.trim())
            .map_err(|e| bad(crate::stores::http::url_unparsable(e)))?;
        if !matches!(url.scheme(), "postgres" | "postgresql") {
            return Err(bad("the scheme must be postgres or postgresql"));
        }
        let host = crate::stores::http::socket_host(&url).map_err(bad)?;
        let decode = |s: &str| {
            percent_decode_str(s)
                .decode_utf8()
                .map(|s| s.into_owned())
                .map_err(|_| bad("the user, password or database is not UTF-8"))
        };
        let user = decode(url.username())?;
        if user.is_empty() {
            return Err(bad("it names no user"));
        }
        let password = url.password().map(decode).transpose()?;
        let database = match decode(url.path().trim_start_matches('/'))? {
            db if db.is_empty() => user.clone(),
            db => db,
        };
        let mut ssl = SslMode::Prefer;
        for (name, value) in url.query_pairs() {
            if name == "sslmode" {
                ssl = match value.as_ref() {
                    "disable" | "allow" => SslMode::Disable,
                    "prefer" => SslMode::Prefer,
                    "require" | "verify-ca" | "verify-full" => SslMode::Require,
                    _ => return Err(bad(
                        "sslmode must be disable, allow, prefer, require, verify-ca or verify-full",
                    )),
                };
            }
        }
        Ok(PgUrl {
            host,
            port: url.port().unwrap_or(5432),
            user,
            password,
            database,
            ssl,
        })
    }
}

fn protocol(message: impl Into<String>) -> StoreError {
    StoreError::new(ErrorKind::Protocol, message)
}

fn encode_error(e: io::Error) -> StoreError {
    protocol(format!("cannot encode the message: {e}"))
}

/// A connection with its read buffer.
struct PgConn<T> {
    io: T,
    buf: BytesMut,
}

impl<T: Connection> PgConn<T> {
    fn new(io: T) -> PgConn<T> {
        PgConn {
            io,
            buf: BytesMut::with_capacity(READ_CHUNK),
        }
    }

    /// Reads more bytes after the buffered ones.
    async fn fill(&mut self) -> Result<(), StoreError> {
        let had = self.buf.len();
        self.buf.resize(had + READ_CHUNK, 0);
        let read = match self.buf.get_mut(had..) {
            Some(free) => self.io.read(free).await,
            None => Err(protocol("reader state out of bounds")),
        };
        let n = *read.as_ref().unwrap_or(&0);
        self.buf.truncate(had + n);
        read?;
        if n == 0 {
            return Err(StoreError::new(
                ErrorKind::Connect,
                "the server closed the connection",
            ));
        }
        Ok(())
    }

    /// The next message; every length is checked before buffering (at most [`MAX_MESSAGE`]).
    async fn next(&mut self) -> Result<Incoming, StoreError> {
        let len = self.header().await?;
        if self.buf.first() != Some(&b'D') {
            return self.message(len).await.map(Incoming::Message);
        }
        // A data row is counted, never copied (a deployed clock would charge the copy to the
        // read). One column takes at least 10 bytes after the tag.
        if len < 10 {
            return Err(protocol("a data row shorter than one column"));
        }
        while self.buf.len() < 11 {
            self.fill().await?;
        }
        let mut head = [0u8; 6];
        head.copy_from_slice(self.buf.get(5..11).unwrap_or(&[0; 6]));
        let [c0, c1, l0, l1, l2, l3] = head;
        let columns = u16::from_be_bytes([c0, c1]);
        let column = i32::from_be_bytes([l0, l1, l2, l3]);
        let value = match (columns, usize::try_from(column)) {
            (1, Ok(n)) if n + 10 == len => Some(n),
            (1, Err(_)) if column == -1 && len == 10 => None,
            _ => {
                return Err(protocol(
                    "a data row whose lengths do not add up, or not one column",
                ))
            }
        };
        self.skip(len + 1).await?;
        Ok(Incoming::Row(value))
    }

    /// The next message's length (after its tag), once its 5-byte header is buffered.
    async fn header(&mut self) -> Result<usize, StoreError> {
        loop {
            if let Some(header) = self.buf.get(..5) {
                let mut len = [0u8; 4];
                len.copy_from_slice(header.get(1..5).unwrap_or_default());
                let len = u32::from_be_bytes(len) as usize;
                if !(4..=MAX_MESSAGE).contains(&len) {
                    return Err(protocol(format!(
                        "a message of {len} bytes (tag {}): over the {} MiB limit, or not \
                         PostgreSQL's protocol",
                        quote(
                            &header
                                .first()
                                .map(|b| b.escape_ascii().to_string())
                                .unwrap_or_default()
                        ),
                        MAX_MESSAGE >> 20
                    )));
                }
                return Ok(len);
            }
            self.fill().await?;
        }
    }

    /// Consumes `n` bytes without keeping them, reusing the buffer.
    async fn skip(&mut self, mut n: usize) -> Result<(), StoreError> {
        loop {
            let have = self.buf.len().min(n);
            self.buf.advance(have);
            n -= have;
            if n == 0 {
                return Ok(());
            }
            self.buf.clear();
            self.fill().await?;
        }
    }

    /// The whole message of length `len` (its header buffered), parsed.
    async fn message(&mut self, len: usize) -> Result<Message, StoreError> {
        loop {
            if self.buf.len() > len {
                return match Message::parse(&mut self.buf) {
                    Ok(Some(message)) => Ok(message),
                    Ok(None) => Err(protocol("a message cut short")),
                    Err(e) => Err(protocol(format!("not PostgreSQL's protocol: {e}"))),
                };
            }
            self.fill().await?;
        }
    }

    /// The next message, which may not be a data row (during the startup).
    async fn startup_message(&mut self) -> Result<Message, StoreError> {
        match self.next().await? {
            Incoming::Message(m) => Ok(m),
            Incoming::Row(_) => Err(protocol("a data row during the startup")),
        }
    }

    /// Reads one byte (the answer to `SSLRequest`, which is not a message).
    async fn byte(&mut self) -> Result<u8, StoreError> {
        if self.buf.is_empty() {
            self.fill().await?;
        }
        let b = self.buf.first().copied().unwrap_or_default();
        self.buf.advance(1);
        Ok(b)
    }
}

/// The startup's next step.
enum Startup {
    /// Send this and read on.
    Send(BytesMut),
    /// Read on.
    Wait,
    /// `ReadyForQuery`: the session is open.
    Ready,
}

/// What the server sent next: a data row, measured (its one column's length, `None` for
/// NULL), or any other message.
enum Incoming {
    Row(Option<usize>),
    Message(Message),
}

/// A query's outcome, read to its `ReadyForQuery`.
#[derive(Debug, Default)]
struct Outcome {
    /// The first column's length of each data row (`None`: SQL NULL); at most [`MAX_ROWS`].
    rows: Vec<Option<usize>>,
    /// The command tag (`INSERT 0 1`, `SELECT 1`).
    tag: Option<String>,
    /// The server's error, if the statement failed.
    error: Option<ServerError>,
}

/// The fields of an `ErrorResponse` this client shows.
#[derive(Debug, Clone, Default)]
struct ServerError {
    code: String,
    message: String,
}

fn server_error(body: &ErrorResponseBody) -> ServerError {
    let mut out = ServerError::default();
    let mut fields = body.fields();
    while let Ok(Some(field)) = fields.next() {
        let text = String::from_utf8_lossy(field.value_bytes()).into_owned();
        match field.type_() {
            b'C' => out.code = text,
            b'M' => out.message = text,
            _ => {}
        }
    }
    out
}

/// The `postgres` and `hyperdrive` stores: a [`Connector`] and the URL's credentials.
pub struct PostgresStore<C: Connector> {
    url: PgUrl,
    connector: C,
    /// What the URL came from, for messages (`Postgres`, `Hyperdrive`).
    label: &'static str,
    /// The platform's NFKC, for SASLprep.
    nfkc: scram::Nfkc,
    /// The request's connection, put back only after a whole answer, so an exchange cut
    /// short (a timeout) never leaves it half-read.
    conn: RefCell<Option<PgConn<C::Conn>>>,
}

impl<C: Connector> PostgresStore<C> {
    /// `nfkc`: the platform's Unicode normalization, for SASLprep of a non-ASCII password
    /// ([`scram::Nfkc`]).
    pub fn new(url: PgUrl, connector: C, label: &'static str, nfkc: scram::Nfkc) -> Self {
        Self {
            url,
            connector,
            label,
            nfkc,
            conn: RefCell::new(None),
        }
    }

    /// Ends the request's session (`Terminate`) and closes its connection, if one is open.
    pub async fn close(&self) {
        let conn = self.conn.borrow_mut().take();
        if let Some(mut conn) = conn {
            let mut bye = BytesMut::new();
            frontend::terminate(&mut bye);
            let _ = conn.io.write_all(&bye).await;
            conn.io.close().await;
        }
    }

    /// A server's error as a store error: its SQLSTATE says the kind; the text is the server's
    /// own, with the password taken out should it ever appear.
    fn error(&self, e: &ServerError) -> StoreError {
        let secrets: Vec<&str> = self.url.password.as_deref().into_iter().collect();
        let text = redact(&e.message, &secrets);
        let kind = match e.code.as_str() {
            code if code.starts_with("28") => ErrorKind::Auth,
            // The database or the table does not exist: the deployment is not set up.
            "3D000" | "42P01" => ErrorKind::NotConfigured,
            "53300" => ErrorKind::RateLimited,
            _ => ErrorKind::Http,
        };
        let hint = match e.code.as_str() {
            "42P01" => {
                " (run the migration migrations/postgres/0001_values.sql: npm run deploy does)"
            }
            _ => "",
        };
        StoreError::new(
            kind,
            format!("{}: {} {}{hint}", self.label, e.code, quote(&text)),
        )
    }

    /// A connection lost before its session was ready is a failure to connect. Right after TLS
    /// began, it is how the runtime ends a handshake whose certificate it refuses (not trusted,
    /// or not naming the host) — its own error says only "internal error" — so the message
    /// says so.
    fn lost_in_startup(&self, mut e: StoreError, tls: bool) -> StoreError {
        if e.kind == ErrorKind::Runtime {
            e.kind = ErrorKind::Connect;
            if tls {
                e.message = format!(
                    "{}: the connection ended as the session started over TLS ({}): the runtime \
                     ends it so when it does not trust the server's certificate or the \
                     certificate does not name {}",
                    self.label, e.message, self.url.host
                );
            }
        }
        e
    }

    fn take(&self) -> Result<PgConn<C::Conn>, StoreError> {
        self.conn.borrow_mut().take().ok_or_else(|| {
            StoreError::new(
                ErrorKind::Runtime,
                "no open connection (a previous call failed)",
            )
        })
    }

    /// Opens the connection, upgraded to TLS as the URL asks; whether it was.
    async fn open(&self) -> Result<(PgConn<C::Conn>, bool), StoreError> {
        let (host, port) = (&self.url.host, self.url.port);
        let as_connect = |mut e: StoreError| {
            if e.kind == ErrorKind::Runtime {
                e.kind = ErrorKind::Connect;
            }
            e
        };
        if self.url.ssl == SslMode::Disable {
            let io = self.connector.connect(host, port, false).await;
            return io.map(|io| (PgConn::new(io), false)).map_err(as_connect);
        }
        let io = self.connector.connect_upgradable(host, port).await;
        let mut conn = PgConn::new(io.map_err(as_connect)?);
        let mut ask = BytesMut::new();
        frontend::ssl_request(&mut ask);
        conn.io.write_all(&ask).await.map_err(as_connect)?;
        let tls = match conn.byte().await.map_err(as_connect)? {
            b'S' => {
                // workerd 1.20261117 refuses the certificate in the handshake itself (`opened`);
                // older ones on the first write after it: either way the same words.
                conn.io
                    .start_tls()
                    .await
                    .map_err(|e| self.lost_in_startup(e, true))?;
                true
            }
            b'N' if self.url.ssl == SslMode::Prefer => false,
            b'N' => {
                return Err(StoreError::new(
                    ErrorKind::Connect,
                    format!(
                        "{}: the server does not offer TLS and sslmode asks for it",
                        self.label
                    ),
                ))
            }
            other => {
                return Err(protocol(format!(
                    "{}: the server answered SSLRequest with {}: not PostgreSQL",
                    self.label,
                    quote(&other.escape_ascii().to_string())
                )))
            }
        };
        Ok((conn, tls))
    }

    /// The startup message and the authentication the server asks for, to `ReadyForQuery`.
    async fn start(&self, conn: &mut PgConn<C::Conn>) -> Result<(), StoreError> {
        let mut out = BytesMut::new();
        frontend::startup_message(
            [
                ("user", self.url.user.as_str()),
                ("database", self.url.database.as_str()),
                ("application_name", "kvbench"),
                ("client_encoding", "UTF8"),
            ],
            &mut out,
        )
        .map_err(encode_error)?;
        conn.io.write_all(&out).await?;
        let mut scram: Option<Scram> = None;
        loop {
            match self.answer(conn.startup_message().await?, &mut scram)? {
                Startup::Ready => return Ok(()),
                Startup::Wait => {}
                Startup::Send(out) => conn.io.write_all(&out).await?,
            }
        }
    }

    /// What the startup does after `message`: the password, SCRAM's next step, or nothing.
    fn answer(&self, message: Message, scram: &mut Option<Scram>) -> Result<Startup, StoreError> {
        let reply = match message {
            Message::AuthenticationOk
            | Message::ParameterStatus(_)
            | Message::BackendKeyData(_)
            | Message::NoticeResponse(_) => None,
            Message::ReadyForQuery(_) => return Ok(Startup::Ready),
            Message::AuthenticationCleartextPassword => {
                let mut out = BytesMut::new();
                frontend::password_message(self.password()?.as_bytes(), &mut out)
                    .map_err(encode_error)?;
                Some(out)
            }
            Message::AuthenticationMd5Password(body) => {
                let hash = postgres_protocol::authentication::md5_hash(
                    self.url.user.as_bytes(),
                    self.password()?.as_bytes(),
                    body.salt(),
                );
                let mut out = BytesMut::new();
                frontend::password_message(hash.as_bytes(), &mut out).map_err(encode_error)?;
                Some(out)
            }
            Message::AuthenticationSasl(body) => Some(self.sasl_start(&body, scram)?),
            Message::AuthenticationSaslContinue(body) => Some(self.sasl_continue(&body, scram)?),
            Message::AuthenticationSaslFinal(body) => {
                let s = scram
                    .as_mut()
                    .ok_or_else(|| protocol("SASL final before SASL"))?;
                s.verify(body.data())
                    .map_err(|e| self.auth(format!("the server's SCRAM proof: {e}")))?;
                None
            }
            Message::ErrorResponse(body) => return Err(self.error(&server_error(&body))),
            // Methods this client does not speak, named so the deployer knows what to change
            // in the server's pg_hba.conf (scram-sha-256, md5 or password).
            Message::AuthenticationGss => return Err(self.unsupported("GSSAPI (gss)")),
            Message::AuthenticationSspi => return Err(self.unsupported("SSPI (sspi)")),
            Message::AuthenticationKerberosV5 => return Err(self.unsupported("Kerberos V5")),
            Message::AuthenticationScmCredential => {
                return Err(self.unsupported("SCM credentials (peer)"))
            }
            _ => {
                return Err(protocol(format!(
                    "{}: an unexpected message during startup",
                    self.label
                )))
            }
        };
        Ok(reply.map_or(Startup::Wait, Startup::Send))
    }

    /// SCRAM-SHA-256's first message, when the server offers it among its SASL mechanisms.
    fn sasl_start(
        &self,
        body: &AuthenticationSaslBody,
        scram: &mut Option<Scram>,
    ) -> Result<BytesMut, StoreError> {
        let mut mechanisms = body.mechanisms();
        let mut offered = Vec::new();
        while let Ok(Some(m)) = mechanisms.next() {
            offered.push(m.to_string());
        }
        if !offered.iter().any(|m| m == scram::MECHANISM) {
            return Err(StoreError::new(
                ErrorKind::Auth,
                format!(
                    "{}: the server offers SASL {offered:?}, not SCRAM-SHA-256",
                    self.label
                ),
            ));
        }
        self.password()?;
        let s = Scram::new().map_err(|e| self.auth(format!("SCRAM: {e}")))?;
        let mut out = BytesMut::new();
        frontend::sasl_initial_response(scram::MECHANISM, s.client_first().as_bytes(), &mut out)
            .map_err(encode_error)?;
        *scram = Some(s);
        Ok(out)
    }

    /// SCRAM's proof, from the server's first message.
    fn sasl_continue(
        &self,
        body: &AuthenticationSaslContinueBody,
        scram: &mut Option<Scram>,
    ) -> Result<BytesMut, StoreError> {
        let s = scram
            .as_mut()
            .ok_or_else(|| protocol("SASL continue before SASL"))?;
        // The keys of (password, salt, iterations) are derived once per isolate
        // (`scram::KEYS`); the proof and the server's signature are this exchange's.
        let message = s
            .client_final(
                self.password()?.as_bytes(),
                body.data(),
                &scram::KEYS,
                self.nfkc,
            )
            .map_err(|e| self.auth(format!("SCRAM: {e}")))?;
        let mut out = BytesMut::new();
        frontend::sasl_response(message.as_bytes(), &mut out).map_err(encode_error)?;
        Ok(out)
    }

    fn unsupported(&self, method: &str) -> StoreError {
        self.auth(format!(
            "the server asks for {method} authentication, which this client does not support \
             (it supports scram-sha-256, md5 and password)"
        ))
    }

    fn auth(&self, message: String) -> StoreError {
        StoreError::new(ErrorKind::Auth, format!("{}: {message}", self.label))
    }

    fn password(&self) -> Result<&str, StoreError> {
        self.url
            .password
            .as_deref()
            .ok_or_else(|| self.auth("the server asks for a password and the URL has none".into()))
    }

    /// Sends `request` (a statement and `Sync`) and reads every message to `ReadyForQuery`.
    async fn call(&self, request: &[u8]) -> Result<Outcome, StoreError> {
        let mut conn = self.take()?;
        conn.io.write_all(request).await?;
        let mut out = Outcome::default();
        loop {
            let message = match conn.next().await? {
                // One row at most per statement (the key is the primary key): more is refused
                // at once and the connection dropped.
                Incoming::Row(_) if out.rows.len() >= MAX_ROWS => {
                    return Err(protocol(format!(
                        "{}: more than {MAX_ROWS} row for one key",
                        self.label
                    )));
                }
                Incoming::Row(value) => {
                    out.rows.push(value);
                    continue;
                }
                Incoming::Message(m) => m,
            };
            match message {
                Message::ParseComplete
                | Message::BindComplete
                | Message::NoticeResponse(_)
                | Message::ParameterStatus(_)
                | Message::NoData => {}
                Message::CommandComplete(body) => {
                    out.tag = Some(body.tag().map(str::to_string).unwrap_or_default());
                }
                Message::EmptyQueryResponse => {}
                Message::ErrorResponse(body) => out.error = Some(server_error(&body)),
                Message::ReadyForQuery(_) => break,
                _ => return Err(protocol(format!("{}: an unexpected message", self.label))),
            }
        }
        *self.conn.borrow_mut() = Some(conn);
        Ok(out)
    }
}

/// Parse, Bind (binary parameters and results), Execute and Sync of one unnamed statement.
fn statement(sql: &str, types: &[u32], params: &[&[u8]]) -> Result<Vec<u8>, StoreError> {
    // Sized once: the value is copied into the body one time, before the first span (no
    // regrowth, no copy out).
    let size = 64 + 2 * sql.len() + params.iter().map(|p| p.len() + 4).sum::<usize>();
    let mut buf = BytesMut::with_capacity(size);
    frontend::parse("", sql, types.iter().copied(), &mut buf).map_err(encode_error)?;
    frontend::bind(
        "",
        "",
        [1i16],
        params.iter(),
        |param, buf| {
            buf.extend_from_slice(param);
            Ok(IsNull::No)
        },
        [1i16],
        &mut buf,
    )
    .map_err(|_| protocol("cannot encode the statement's parameters"))?;
    frontend::execute("", 0, &mut buf).map_err(encode_error)?;
    frontend::sync(&mut buf);
    Ok(Vec::from(buf))
}

#[async_trait(?Send)]
impl<C: Connector> Store for PostgresStore<C> {
    /// The write's statement (parse, bind, execute, sync), encoded.
    type Prepared = Vec<u8>;

    async fn connect(&self) -> Result<bool, StoreError> {
        if self.conn.borrow().is_some() {
            return Ok(false);
        }
        let (mut conn, tls) = self.open().await?;
        self.start(&mut conn)
            .await
            .map_err(|e| self.lost_in_startup(e, tls))?;
        *self.conn.borrow_mut() = Some(conn);
        Ok(true)
    }

    async fn get(&self, key: &str, _options: &Options) -> Result<Fetched, StoreError> {
        let out = self
            .call(&statement(READ_SQL, &[TEXT], &[key.as_bytes()])?)
            .await?;
        if let Some(e) = &out.error {
            return Err(self.error(e));
        }
        match out.rows.as_slice() {
            [] => Ok(Fetched::Miss),
            [Some(len)] => Ok(Fetched::Hit(Deferred::ready(*len as u64))),
            [None] => Err(protocol(format!("{}: the value is NULL", self.label))),
            rows => Err(protocol(format!(
                "{}: {} rows for one key",
                self.label,
                rows.len()
            ))),
        }
    }

    fn prepare(&self, key: &str, value: &Value, ttl_s: u32) -> Result<Vec<u8>, StoreError> {
        let ttl = f64::from(ttl_s).to_be_bytes();
        statement(
            WRITE_SQL,
            &[TEXT, BYTEA, FLOAT8],
            &[key.as_bytes(), value.bytes(), &ttl],
        )
    }

    async fn put(
        &self,
        _key: &str,
        _ttl_s: u32,
        body: Vec<u8>,
        _options: &Options,
    ) -> Result<(), StoreError> {
        let out = self.call(&body).await?;
        if let Some(e) = &out.error {
            return Err(self.error(e));
        }
        match out.tag.as_deref() {
            Some("INSERT 0 1") => Ok(()),
            other => Err(protocol(format!(
                "{}: the write answered {}, not INSERT 0 1",
                self.label,
                quote(other.unwrap_or("nothing"))
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that agrees to TLS (`S`), whose connection then fails on the first write (what
    /// workerd before 1.20261117 did when it refused the server's certificate; with `tls: false`,
    /// a plain connection the server drops) or, with `in_handshake`, in the handshake itself
    /// (what workerd 1.20261117 does).
    struct DropsAtStartup {
        tls: bool,
        in_handshake: bool,
    }
    struct Dropping {
        answered: bool,
        tls: bool,
        in_handshake: bool,
    }

    #[async_trait::async_trait(?Send)]
    impl Connector for DropsAtStartup {
        type Conn = Dropping;
        async fn connect(&self, _: &str, _: u16, _: bool) -> Result<Dropping, StoreError> {
            Ok(Dropping {
                answered: true,
                tls: self.tls,
                in_handshake: self.in_handshake,
            })
        }
        async fn connect_upgradable(&self, _: &str, _: u16) -> Result<Dropping, StoreError> {
            Ok(Dropping {
                answered: false,
                tls: self.tls,
                in_handshake: self.in_handshake,
            })
        }
    }

    #[async_trait::async_trait(?Send)]
    impl Connection for Dropping {
        async fn write_all(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
            // The SSLRequest goes through; the startup message does not.
            if bytes.len() == 8 && !self.answered {
                return Ok(());
            }
            Err(StoreError::new(
                ErrorKind::Runtime,
                "write: Error: internal error; reference = x",
            ))
        }
        async fn read(&mut self, buf: &mut [u8]) -> Result<usize, StoreError> {
            self.answered = true;
            buf[0] = if self.tls { b'S' } else { b'N' };
            Ok(1)
        }
        async fn close(&mut self) {}
        async fn start_tls(&mut self) -> Result<(), StoreError> {
            if self.in_handshake {
                return Err(StoreError::new(
                    ErrorKind::Runtime,
                    "TLS: Error: internal error; reference = y",
                ));
            }
            Ok(())
        }
    }

    #[test]
    fn a_connection_lost_as_the_session_starts_is_connect_and_after_tls_says_why() {
        for (tls, in_handshake, ssl, says) in [
            (true, false, "require", true),
            (true, true, "require", true),
            (false, false, "prefer", false),
            (false, false, "disable", false),
        ] {
            let url = PgUrl::parse(
                &format!("postgres://u:pw@db.example.com/d?sslmode={ssl}"),
                "POSTGRES_URL",
            )
            .unwrap();
            let store = PostgresStore::new(
                url,
                DropsAtStartup { tls, in_handshake },
                "Postgres",
                scram::nfkc_tables,
            );
            let e = futures::executor::block_on(store.connect()).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Connect, "{ssl}: {e:?}");
            assert_eq!(
                e.message
                    .contains("certificate does not name db.example.com"),
                says,
                "{ssl}: {}",
                e.message
            );
            assert!(
                e.message.contains("internal error"),
                "the runtime's words kept: {}",
                e.message
            );
        }
    }

    #[test]
    fn urls_parse_and_never_show_the_password() {
        let u = PgUrl::parse(
            "postgres://kv:s3cr%40t@db.example.com:6543/bench?sslmode=require",
            "POSTGRES_URL",
        )
        .unwrap();
        assert_eq!(
            (
                u.host.as_str(),
                u.port,
                u.user.as_str(),
                u.database.as_str(),
                u.ssl
            ),
            ("db.example.com", 6543, "kv", "bench", SslMode::Require)
        );
        assert_eq!(u.password.as_deref(), Some("s3cr@t"));
        assert!(!format!("{u:?}").contains("s3cr"));
        let u = PgUrl::parse("postgresql://me@127.0.0.1", "POSTGRES_URL").unwrap();
        assert_eq!(
            (u.port, u.database.as_str(), u.ssl),
            (5432, "me", SslMode::Prefer)
        );
        assert_eq!(u.password, None);
        let u = PgUrl::parse("postgres://a:b@[::1]:7000/d?sslmode=disable", "X").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.ssl),
            ("::1", 7000, SslMode::Disable)
        );
        for bad in [
            "http://u:secret@host/db",
            "postgres://",
            "not a url",
            "postgres://:secret@host/db",
            "postgres://u:secret@host/db?sslmode=sometimes",
        ] {
            let e = PgUrl::parse(bad, "POSTGRES_URL").unwrap_err();
            assert_eq!(e.kind, ErrorKind::NotConfigured, "{bad}");
            assert!(e.message.starts_with("POSTGRES_URL "), "{}", e.message);
            assert!(!e.message.contains("secret"), "{}", e.message);
        }
        // A Unicode host name is refused by name; its punycode form is a host like any other.
        let e =
            PgUrl::parse("postgres://u:secret@b\u{fc}cher.example/db", "POSTGRES_URL").unwrap_err();
        assert!(e.message.contains("punycode"), "{}", e.message);
        assert!(!e.message.contains("secret"), "{}", e.message);
        let u = PgUrl::parse("postgres://u@xn--bcher-kva.example/db", "POSTGRES_URL").unwrap();
        assert_eq!(u.host, "xn--bcher-kva.example");
    }

    #[test]
    fn a_statement_is_parse_bind_execute_sync_with_binary_parameters() {
        let bytes = statement("SELECT $1", &[TEXT], &[b"k"]).unwrap();
        let tags: Vec<u8> = {
            let mut tags = Vec::new();
            let mut rest = bytes.as_slice();
            while let [tag, a, b, c, d, ..] = rest {
                tags.push(*tag);
                let len = u32::from_be_bytes([*a, *b, *c, *d]) as usize;
                rest = &rest[1 + len..];
            }
            tags
        };
        assert_eq!(tags, b"PBES");
    }
}
