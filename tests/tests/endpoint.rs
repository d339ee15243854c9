//! `/test` end to end through the core, with every binding mocked: what is measured, what is
//! written, what is answered — and what never leaks.

use std::cell::RefCell;

use kvbench_core::params::Defaults;
use kvbench_core::{
    handle, Budget, Call, DenoKvStore, ErrorKind, Isolate, MetadataCache, Reply, Store, StoreError,
    StoreId, StoreSet, UpstashStore, ValueGen,
};
use kvbench_tests::{FakeClock, FakeTimer, Fault, MockDenoKv, MockKv, MockUpstash, Op, Scripted};
use serde_json::Value;

const TOKEN: &str = "upstash-secret-token-4f2a9c";
const BENCH_TOKEN: &str = "bench-secret-token-77b1e0";
const DENO_TOKEN: &str = "deno-secret-token-0c4d12";
const ALL: [&str; 3] = ["kv", "upstash", "denokv"];

struct World<'a> {
    clock: &'a FakeClock,
    kv: MockKv<'a>,
    upstash: MockUpstash<'a>,
    denokv: MockDenoKv<'a>,
    /// The isolate's KV Connect metadata, shared across calls like in the worker.
    deno_meta: MetadataCache,
    deno_configured: std::cell::Cell<bool>,
    gen: RefCell<ValueGen>,
    requests: RefCell<u64>,
    budget: Budget,
}

impl<'a> World<'a> {
    fn new(clock: &'a FakeClock) -> Self {
        Self {
            clock,
            kv: MockKv::new(clock, 12.0),
            upstash: MockUpstash::new(clock, 3.0, TOKEN),
            denokv: MockDenoKv::new(clock, 5.0, DENO_TOKEN),
            deno_meta: MetadataCache::default(),
            deno_configured: std::cell::Cell::new(true),
            gen: RefCell::new(ValueGen::from_seed([42; 32])),
            requests: RefCell::new(0),
            budget: Budget::new(kvbench_core::budget::ISOLATE_BUDGET_BYTES),
        }
    }

    fn call(&self, query: &str) -> (u16, Value) {
        self.call_with(query, None, None, Ok(Defaults::default()), true)
    }

    fn call_with(
        &self,
        query: &str,
        authorization: Option<&str>,
        token: Option<&str>,
        defaults: Result<Defaults, kvbench_core::ParamError>,
        upstash_configured: bool,
    ) -> (u16, Value) {
        let upstash = UpstashStore::new("https://mock.upstash.io", TOKEN, &self.upstash);
        let upstash_entry: Result<&dyn Store, StoreError> = if upstash_configured {
            Ok(&upstash)
        } else {
            Err(StoreError::new(
                ErrorKind::NotConfigured,
                "UPSTASH_REDIS_REST_URL is not set",
            ))
        };
        let denokv = DenoKvStore::new(
            MockDenoKv::URL,
            DENO_TOKEN,
            &self.denokv,
            self.clock,
            &self.deno_meta,
        );
        let stores: StoreSet = vec![
            (StoreId::Kv, Ok(&self.kv)),
            (StoreId::Upstash, upstash_entry),
            (
                StoreId::DenoKv,
                if self.deno_configured.get() {
                    Ok(&denokv)
                } else {
                    Err(StoreError::new(
                        ErrorKind::NotConfigured,
                        "DENO_KV_URL is not set",
                    ))
                },
            ),
        ];
        *self.requests.borrow_mut() += 1;
        // A request arriving is control entering the isolate: a deployed clock syncs here.
        self.clock.sync();
        let timer = FakeTimer(self.clock);
        let isolate = Isolate {
            gen: &self.gen,
            clock: self.clock,
            timer: &timer,
            requests: *self.requests.borrow(),
            colo: "local".into(),
            budget: &self.budget,
        };
        let call = Call {
            query,
            authorization,
            token,
            defaults,
        };
        let Reply { status, body } = futures::executor::block_on(handle(call, &stores, &isolate));
        assert!(!body.contains(TOKEN), "upstash token leaked: {body}");
        assert!(!body.contains(BENCH_TOKEN), "bench token leaked: {body}");
        assert!(!body.contains(DENO_TOKEN), "deno token leaked: {body}");
        assert!(
            !body.contains("data-token"),
            "deno data token leaked: {body}"
        );
        (status, serde_json::from_str(&body).expect("answer is JSON"))
    }

    fn touched(&self) -> usize {
        self.kv.ops.borrow().len()
            + self.upstash.requests.borrow().len()
            + self.denokv.requests.borrow().len()
    }
}

fn store<'v>(answer: &'v Value, name: &str) -> &'v Value {
    &answer["stores"][name]
}

#[test]
fn miss_writes_then_hit_reads_the_same_value_in_every_store() {
    let clock = FakeClock::default();
    let w = World::new(&clock);
    let (status, first) = w.call("key=417&order=kv,upstash,denokv");
    assert_eq!(status, 200);
    assert_eq!(first["key"], "417");
    assert_eq!(first["colo"], "local");
    assert_eq!(first["isolate_requests"], 1);
    for name in ALL {
        let s = store(&first, name);
        assert_eq!(s["hit"], false, "{name}");
        assert!(s["write_ms"].as_f64().is_some(), "{name}");
        assert_eq!(s["error"], Value::Null, "{name}");
        let bytes = s["value_bytes"].as_u64().unwrap();
        assert!((4096..=65_536).contains(&bytes), "{name}: {bytes}");
    }
    assert_eq!(
        store(&first, "kv")["value_bytes"],
        store(&first, "upstash")["value_bytes"]
    );
    // Exactly the same bytes reached both stores.
    let kv_value = w.kv.data.borrow()["417"].clone();
    let redis_value = w.upstash.data.borrow()["417"].clone();
    assert_eq!(kv_value, redis_value.as_bytes());
    let (deno_value, encoding, expire_at_ms) = w.denokv.data.borrow()[&b"\x02417\x00"[..]].clone();
    assert_eq!(deno_value, kv_value);
    assert_eq!(encoding, 3, "stored as bytes (a Uint8Array to Deno)");
    // The write bodies are encoded before the first store call (at 0 ms of mock time), so the
    // absolute expiry is the request's start + TTL 60 s.
    assert_eq!(expire_at_ms, 60_000);
    // Read and write latencies are what the mocks took (12 ms KV, 3 ms Upstash per call).
    assert_eq!(store(&first, "kv")["read_ms"], 12.0);
    assert_eq!(store(&first, "kv")["write_ms"], 12.0);
    assert_eq!(store(&first, "upstash")["read_ms"], 3.0);
    assert_eq!(store(&first, "upstash")["write_ms"], 3.0);
    assert_eq!(first["kvLatency"], 12.0);
    assert_eq!(first["redisLatency"], 3.0);
    // Deno KV: the metadata exchange is reported apart and not counted in the read.
    assert_eq!(store(&first, "denokv")["connect_ms"], 5.0);
    assert_eq!(store(&first, "denokv")["read_ms"], 5.0);
    assert_eq!(store(&first, "denokv")["write_ms"], 5.0);
    assert!(store(&first, "kv").get("connect_ms").is_none());

    let (_, second) = w.call("key=417");
    assert_eq!(second["isolate_requests"], 2);
    assert!(
        store(&second, "denokv").get("connect_ms").is_none(),
        "metadata is cached per isolate"
    );
    assert_eq!(w.denokv.exchanges(), 1);
    for name in ALL {
        let s = store(&second, name);
        assert_eq!(s["hit"], true, "{name}");
        assert_eq!(s["write_ms"], Value::Null, "{name}");
        assert_eq!(
            s["value_bytes"],
            store(&first, name)["value_bytes"],
            "{name}"
        );
    }
}

#[test]
fn upstash_requests_are_rest_commands_with_bearer_auth_and_ttl_in_seconds() {
    let clock = FakeClock::default();
    let w = World::new(&clock);
    w.call("key=7&ttl=3600&order=upstash,kv");
    let requests = w.upstash.requests.borrow();
    assert_eq!(requests.len(), 2);
    for r in requests.iter() {
        assert_eq!(r.method, "POST");
        assert_eq!(r.url, "https://mock.upstash.io");
        assert!(r
            .headers
            .contains(&("Authorization".into(), format!("Bearer {TOKEN}"))));
        assert!(r
            .headers
            .contains(&("Content-Type".into(), "application/json".into())));
    }
    let commands = w.upstash.commands.borrow();
    assert_eq!(commands[0], serde_json::json!(["GET", "7"]));
    assert_eq!(commands[1][0], "SET");
    assert_eq!(commands[1][3], "EX");
    assert_eq!(commands[1][4], 3600);
    let kv_put = w.kv.ops.borrow()[1].clone();
    assert!(matches!(kv_put, Op::Put { ttl_s: 3600, .. }), "{kv_put:?}");
}

#[test]
fn value_sizes_are_exact_at_both_bounds() {
    for (min, max) in [
        (1, 1),
        (4096, 4096),
        (65_536, 65_536),
        (1_048_576, 1_048_576),
    ] {
        let clock = FakeClock::default();
        let w = World::new(&clock);
        // Deno KV stores at most 64 KiB: larger values are measured without it.
        let names: &[&str] = if max > 65_536 { &ALL[..2] } else { &ALL };
        let (status, a) = w.call(&format!(
            "min_bytes={min}&max_bytes={max}&stores={}",
            names.join(",")
        ));
        assert_eq!(status, 200);
        for name in names {
            assert_eq!(
                store(&a, name)["value_bytes"],
                max as u64,
                "{name} {min}..{max}"
            );
        }
        let key = a["key"].as_str().unwrap();
        assert_eq!(w.kv.data.borrow()[key].len(), max);
        assert_eq!(w.upstash.data.borrow()[key].len(), max);
        if max <= 65_536 {
            let encoded = format!("\x02{key}\x00").into_bytes();
            assert_eq!(w.denokv.data.borrow()[&encoded].0.len(), max);
        }
    }
    let clock = FakeClock::default();
    let w = World::new(&clock);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..400 {
        let (_, a) = w.call("min_bytes=10&max_bytes=12&keys=1000000");
        seen.insert(store(&a, "kv")["value_bytes"].as_u64().unwrap());
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![10, 11, 12]);
}

#[test]
fn random_order_puts_every_store_first_and_fixed_order_is_honoured() {
    let clock = FakeClock::default();
    let w = World::new(&clock);
    let mut first = std::collections::BTreeMap::<String, u32>::new();
    for _ in 0..300 {
        let (_, a) = w.call("");
        *first
            .entry(a["order"][0].as_str().unwrap().into())
            .or_default() += 1;
        let mut order: Vec<&str> = a["order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        order.sort_unstable();
        assert_eq!(order, ["denokv", "kv", "upstash"]);
    }
    // Each store leads about 100 times in 300; 50 is far outside chance.
    assert_eq!(first.len(), 3, "{first:?}");
    assert!(first.values().all(|n| *n > 50), "{first:?}");
    for _ in 0..20 {
        let (_, a) = w.call("order=upstash,kv");
        assert_eq!(a["order"], serde_json::json!(["upstash", "kv"]));
    }
    let (_, a) = w.call("stores=kv");
    assert_eq!(a["order"], serde_json::json!(["kv"]));
    assert!(a["stores"].get("upstash").is_none());
    assert_eq!(a["redisLatency"], Value::Null);
}

#[test]
fn random_keys_stay_within_keys() {
    let clock = FakeClock::default();
    let w = World::new(&clock);
    for _ in 0..200 {
        let (_, a) = w.call("keys=5&min_bytes=1&max_bytes=1");
        let k: u32 = a["key"].as_str().unwrap().parse().unwrap();
        assert!(k < 5);
    }
    assert!(w.kv.data.borrow().len() <= 5);
}

#[test]
fn invalid_parameters_answer_400_and_touch_no_store() {
    // 2,047 bytes encode to 2,049: one over Deno KV's key limit.
    let deno_long_key = format!("stores=denokv&key={}", "k".repeat(2047));
    let cases = [
        ("keys=0", "keys"),
        ("keys=abc", "keys"),
        ("min_bytes=0", "min_bytes"),
        ("max_bytes=2000000", "max_bytes"),
        ("min_bytes=9000&max_bytes=8000", "min_bytes"),
        ("ttl=30", "ttl"),
        ("ttl=100000", "ttl"),
        ("stores=kv,memcached", "stores"),
        ("order=kv,kv", "order"),
        ("order=backwards", "order"),
        ("cache_ttl=5", "cache_ttl"),
        ("timeout_ms=0", "timeout_ms"),
        ("key=", "key"),
        ("key=..", "key"),
        ("colour=blue", "colour"),
        ("ttl=60&ttl=70", "ttl"),
        ("max_bytes=65537", "max_bytes"),
        (deno_long_key.as_str(), "key"),
        ("consistency=weak", "consistency"),
    ];
    for (query, parameter) in cases {
        let clock = FakeClock::default();
        let w = World::new(&clock);
        let (status, body) = w.call(query);
        assert_eq!(status, 400, "{query}");
        assert_eq!(body["error"]["parameter"], parameter, "{query}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().len() > 5,
            "{query}"
        );
        assert_eq!(w.touched(), 0, "{query} touched a store");
    }
}

#[test]
fn bench_token_guards_the_endpoint_and_is_never_echoed() {
    let clock = FakeClock::default();
    let w = World::new(&clock);
    let ok = Ok(Defaults::default());
    let (status, body) = w.call_with("", None, Some(BENCH_TOKEN), ok.clone(), true);
    assert_eq!(
        (status, body["error"]["parameter"].as_str()),
        (401, Some("Authorization"))
    );
    let wrong = format!("Bearer {}x", BENCH_TOKEN);
    let (status, _) = w.call_with("", Some(&wrong), Some(BENCH_TOKEN), ok.clone(), true);
    assert_eq!(status, 401);
    assert_eq!(w.touched(), 0);
    // A blank token is a misconfiguration: 500 naming the variable, nothing touched, never open.
    for blank in ["", " ", "\n"] {
        let before = w.touched();
        let (status, body) = w.call_with("", None, Some(blank), ok.clone(), true);
        assert_eq!(
            (status, body["error"]["parameter"].as_str()),
            (500, Some("BENCH_TOKEN"))
        );
        assert_eq!(w.touched(), before);
    }
    // A token saved with a trailing newline is still the token.
    let saved = format!("{BENCH_TOKEN}\n");
    let right = format!("Bearer {BENCH_TOKEN}");
    let (status, _) = w.call_with("", Some(&right), Some(&saved), ok.clone(), true);
    assert_eq!(status, 200);
    let (status, _) = w.call_with("", Some(&right), Some(BENCH_TOKEN), ok, true);
    assert_eq!(status, 200);
}

#[test]
fn invalid_vars_answer_500_naming_the_var() {
    let clock = FakeClock::default();
    let w = World::new(&clock);
    let defaults = Defaults::from_vars(|v| (v == "TTL").then(|| "10".to_string()));
    let (status, body) = w.call_with("", None, None, defaults, true);
    assert_eq!(status, 500);
    assert_eq!(body["error"]["parameter"], "TTL");
    assert_eq!(w.touched(), 0);
}

#[test]
fn unconfigured_store_is_an_error_and_the_other_is_still_measured() {
    let clock = FakeClock::default();
    let w = World::new(&clock);
    let (status, a) = w.call_with("", None, None, Ok(Defaults::default()), false);
    assert_eq!(status, 200);
    let u = store(&a, "upstash");
    assert_eq!(u["error"]["kind"], "not_configured");
    assert_eq!(u["error"]["op"], "read");
    assert_eq!(u["read_ms"], Value::Null);
    assert_eq!(u["hit"], Value::Null);
    assert_eq!(a["redisLatency"], Value::Null);
    assert_eq!(store(&a, "kv")["hit"], false);
    assert_eq!(store(&a, "kv")["error"], Value::Null);
}

#[test]
fn upstash_failures_are_classified_and_kv_is_still_measured() {
    let cases = [
        (400, r#"{"error":"ERR wrong number of arguments"}"#, "http"),
        (401, r#"{"error":"Unauthorized"}"#, "auth"),
        (403, "forbidden", "auth"),
        (
            429,
            r#"{"error":"ERR max requests limit exceeded"}"#,
            "rate_limited",
        ),
        (500, "<html>Internal Server Error</html>", "http"),
        (503, "", "http"),
        (200, "<html>not json</html>", "decode"),
        (200, r#"{"result": 5}"#, "decode"),
        (200, r#"{"unexpected": true}"#, "decode"),
        // A misbehaving server that echoes the credentials it received.
        (
            400,
            &format!(r#"{{"error":"bad token Bearer {TOKEN}"}}"#),
            "http",
        ),
    ];
    for (status, body, kind) in cases {
        let clock = FakeClock::default();
        let w = World::new(&clock);
        *w.upstash.script.borrow_mut() = Some(Scripted {
            status,
            body: body.to_string(),
        });
        let (code, a) = w.call("order=upstash,kv");
        assert_eq!(code, 200);
        let u = store(&a, "upstash");
        assert_eq!(u["error"]["kind"], kind, "{status} {body}");
        assert_eq!(u["error"]["op"], "read");
        assert_eq!(u["hit"], Value::Null);
        assert_eq!(u["read_ms"], 3.0, "elapsed time is reported");
        assert_eq!(u["write_ms"], Value::Null, "no write after a failed read");
        assert_eq!(store(&a, "kv")["error"], Value::Null);
        assert_eq!(store(&a, "kv")["hit"], false);
    }
}

#[test]
fn wrong_upstash_token_is_an_auth_error() {
    let clock = FakeClock::default();
    let mut w = World::new(&clock);
    w.upstash.token = "another-token".into();
    let (_, a) = w.call("");
    assert_eq!(store(&a, "upstash")["error"]["kind"], "auth");
}

#[test]
fn a_hung_store_times_out_with_its_elapsed_time() {
    let clock = FakeClock::default();
    let w = World::new(&clock);
    w.upstash.hang.set(true);
    let (status, a) = w.call("timeout_ms=2500&order=upstash,kv");
    assert_eq!(status, 200);
    let u = store(&a, "upstash");
    assert_eq!(u["error"]["kind"], "timeout");
    assert_eq!(u["read_ms"], 2500.0);
    assert_eq!(store(&a, "kv")["read_ms"], 12.0);

    let clock = FakeClock::default();
    let w = World::new(&clock);
    w.kv.fault.set(Fault::Hang);
    let (_, a) = w.call("");
    assert_eq!(store(&a, "kv")["error"]["kind"], "timeout");
    assert_eq!(store(&a, "kv")["read_ms"], 10_000.0);
    assert_eq!(store(&a, "upstash")["error"], Value::Null);
}

#[test]
fn a_failed_write_is_reported_with_its_time_and_size() {
    let clock = FakeClock::default();
    let w = World::new(&clock);
    w.kv.fault.set(Fault::FailWrites);
    let (_, a) = w.call("min_bytes=100&max_bytes=100");
    let k = store(&a, "kv");
    assert_eq!(k["hit"], false);
    assert_eq!(k["read_ms"], 12.0);
    assert_eq!(k["value_bytes"], 100);
    assert_eq!(k["error"]["kind"], "runtime");
    assert_eq!(k["error"]["op"], "write");
    assert!(k["write_ms"].as_f64().is_some());
    // The legacy field still reports the successful read.
    assert_eq!(a["kvLatency"], 12.0);
}

#[test]
fn cache_ttl_reaches_kv_reads() {
    let clock = FakeClock::default();
    let w = World::new(&clock);
    w.call("key=1&cache_ttl=300&stores=kv");
    assert_eq!(
        w.kv.ops.borrow()[0],
        Op::Get {
            key: "1".into(),
            cache_ttl_s: Some(300)
        }
    );
}

#[test]
fn deno_kv_failures_are_its_own_data_points() {
    // Not configured.
    let clock = FakeClock::default();
    let w = World::new(&clock);
    w.deno_configured.set(false);
    let (status, a) = w.call("");
    assert_eq!(status, 200);
    assert_eq!(store(&a, "denokv")["error"]["kind"], "not_configured");
    assert_eq!(store(&a, "kv")["error"], Value::Null);
    assert_eq!(store(&a, "upstash")["error"], Value::Null);

    // The metadata exchange fails: a read error with the exchange's time, no read attempted.
    let clock = FakeClock::default();
    let w = World::new(&clock);
    w.denokv.push_script(
        503,
        "The server is temporarially unavailable, try again later.",
    );
    let (_, a) = w.call("order=denokv,kv,upstash");
    let d = store(&a, "denokv");
    assert_eq!(d["error"]["kind"], "http");
    assert_eq!(d["error"]["op"], "read");
    assert!(d["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("metadata exchange: HTTP 503"));
    assert_eq!(d["connect_ms"], 5.0);
    assert_eq!((&d["read_ms"], &d["hit"]), (&Value::Null, &Value::Null));
    assert_eq!(w.denokv.requests.borrow().len(), 1);
    assert_eq!(store(&a, "kv")["hit"], false);
    // The next request exchanges again and succeeds.
    let (_, a) = w.call("order=denokv,kv,upstash");
    assert_eq!(store(&a, "denokv")["connect_ms"], 5.0);
    assert_eq!(store(&a, "denokv")["error"], Value::Null);

    // A hung server times out, in the exchange or in the read.
    for warm in [false, true] {
        let clock = FakeClock::default();
        let w = World::new(&clock);
        if warm {
            w.call("stores=denokv");
        }
        w.denokv.hang.set(true);
        let (_, a) = w.call("timeout_ms=1500&order=denokv,upstash,kv");
        let d = store(&a, "denokv");
        assert_eq!(d["error"]["kind"], "timeout", "warm={warm}");
        let timed = if warm { "read_ms" } else { "connect_ms" };
        assert_eq!(d[timed], 1500.0, "warm={warm}: {d}");
        assert_eq!(store(&a, "upstash")["read_ms"], 3.0);
        assert_eq!(store(&a, "kv")["error"], Value::Null);
    }
}

#[test]
fn consistency_is_accepted_and_ttl_reaches_deno_kv_in_milliseconds() {
    let clock = FakeClock::default();
    clock.now.set(1_700_000_000_000.0);
    let w = World::new(&clock);
    let (status, a) = w.call("key=c&stores=denokv&consistency=eventual&ttl=3600");
    assert_eq!(status, 200);
    assert_eq!(store(&a, "denokv")["hit"], false);
    let expire_at_ms = w.denokv.data.borrow()[&b"\x02c\x00"[..]].2;
    // Encoded before the first store call: the request's start + TTL.
    assert_eq!(expire_at_ms, 1_700_000_000_000 + 3_600_000);
    let (_, a) = w.call("key=c&stores=denokv&consistency=eventual");
    assert_eq!(store(&a, "denokv")["hit"], true);
}

/// On a deployed worker the clock moves only at I/O, so any CPU between two store calls would be
/// counted in the next call. With the deployed-clock model (hidden real time = this thread's CPU
/// time + scripted I/O), every reported read and write must be its I/O time alone: generating
/// 1 MiB values, encoding write bodies and decoding 1 MiB hits all happen outside the spans.
#[test]
fn on_a_deployed_clock_every_span_is_the_io_alone() {
    let clock = FakeClock::deployed();
    let w = World::new(&clock);
    let latency = |store: &str| match store {
        "kv" => 12.0,
        "upstash" => 3.0,
        _ => 5.0,
    };
    // Tolerance for the probe's own bookkeeping between an I/O and the next span (microseconds);
    // generating or decoding 1 MiB takes tens of milliseconds of CPU in this (debug) build. The
    // first span of a request may also hold the write bodies' encoding, done up front: a copy of
    // the value per store (the value itself was generated after the previous request).
    let tolerance_ms = 0.5;
    let first_span_tolerance_ms = 3.0;
    let big = "min_bytes=1048576&max_bytes=1048576&stores=kv,upstash";
    let small = "min_bytes=65536&max_bytes=65536";
    let mut checked = 0;
    // Request 1 of each size range is cold (its value is generated inside its first span); from
    // then on values are prepared after each request's last I/O.
    for (i, query) in [
        format!("key=a&{big}"),
        format!("key=a&{big}"),
        format!("key=b&{big}&order=upstash,kv"),
        format!("key=b&{big}&order=upstash,kv"),
        format!("key=c&{small}"),
        format!("key=c&{small}"),
        format!("key=d&{small}"),
        format!("key=d&{small}"),
    ]
    .iter()
    .enumerate()
    {
        let (status, a) = w.call(query);
        assert_eq!(status, 200, "{a}");
        if i == 0 || i == 4 {
            continue;
        }
        let first = a["order"][0].as_str().unwrap().to_string();
        for (name, s) in a["stores"].as_object().unwrap() {
            assert!(s["error"].is_null(), "{query}: {name}: {s}");
            for field in ["read_ms", "write_ms"] {
                let Some(ms) = s[field].as_f64() else {
                    continue;
                };
                let extra = ms - latency(name);
                let allowed = if *name == first && field == "read_ms" {
                    first_span_tolerance_ms
                } else {
                    tolerance_ms
                };
                assert!(
                    (0.0..=allowed).contains(&extra),
                    "{query}: {name}.{field} = {ms} ms, I/O took {} ms: {extra:.3} ms of CPU counted",
                    latency(name)
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 14, "{checked} spans checked");
}

/// Value bytes in flight are bounded per isolate: a request that does not fit next to the ones in
/// flight is a 503 naming `max_bytes`, touching no store; once they finish it runs.
#[test]
fn a_request_over_the_isolate_budget_is_refused_before_touching_a_store() {
    let clock = FakeClock::default();
    let w = World::new(&clock);
    let held = w
        .budget
        .reserve(w.budget.limit() - (1 << 20))
        .expect("the budget is free");
    let before = w.touched();
    let (status, body) = w.call("key=big&min_bytes=1048576&max_bytes=1048576&stores=kv,upstash");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["parameter"], "max_bytes");
    assert_eq!(w.touched(), before, "nothing reached a store");
    // Small values still fit next to what is in flight.
    let (status, _) = w.call("key=small&min_bytes=100&max_bytes=100&stores=kv");
    assert_eq!(status, 200);
    drop(held);
    assert_eq!(
        w.budget.reserved(),
        0,
        "every finished request released its bytes"
    );
    let (status, _) = w.call("key=big&min_bytes=1048576&max_bytes=1048576&stores=kv,upstash");
    assert_eq!(status, 200);
    assert_eq!(w.budget.reserved(), 0);
}
