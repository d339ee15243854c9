//! Mocks of the bindings for the native companion tests: an in-memory KV namespace with
//! Cloudflare's rules, the Durable Object, D1, R2 and Cache API bindings with theirs
//! ([`MockBinding`]), Upstash REST and Deno KV (KV Connect) "servers" behind the HTTP transport
//! seam, and a RESP server behind the socket seam ([`MockRedis`]). All record every call, so
//! tests can assert what reached a store — and that nothing did.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use async_trait::async_trait;
use kvbench_core::stores::denokv::proto;
use kvbench_core::stores::durable::LocationHint;
use kvbench_core::stores::socket::{Connection, Connector};
use kvbench_core::stores::sql::D1Session;
use kvbench_core::stores::store::{Deferred, DynStore, Fetched, Options};
use kvbench_core::{
    Clock, ErrorKind, HttpRequest, HttpResponse, HttpTransport, Store, StoreError, StoreId, Timer,
};
use prost::Message;
use serde_json::{json, Value};

/// A store's read as the probe sees it once every span is over: the value's size on a hit,
/// `None` on a miss.
pub async fn read(
    store: &dyn DynStore,
    key: &str,
    options: Options,
) -> Result<Option<u64>, StoreError> {
    match store.get(key, &options).await? {
        Fetched::Miss => Ok(None),
        Fetched::Hit(decode) => decode.finish().map(Some),
    }
}

/// A value's copy as the mock bindings write it, made once per value and kept with it
/// (`Value::outside`), as the worker's glue keeps one JS copy (`js_copy::JsCopy`).
#[derive(Clone)]
pub struct MockValue(std::rc::Rc<[u8]>);

impl MockValue {
    pub fn of(value: &kvbench_core::Value) -> MockValue {
        value.outside(|bytes| MockValue(bytes.into()))
    }
}

impl std::ops::Deref for MockValue {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// A store's write as the probe makes it: prepared first, then sent.
pub async fn write(
    store: &dyn DynStore,
    key: &str,
    value: &[u8],
    ttl_s: u32,
) -> Result<(), StoreError> {
    let value = kvbench_core::Value::from_bytes(value.to_vec());
    let write = store.prepare(key, &value, ttl_s)?;
    write.put(&Options::default()).await
}

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
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Fault {
    #[default]
    None,
    /// Every call fails with this kind.
    Fail(ErrorKind),
    /// Every call never completes (only the timeout ends it).
    Hang,
    /// Reads work, writes fail.
    FailWrites,
    /// Every call completes only once the clock has moved this many ms past its start (after a
    /// timeout, during the probe's wait for the abandoned call).
    Late(f64),
}

impl Fault {
    /// Waits out a `Late` fault: pending until the fake clock passes `start + ms`.
    pub async fn late(self, clock: &FakeClock) {
        if let Fault::Late(ms) = self {
            let until = clock.now.get() + ms;
            futures::future::poll_fn(|cx| {
                if clock.now.get() >= until {
                    std::task::Poll::Ready(())
                } else {
                    cx.waker().wake_by_ref();
                    std::task::Poll::Pending
                }
            })
            .await;
        }
    }
}

/// A fake clock in milliseconds; each store call advances it by a scripted latency.
///
/// [`FakeClock::deployed`] models a deployed worker's clock instead: what the code reads moves
/// only when control re-enters the isolate (an I/O completes, a request arrives), to the hidden
/// real time then, and stands still while CPU runs in between. The hidden real time is this
/// thread's CPU time plus every scripted I/O latency so far, so CPU the code spends between two
/// I/Os lands in whichever span is open — exactly what a deployed worker would report.
#[derive(Default)]
pub struct FakeClock {
    pub now: Cell<f64>,
    deployed: Cell<bool>,
    io_ms: Cell<f64>,
    cpu_origin_ms: Cell<f64>,
    /// Response bodies the code has dropped, freed by the next [`FakeClock::server`] call (see
    /// [`FakeClock::outside`]).
    dropped: Rc<RefCell<Vec<Vec<u8>>>>,
}

/// A response body on the platform's side, as the worker's is (a JS `ArrayBuffer`, see
/// `FetchTransport`): the code copies it in when it asks for its bytes, and dropping it frees
/// nothing in the code's time — the garbage collector frees an `ArrayBuffer` later, whereas a
/// native 1 MiB `Vec` is returned to the kernel (`munmap`) at once: CPU that a deployed-clock
/// span would count although the worker never spends it (it was what made `kv`'s read after
/// `upstash`'s 1 MiB hit hold most of a millisecond).
struct ServerBody {
    bytes: Vec<u8>,
    dropped: Rc<RefCell<Vec<Vec<u8>>>>,
}

impl kvbench_core::stores::http::OutsideBody for ServerBody {
    fn copy_in(&self) -> Vec<u8> {
        self.bytes.clone()
    }

    fn copy_range(&self, start: usize, end: usize) -> Vec<u8> {
        self.bytes.get(start..end).unwrap_or_default().to_vec()
    }
}

impl Drop for ServerBody {
    fn drop(&mut self) {
        self.dropped
            .borrow_mut()
            .push(std::mem::take(&mut self.bytes));
    }
}

/// CPU time this thread has used, ms (preemption by other processes does not count).
pub fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the pointer it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 * 1000.0 + ts.tv_nsec as f64 / 1e6
}

impl FakeClock {
    /// The deployed-worker model (see the type's documentation).
    pub fn deployed() -> FakeClock {
        let clock = FakeClock::default();
        clock.deployed.set(true);
        clock.cpu_origin_ms.set(thread_cpu_ms());
        clock
    }

    /// An I/O of `ms` completed (or, for the plain fake, time moved on by `ms`).
    pub fn advance(&self, ms: f64) {
        if self.deployed.get() {
            self.io_ms.set(self.io_ms.get() + ms);
            self.sync();
        } else {
            self.now.set(self.now.get() + ms);
        }
    }

    /// Runs a mock server's own work: on the deployed model its CPU is not the worker's, so it
    /// is taken out of the hidden real time (the scripted latency stands for the server).
    pub fn server<T>(&self, work: impl FnOnce() -> T) -> T {
        let before = thread_cpu_ms();
        // What the garbage collector would free, freed here, in the server's time.
        self.dropped.borrow_mut().clear();
        let out = work();
        if self.deployed.get() {
            self.io_ms
                .set(self.io_ms.get() - (thread_cpu_ms() - before));
        }
        out
    }

    /// `response` as the worker's transport returns it: its body still on the platform's side
    /// (see [`ServerBody`]). Converted in the server's time.
    pub fn outside(&self, response: HttpResponse) -> HttpResponse {
        self.server(move || {
            let bytes = response.body.to_vec();
            let status = response.status;
            // The native copy is freed here, in the server's time.
            drop(response);
            HttpResponse {
                status,
                body: kvbench_core::stores::http::Body::outside(
                    bytes.len(),
                    Box::new(ServerBody {
                        bytes,
                        dropped: self.dropped.clone(),
                    }),
                ),
            }
        })
    }

    /// Control enters the isolate (a request arrives): the deployed clock catches up with the
    /// hidden real time. No-op for the plain fake.
    pub fn sync(&self) {
        if self.deployed.get() {
            let cpu = thread_cpu_ms() - self.cpu_origin_ms.get();
            self.now.set(cpu + self.io_ms.get());
        }
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
        // Yield until a round passes in which nothing else moved the clock, so that a store
        // future that is ready wins the race, as with a real timer (a timer armed earlier and
        // polled again while a later call runs fires only once that call stands still); then
        // move the clock to when the timer was due (not at all if that is past) and yield again,
        // so a store call that completes at that time (a `Fault::Late` one) is seen to, before
        // the timer fires.
        let due = self.0.now_ms() + ms as f64;
        loop {
            let seen = self.0.now_ms();
            yield_once().await;
            if self.0.now_ms() == seen {
                break;
            }
        }
        let left = due - self.0.now_ms();
        if left > 0.0 {
            self.0.advance(left);
        }
        yield_once().await;
    }
}

async fn yield_once() {
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
    type Prepared = MockValue;

    async fn get(&self, key: &str, options: &Options) -> Result<Fetched, StoreError> {
        self.ops.borrow_mut().push(Op::Get {
            key: key.into(),
            cache_ttl_s: options.cache_ttl_s,
        });
        match self.fault.get() {
            Fault::Hang => futures::future::pending::<()>().await,
            Fault::Fail(kind) => return Err(StoreError::new(kind, "injected")),
            late @ Fault::Late(_) => late.late(self.clock).await,
            _ => {}
        }
        let found = self
            .clock
            .server(|| self.data.borrow().get(key).map(|v| v.len() as u64));
        self.clock.advance(self.latency_ms);
        Ok(match found {
            None => Fetched::Miss,
            Some(len) => Fetched::Hit(Deferred::ready(len)),
        })
    }

    /// The value's bytes, as a binding's glue takes them: one copy per value, kept with it
    /// and shared by every store ([`MockValue`]).
    fn prepare(
        &self,
        _key: &str,
        value: &kvbench_core::Value,
        _ttl_s: u32,
    ) -> Result<MockValue, StoreError> {
        Ok(MockValue::of(value))
    }

    async fn put(
        &self,
        key: &str,
        ttl_s: u32,
        value: MockValue,
        _options: &Options,
    ) -> Result<(), StoreError> {
        self.ops.borrow_mut().push(Op::Put {
            key: key.into(),
            len: value.len(),
            ttl_s,
        });
        match self.fault.get() {
            Fault::Hang => futures::future::pending::<()>().await,
            Fault::Fail(kind) => return Err(StoreError::new(kind, "injected")),
            Fault::FailWrites => return Err(StoreError::new(ErrorKind::Runtime, "KV put failed")),
            late @ Fault::Late(_) => late.late(self.clock).await,
            Fault::None => {}
        }
        if ttl_s < 60 {
            return Err(StoreError::new(
                ErrorKind::Http,
                "400 Invalid expiration_ttl",
            ));
        }
        self.clock
            .server(|| self.data.borrow_mut().insert(key.into(), value.to_vec()));
        self.clock.advance(self.latency_ms);
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
/// A Redis database's strings, shareable by the REST and the TCP mock (one database behind
/// both, as when `upstash` and `redis` point at the same Upstash database).
pub type RedisDb = Rc<RefCell<HashMap<String, String>>>;

pub struct MockUpstash<'a> {
    pub clock: &'a FakeClock,
    pub latency_ms: f64,
    pub token: String,
    pub data: RedisDb,
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
            data: RedisDb::default(),
            requests: RefCell::default(),
            commands: RefCell::default(),
            script: RefCell::default(),
            hang: Cell::new(false),
        }
    }

    fn execute(&self, request: &HttpRequest) -> HttpResponse {
        let auth = request
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| v.as_str());
        if auth != Some(format!("Bearer {}", self.token).as_str()) {
            return json_reply(401, json!({"error": "Unauthorized"}));
        }
        let Some(args) = upstash_args(request) else {
            return json_reply(400, json!({"error": "ERR failed to parse command"}));
        };
        self.commands.borrow_mut().push(Value::Array(args.clone()));
        self.command(request, &args)
    }

    /// One command's reply: GET (base64 when asked) and SET … EX; anything else is unknown.
    fn command(&self, request: &HttpRequest, args: &[Value]) -> HttpResponse {
        let s = |i: usize| args.get(i).and_then(Value::as_str).map(str::to_string);
        let name = s(0).map(|n| n.to_ascii_uppercase());
        match name.as_deref() {
            Some("GET") => {
                let value = s(1).and_then(|k| self.data.borrow().get(&k).cloned());
                let base64 = header(request, "upstash-encoding") == Some("base64");
                let value = value.map(|v| {
                    if base64 {
                        base64_encode(v.as_bytes())
                    } else {
                        v
                    }
                });
                json_reply(200, json!({ "result": value }))
            }
            Some("SET") => match (
                s(1),
                s(2),
                s(3).as_deref(),
                args.get(4)
                    .and_then(|t| t.as_u64().or(t.as_str()?.parse().ok())),
            ) {
                (Some(k), Some(v), Some("EX"), Some(ttl)) if ttl > 0 => {
                    self.data.borrow_mut().insert(k, v);
                    json_reply(200, json!({"result": "OK"}))
                }
                _ => json_reply(400, json!({"error": "ERR syntax error"})),
            },
            _ => json_reply(400, json!({"error": "ERR unknown command"})),
        }
    }
}

fn json_reply(status: u16, body: Value) -> HttpResponse {
    HttpResponse {
        status,
        body: body.to_string().into_bytes().into(),
    }
}

/// A request's command: the JSON command array, or the path form — `/cmd/arg…`, the raw body
/// appended as the last argument, then the query's pairs (Upstash's REST API). `None` when the
/// body is no command array.
fn upstash_args(request: &HttpRequest) -> Option<Vec<Value>> {
    let path = request
        .url
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('/'))
        .map(|(_, path)| path);
    let Some(path) = path.filter(|p| !p.is_empty()) else {
        return match serde_json::from_slice::<Value>(&request.body) {
            Ok(Value::Array(args)) => Some(args),
            _ => None,
        };
    };
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let decode = |s: &str| {
        Value::String(
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned(),
        )
    };
    let mut args: Vec<Value> = path.split('/').map(decode).collect();
    if !request.body.is_empty() {
        args.push(Value::String(
            String::from_utf8_lossy(&request.body).into_owned(),
        ));
    }
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        args.push(decode(k));
        if !v.is_empty() {
            args.push(decode(v));
        }
    }
    Some(args)
}

#[async_trait(?Send)]
impl HttpTransport for &MockUpstash<'_> {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, StoreError> {
        self.clock
            .server(|| self.requests.borrow_mut().push(request.clone()));
        if self.hang.get() {
            futures::future::pending::<()>().await;
        }
        let response = self.clock.server(|| match self.script.borrow().clone() {
            Some(s) => HttpResponse {
                status: s.status,
                body: s.body.into_bytes().into(),
            },
            None => self.execute(&request),
        });
        let response = self.clock.outside(response);
        self.clock.advance(self.latency_ms);
        // The request (its body a prepared JS copy in the worker) is freed by the server too.
        self.clock.server(|| drop(request));
        Ok(response)
    }
}

/// A stored Deno KV entry by encoded key: (value, encoding, expire_at_ms).
pub type DenoEntry = (Vec<u8>, i32, i64);

/// A KV Connect server (Deno KV) behind the transport seam: the metadata exchange at
/// [`MockDenoKv::URL`] issues numbered short-lived tokens, `/v2/snapshot_read` and
/// `/v2/atomic_write` speak the protobuf data path over an in-memory map that honours
/// `expire_at_ms`. Scripted responses, when queued, answer instead, one per request.
pub struct MockDenoKv<'a> {
    pub clock: &'a FakeClock,
    pub latency_ms: f64,
    pub access_token: String,
    /// Lifetime of each issued data-path token.
    pub token_lifetime_ms: f64,
    /// Protocol version the metadata exchange picks.
    pub version: u32,
    pub data: RefCell<HashMap<Vec<u8>, DenoEntry>>,
    pub requests: RefCell<Vec<HttpRequest>>,
    pub script: RefCell<VecDeque<HttpResponse>>,
    /// Issued data-path tokens with their expiry.
    pub tokens: RefCell<Vec<(String, f64)>>,
    pub hang: Cell<bool>,
}

impl<'a> MockDenoKv<'a> {
    pub const URL: &'static str = "http://denokv.mock:4512";
    pub const DATABASE_ID: &'static str = "00000000-0000-0000-0000-000000000000";

    pub fn new(clock: &'a FakeClock, latency_ms: f64, access_token: &str) -> Self {
        Self {
            clock,
            latency_ms,
            access_token: access_token.into(),
            token_lifetime_ms: 3_600_000.0,
            version: 3,
            data: RefCell::default(),
            requests: RefCell::default(),
            script: RefCell::default(),
            tokens: RefCell::default(),
            hang: Cell::new(false),
        }
    }

    /// Queues a scripted answer for the next request.
    pub fn push_script(&self, status: u16, body: impl Into<Vec<u8>>) {
        self.script.borrow_mut().push_back(HttpResponse {
            status,
            body: body.into().into(),
        });
    }

    /// How many metadata exchanges reached the server.
    pub fn exchanges(&self) -> usize {
        self.requests
            .borrow()
            .iter()
            .filter(|r| r.url == Self::URL)
            .count()
    }

    /// The data-path requests to `op` (`snapshot_read`, `atomic_write`).
    pub fn data_requests(&self, op: &str) -> Vec<HttpRequest> {
        self.requests
            .borrow()
            .iter()
            .filter(|r| r.url.ends_with(&format!("/{op}")))
            .cloned()
            .collect()
    }

    fn execute(&self, request: &HttpRequest) -> HttpResponse {
        let bearer = header(request, "authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default()
            .to_string();
        let now = self.clock.now.get();
        if request.url == Self::URL {
            return self.metadata(request, &bearer, now);
        }
        let valid = self
            .tokens
            .borrow()
            .iter()
            .any(|(t, exp)| *t == bearer && now < *exp);
        if !valid {
            return text_reply(401, "Invalid access token.");
        }
        let version_ok = if self.version >= 2 {
            header(request, "x-denokv-version") == Some(&self.version.to_string())
                && header(request, "x-denokv-database-id") == Some(Self::DATABASE_ID)
        } else {
            header(request, "x-transaction-domain-id") == Some(Self::DATABASE_ID)
        };
        if !version_ok || header(request, "content-type") != Some("application/x-protobuf") {
            return text_reply(400, "Expected protocol version 2.");
        }
        if request.url == format!("{}/v2/snapshot_read", Self::URL) {
            return self.snapshot_read(request, now);
        }
        if request.url == format!("{}/v2/atomic_write", Self::URL) {
            return self.atomic_write(request);
        }
        text_reply(404, "Resource not found.")
    }

    /// The metadata exchange: a data token for the access token, at a protocol version both
    /// speak.
    fn metadata(&self, request: &HttpRequest, bearer: &str, now: f64) -> HttpResponse {
        if bearer != self.access_token {
            return text_reply(401, "Invalid access token.");
        }
        let versions: Vec<u32> = serde_json::from_slice::<Value>(&request.body)
            .ok()
            .and_then(|v| serde_json::from_value(v["supportedVersions"].clone()).ok())
            .unwrap_or_default();
        if !versions.contains(&self.version) {
            return text_reply(400, "The server could not negotiate a protocol version.");
        }
        let token = format!("data-token-{}", self.tokens.borrow().len() + 1);
        let expires = now + self.token_lifetime_ms;
        self.tokens.borrow_mut().push((token.clone(), expires));
        let body = json!({
            "version": self.version,
            "databaseId": Self::DATABASE_ID,
            "endpoints": [{"url": "/v2", "consistency": "strong"}],
            "token": token,
            "expiresAt": rfc3339(expires),
        });
        text_reply(200, &body.to_string())
    }

    /// Each range's live entries in key order, up to its limit.
    fn snapshot_read(&self, request: &HttpRequest, now: f64) -> HttpResponse {
        let Ok(read) = proto::SnapshotRead::decode(request.body.as_slice()) else {
            return text_reply(400, "Request protobuf is invalid.");
        };
        let data = self.data.borrow();
        let ranges = read
            .ranges
            .iter()
            .map(|r| {
                let mut values: Vec<proto::KvEntry> = data
                    .iter()
                    .filter(|(k, (_, _, exp))| {
                        **k >= r.start && **k < r.end && (*exp <= 0 || (*exp as f64) > now)
                    })
                    .map(|(k, (v, enc, _))| proto::KvEntry {
                        key: k.clone(),
                        value: v.clone(),
                        encoding: *enc,
                        versionstamp: vec![0; 10],
                    })
                    .collect();
                values.sort_by(|a, b| a.key.cmp(&b.key));
                values.truncate(r.limit.max(0) as usize);
                proto::ReadRangeOutput { values }
            })
            .collect();
        let out = proto::SnapshotReadOutput {
            ranges,
            read_disabled: false,
            read_is_strongly_consistent: true,
            status: proto::SnapshotReadStatus::SrSuccess as i32,
        };
        proto_reply(out.encode_to_vec())
    }

    /// Sets only, each value at most 64 KiB.
    fn atomic_write(&self, request: &HttpRequest) -> HttpResponse {
        let Ok(write) = proto::AtomicWrite::decode(request.body.as_slice()) else {
            return text_reply(400, "Request protobuf is invalid.");
        };
        for m in &write.mutations {
            let value = m.value.clone().unwrap_or_default();
            if value.data.len() > 65_536 {
                return text_reply(400, "A value exceeds the value size limit.");
            }
            if m.mutation_type != proto::MutationType::MSet as i32 {
                return text_reply(400, "Invalid mutation kind or arguments.");
            }
            self.data
                .borrow_mut()
                .insert(m.key.clone(), (value.data, value.encoding, m.expire_at_ms));
        }
        let out = proto::AtomicWriteOutput {
            status: proto::AtomicWriteStatus::AwSuccess as i32,
            versionstamp: vec![0, 0, 0, 0, 0, 0, 0, 1, 0, 0],
            failed_checks: vec![],
        };
        proto_reply(out.encode_to_vec())
    }
}

fn text_reply(status: u16, body: &str) -> HttpResponse {
    HttpResponse {
        status,
        body: body.as_bytes().to_vec().into(),
    }
}

fn proto_reply(body: Vec<u8>) -> HttpResponse {
    HttpResponse {
        status: 200,
        body: body.into(),
    }
}

/// Standard base64 with padding (what Upstash sends with `Upstash-Encoding: base64`).
pub fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn header<'r>(request: &'r HttpRequest, name: &str) -> Option<&'r str> {
    request
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

#[async_trait(?Send)]
impl HttpTransport for &MockDenoKv<'_> {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, StoreError> {
        self.clock
            .server(|| self.requests.borrow_mut().push(request.clone()));
        if self.hang.get() {
            futures::future::pending::<()>().await;
        }
        // The server answers as of the end of the latency (token expiries are checked then).
        self.clock.advance(self.latency_ms);
        let response = self.clock.server(|| {
            self.script
                .borrow_mut()
                .pop_front()
                .unwrap_or_else(|| self.execute(&request))
        });
        let response = self.clock.outside(response);
        self.clock.server(|| drop(request));
        Ok(response)
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of epoch milliseconds (civil-from-days, proleptic Gregorian).
pub fn rfc3339(ms: f64) -> String {
    let ms = ms.floor() as i64;
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// One call to a [`MockBinding`], with the per-request options that reached the binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingCall {
    pub put: bool,
    /// The key as the store saw it (its namespace included).
    pub key: String,
    /// Bytes written (0 for a read).
    pub len: usize,
    pub ttl_s: u32,
    /// `do`: the object the call went to, and the location hint it carried.
    pub object: Option<String>,
    pub location: Option<LocationHint>,
    /// `d1`: the Sessions API constraint the query ran under.
    pub session: Option<D1Session>,
}

/// The `do`, `d1`, `r2` and `cache` bindings in memory, each with the rules of its store's
/// description (key and value limits, shortest TTL) and its way of expiring: a row or object
/// past its expiry is a miss and is overwritten, a cache entry past its max-age is gone.
pub struct MockBinding<'a> {
    pub id: StoreId,
    pub clock: &'a FakeClock,
    pub latency_ms: f64,
    /// Store key → (value, expiry in ms of the fake clock).
    pub data: RefCell<HashMap<String, (Vec<u8>, f64)>>,
    pub calls: RefCell<Vec<BindingCall>>,
    pub fault: Cell<Fault>,
}

impl<'a> MockBinding<'a> {
    pub fn new(id: StoreId, clock: &'a FakeClock, latency_ms: f64) -> Self {
        assert!(
            matches!(id, StoreId::Do | StoreId::D1 | StoreId::R2 | StoreId::Cache),
            "{id:?} has its own mock"
        );
        Self {
            id,
            clock,
            latency_ms,
            data: RefCell::default(),
            calls: RefCell::default(),
            fault: Cell::default(),
        }
    }

    fn record(&self, put: bool, key: &str, len: usize, ttl_s: u32, options: &Options) {
        let is_do = self.id == StoreId::Do;
        self.calls.borrow_mut().push(BindingCall {
            put,
            key: key.into(),
            len,
            ttl_s,
            object: is_do.then(|| options.object_name(key)),
            location: options.do_location.filter(|_| is_do),
            session: options.d1_session.filter(|_| self.id == StoreId::D1),
        });
    }

    /// Errors the real binding raises for a call outside the store's limits.
    fn check(&self, key: &str, len: usize, ttl_s: u32) -> Result<(), StoreError> {
        let spec = self.id.spec();
        if spec
            .key_max_bytes
            .is_some_and(|max| key.len() > max as usize)
        {
            return Err(StoreError::new(ErrorKind::Http, "key too long"));
        }
        if spec.value_max_bytes.is_some_and(|max| len as u64 > max) {
            return Err(StoreError::new(ErrorKind::Http, "value too large"));
        }
        if ttl_s < spec.ttl_min_s {
            return Err(StoreError::new(ErrorKind::Http, "ttl too short"));
        }
        Ok(())
    }

    /// Where a key's value lives: a Durable Object's rows are its object's (`object/key`), the
    /// key alone for the key's own object (what the tests read back).
    fn slot(&self, key: &str, options: &Options) -> String {
        let object = options.object_name(key);
        if self.id == StoreId::Do && object != key {
            format!("{object}/{key}")
        } else {
            key.to_string()
        }
    }

    /// The scope a `do_scope=shared` read reaches, by object.
    pub fn objects(&self) -> Vec<String> {
        let mut objects: Vec<String> = self
            .calls
            .borrow()
            .iter()
            .filter_map(|c| c.object.clone())
            .collect();
        objects.sort();
        objects.dedup();
        objects
    }
}

#[async_trait(?Send)]
impl Store for MockBinding<'_> {
    type Prepared = MockValue;

    async fn get(&self, key: &str, options: &Options) -> Result<Fetched, StoreError> {
        self.record(false, key, 0, 0, options);
        match self.fault.get() {
            Fault::Hang => futures::future::pending::<()>().await,
            Fault::Fail(kind) => return Err(StoreError::new(kind, "injected")),
            _ => {}
        }
        let now = self.clock.now.get();
        let slot = self.slot(key, options);
        let found = self.clock.server(|| {
            self.data
                .borrow()
                .get(&slot)
                .filter(|(_, expires)| *expires > now)
                .map(|(v, _)| v.len() as u64)
        });
        self.clock.advance(self.latency_ms);
        Ok(match found {
            None => Fetched::Miss,
            // D1's glue sizes its text after the spans; the mock takes the same path.
            Some(len) if self.id == StoreId::D1 => Fetched::Hit(Deferred::later(move || Ok(len))),
            Some(len) => Fetched::Hit(Deferred::ready(len)),
        })
    }

    /// The value's bytes, as a binding's glue takes them: one copy per value, kept with it
    /// and shared by every store ([`MockValue`]).
    fn prepare(
        &self,
        _key: &str,
        value: &kvbench_core::Value,
        _ttl_s: u32,
    ) -> Result<MockValue, StoreError> {
        Ok(MockValue::of(value))
    }

    async fn put(
        &self,
        key: &str,
        ttl_s: u32,
        value: MockValue,
        options: &Options,
    ) -> Result<(), StoreError> {
        self.record(true, key, value.len(), ttl_s, options);
        match self.fault.get() {
            Fault::Hang => futures::future::pending::<()>().await,
            Fault::Fail(kind) => return Err(StoreError::new(kind, "injected")),
            Fault::FailWrites => return Err(StoreError::new(ErrorKind::Runtime, "put failed")),
            late @ Fault::Late(_) => late.late(self.clock).await,
            Fault::None => {}
        }
        self.check(key, value.len(), ttl_s)?;
        let expires = self.clock.now.get() + f64::from(ttl_s) * 1000.0;
        let slot = self.slot(key, options);
        self.clock.server(|| {
            self.data
                .borrow_mut()
                .insert(slot, (value.to_vec(), expires))
        });
        self.clock.advance(self.latency_ms);
        Ok(())
    }
}

/// A Redis server behind the socket seam: RESP commands `AUTH`, `SELECT`, `GET` and
/// `SET … EX` on a [`RedisDb`] with expiry, a password when set, and scripted faults. Each
/// connection costs `connect_ms`, each command `latency_ms`.
pub struct MockRedis<'a> {
    pub clock: &'a FakeClock,
    pub connect_ms: f64,
    pub latency_ms: f64,
    pub password: Option<String>,
    pub data: RedisDb,
    pub expiry: RefCell<HashMap<String, f64>>,
    /// Every command, a long argument shown as `<N bytes>`.
    pub commands: RefCell<Vec<Vec<String>>>,
    /// Every connection asked for: (host, port, tls).
    pub connects: RefCell<Vec<(String, u16, bool)>>,
    pub closed: Cell<usize>,
    /// Connecting fails (nothing listens).
    pub refuse: Cell<bool>,
    /// The server accepts connections but never answers a command.
    pub hang: Cell<bool>,
    /// Replies with these bytes instead of executing any command but `AUTH`.
    pub reply: RefCell<Option<Vec<u8>>>,
}

impl<'a> MockRedis<'a> {
    pub fn new(clock: &'a FakeClock, connect_ms: f64, latency_ms: f64) -> Self {
        Self {
            clock,
            connect_ms,
            latency_ms,
            password: None,
            data: RedisDb::default(),
            expiry: RefCell::default(),
            commands: RefCell::default(),
            connects: RefCell::default(),
            closed: Cell::new(0),
            refuse: Cell::new(false),
            hang: Cell::new(false),
            reply: RefCell::default(),
        }
    }

    /// Commands by name, e.g. how many `AUTH`s arrived.
    pub fn count(&self, name: &str) -> usize {
        self.commands
            .borrow()
            .iter()
            .filter(|c| c[0].eq_ignore_ascii_case(name))
            .count()
    }

    fn execute(&self, args: &[Vec<u8>], authed: &mut bool) -> Vec<u8> {
        let text = |i: usize| String::from_utf8_lossy(&args[i]).into_owned();
        self.commands.borrow_mut().push(
            args.iter()
                .map(|a| {
                    if a.len() > 64 {
                        format!("<{} bytes>", a.len())
                    } else {
                        String::from_utf8_lossy(a).into_owned()
                    }
                })
                .collect(),
        );
        let name = text(0).to_ascii_uppercase();
        if name == "AUTH" {
            let given = text(args.len() - 1);
            return if self.password.as_deref() == Some(given.as_str()) {
                *authed = true;
                b"+OK\r\n".to_vec()
            } else if self.password.is_none() {
                b"-ERR AUTH <password> called without any password configured for the default user\r\n".to_vec()
            } else {
                b"-WRONGPASS invalid username-password pair or user is disabled.\r\n".to_vec()
            };
        }
        if !*authed {
            return b"-NOAUTH Authentication required.\r\n".to_vec();
        }
        if let Some(reply) = self.reply.borrow().clone() {
            return reply;
        }
        let now = self.clock.now.get();
        match (name.as_str(), args.len()) {
            ("SELECT", 2) => b"+OK\r\n".to_vec(),
            ("GET", 2) => {
                let key = text(1);
                if self.expiry.borrow().get(&key).is_some_and(|at| *at <= now) {
                    self.data.borrow_mut().remove(&key);
                    self.expiry.borrow_mut().remove(&key);
                }
                match self.data.borrow().get(&key) {
                    None => b"$-1\r\n".to_vec(),
                    Some(v) => {
                        let mut out = format!("${}\r\n", v.len()).into_bytes();
                        out.extend_from_slice(v.as_bytes());
                        out.extend_from_slice(b"\r\n");
                        out
                    }
                }
            }
            ("SET", 5) if text(3).eq_ignore_ascii_case("EX") => {
                let Ok(ttl) = text(4).parse::<u32>() else {
                    return b"-ERR value is not an integer or out of range\r\n".to_vec();
                };
                let key = text(1);
                self.data
                    .borrow_mut()
                    .insert(key.clone(), String::from_utf8_lossy(&args[2]).into_owned());
                self.expiry
                    .borrow_mut()
                    .insert(key, now + f64::from(ttl) * 1000.0);
                b"+OK\r\n".to_vec()
            }
            _ => b"-ERR unknown command or wrong number of arguments\r\n".to_vec(),
        }
    }
}

/// One connection to a [`MockRedis`].
pub struct MockRedisConn<'a> {
    server: &'a MockRedis<'a>,
    inbox: Vec<u8>,
    outbox: VecDeque<u8>,
    authed: bool,
}

/// Splits one complete RESP array of bulk strings off the front of `buf`.
fn take_command(buf: &mut Vec<u8>) -> Option<Vec<Vec<u8>>> {
    fn line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
        let end = buf[at..].windows(2).position(|w| w == b"\r\n")? + at;
        Some((&buf[at..end], end + 2))
    }
    let (head, mut at) = line(buf, 0)?;
    let n: usize = std::str::from_utf8(head.strip_prefix(b"*")?)
        .ok()?
        .parse()
        .ok()?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        let (len, next) = line(buf, at)?;
        let len: usize = std::str::from_utf8(len.strip_prefix(b"$")?)
            .ok()?
            .parse()
            .ok()?;
        if buf.len() < next + len + 2 {
            return None;
        }
        args.push(buf[next..next + len].to_vec());
        at = next + len + 2;
    }
    buf.drain(..at);
    Some(args)
}

#[async_trait(?Send)]
impl<'a> Connector for &'a MockRedis<'a> {
    type Conn = MockRedisConn<'a>;

    async fn connect(
        &self,
        host: &str,
        port: u16,
        tls: bool,
    ) -> Result<MockRedisConn<'a>, StoreError> {
        self.clock
            .server(|| self.connects.borrow_mut().push((host.into(), port, tls)));
        self.clock.advance(self.connect_ms);
        if self.refuse.get() {
            return Err(StoreError::new(
                ErrorKind::Runtime,
                "connect: Connection refused",
            ));
        }
        Ok(MockRedisConn {
            server: self,
            inbox: Vec::new(),
            outbox: VecDeque::new(),
            authed: self.password.is_none(),
        })
    }
}

#[async_trait(?Send)]
impl Connection for MockRedisConn<'_> {
    async fn write_all(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        let server = self.server;
        let executed = server.clock.server(|| {
            self.inbox.extend_from_slice(bytes);
            let mut executed = 0;
            while let Some(args) = take_command(&mut self.inbox) {
                if server.hang.get() && !args[0].eq_ignore_ascii_case(b"AUTH") {
                    continue;
                }
                let reply = server.execute(&args, &mut self.authed);
                self.outbox.extend(reply);
                executed += 1;
            }
            executed
        });
        if executed > 0 {
            server.clock.advance(server.latency_ms);
        }
        Ok(())
    }

    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, StoreError> {
        if self.outbox.is_empty() {
            if self.server.hang.get() {
                futures::future::pending::<()>().await;
            }
            return Ok(0);
        }
        // Delivering the bytes is the network's work, not the worker's.
        let n = buf.len().min(self.outbox.len());
        self.server.clock.server(|| {
            for (b, v) in buf.iter_mut().zip(self.outbox.drain(..n)) {
                *b = v;
            }
        });
        Ok(n)
    }

    async fn close(&mut self) {
        self.server.closed.set(self.server.closed.get() + 1);
    }
}

/// A PostgreSQL server behind the socket seam, as far as the `postgres` store speaks to it:
/// the startup (with a cleartext password when `password` is set), and the extended protocol's
/// Parse, Bind, Execute, Sync of the store's read (`SELECT`) and write (the upsert), executed
/// against `data` with expiry on the fake clock. One round trip (`latency_ms`) per `Sync`.
pub struct MockPostgres<'a> {
    pub clock: &'a FakeClock,
    pub connect_ms: f64,
    pub latency_ms: f64,
    pub password: Option<String>,
    /// Key → (value, expiry on the fake clock, ms).
    pub data: RefCell<HashMap<String, (Vec<u8>, f64)>>,
    /// Every statement executed: `read <key>` or `write <key> <bytes> <ttl>`.
    pub statements: RefCell<Vec<String>>,
    /// Every connection asked for: (host, port).
    pub connects: RefCell<Vec<(String, u16)>>,
    pub closed: Cell<usize>,
}

impl<'a> MockPostgres<'a> {
    pub fn new(clock: &'a FakeClock, connect_ms: f64, latency_ms: f64) -> Self {
        Self {
            clock,
            connect_ms,
            latency_ms,
            password: None,
            data: RefCell::default(),
            statements: RefCell::default(),
            connects: RefCell::default(),
            closed: Cell::new(0),
        }
    }
}

/// One connection to a [`MockPostgres`].
pub struct MockPostgresConn<'a> {
    server: &'a MockPostgres<'a>,
    inbox: Vec<u8>,
    outbox: VecDeque<u8>,
    started: bool,
    sql: String,
    params: Vec<Vec<u8>>,
}

fn pg_message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn pg_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn pg_u16(b: &[u8], at: usize) -> usize {
    u16::from_be_bytes([b[at], b[at + 1]]) as usize
}

/// A NUL-terminated string at `at`, and the offset after it.
fn pg_cstr(b: &[u8], at: usize) -> (String, usize) {
    let end = at + b[at..].iter().position(|c| *c == 0).unwrap();
    (String::from_utf8_lossy(&b[at..end]).into_owned(), end + 1)
}

impl MockPostgresConn<'_> {
    /// Handles every whole message in the inbox; true when a round trip ended (Sync, startup).
    fn handle(&mut self) -> bool {
        let mut round_trip = false;
        loop {
            if !self.started {
                if self.inbox.len() < 4 || self.inbox.len() < pg_u32(&self.inbox, 0) as usize {
                    return round_trip;
                }
                let len = pg_u32(&self.inbox, 0) as usize;
                self.inbox.drain(..len);
                self.started = true;
                if self.server.password.is_some() {
                    self.outbox.extend(pg_message(b'R', &3u32.to_be_bytes()));
                } else {
                    self.outbox.extend(pg_message(b'R', &0u32.to_be_bytes()));
                    self.outbox.extend(pg_message(b'Z', b"I"));
                }
                round_trip = true;
                continue;
            }
            if self.inbox.len() < 5 || self.inbox.len() < 1 + pg_u32(&self.inbox, 1) as usize {
                return round_trip;
            }
            let len = pg_u32(&self.inbox, 1) as usize;
            let message: Vec<u8> = self.inbox.drain(..1 + len).collect();
            let (tag, body) = (message[0], &message[5..]);
            match tag {
                b'p' => {
                    let (given, _) = pg_cstr(body, 0);
                    if self.server.password.as_deref() == Some(given.as_str()) {
                        self.outbox.extend(pg_message(b'R', &0u32.to_be_bytes()));
                        self.outbox.extend(pg_message(b'Z', b"I"));
                    } else {
                        self.outbox.extend(pg_message(
                            b'E',
                            b"SFATAL\0C28P01\0Mpassword authentication failed\0\0",
                        ));
                    }
                    round_trip = true;
                }
                b'P' => {
                    let (_, at) = pg_cstr(body, 0);
                    self.sql = pg_cstr(body, at).0;
                    self.outbox.extend(pg_message(b'1', b""));
                }
                b'B' => {
                    let (_, at) = pg_cstr(body, 0);
                    let (_, mut at) = pg_cstr(body, at);
                    at += 2 + 2 * pg_u16(body, at);
                    let n = pg_u16(body, at);
                    at += 2;
                    self.params.clear();
                    for _ in 0..n {
                        let len = pg_u32(body, at) as usize;
                        self.params.push(body[at + 4..at + 4 + len].to_vec());
                        at += 4 + len;
                    }
                    self.outbox.extend(pg_message(b'2', b""));
                }
                b'E' => {
                    let out = self.execute();
                    self.outbox.extend(out);
                }
                b'S' => {
                    self.outbox.extend(pg_message(b'Z', b"I"));
                    round_trip = true;
                }
                _ => {}
            }
        }
    }

    fn execute(&self) -> Vec<u8> {
        let server = self.server;
        let key = String::from_utf8_lossy(&self.params[0]).into_owned();
        let now = server.clock.now.get();
        if self.sql.starts_with("SELECT") {
            server.statements.borrow_mut().push(format!("read {key}"));
            let data = server.data.borrow();
            match data.get(&key).filter(|(_, at)| *at > now) {
                Some((v, _)) => {
                    let mut row = 1u16.to_be_bytes().to_vec();
                    row.extend_from_slice(&(v.len() as u32).to_be_bytes());
                    row.extend_from_slice(v);
                    let mut out = pg_message(b'D', &row);
                    out.extend(pg_message(b'C', b"SELECT 1\0"));
                    out
                }
                None => pg_message(b'C', b"SELECT 0\0"),
            }
        } else {
            let ttl = f64::from_be_bytes(self.params[2].as_slice().try_into().unwrap());
            server
                .statements
                .borrow_mut()
                .push(format!("write {key} {} {ttl}", self.params[1].len()));
            server
                .data
                .borrow_mut()
                .insert(key, (self.params[1].clone(), now + ttl * 1000.0));
            pg_message(b'C', b"INSERT 0 1\0")
        }
    }
}

#[async_trait(?Send)]
impl<'a> Connector for &'a MockPostgres<'a> {
    type Conn = MockPostgresConn<'a>;

    async fn connect(
        &self,
        host: &str,
        port: u16,
        _tls: bool,
    ) -> Result<MockPostgresConn<'a>, StoreError> {
        self.clock
            .server(|| self.connects.borrow_mut().push((host.into(), port)));
        self.clock.advance(self.connect_ms);
        Ok(MockPostgresConn {
            server: self,
            inbox: Vec::new(),
            outbox: VecDeque::new(),
            started: false,
            sql: String::new(),
            params: Vec::new(),
        })
    }
}

#[async_trait(?Send)]
impl Connection for MockPostgresConn<'_> {
    async fn write_all(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        let server = self.server;
        let round_trip = server.clock.server(|| {
            self.inbox.extend_from_slice(bytes);
            self.handle()
        });
        if round_trip {
            server.clock.advance(server.latency_ms);
        }
        Ok(())
    }

    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, StoreError> {
        if self.outbox.is_empty() {
            return Ok(0);
        }
        let n = buf.len().min(self.outbox.len());
        self.server.clock.server(|| {
            for (b, v) in buf.iter_mut().zip(self.outbox.drain(..n)) {
                *b = v;
            }
        });
        Ok(n)
    }

    async fn close(&mut self) {
        self.server.closed.set(self.server.closed.get() + 1);
    }
}

/// Blocking loopback TCP behind the socket seam, for tests against real servers driven by
/// `block_on` (`redis_server.rs`, `postgres_server.rs`): plain TCP only, reads give up after 20 s.
pub struct Tcp;

/// One [`Tcp`] connection.
pub struct TcpConn(std::net::TcpStream);

#[async_trait(?Send)]
impl Connector for Tcp {
    type Conn = TcpConn;

    async fn connect(&self, host: &str, port: u16, tls: bool) -> Result<TcpConn, StoreError> {
        assert!(!tls, "this test speaks plain TCP");
        let s = std::net::TcpStream::connect((host, port))
            .map_err(|e| StoreError::new(ErrorKind::Runtime, format!("connect: {e}")))?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .map_err(|e| StoreError::new(ErrorKind::Runtime, e.to_string()))?;
        Ok(TcpConn(s))
    }
}

#[async_trait(?Send)]
impl Connection for TcpConn {
    async fn write_all(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        std::io::Write::write_all(&mut self.0, bytes)
            .map_err(|e| StoreError::new(ErrorKind::Runtime, e.to_string()))
    }
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, StoreError> {
        std::io::Read::read(&mut self.0, buf)
            .map_err(|e| StoreError::new(ErrorKind::Runtime, e.to_string()))
    }
    async fn close(&mut self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}
