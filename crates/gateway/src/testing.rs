//! Test support (not part of the gateway's API): a private redis-server on a free loopback port,
//! killed on drop, as redis-rs's test helpers do. The binary comes from `REDIS_SERVER_BIN`
//! (default `redis-server` on PATH); if it cannot start, the test fails saying so.

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running redis-server with no persistence, owned by one test.
pub struct RedisServer {
    child: Child,
    pub port: u16,
}

impl RedisServer {
    /// Starts redis-server and waits (bounded) until it accepts connections. Panics with a clear
    /// message when it is missing or does not come up.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Like [`RedisServer::start`], with extra `redis-server` arguments
    /// (e.g. `["--busy-reply-threshold", "100"]`).
    pub fn start_with(extra_args: &[&str]) -> Self {
        let bin = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".to_owned());
        let port = free_port();
        let child = Command::new(&bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(extra_args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| {
                panic!(
                    "cannot start redis-server ({bin:?}): {err}. Install it \
                     (apt-get install -y redis-server) or set REDIS_SERVER_BIN"
                )
            });
        let mut server = Self { child, port };
        server.wait_ready();
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn wait_ready(&mut self) {
        // Up to ~10 s: generous for a loaded machine; redis usually answers in milliseconds.
        for _ in 0..400 {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "redis-server exited at start ({status}) on port {}",
                    self.port
                );
            }
            if let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.port)) {
                use std::io::{Read, Write};
                let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 7];
                if conn.write_all(b"PING\r\n").is_ok()
                    && conn.read_exact(&mut buf).is_ok()
                    && &buf == b"+PONG\r\n"
                {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!(
            "redis-server did not answer PING on port {} within ~10 s",
            self.port
        );
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on right now (the OS picks it; a race with other processes is possible
/// but rare on loopback).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral loopback port")
}

/// Sends one request to `app` without a socket and returns its status and JSON body
/// (`Value::Null` when the body is not JSON).
pub async fn call(
    app: &axum::Router,
    method: axum::http::Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: impl Into<axum::body::Body>,
) -> (axum::http::StatusCode, serde_json::Value) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let mut req = axum::http::Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = app
        .clone()
        .oneshot(req.body(body.into()).expect("valid test request"))
        .await
        .expect("the router is infallible");
    let status = res.status();
    let bytes = res.into_body().collect().await.expect("body").to_bytes();
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    (status, json)
}
