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
        Reply { status: 200, body: body.into(), delay: Duration::ZERO }
    }
}

/// Starts the server on its own thread; it lives until the test process ends.
pub fn serve(handler: impl Fn(u64) -> Reply + Send + Sync + 'static) -> SocketAddr {
    let handler = Arc::new(handler);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let counter = Arc::new(AtomicU64::new(0));
            loop {
                let (stream, _) = listener.accept().await.unwrap();
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
                            resp.headers_mut().insert("content-type", "application/json".parse().unwrap());
                            Ok::<_, Infallible>(resp)
                        }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
    });
    rx.recv_timeout(Duration::from_secs(5)).expect("server started")
}

/// A fresh, empty directory under the crate's target dir.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn kvbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvbench")).args(args).output().expect("kvbench runs")
}

pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// A `/test` answer with the given store fragments.
pub fn answer(colo: &str, stores: &str) -> String {
    format!(r#"{{"key":"1","colo":"{colo}","order":[],"isolate_requests":1,"stores":{{{stores}}}}}"#)
}
