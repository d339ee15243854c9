//! The attacker: how one request is sent. A template built once and cloned per request; a
//! [`Conn`] is one HTTP/1.1(S) connection driven inside the sending task (no wake-up between
//! tasks). A request that meets a server's idle close is sent once more ([`Attacker::send`]).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::client::conn::http1;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, HOST, USER_AGENT};
use hyper::{Request, Uri};
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tower_service::Service as _;

use kvbench_report::sample::FailureKind;

/// Larger bodies are not `/test` answers; reading them whole would only cost memory.
pub const MAX_BODY_BYTES: usize = 4 << 20;

type Tcp = MaybeHttpsStream<TokioIo<tokio::net::TcpStream>>;
/// The connection as hyper drives it: TCP (and TLS), its plaintext bytes read counted.
type Io = TokioIo<Counted<TokioIo<Tcp>>>;
type Driver = http1::Connection<Io, Empty<Bytes>>;

/// Why a request yielded no HTTP answer, and the reason in words.
pub type Failed = (FailureKind, String);

/// Sends `/test` requests.
pub struct Attacker {
    connector: HttpsConnector<HttpConnector>,
    /// Where to connect (scheme and authority).
    url: Uri,
    /// Origin-form (`/test?...`), as sent on the wire.
    path: Uri,
    headers: HeaderMap,
    /// Whether a request that got no answer on a connection that waited idle is sent again on a
    /// new one (see [`Attacker::send`]); off only to show the race in tests.
    retry: bool,
}

pub(crate) fn connector() -> HttpsConnector<HttpConnector> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    // Headers and body in separate writes otherwise stall on Nagle + delayed ACK.
    http.set_nodelay(true);
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http()
        .enable_http1()
        .wrap_connector(http)
}

/// `host[:port]`, the port only when it is not the scheme's default (as browsers and hyper's
/// pooled client send it).
pub(crate) fn host_header(url: &Uri) -> anyhow::Result<HeaderValue> {
    let host = url.host().context("the URL has no host")?;
    let default_port = if url.scheme_str() == Some("https") {
        443
    } else {
        80
    };
    let text = match url.port_u16() {
        Some(port) if port != default_port => format!("{host}:{port}"),
        _ => host.to_string(),
    };
    HeaderValue::from_str(&text).context("the URL's host is not a valid Host header")
}

pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    kvbench_report::answer::shorten(&text)
}

impl Attacker {
    pub fn new(url: &Uri, headers: &[(HeaderName, HeaderValue)]) -> anyhow::Result<Attacker> {
        let path = match url.path_and_query() {
            Some(p) if p.as_str() != "/" => Uri::builder()
                .path_and_query(p.clone())
                .build()
                .context("the URL's path is not valid")?,
            _ => Uri::from_static("/"),
        };
        let mut map = HeaderMap::new();
        if !headers.iter().any(|(n, _)| n == HOST) {
            map.insert(HOST, host_header(url)?);
        }
        if !headers.iter().any(|(n, _)| n == USER_AGENT) {
            map.insert(
                USER_AGENT,
                HeaderValue::from_static(concat!("kvbench/", env!("CARGO_PKG_VERSION"))),
            );
        }
        for (name, value) in headers {
            map.append(name, value.clone());
        }
        Ok(Attacker {
            connector: connector(),
            url: url.clone(),
            path,
            headers: map,
            retry: true,
        })
    }

    /// The attacker without the one retry of [`Attacker::send`]: a request the server's idle
    /// close crossed fails as `transport` (to show the race; `kvbench run` always retries).
    pub fn without_retry(mut self) -> Attacker {
        self.retry = false;
        self
    }

    /// A copy of the template: the URI and header values are shared buffers, only the header
    /// map's own tables are allocated.
    fn request(&self) -> Request<Empty<Bytes>> {
        let mut req = Request::new(Empty::new());
        *req.uri_mut() = self.path.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }

    /// Opens a connection (TCP, TLS for https, HTTP/1.1 handshake).
    pub async fn connect(&self) -> Result<Conn, Failed> {
        let failed = |e: &dyn std::error::Error| (FailureKind::Connect, error_chain(e));
        let io = self
            .connector
            .clone()
            .call(self.url.clone())
            .await
            .map_err(|e| failed(&*e))?;
        let read = Arc::new(AtomicU64::new(0));
        let io = TokioIo::new(Counted {
            inner: TokioIo::new(io),
            read: read.clone(),
        });
        let (sender, driver) = http1::handshake(io).await.map_err(|e| failed(&e))?;
        Ok(Conn {
            sender,
            driver: Some(Box::pin(driver)),
            read,
        })
    }

    /// Sends one request on `conn` (opening one when needed) and reads the body into `body`;
    /// returns the status. After a failure `conn` is `None` (its state is unknown).
    ///
    /// An idle connection may have been closed by the server meanwhile (workerd after 5 s), so:
    /// - closed before the request left: sent on a new one, not counted;
    /// - failed before any answer byte: sent once more on a new one, `retried` set (at once, so
    ///   a retry that times out still counts);
    /// - failed on a fresh connection, after answer bytes, or twice: the failure stands.
    ///
    /// Latency runs from the intended start, so it includes the failed attempt.
    pub async fn send(
        &self,
        conn: &mut Option<Conn>,
        body: &mut Vec<u8>,
        retried: &mut bool,
    ) -> Result<u16, Failed> {
        *retried = false;
        let mut req = self.request();
        // Twice at most: a failure on a connection that waited idle leaves `conn` empty, so the
        // second attempt is on a connection opened for it, whose failures are final.
        for _ in 0..2 {
            let (c, fresh) = match conn {
                Some(c) if !c.is_closed() => (c, false),
                _ => (conn.insert(self.connect().await?), true),
            };
            match c.exchange(req, body).await {
                Ok(status) => {
                    if c.is_closed() {
                        *conn = None;
                    }
                    return Ok(status);
                }
                Err(Exchange::NotSent(again)) if !fresh => {
                    *conn = None;
                    req = again;
                }
                Err(Exchange::NotSent(_)) => {
                    *conn = None;
                    return Err((
                        FailureKind::Transport,
                        "connection closed before the request was sent".into(),
                    ));
                }
                Err(Exchange::Unanswered(_)) if !fresh && self.retry => {
                    *conn = None;
                    *retried = true;
                    req = self.request();
                }
                Err(Exchange::Unanswered(f) | Exchange::Failed(f)) => {
                    *conn = None;
                    return Err(f);
                }
            }
        }
        unreachable!("the second attempt is on a new connection, and always returns")
    }
}

/// How an exchange on one connection failed.
enum Exchange {
    /// The connection was closed before the request left: it can be sent on another.
    NotSent(Request<Empty<Bytes>>),
    /// The request left, then the connection failed before any byte of an answer arrived
    /// (`transport`).
    Unanswered(Failed),
    /// The connection failed after answer bytes arrived, or the answer passed the size limit
    /// (`truncated`).
    Failed(Failed),
}

/// One HTTP/1.1 connection: the sending half and the protocol driver, polled together by
/// whoever awaits [`Conn::exchange`].
pub struct Conn {
    sender: http1::SendRequest<Empty<Bytes>>,
    /// `None` once the connection ended (dropping it fails any request still queued on it).
    driver: Option<Pin<Box<Driver>>>,
    /// Plaintext bytes read from the connection so far.
    read: Arc<AtomicU64>,
}

impl Conn {
    fn is_closed(&self) -> bool {
        self.driver.is_none() || self.sender.is_closed()
    }

    async fn exchange(
        &mut self,
        req: Request<Empty<Bytes>>,
        body: &mut Vec<u8>,
    ) -> Result<u16, Exchange> {
        let Conn {
            sender,
            driver,
            read,
        } = self;
        let read_before = read.load(Ordering::Relaxed);
        let work = async {
            if std::future::poll_fn(|cx| sender.poll_ready(cx))
                .await
                .is_err()
            {
                return Err(Step::NotSent(req));
            }
            let response =
                sender
                    .try_send_request(req)
                    .await
                    .map_err(|mut e| match e.take_message() {
                        Some(req) => Step::NotSent(req),
                        None => Step::Broke(error_chain(e.error())),
                    })?;
            let status = response.status().as_u16();
            let mut incoming = response.into_body();
            body.clear();
            while let Some(frame) = incoming.frame().await {
                let frame =
                    frame.map_err(|e| Step::Broke(format!("reading body: {}", error_chain(&e))))?;
                if let Ok(data) = frame.into_data() {
                    if body.len() + data.len() > MAX_BODY_BYTES {
                        return Err(Step::Broke("reading body: length limit exceeded".into()));
                    }
                    body.extend_from_slice(&data);
                }
            }
            Ok(status)
        };
        let out = Drive {
            driver,
            work: std::pin::pin!(work),
        }
        .await;
        // Whether any byte of an answer arrived decides the kind, and whether it may be retried.
        out.map_err(|step| match step {
            Step::NotSent(req) => Exchange::NotSent(req),
            Step::Broke(reason) if read.load(Ordering::Relaxed) == read_before => {
                Exchange::Unanswered((FailureKind::Transport, reason))
            }
            Step::Broke(reason) => Exchange::Failed((FailureKind::Truncated, reason)),
        })
    }
}

/// How the work of an exchange stopped short, before the bytes read say what it means.
enum Step {
    NotSent(Request<Empty<Bytes>>),
    Broke(String),
}

/// Counts the bytes read, above TLS (a `close_notify` is not an answer byte): any byte of an
/// answer means a failed request is not sent again.
pub struct Counted<T> {
    inner: T,
    read: Arc<AtomicU64>,
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counted<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let out = Pin::new(&mut this.inner).poll_read(cx, buf);
        let n = buf.filled().len().saturating_sub(before);
        if n > 0 {
            this.read.fetch_add(n as u64, Ordering::Relaxed);
        }
        out
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Counted<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Polls the connection's driver alongside the request that needs it.
struct Drive<'d, 'w, W> {
    driver: &'d mut Option<Pin<Box<Driver>>>,
    work: Pin<&'w mut W>,
}

impl<W: Future> Future for Drive<'_, '_, W> {
    type Output = W::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<W::Output> {
        let this = self.get_mut();
        let work = &mut this.work;
        // Driver first (it notices a close, then writes what `work` queued and reads the
        // answer), `work` after it; twice, so a request queued by `work` leaves in this poll.
        for _ in 0..2 {
            if let Some(d) = this.driver.as_mut() {
                if d.as_mut().poll(cx).is_ready() {
                    // Dropping the driver fails whatever `work` still waits for.
                    *this.driver = None;
                }
            }
            if let Poll::Ready(out) = work.as_mut().poll(cx) {
                return Poll::Ready(out);
            }
        }
        Poll::Pending
    }
}
