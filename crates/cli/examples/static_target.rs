//! A minimal static `/test` target for `bench-rate.sh`: answers every request at once with a fixed
//! `/test`-shaped body, keep-alive, TCP_NODELAY — so the benchmark measures the load generator,
//! not a server — and counts what it received, so a generator's claims can be checked.
//!
//! Usage: `static_target [ADDR]` (default 127.0.0.1:0); prints `listening on http://ADDR/test`.
//! `GET /count` answers the number of other requests received so far (itself not counted).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

const BODY: &str = r#"{"key":"1","colo":"LOCAL","order":["kv","upstash"],"isolate_requests":1,"stores":{"kv":{"read_ms":0.0,"hit":true,"value_bytes":100,"write_ms":null,"error":null},"upstash":{"read_ms":0.0,"hit":true,"value_bytes":100,"write_ms":null,"error":null}},"kvLatency":0.0,"redisLatency":0.0}"#;

fn answer(req: &Request<hyper::body::Incoming>, received: &AtomicU64) -> Response<Full<Bytes>> {
    let body = if req.uri().path() == "/count" {
        Bytes::from(received.load(Ordering::Relaxed).to_string())
    } else {
        received.fetch_add(1, Ordering::Relaxed);
        Bytes::from_static(BODY.as_bytes())
    };
    let mut resp = Response::new(Full::new(body));
    resp.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    // One thread: leaves the other core to the load generator on a 2-core machine.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let received = Arc::new(AtomicU64::new(0));
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        println!("listening on http://{}/test", listener.local_addr()?);
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            let received = received.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let resp = answer(&req, &received);
                    async move { Ok::<_, Infallible>(resp) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}
