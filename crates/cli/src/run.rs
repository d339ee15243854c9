//! The load run: the pacer decides *when*, one task per request decides *how*, samples flow over a
//! channel to the single collector. Ctrl-C stops sending, waits (bounded) for the requests in
//! flight and still yields a (partial) report.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::header::{HeaderName, HeaderValue, USER_AGENT};
use hyper::{Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{mpsc, watch};

use crate::collect::Collector;
use crate::hist::Hist;
use crate::pacer::{self, Pacer};
use crate::progress::Progress;
use crate::report::{Report, RunInfo};
use crate::sample::{self, FailureKind, Outcome, Sample};

/// Larger bodies are not `/test` answers; reading them whole would only cost memory.
const MAX_BODY_BYTES: usize = 4 << 20;
/// After the pacer stops and every request got its own timeout, allow this much more.
const DRAIN_SLACK: Duration = Duration::from_secs(1);
/// After cancelling, how long tasks get to report `cancelled`.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

type HttpClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// What `kvbench run` needs, already validated.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub url: Uri,
    pub rate: f64,
    pub duration: Duration,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub label: String,
    pub timeout: Duration,
    pub max_in_flight: u64,
    pub interval: Duration,
    pub samples_csv: Option<PathBuf>,
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

/// Sends one request and classifies what came back.
async fn fire(
    client: HttpClient,
    request: Request<Empty<Bytes>>,
    timeout: Duration,
    cancel: watch::Receiver<bool>,
) -> Result<(StatusCode, Bytes), (FailureKind, String)> {
    let exchange = async {
        let response = client.request(request).await.map_err(|e| {
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
    };
    tokio::select! {
        r = tokio::time::timeout(timeout, exchange) => match r {
            Ok(r) => r,
            Err(_) => Err((FailureKind::Timeout, format!("no answer within {}", humantime::format_duration(timeout)))),
        },
        _ = cancelled(cancel) => Err((FailureKind::Cancelled, "run stopped before the answer".into())),
    }
}

fn outcome(
    result: Result<(StatusCode, Bytes), (FailureKind, String)>,
) -> (FailureKind, String, Option<Outcome>) {
    match result {
        Err((kind, detail)) => (kind, detail, None),
        Ok((status, body)) if status != StatusCode::OK => (
            FailureKind::Status(status.as_u16()),
            crate::answer::describe_error_body(&body),
            None,
        ),
        Ok((_, body)) => match crate::answer::parse(&body) {
            Ok(a) => (
                FailureKind::NotSent,
                String::new(),
                Some(Outcome::Answer(a)),
            ),
            Err(e) => (
                FailureKind::Malformed,
                crate::answer::shorten(&e.to_string()),
                None,
            ),
        },
    }
}

fn request(cfg: &RunConfig) -> anyhow::Result<Request<Empty<Bytes>>> {
    let mut builder = Request::get(cfg.url.clone());
    let has_agent = cfg.headers.iter().any(|(n, _)| n == USER_AGENT);
    if !has_agent {
        builder = builder.header(USER_AGENT, concat!("kvbench/", env!("CARGO_PKG_VERSION")));
    }
    for (name, value) in &cfg.headers {
        builder = builder.header(name, value);
    }
    builder.body(Empty::new()).context("building the request")
}

#[cfg(unix)]
struct Interrupt(tokio::signal::unix::Signal);

#[cfg(unix)]
impl Interrupt {
    fn install() -> anyhow::Result<Interrupt> {
        let s = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .context("installing the Ctrl-C handler")?;
        Ok(Interrupt(s))
    }

    async fn recv(&mut self) {
        self.0.recv().await;
    }
}

#[cfg(not(unix))]
struct Interrupt;

#[cfg(not(unix))]
impl Interrupt {
    fn install() -> anyhow::Result<Interrupt> {
        Ok(Interrupt)
    }

    async fn recv(&mut self) {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Runs the load and returns this run's report (partial when interrupted).
pub async fn run(cfg: RunConfig, mut progress: Progress) -> anyhow::Result<Report> {
    let pacer = Pacer::new(cfg.rate, cfg.duration).context("--rate/--duration")?;
    let template = request(&cfg)?;
    let client = client(cfg.max_in_flight.min(1024) as usize);
    let mut csv = match &cfg.samples_csv {
        None => None,
        Some(path) => {
            let mut w = BufWriter::new(
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
            );
            w.write_all(sample::CSV_HEADER.as_bytes())?;
            Some(w)
        }
    };

    let (tx, mut rx) = mpsc::unbounded_channel::<Sample>();
    let in_flight = Arc::new(AtomicU64::new(0));
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let (done_tx, mut done_rx) = watch::channel(false);
    let mut interrupt = Interrupt::install()?;
    progress.started(&format!(
        "kvbench: {} req/s to {} for {} (label {}); Ctrl-C stops and writes a partial report",
        cfg.rate,
        cfg.url,
        humantime::format_duration(cfg.duration),
        cfg.label
    ));

    let collector = {
        let in_flight = in_flight.clone();
        let (interval, timeout) = (cfg.interval, cfg.timeout);
        tokio::spawn(async move {
            let mut c = Collector::new(interval, timeout);
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            let mut csv_error = None;
            loop {
                tokio::select! {
                    s = rx.recv() => match s {
                        Some(s) => {
                            c.record(&s);
                            if let (Some(w), None) = (csv.as_mut(), &csv_error) {
                                csv_error = sample::write_csv(w, &s).err();
                            }
                        }
                        None => break,
                    },
                    _ = tick.tick() => progress.update(&c.snapshot(), in_flight.load(Ordering::Relaxed)),
                    _ = done_rx.wait_for(|d| *d) => {
                        // Tasks that outlived the cancel grace: take what already arrived.
                        while let Ok(s) = rx.try_recv() {
                            c.record(&s);
                        }
                        break;
                    }
                }
            }
            progress.finish();
            if let Some(mut w) = csv {
                if csv_error.is_none() {
                    csv_error = w.flush().err();
                }
            }
            (c, csv_error)
        })
    };

    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    // Ctrl-C count: the first stops the pacer, a second cuts the drain short.
    let sigints = Arc::new(AtomicU64::new(0));
    let watcher = {
        let sigints = sigints.clone();
        tokio::spawn(async move {
            loop {
                interrupt.recv().await;
                sigints.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    // The pacer runs on its own OS thread: thread sleeps are precise to tens of microseconds,
    // tokio's timer only to a millisecond, which at 2,000 req/s would be two whole periods.
    let start = Instant::now();
    let pacer_thread = {
        let (runtime, sigints, in_flight, tx) = (
            tokio::runtime::Handle::current(),
            sigints.clone(),
            in_flight.clone(),
            tx.clone(),
        );
        let (cfg, template, cancel_rx) = (cfg.clone(), template, cancel_rx.clone());
        std::thread::spawn(move || {
            let mut lag_us = Hist::default();
            let mut interrupted = false;
            'schedule: for offset in pacer {
                let intended = start + offset;
                loop {
                    if sigints.load(Ordering::SeqCst) > 0 {
                        interrupted = true;
                        break 'schedule;
                    }
                    let now = Instant::now();
                    if now >= intended {
                        break;
                    }
                    // Short naps so Ctrl-C is seen promptly even at very low rates.
                    std::thread::sleep((intended - now).min(Duration::from_millis(50)));
                }
                lag_us.record(pacer::lag(intended, Instant::now()).as_micros() as u64);
                let intended_us = offset.as_micros() as u64;
                if in_flight.load(Ordering::SeqCst) >= cfg.max_in_flight {
                    let detail = format!("--max-in-flight {} reached", cfg.max_in_flight);
                    let _ = tx.send(Sample::failure(
                        intended_us,
                        0,
                        FailureKind::NotSent,
                        detail,
                    ));
                    continue;
                }
                in_flight.fetch_add(1, Ordering::SeqCst);
                let (client, tx, in_flight, cancel) = (
                    client.clone(),
                    tx.clone(),
                    in_flight.clone(),
                    cancel_rx.clone(),
                );
                let mut req = Request::new(Empty::new());
                *req.method_mut() = template.method().clone();
                *req.uri_mut() = template.uri().clone();
                *req.headers_mut() = template.headers().clone();
                let timeout = cfg.timeout;
                runtime.spawn(async move {
                    let result = fire(client, req, timeout, cancel).await;
                    let latency_us = intended.elapsed().as_micros() as u64;
                    let sample = match outcome(result) {
                        (_, _, Some(o)) => Sample {
                            intended_us,
                            latency_us,
                            outcome: o,
                        },
                        (kind, detail, None) => {
                            Sample::failure(intended_us, latency_us, kind, detail)
                        }
                    };
                    let _ = tx.send(sample);
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                });
            }
            let send_window = if interrupted {
                start.elapsed()
            } else {
                start.elapsed().max(cfg.duration)
            };
            (lag_us, interrupted, send_window)
        })
    };
    let (lag_us, mut interrupted, send_window) =
        tokio::task::spawn_blocking(move || pacer_thread.join())
            .await
            .context("waiting for the pacer")?
            .map_err(|_| anyhow::anyhow!("the pacer thread panicked"))?;

    // Drain: every request has its own timeout, so this ends; a (second) Ctrl-C cuts it short.
    let deadline = tokio::time::Instant::now() + cfg.timeout + DRAIN_SLACK;
    let sigints_at_drain = sigints.load(Ordering::SeqCst);
    while in_flight.load(Ordering::Relaxed) > 0 && tokio::time::Instant::now() < deadline {
        if sigints.load(Ordering::SeqCst) > sigints_at_drain {
            interrupted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    watcher.abort();
    if in_flight.load(Ordering::Relaxed) > 0 {
        let _ = cancel_tx.send(true);
        let deadline = tokio::time::Instant::now() + CANCEL_GRACE;
        while in_flight.load(Ordering::Relaxed) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    drop(tx);
    let stuck = in_flight.load(Ordering::Relaxed);
    if stuck > 0 {
        eprintln!(
            "kvbench: {stuck} request(s) ignored cancellation and are missing from the report"
        );
        let _ = done_tx.send(true);
    }
    let (collector, csv_error) = collector.await.context("the collector panicked")?;
    drop(done_tx);
    if let Some(e) = csv_error {
        eprintln!("kvbench: samples.csv is incomplete: {e}");
    }
    let run = RunInfo {
        label: cfg.label.clone(),
        url: cfg.url.to_string(),
        started_at,
        requested_rate: cfg.rate,
        planned_duration_s: cfg.duration.as_secs_f64(),
        send_window_s: send_window.as_secs_f64(),
        elapsed_s: start.elapsed().as_secs_f64(),
        timeout_s: cfg.timeout.as_secs_f64(),
        max_in_flight: cfg.max_in_flight,
        interrupted,
        pacer_lag_us: lag_us,
    };
    drop(cancel_tx);
    Ok(collector.finish(run))
}
