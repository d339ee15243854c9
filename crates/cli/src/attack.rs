//! The attacker: one HTTP client and a request template; `hit` sends one scheduled request and
//! returns its [`Sample`] directly (timed from the intended start, wrk2-style), classifying every
//! way it can fail.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::header::{HeaderName, HeaderValue, USER_AGENT};
use hyper::{Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::watch;

use crate::sample::{FailureKind, Outcome, Sample};

/// Larger bodies are not `/test` answers; reading them whole would only cost memory.
const MAX_BODY_BYTES: usize = 4 << 20;

type HttpClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// Sends `/test` requests.
#[derive(Clone)]
pub struct Attacker {
    client: HttpClient,
    template: Request<Empty<Bytes>>,
    timeout: Duration,
}

fn client(max_idle: usize) -> HttpClient {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    // Headers and body in separate writes otherwise stall on Nagle + delayed ACK.
    http.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(max_idle)
        .build(https)
}

fn template(
    url: &Uri,
    headers: &[(HeaderName, HeaderValue)],
) -> anyhow::Result<Request<Empty<Bytes>>> {
    let mut builder = Request::get(url.clone());
    if !headers.iter().any(|(n, _)| n == USER_AGENT) {
        builder = builder.header(USER_AGENT, concat!("kvbench/", env!("CARGO_PKG_VERSION")));
    }
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    builder.body(Empty::new()).context("building the request")
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    crate::answer::shorten(&text)
}

/// Waits until the run is cancelled; never, if the sender is gone.
async fn cancelled(mut rx: watch::Receiver<bool>) {
    if rx.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}

type Failed = (FailureKind, String);

/// What a 200/non-200 body means for the report.
pub fn classify(status: StatusCode, body: &[u8]) -> Result<Outcome, Failed> {
    if status != StatusCode::OK {
        return Err((
            FailureKind::Status(status.as_u16()),
            crate::answer::describe_error_body(body),
        ));
    }
    crate::answer::parse(body)
        .map(Outcome::Answer)
        .map_err(|e| {
            (
                FailureKind::Malformed,
                crate::answer::shorten(&e.to_string()),
            )
        })
}

impl Attacker {
    /// `max_idle`: idle connections kept for reuse.
    pub fn new(
        url: &Uri,
        headers: &[(HeaderName, HeaderValue)],
        timeout: Duration,
        max_idle: usize,
    ) -> anyhow::Result<Attacker> {
        Ok(Attacker {
            client: client(max_idle),
            template: template(url, headers)?,
            timeout,
        })
    }

    fn request(&self) -> Request<Empty<Bytes>> {
        let mut req = Request::new(Empty::new());
        *req.method_mut() = self.template.method().clone();
        *req.uri_mut() = self.template.uri().clone();
        *req.headers_mut() = self.template.headers().clone();
        req
    }

    async fn exchange(&self) -> Result<(StatusCode, Bytes), Failed> {
        let response = self.client.request(self.request()).await.map_err(|e| {
            let kind = if e.is_connect() {
                FailureKind::Connect
            } else {
                FailureKind::Transport
            };
            (kind, error_chain(&e))
        })?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_BODY_BYTES)
            .collect()
            .await
            .map_err(|e| {
                (
                    FailureKind::Transport,
                    format!("reading body: {}", error_chain(&*e)),
                )
            })?
            .to_bytes();
        Ok((status, body))
    }

    /// Sends the request scheduled at `intended` (`intended_us` after the run start) and returns
    /// its sample; latency counts from the intended start, so queueing and pacer lag count.
    pub async fn hit(
        &self,
        intended: Instant,
        intended_us: u64,
        cancel: watch::Receiver<bool>,
    ) -> Sample {
        let result = tokio::select! {
            r = tokio::time::timeout(self.timeout, self.exchange()) => match r {
                Ok(Ok((status, body))) => classify(status, &body),
                Ok(Err(failed)) => Err(failed),
                Err(_) => Err((
                    FailureKind::Timeout,
                    format!("no answer within {}", humantime::format_duration(self.timeout)),
                )),
            },
            _ = cancelled(cancel) => Err((FailureKind::Cancelled, "run stopped before the answer".into())),
        };
        let latency_us = intended.elapsed().as_micros() as u64;
        match result {
            Ok(outcome) => Sample {
                intended_us,
                latency_us,
                outcome,
            },
            Err((kind, detail)) => Sample::failure(intended_us, latency_us, kind, detail),
        }
    }
}
