//! Test helpers: an in-test HTTP server on 127.0.0.1 (ephemeral port) whose answers a closure
//! decides per request number, and a runner for the `kvbench` binary.

#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;

/// What the server answers to request number `n` (0, 1, 2, ... in arrival order).
pub struct Reply {
    pub status: u16,
    pub body: String,
    pub delay: Duration,
}

impl Reply {
    pub fn ok(body: impl Into<String>) -> Reply {
        Reply {
            status: 200,
            body: body.into(),
            delay: Duration::ZERO,
        }
    }
}

/// Starts the server on its own thread; it lives until the test process ends.
pub fn serve(handler: impl Fn(u64) -> Reply + Send + Sync + 'static) -> SocketAddr {
    serve_counted(handler).0
}

/// [`serve`], also counting the connections it accepted.
pub fn serve_counted(
    handler: impl Fn(u64) -> Reply + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicU64>) {
    let handler = Arc::new(handler);
    let connections = Arc::new(AtomicU64::new(0));
    let accepted = connections.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let counter = Arc::new(AtomicU64::new(0));
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                accepted.fetch_add(1, Ordering::SeqCst);
                stream.set_nodelay(true).unwrap();
                let (handler, counter) = (handler.clone(), counter.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |_req| {
                        let reply = handler(counter.fetch_add(1, Ordering::SeqCst));
                        async move {
                            if !reply.delay.is_zero() {
                                tokio::time::sleep(reply.delay).await;
                            }
                            let mut resp = Response::new(Full::new(Bytes::from(reply.body)));
                            *resp.status_mut() = StatusCode::from_u16(reply.status).unwrap();
                            resp.headers_mut()
                                .insert("content-type", "application/json".parse().unwrap());
                            Ok::<_, Infallible>(resp)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("server started");
    (addr, connections)
}

/// A bare HTTP/1.1 server that answers `body` with keep-alive, then closes a connection left
/// idle for `idle_close` without saying so (as servers and proxies do); counts the requests.
pub fn serve_closing_idle(body: String, idle_close: Duration) -> (SocketAddr, Arc<AtomicU64>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(AtomicU64::new(0));
    let counted = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let (body, counted) = (body.clone(), counted.clone());
            std::thread::spawn(move || {
                stream.set_nodelay(true).unwrap();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // The first request may take its time; later ones must come within idle_close.
                let mut first = true;
                loop {
                    stream
                        .set_read_timeout(if first { None } else { Some(idle_close) })
                        .unwrap();
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        counted.fetch_add(1, Ordering::SeqCst);
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            body.len()
                        );
                        if stream.write_all((head + &body).as_bytes()).is_err() {
                            return;
                        }
                        first = false;
                    }
                }
            });
        }
    });
    (addr, requests)
}

/// What [`serve_dropping`] did, counted.
#[derive(Debug, Default)]
pub struct Dropping {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Requests answered (200, keep-alive), counted before the answer is written.
    pub answered: AtomicU64,
    /// Requests whose connection it closed after reading their first bytes, without a byte of
    /// an answer (counted before the close).
    pub dropped: AtomicU64,
}

/// How [`serve_dropping`] closes on a request it will not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// Reads one byte of the request and closes with the rest unread: the kernel answers with a
    /// reset (`connection reset by peer`), as when an idle close crosses a request on the wire.
    Reset,
    /// Reads the whole request head, then closes: the client sees the end of the stream before
    /// any byte of an answer.
    Eof,
}

/// A bare HTTP/1.1 server that closes kept-alive connections at the worst moment for the client:
/// on each connection it answers the first `answer_first` requests with `body` (keep-alive),
/// then takes the next request's first bytes and closes without answering — what a server's
/// idle close does to a request already on its way, with no timing involved. `answer_first = 0`
/// closes every connection at its first request (a fresh connection failing).
///
/// Bounded in count and time: it accepts at most `max_connections` within 60 s, each connection
/// serves at most `answer_first + 1` requests, and every read waits at most 10 s.
pub fn serve_dropping(
    body: String,
    answer_first: u64,
    close: Close,
    max_connections: u64,
) -> (SocketAddr, Arc<Dropping>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let seen = Arc::new(Dropping::default());
    let counts = seen.clone();
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut accepted = 0;
        while accepted < max_connections && std::time::Instant::now() < deadline {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                Err(_) => return,
            };
            accepted += 1;
            counts.connections.fetch_add(1, Ordering::SeqCst);
            let (body, counts) = (body.clone(), counts.clone());
            std::thread::spawn(move || {
                let mut stream = stream;
                stream.set_nonblocking(false).unwrap();
                stream.set_nodelay(true).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                for _ in 0..answer_first {
                    if !read_head(&mut stream, &mut buf) {
                        return;
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
                    buf.drain(..end + 4);
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    // Counted first: the client may read the answer before this thread runs on.
                    counts.answered.fetch_add(1, Ordering::SeqCst);
                    if stream.write_all((head + &body).as_bytes()).is_err() {
                        return;
                    }
                }
                // The next request: its first bytes, then the close.
                let took = match close {
                    Close::Reset => stream.read(&mut chunk[..1]),
                    Close::Eof => {
                        let before = buf.len();
                        read_head(&mut stream, &mut buf);
                        Ok(buf.len() - before)
                    }
                };
                if matches!(took, Ok(n) if n > 0) {
                    counts.dropped.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    (addr, seen)
}

/// A fresh, empty directory under the crate's target dir.
/// Reads from `stream` into `buf` until it holds a whole request head (a GET has no body), at
/// most 64 KiB; `false` when the stream ended, failed or passed the bound first.
pub fn read_head(stream: &mut impl std::io::Read, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk) {
            Ok(n) if n > 0 && buf.len() < 64 << 10 => buf.extend_from_slice(&chunk[..n]),
            _ => return false,
        }
    }
    true
}

pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn kvbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvbench"))
        .args(args)
        .output()
        .expect("kvbench runs")
}

pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

/// A `/test` answer of a warm isolate with the given store fragments.
pub fn answer(colo: &str, stores: &str) -> String {
    format!(
        r#"{{"key":"1","colo":"{colo}","order":[],"isolate_requests":2,"stores":{{{stores}}}}}"#
    )
}

/// Deterministic pseudo-random samples (no RNG dependency): a mix of hits, misses, writes, store
/// errors, two colos and every failure kind, spread over `span_s` seconds.
pub fn samples(seed: u64, n: u64, span_s: u64) -> Vec<kvbench_report::sample::Sample> {
    use kvbench_report::answer::{Answer, StoreError, StoreResult};
    use kvbench_report::sample::{FailureKind, Outcome, Sample};
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move |m: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    (0..n)
        .map(|i| {
            let intended_us = i * span_s * 1_000_000 / n;
            let latency_us = 1_000 + next(50_000);
            let roll = next(100);
            let outcome = match roll {
                0..=2 => Outcome::Failure(kvbench_report::sample::Failure {
                    kind: FailureKind::Timeout,
                    detail: "no answer".into(),
                }),
                3 => Outcome::Failure(kvbench_report::sample::Failure {
                    kind: FailureKind::Status(401),
                    detail: "unauthorized".into(),
                }),
                4 => Outcome::Failure(kvbench_report::sample::Failure {
                    kind: FailureKind::Malformed,
                    detail: "bad json".into(),
                }),
                5 => Outcome::Failure(kvbench_report::sample::Failure {
                    kind: FailureKind::NotSent,
                    detail: String::new(),
                }),
                _ => {
                    let mut stores = std::collections::BTreeMap::new();
                    let hit = next(3) > 0;
                    stores.insert(
                        "kv".to_string(),
                        StoreResult {
                            read_us: Some(500 + next(80_000)),
                            hit: Some(hit),
                            value_bytes: Some(1 + next(60_000)),
                            ..Default::default()
                        },
                    );
                    let write = !hit;
                    let error = (next(20) == 0).then(|| StoreError {
                        kind: "timeout".into(),
                        message: "slow".into(),
                        op: Some(kvbench_wire::answer::Op::Write),
                    });
                    stores.insert(
                        "upstash".to_string(),
                        StoreResult {
                            read_us: Some(200 + next(20_000)),
                            hit: Some(hit),
                            value_bytes: Some(1 + next(60_000)),
                            write_us: (write && error.is_none()).then(|| 300 + next(30_000)),
                            error: if write { error } else { None },
                            ..Default::default()
                        },
                    );
                    if next(4) == 0 {
                        stores.insert(
                            "denokv".to_string(),
                            StoreResult {
                                read_us: Some(900 + next(9_000)),
                                hit: None,
                                value_bytes: Some(5000),
                                connect_us: Some(4_000 + next(1_000)),
                                ..Default::default()
                            },
                        );
                    }
                    Outcome::Answer(Answer {
                        key: Some(i.to_string()),
                        colo: if roll % 2 == 0 { "FRA".into() } else { "AMS".into() },
                        stores,
                        concurrent: None,
                        cold: false,
                    })
                }
            };
            let latency_us = if matches!(outcome, Outcome::Failure(ref f) if f.kind == FailureKind::NotSent) {
                0
            } else {
                latency_us
            };
            Sample {
                intended_us,
                latency_us,
                outcome,
            }
        })
        .collect()
}

/// A fixed RunInfo so golden files do not depend on the clock.
pub fn run_info(label: &str, rate: f64, span_s: f64) -> kvbench_report::report::RunInfo {
    let mut lag = kvbench_report::hist::Hist::default();
    for v in [40, 55, 60, 80, 1200] {
        lag.record(v);
    }
    kvbench_report::report::RunInfo {
        label: label.into(),
        url: "http://127.0.0.1:8787/test".into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        requested_rate: rate,
        planned_duration_s: span_s,
        send_window_s: span_s,
        elapsed_s: span_s + 0.05,
        timeout_s: 10.0,
        max_in_flight: 512,
        interrupted: false,
        pacer_lag_us: lag,
        engine: "kvbench".into(),
        latency_from: "intended".into(),
        import: None,
        read_us: Default::default(),
    }
}

pub fn collect(
    samples: &[kvbench_report::sample::Sample],
    interval_s: u64,
    run: kvbench_report::report::RunInfo,
) -> kvbench_report::report::Report {
    let mut c = kvbench_report::collect::Collector::new(
        Duration::from_secs(interval_s),
        Duration::from_secs(10),
    );
    for s in samples {
        c.record(s);
    }
    c.finish(run)
}

/// One step of a [`serve_script`] connection, after it has read the request's head.
pub enum Step {
    /// Writes these bytes.
    Send(Vec<u8>),
    /// Waits (never past the server's lifetime).
    Sleep(Duration),
    /// Writes these bytes one at a time, `every` apart.
    Drip(Vec<u8>, Duration),
    /// Writes `make(i)` for i in 0..n, `every` apart (zero: as fast as the client reads).
    Lines(Box<dyn Fn(u64) -> Vec<u8> + Send + Sync>, u64, Duration),
}

/// A bare TCP server that plays `script` on each of the first `connections` connections, then
/// closes it. It stops by itself: no connection is accepted after `lifetime`, and every step
/// ends when the client goes away or the lifetime is over.
pub fn serve_script(connections: usize, lifetime: Duration, script: Vec<Step>) -> SocketAddr {
    use std::io::{ErrorKind, Write};
    use std::time::Instant;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + lifetime;
    let script = Arc::new(script);
    std::thread::spawn(move || {
        let mut accepted = 0;
        while accepted < connections && Instant::now() < deadline {
            let mut stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                Err(_) => return,
            };
            accepted += 1;
            let script = script.clone();
            std::thread::spawn(move || {
                stream.set_nonblocking(false).unwrap();
                stream.set_nodelay(true).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                if !read_head(&mut stream, &mut Vec::new()) {
                    return;
                }
                let nap = |d: Duration| {
                    let left = deadline.saturating_duration_since(Instant::now());
                    std::thread::sleep(d.min(left));
                    !left.is_zero()
                };
                for step in script.iter() {
                    let ok = match step {
                        Step::Send(bytes) => stream.write_all(bytes).is_ok(),
                        Step::Sleep(d) => nap(*d),
                        Step::Drip(bytes, every) => bytes
                            .iter()
                            .all(|b| stream.write_all(&[*b]).is_ok() && nap(*every)),
                        Step::Lines(make, n, every) => (0..*n).all(|i| {
                            Instant::now() < deadline
                                && stream.write_all(&make(i)).is_ok()
                                && (every.is_zero() || nap(*every))
                        }),
                    };
                    if !ok {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// How a bounded run of `kvbench` went.
pub struct Ran {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    /// The child's peak resident memory (`ru_maxrss`), KiB.
    pub max_rss_kib: u64,
}

/// Runs `kvbench` with `args`, killed if it has not ended within `limit`, and measures its peak
/// memory (`wait4`'s `ru_maxrss`: this child's alone).
#[cfg(target_os = "linux")]
// Reaped by `wait4` below, which std's `wait` cannot replace: it gives the child's own rusage.
#[allow(clippy::zombie_processes)]
pub fn kvbench_bounded(args: &[&str], limit: Duration) -> Ran {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::Instant;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kvbench"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kvbench starts");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = r.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let pid = child.id() as libc::pid_t;
    let end = Instant::now() + limit;
    let mut status = 0;
    // SAFETY: plain libc calls on a zeroed rusage and our own child's pid, reaped only here.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let got = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(got >= 0, "wait4 failed");
        if got == pid {
            break;
        }
        if Instant::now() >= end {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            panic!(
                "kvbench {args:?} still ran after {limit:?}; stderr: {}",
                stderr.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ran {
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        max_rss_kib: usage.ru_maxrss as u64,
    }
}
