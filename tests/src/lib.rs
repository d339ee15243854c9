//! Mocks of both bindings for the native companion tests: an in-memory KV namespace with
//! Cloudflare's rules, and an Upstash REST "server" behind the HTTP transport seam. Both record
//! every call, so tests can assert what reached a store — and that nothing did.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use async_trait::async_trait;
use kvbench_core::store::ReadOptions;
use kvbench_core::{
    Clock, ErrorKind, HttpRequest, HttpResponse, HttpTransport, Store, StoreError, Timer,
};
use serde_json::{json, Value};

/// One operation as a store saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Get {
        key: String,
        cache_ttl_s: Option<u32>,
    },
    Put {
        key: String,
        len: usize,
        ttl_s: u32,
    },
}

/// How a mock store misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    #[default]
    None,
    /// Every call fails with this kind.
    Fail(ErrorKind),
    /// Every call never completes (only the timeout ends it).
    Hang,
    /// Reads work, writes fail.
    FailWrites,
}

/// A fake clock in milliseconds; each store call advances it by a scripted latency.
#[derive(Default)]
pub struct FakeClock {
    pub now: Cell<f64>,
}

impl FakeClock {
    pub fn advance(&self, ms: f64) {
        self.now.set(self.now.get() + ms);
    }
}

impl Clock for FakeClock {
    fn now_ms(&self) -> f64 {
        self.now.get()
    }
}

/// A timer that fires at once and moves the fake clock forward by the slept time, so a hung
/// store times out instantly in test time while the answer still shows the full timeout.
pub struct FakeTimer<'a>(pub &'a FakeClock);

#[async_trait(?Send)]
impl Timer for FakeTimer<'_> {
    async fn sleep_ms(&self, ms: u64) {
        // Yield once so that a store future that is ready wins the race, as with a real timer.
        let mut yielded = false;
        futures::future::poll_fn(|cx| {
            if yielded {
                std::task::Poll::Ready(())
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        })
        .await;
        self.0.advance(ms as f64);
    }
}

/// In-memory Cloudflare KV, enforcing `expirationTtl >= 60` like the real service.
pub struct MockKv<'a> {
    pub clock: &'a FakeClock,
    pub latency_ms: f64,
    pub data: RefCell<HashMap<String, Vec<u8>>>,
    pub ops: RefCell<Vec<Op>>,
    pub fault: Cell<Fault>,
}

impl<'a> MockKv<'a> {
    pub fn new(clock: &'a FakeClock, latency_ms: f64) -> Self {
        Self {
            clock,
            latency_ms,
            data: RefCell::default(),
            ops: RefCell::default(),
            fault: Cell::default(),
        }
    }
}

#[async_trait(?Send)]
impl Store for MockKv<'_> {
    async fn get(&self, key: &str, options: ReadOptions) -> Result<Option<Vec<u8>>, StoreError> {
        self.ops.borrow_mut().push(Op::Get {
            key: key.into(),
            cache_ttl_s: options.cache_ttl_s,
        });
        match self.fault.get() {
            Fault::Hang => futures::future::pending::<()>().await,
            Fault::Fail(kind) => return Err(StoreError::new(kind, "injected")),
            _ => {}
        }
        self.clock.advance(self.latency_ms);
        Ok(self.data.borrow().get(key).cloned())
    }

    async fn put(&self, key: &str, value: &[u8], ttl_s: u32) -> Result<(), StoreError> {
        self.ops.borrow_mut().push(Op::Put {
            key: key.into(),
            len: value.len(),
            ttl_s,
        });
        match self.fault.get() {
            Fault::Hang => futures::future::pending::<()>().await,
            Fault::Fail(kind) => return Err(StoreError::new(kind, "injected")),
            Fault::FailWrites => return Err(StoreError::new(ErrorKind::Runtime, "KV put failed")),
            Fault::None => {}
        }
        if ttl_s < 60 {
            return Err(StoreError::new(
                ErrorKind::Http,
                "400 Invalid expiration_ttl",
            ));
        }
        self.clock.advance(self.latency_ms);
        self.data.borrow_mut().insert(key.into(), value.to_vec());
        Ok(())
    }
}

/// A scripted answer the mock Upstash server gives instead of executing the command.
#[derive(Debug, Clone)]
pub struct Scripted {
    pub status: u16,
    pub body: String,
}

/// An Upstash REST server behind the transport seam: executes GET and SET (with EX) on a map,
/// checks the bearer token, and records every request.
pub struct MockUpstash<'a> {
    pub clock: &'a FakeClock,
    pub latency_ms: f64,
    pub token: String,
    pub data: RefCell<HashMap<String, String>>,
    pub requests: RefCell<Vec<HttpRequest>>,
    pub commands: RefCell<Vec<Value>>,
    pub script: RefCell<Option<Scripted>>,
    pub hang: Cell<bool>,
}

impl<'a> MockUpstash<'a> {
    pub fn new(clock: &'a FakeClock, latency_ms: f64, token: &str) -> Self {
        Self {
            clock,
            latency_ms,
            token: token.into(),
            data: RefCell::default(),
            requests: RefCell::default(),
            commands: RefCell::default(),
            script: RefCell::default(),
            hang: Cell::new(false),
        }
    }

    fn execute(&self, request: &HttpRequest) -> HttpResponse {
        let reply = |status: u16, body: Value| HttpResponse {
            status,
            body: body.to_string().into_bytes(),
        };
        let auth = request
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| v.as_str());
        if auth != Some(format!("Bearer {}", self.token).as_str()) {
            return reply(401, json!({"error": "Unauthorized"}));
        }
        let Ok(Value::Array(args)) = serde_json::from_slice::<Value>(&request.body) else {
            return reply(400, json!({"error": "ERR failed to parse command"}));
        };
        self.commands.borrow_mut().push(Value::Array(args.clone()));
        let s = |i: usize| args.get(i).and_then(Value::as_str).map(str::to_string);
        match s(0).as_deref() {
            Some("GET") => {
                let value = s(1).and_then(|k| self.data.borrow().get(&k).cloned());
                reply(200, json!({ "result": value }))
            }
            Some("SET") => match (
                s(1),
                s(2),
                s(3).as_deref(),
                args.get(4).and_then(Value::as_u64),
            ) {
                (Some(k), Some(v), Some("EX"), Some(ttl)) if ttl > 0 => {
                    self.data.borrow_mut().insert(k, v);
                    reply(200, json!({"result": "OK"}))
                }
                _ => reply(400, json!({"error": "ERR syntax error"})),
            },
            _ => reply(400, json!({"error": "ERR unknown command"})),
        }
    }
}

#[async_trait(?Send)]
impl HttpTransport for &MockUpstash<'_> {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, StoreError> {
        self.requests.borrow_mut().push(request.clone());
        if self.hang.get() {
            futures::future::pending::<()>().await;
        }
        self.clock.advance(self.latency_ms);
        if let Some(s) = self.script.borrow().clone() {
            return Ok(HttpResponse {
                status: s.status,
                body: s.body.into_bytes(),
            });
        }
        Ok(self.execute(&request))
    }
}
