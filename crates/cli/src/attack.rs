//! The attacker: how one request is sent. The request is a template built once (origin-form URI,
//! `Host`, `User-Agent`, `--header`s) and cloned per request; a [`Conn`] is one HTTP/1.1 (or
//! HTTPS) connection whose protocol state is driven inside the task that sends on it — no task of
//! its own, so a request costs no wake-up between tasks. A connection the server closed while idle
//! is replaced and the request sent again, as long as it never left.

use std::future::Future;
use std::pin::Pin;
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

use crate::sample::FailureKind;

/// Larger bodies are not `/test` answers; reading them whole would only cost memory.
pub const MAX_BODY_BYTES: usize = 4 << 20;

type Io = MaybeHttpsStream<TokioIo<tokio::net::TcpStream>>;
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
    crate::answer::shorten(&text)
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
        })
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
        let (sender, driver) = http1::handshake(io).await.map_err(|e| failed(&e))?;
        Ok(Conn {
            sender,
            driver: Some(Box::pin(driver)),
        })
    }

    /// Sends one request on `conn` (opening one when there is none or it was closed) and reads
    /// the answer's body into `body`; returns the status. After a failure `conn` is `None`: its
    /// state is unknown, and an answer arriving later must not be taken for the next one's.
    pub async fn send(&self, conn: &mut Option<Conn>, body: &mut Vec<u8>) -> Result<u16, Failed> {
        let mut req = self.request();
        // Twice at most: a kept-alive connection can turn out closed only when used.
        for attempt in 0..2 {
            let c = match conn {
                Some(c) if !c.is_closed() => c,
                _ => conn.insert(self.connect().await?),
            };
            match c.exchange(req, body).await {
                Ok(status) => {
                    if c.is_closed() {
                        *conn = None;
                    }
                    return Ok(status);
                }
                Err(Exchange::NotSent(again)) if attempt == 0 => {
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
                Err(Exchange::Failed(f)) => {
                    *conn = None;
                    return Err(f);
                }
            }
        }
        unreachable!("the second attempt always returns")
    }
}

/// How an exchange on one connection failed.
enum Exchange {
    /// The connection was closed before the request left: it can be sent on another.
    NotSent(Request<Empty<Bytes>>),
    Failed(Failed),
}

/// One HTTP/1.1 connection: the sending half and the protocol driver, polled together by
/// whoever awaits [`Conn::exchange`].
pub struct Conn {
    sender: http1::SendRequest<Empty<Bytes>>,
    /// `None` once the connection ended (dropping it fails any request still queued on it).
    driver: Option<Pin<Box<Driver>>>,
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
        let Conn { sender, driver } = self;
        let work = async {
            if std::future::poll_fn(|cx| sender.poll_ready(cx))
                .await
                .is_err()
            {
                return Err(Exchange::NotSent(req));
            }
            let response =
                sender
                    .try_send_request(req)
                    .await
                    .map_err(|mut e| match e.take_message() {
                        Some(req) => Exchange::NotSent(req),
                        None => Exchange::Failed((FailureKind::Transport, error_chain(e.error()))),
                    })?;
            let status = response.status().as_u16();
            let mut incoming = response.into_body();
            body.clear();
            let reading = |e: &dyn std::error::Error| {
                Exchange::Failed((
                    FailureKind::Transport,
                    format!("reading body: {}", error_chain(e)),
                ))
            };
            while let Some(frame) = incoming.frame().await {
                let frame = frame.map_err(|e| reading(&e))?;
                if let Ok(data) = frame.into_data() {
                    if body.len() + data.len() > MAX_BODY_BYTES {
                        return Err(Exchange::Failed((
                            FailureKind::Transport,
                            "reading body: length limit exceeded".into(),
                        )));
                    }
                    body.extend_from_slice(&data);
                }
            }
            Ok(status)
        };
        Drive {
            driver,
            work: std::pin::pin!(work),
        }
        .await
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
