//! A small, bounded HTTP load generator for `bench.sh`: a fixed number of keep-alive connections
//! each sends `GET /get/<key>` back to back for a fixed time, then it prints throughput and
//! latency percentiles. Closed loop: it measures how fast the gateway answers, not latency under a
//! fixed arrival rate.
//!
//! Usage: load <base-url> <token> <key> <connections> <seconds>

use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Latency samples kept per connection; beyond this only counts are kept, so memory stays bounded.
const MAX_SAMPLES_PER_CONN: usize = 200_000;

struct ConnResult {
    requests: u64,
    bytes: u64,
    errors: u64,
    latencies_us: Vec<u32>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        eprintln!("usage: load <base-url> <token> <key> <connections> <seconds>");
        std::process::exit(2);
    }
    let base = args[1].trim_end_matches('/').to_owned();
    let authority = base.trim_start_matches("http://").to_owned();
    let token = args[2].clone();
    let path = format!("/get/{}", args[3]);
    let connections: usize = args[4].parse()?;
    let duration = Duration::from_secs(args[5].parse()?);

    let deadline = Instant::now() + duration;
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections {
        let (authority, token, path) = (authority.clone(), token.clone(), path.clone());
        tasks.push(tokio::spawn(async move {
            run_conn(&authority, &token, &path, deadline).await
        }));
    }
    let mut total = ConnResult {
        requests: 0,
        bytes: 0,
        errors: 0,
        latencies_us: Vec::new(),
    };
    for task in tasks {
        let r = task.await??;
        total.requests += r.requests;
        total.bytes += r.bytes;
        total.errors += r.errors;
        total.latencies_us.extend(r.latencies_us);
    }
    let secs = started.elapsed().as_secs_f64();
    total.latencies_us.sort_unstable();
    let pct = |p: f64| {
        let v = &total.latencies_us;
        if v.is_empty() {
            0.0
        } else {
            v[((v.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0
        }
    };
    println!(
        "{:>9.0} req/s  {:>7.1} MB/s  p50 {:.2} ms  p99 {:.2} ms  ({} requests, {} errors, {} connections, {:.1} s)",
        total.requests as f64 / secs,
        total.bytes as f64 / secs / 1e6,
        pct(0.50),
        pct(0.99),
        total.requests,
        total.errors,
        connections,
        secs
    );
    if total.errors > 0 {
        std::process::exit(1);
    }
    Ok(())
}

async fn run_conn(
    authority: &str,
    token: &str,
    path: &str,
    deadline: Instant,
) -> anyhow::Result<ConnResult> {
    let stream = TcpStream::connect(authority).await?;
    stream.set_nodelay(true)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut r = ConnResult {
        requests: 0,
        bytes: 0,
        errors: 0,
        latencies_us: Vec::new(),
    };
    let auth = format!("Bearer {token}");
    while Instant::now() < deadline {
        let req = Request::get(path)
            .header("host", authority)
            .header("authorization", &auth)
            .body(Empty::<Bytes>::new())?;
        let sent = Instant::now();
        let res = sender.send_request(req).await?;
        let ok = res.status().is_success();
        let body = res.into_body().collect().await?.to_bytes();
        let us = sent.elapsed().as_micros().min(u32::MAX as u128) as u32;
        r.requests += 1;
        r.bytes += body.len() as u64;
        if !ok {
            r.errors += 1;
        }
        if r.latencies_us.len() < MAX_SAMPLES_PER_CONN {
            r.latencies_us.push(us);
        }
    }
    Ok(r)
}
