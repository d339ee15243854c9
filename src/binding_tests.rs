//! The glue of every binding, tested where it runs: inside workerd (Miniflare), against the real
//! emulated bindings of wrangler.toml and a real redis-server over `connect()`
//! (scripts/wasm-test-runner.mjs). Each store: miss → write → hit at exact sizes, the expiry it
//! sets, its errors' kinds, and a missing binding as `not_configured`.

use kvbench_core::spec::env::{BENCH_D1, BENCH_DO, BENCH_KV, BENCH_R2};
use kvbench_core::stores::durable;
use kvbench_core::{ErrorKind, Store};
use wasm_bindgen::JsCast;
use wasm_bindgen_test::wasm_bindgen_test;

use crate::bindings::{env_text, JsClock};
use crate::stores::cache::CacheBinding;
use crate::stores::d1::D1Binding;
use crate::stores::durable::DoBinding;
use crate::stores::kv::KvBinding;
use crate::stores::r2::R2Binding;
use crate::stores::socket::redis_store;
use crate::testing::{
    allocated_during, empty_env, env, miss_put_hit, read, unique_key, value, write,
};
use kvbench_core::Clock;

/// Sizes at the edges that matter: one byte, the default range, getrandom's 64 KiB chunk, 1 MiB.
const SIZES: [usize; 5] = [1, 4096, 65_536, 65_537, 1_048_576];

fn now_ms() -> f64 {
    JsClock.now_ms()
}

fn kind<T>(result: Result<T, kvbench_core::StoreError>) -> ErrorKind {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.kind,
    }
}

#[wasm_bindgen_test]
async fn kv_miss_put_hit_at_exact_sizes() {
    let kv = KvBinding::from_env(&env()).expect("BENCH_KV");
    miss_put_hit(&kv, "kv", &SIZES).await;
}

#[wasm_bindgen_test]
async fn kv_write_sets_the_ttl() {
    let kv = KvBinding::from_env(&env()).expect("BENCH_KV");
    let key = unique_key("kv-ttl");
    let before_s = (now_ms() / 1000.0).floor() as u64;
    write(&kv, &key, &value(100), 120).await.expect("write");
    let listed = env()
        .kv(BENCH_KV)
        .unwrap()
        .list()
        .prefix(key.clone())
        .execute()
        .await
        .expect("list");
    let expiration = listed.keys[0].expiration.expect("an expiring key");
    assert!(
        (before_s + 119..=before_s + 121).contains(&expiration),
        "expiration {expiration} is 120 s after {before_s}"
    );
}

#[wasm_bindgen_test]
async fn kv_errors_have_their_kind() {
    let kv = KvBinding::from_env(&env()).expect("BENCH_KV");
    // KV refuses keys over 512 bytes with a 414 of its service: an `http` error, not a crash.
    let long = "k".repeat(600);
    assert_eq!(kind(read(&kv, &long).await), ErrorKind::Http);
    // And a TTL under KV's 60 s minimum is its 400.
    let key = unique_key("kv-short-ttl");
    assert_eq!(
        kind(write(&kv, &key, &value(10), 10).await),
        ErrorKind::Http
    );
}

#[wasm_bindgen_test]
fn missing_bindings_are_not_configured() {
    let empty = empty_env();
    assert_eq!(kind(KvBinding::from_env(&empty)), ErrorKind::NotConfigured);
    assert_eq!(kind(DoBinding::from_env(&empty)), ErrorKind::NotConfigured);
    assert_eq!(kind(D1Binding::from_env(&empty)), ErrorKind::NotConfigured);
    assert_eq!(kind(R2Binding::from_env(&empty)), ErrorKind::NotConfigured);
    assert_eq!(kind(redis_store(&empty)), ErrorKind::NotConfigured);
    assert_eq!(
        kind(crate::bindings::upstash_store(&empty)),
        ErrorKind::NotConfigured
    );
    let workers_dev = "https://kvbench.someone.workers.dev/test";
    assert_eq!(
        kind(CacheBinding::for_request(workers_dev)),
        ErrorKind::NotConfigured
    );
}

/// The object's own report of itself (`/.stats`): whether its table exists, rows, next expiry,
/// alarm.
async fn do_stats(store_key: &str) -> serde_json::Value {
    let stub = env()
        .durable_object(BENCH_DO)
        .unwrap()
        .get_by_name(store_key)
        .unwrap();
    let mut response = stub
        .fetch_with_str(&format!("https://kvbench.do{}", durable::STATS_PATH))
        .await
        .expect("stats");
    response.json().await.expect("stats JSON")
}

#[wasm_bindgen_test]
async fn do_miss_put_hit_at_exact_sizes() {
    let store = DoBinding::from_env(&env()).expect("BENCH_DO");
    miss_put_hit(&store, "do", &SIZES).await;
}

#[wasm_bindgen_test]
async fn do_read_of_a_new_object_writes_nothing() {
    // Issue 16 item 1: the read created the table (2 rows written inside read_ms).
    let store = DoBinding::from_env(&env()).expect("BENCH_DO");
    let key = unique_key("do-fresh");
    assert_eq!(read(&store, &key).await.expect("read"), None);
    let stats = do_stats(&key).await;
    assert_eq!(stats["table"], false, "a read created the table: {stats}");
    assert_eq!(stats["rows"], 0);
}

#[wasm_bindgen_test]
async fn do_write_sets_the_alarm_at_the_expiry() {
    let store = DoBinding::from_env(&env()).expect("BENCH_DO");
    let key = unique_key("do-alarm");
    let before = now_ms();
    write(&store, &key, &value(512), 60).await.expect("write");
    let stats = do_stats(&key).await;
    assert_eq!(stats["table"], true);
    assert_eq!(stats["rows"], 1);
    let next = stats["next_expiry_ms"].as_f64().expect("next expiry");
    let alarm = stats["alarm_ms"].as_f64().expect("an alarm");
    assert_eq!(next, alarm, "the alarm is at the row's expiry");
    assert!(
        next >= before + 59_000.0 && next <= before + 61_000.0,
        "expiry {next} is 60 s after {before}"
    );
}

#[wasm_bindgen_test]
async fn d1_miss_put_hit_and_expires_at() {
    let store = D1Binding::from_env(&env()).expect("BENCH_D1");
    miss_put_hit(&store, "d1", &SIZES[..4]).await;
    let key = unique_key("d1-ttl");
    let before = now_ms();
    write(&store, &key, &value(64), 90).await.expect("write");
    let db = env().d1(BENCH_D1).unwrap();
    let expires_at: Option<f64> = db
        .prepare("SELECT expires_at FROM kvbench WHERE key = ?1")
        .bind(&[key.clone().into()])
        .unwrap()
        .first(Some("expires_at"))
        .await
        .expect("select");
    let at = expires_at.expect("the row");
    assert!(
        at >= before + 89_000.0 && at <= before + 91_000.0,
        "{at} vs {before}"
    );
}

#[wasm_bindgen_test]
async fn r2_miss_put_hit_and_expiry_metadata() {
    let store = R2Binding::from_env(&env()).expect("BENCH_R2");
    miss_put_hit(&store, "r2", &SIZES).await;
    let key = unique_key("r2-ttl");
    let before = now_ms();
    write(&store, &key, &value(64), 75).await.expect("write");
    let object = env()
        .bucket(BENCH_R2)
        .unwrap()
        .head(key.clone())
        .await
        .unwrap()
        .expect("the object");
    let meta = object.custom_metadata().unwrap();
    let at: f64 = meta[crate::stores::r2::EXPIRES_AT].parse().unwrap();
    assert!(
        at >= before + 74_000.0 && at <= before + 76_000.0,
        "{at} vs {before}"
    );
    assert_eq!(object.size(), 64);
}

#[wasm_bindgen_test]
async fn cache_miss_put_hit_and_max_age() {
    let store = CacheBinding::for_request("https://kvbench.example.com/test")
        .expect("cache on a custom domain");
    miss_put_hit(&store, "cache", &SIZES).await;
    let key = unique_key("cache-ttl");
    write(&store, &key, &value(64), 45).await.expect("write");
    let url = kvbench_core::stores::cache::url("https://kvbench.example.com", &key);
    let response = worker::Cache::default()
        .get(url, false)
        .await
        .unwrap()
        .expect("cached");
    let control = response.headers().get("Cache-Control").unwrap().unwrap();
    assert_eq!(control, kvbench_core::stores::cache::cache_control(45));
}

#[wasm_bindgen_test]
async fn upstash_over_fetch_miss_put_hit() {
    // The runner's gateway (GATEWAY_BIN); npm test always builds it first.
    let store = crate::bindings::upstash_store(&env())
        .expect("UPSTASH_REDIS_REST_URL (the runner's gateway: build it with cargo build -p upstash-gateway)");
    miss_put_hit(&store, "upstash", &SIZES).await;
}

#[wasm_bindgen_test]
async fn redis_over_tcp_miss_put_hit() {
    let store = redis_store(&env()).expect("REDIS_URL (the runner's redis-server)");
    assert!(
        store.connect().await.expect("connect"),
        "a new request connects"
    );
    miss_put_hit(&store, "redis", &SIZES).await;
}

#[wasm_bindgen_test]
async fn postgres_over_tcp_miss_put_hit() {
    let store = crate::stores::postgres::postgres_store(&env())
        .expect("POSTGRES_URL (the runner's server)");
    assert!(
        store.connect().await.expect("connect + SCRAM"),
        "a new request connects"
    );
    miss_put_hit(&store, "postgres", &SIZES).await;
    store.close().await;
}

#[wasm_bindgen_test]
async fn hyperdrive_binding_miss_put_hit() {
    // Miniflare's local Hyperdrive: the binding's address leads to the runner's server.
    let store =
        crate::stores::postgres::hyperdrive_store(&env()).expect("BENCH_HYPERDRIVE (the runner's)");
    assert!(
        store.connect().await.expect("connect"),
        "a new request connects"
    );
    miss_put_hit(&store, "hyperdrive", &SIZES).await;
    store.close().await;
}

#[wasm_bindgen_test]
async fn postgres_refused_connection_and_wrong_password_are_errors_not_crashes() {
    let store_for = |url: &str| {
        let vars = js_sys::Object::new();
        js_sys::Reflect::set(&vars, &"POSTGRES_URL".into(), &url.into()).unwrap();
        crate::stores::postgres::postgres_store(&wasm_bindgen::JsCast::unchecked_into(vars))
    };
    let refused = store_for("postgres://u:p@127.0.0.1:1/db?sslmode=disable").expect("configured");
    let kind = kind(refused.connect().await);
    assert!(
        matches!(kind, ErrorKind::Connect | ErrorKind::Timeout),
        "refused connect is {kind:?}"
    );
    let good = crate::bindings::env_text(&env(), "POSTGRES_URL").unwrap();
    let wrong = good.replacen(":wasm-", ":wrong-wasm-", 1);
    assert_ne!(good, wrong);
    let e = store_for(&wrong)
        .expect("configured")
        .connect()
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth, "{e:?}");
    assert!(!e.message.contains("wasm-"), "no password in {e:?}");
}

#[wasm_bindgen_test]
async fn redis_refused_connection_is_an_error_not_a_crash() {
    // A closed port: the store reports the failure as data.
    let vars = js_sys::Object::new();
    js_sys::Reflect::set(&vars, &"REDIS_URL".into(), &"redis://127.0.0.1:1".into()).unwrap();
    let store = redis_store(&wasm_bindgen::JsCast::unchecked_into(vars)).expect("configured");
    let kind = kind(store.connect().await);
    assert!(
        matches!(kind, ErrorKind::Connect | ErrorKind::Timeout),
        "refused connect is {kind:?}"
    );
}

/// The runner's own test (tests/e2e/wasm-runner.test.mjs): passes unless the runner is told, by
/// the var KVBENCH_RUNNER_SELFTEST, to make it fail, hang or print.
#[wasm_bindgen_test]
async fn runner_selftest() {
    match env_text(&env(), "KVBENCH_RUNNER_SELFTEST").as_deref() {
        Some("fail") => panic!("deliberate failure (KVBENCH_RUNNER_SELFTEST=fail)"),
        // A pending timer keeps the request alive (a promise nothing can resolve is caught by
        // workerd itself as a hang): ten minutes, far past the runner's timeout.
        Some("hang") => worker::Delay::from(std::time::Duration::from_secs(600)).await,
        Some("print") => web_sys_log("selftest says hello"),
        _ => {}
    }
}

fn web_sys_log(text: &str) {
    worker::console_log!("{text}");
}

const MIB: usize = 1 << 20;
/// What a call may allocate in wasm without having copied a 1 MiB value: its bookkeeping.
const NO_COPY: usize = 64 * 1024;

/// The binding stores (`kv`, `do`, `d1`, `r2`, `cache`), by name; the cache on `origin`.
fn bindings(origin: &worker::Url) -> Vec<(&'static str, Box<dyn kvbench_core::DynStore>)> {
    vec![
        ("kv", Box::new(KvBinding::from_env(&env()).unwrap())),
        ("do", Box::new(DoBinding::from_env(&env()).unwrap())),
        ("d1", Box::new(D1Binding::from_env(&env()).unwrap())),
        ("r2", Box::new(R2Binding::from_env(&env()).unwrap())),
        (
            "cache",
            Box::new(CacheBinding::for_request(origin.as_str()).unwrap()),
        ),
    ]
}

/// docs/measuring.md's "what remains inside a span", shown where the copies happen: a read inside its
/// span (`get`, up to the hit/miss decision) copies no 1 MiB value into wasm for `kv`, `do`, `d1`,
/// `r2` and `cache` — sizing a hit is a JS `byteLength`, or deferred until every span is over
/// (`d1`); a write's value is copied into JS before the first span (`prepare`), so `put`
/// copies nothing out of wasm. Redis over TCP reads its reply through wasm: that copy is inside
/// its own read span, as docs/measuring.md says.
#[wasm_bindgen_test]
async fn reads_copy_no_value_into_wasm_inside_their_span() {
    let origin = worker::Url::parse("https://kvbench.example.com/test").unwrap();
    let stores = bindings(&origin);
    for (name, store) in &stores {
        let key = unique_key(&format!("copy-{name}"));
        write(store.as_ref(), &key, &value(MIB), 60)
            .await
            .expect("write");
        let (fetched, bytes) =
            allocated_during(store.get(&key, &kvbench_core::stores::store::Options::default()))
                .await;
        assert!(
            bytes < NO_COPY,
            "{name}: the read allocated {bytes} bytes in wasm inside its span (a copy of the value)"
        );
        let kvbench_core::stores::store::Fetched::Hit(decode) = fetched.expect("read") else {
            panic!("{name}: a miss after the write");
        };
        assert_eq!(
            decode.finish().unwrap(),
            MIB as u64,
            "{name}: sized as stored"
        );
    }
    // Upstash over fetch: the body stays a JS ArrayBuffer through the read (no copy inside a
    // span, none held in wasm while the next stores run). A hit is sized from its shape and
    // length (15 bytes copied), except one in FULL_CHECK_EVERY, whose 4/3 base64 is copied into
    // wasm and checked byte for byte when the measurement sizes it, after every span.
    if let Ok(upstash) = crate::bindings::upstash_store(&env()) {
        let key = unique_key("copy-upstash");
        write(&upstash, &key, &value(MIB), 60).await.unwrap();
        let mut full = 0;
        for _ in 0..kvbench_core::stores::upstash::FULL_CHECK_EVERY {
            let (fetched, bytes) = allocated_during(
                upstash.get(&key, &kvbench_core::stores::store::Options::default()),
            )
            .await;
            assert!(
                bytes < NO_COPY,
                "upstash: the read allocated {bytes} bytes in wasm inside its span"
            );
            let kvbench_core::stores::store::Fetched::Hit(decode) = fetched.expect("read") else {
                panic!("upstash: a miss after the write");
            };
            let (size, bytes) = allocated_during(async { decode.finish() }).await;
            assert_eq!(size.unwrap(), MIB as u64, "upstash: sized as stored");
            if bytes >= MIB * 4 / 3 {
                full += 1;
            } else {
                assert!(
                    bytes < NO_COPY,
                    "upstash: sized by shape, yet {bytes} bytes copied"
                );
            }
        }
        assert_eq!(
            full, 1,
            "one hit in FULL_CHECK_EVERY is checked byte for byte"
        );
        // And the write's body was taken into JS by prepare: put copies nothing.
        let v = value(MIB);
        let key = unique_key("copy-put-upstash");
        let request = Store::prepare(&upstash, &key, &v, 60).unwrap();
        assert!(
            request.body.is_empty() && request.prepared.is_some(),
            "the body went to JS before the span"
        );
        let (put, bytes) = allocated_during(Store::put(
            &upstash,
            &key,
            60,
            request,
            &kvbench_core::stores::store::Options::default(),
        ))
        .await;
        put.expect("put");
        assert!(
            bytes < NO_COPY,
            "upstash: put allocated {bytes} bytes inside its span"
        );
    }
    // Redis over TCP: the reply comes through wasm, inside the read's own span.
    let redis = redis_store(&env()).unwrap();
    redis.connect().await.unwrap();
    let key = unique_key("copy-redis");
    write(&redis, &key, &value(MIB), 60).await.unwrap();
    let (_, bytes) =
        allocated_during(redis.get(&key, &kvbench_core::stores::store::Options::default())).await;
    assert!(
        bytes >= MIB,
        "redis reads its reply into wasm ({bytes} bytes)"
    );
}

#[wasm_bindgen_test]
async fn writes_copy_no_value_out_of_wasm_inside_their_span() {
    // The copy into JS happens in prepare (before the first span): put allocates nothing of
    // the value, and the prepared JS objects hold it.
    let origin = worker::Url::parse("https://kvbench.example.com/test").unwrap();
    let stores = bindings(&origin);
    let options = kvbench_core::stores::store::Options::default();
    for (name, store) in &stores {
        let key = unique_key(&format!("copy-put-{name}"));
        let v = value(MIB);
        let write = store.prepare(&key, &v, 60).expect("prepare");
        let (put, bytes) = allocated_during(write.put(&options)).await;
        put.expect("put");
        assert!(
            bytes < NO_COPY,
            "{name}: put allocated {bytes} bytes inside its span"
        );
    }
    // The Cache API's entry is a JS Response already (its put converts nothing from wasm).
    let entry = CacheBinding::entry(&js_sys::Uint8Array::from(value(1024).bytes()), 60).unwrap();
    assert!(
        matches!(entry.body(), worker::ResponseBody::Stream(_)),
        "the cache entry's body must be JS-side, not a wasm Vec copied at put time"
    );
}

/// One JS copy of a value (`js_copy::JsCopy`, kept with the value) serves every write of it, in
/// every request that reuses it: written through KV, the Durable Object, R2, the Cache API and
/// Upstash by one request's stores, then again under another key by a second request's, each
/// store holds every byte of it — none of them detached or consumed the buffer the next was given.
#[wasm_bindgen_test]
async fn one_js_copy_of_the_value_serves_every_write() {
    let origin = worker::Url::parse("https://kvbench.example.com/test").unwrap();
    let meta = kvbench_core::MetadataCache::default();
    let v = value(300_000);
    let copy = crate::js_copy::JsCopy::of(&v).bytes;
    let ids = [
        kvbench_core::StoreId::Kv,
        kvbench_core::StoreId::Do,
        kvbench_core::StoreId::R2,
        kvbench_core::StoreId::Cache,
        kvbench_core::StoreId::Upstash,
    ];
    let keys = [unique_key("shared-1"), unique_key("shared-2")];
    for key in &keys {
        let stores = crate::stores::Stores::from_env(&env(), Ok(origin.as_str()), &meta);
        for id in ids {
            let store = kvbench_core::StoreSet::store(&stores, id).unwrap();
            let store_key = id.spec().store_key(key);
            write(store, &store_key, &v, 60).await.expect("write");
        }
    }
    assert!(
        js_sys::Object::is(&copy, &crate::js_copy::JsCopy::of(&v).bytes),
        "the value kept its one copy"
    );
    assert_eq!(copy.length() as usize, v.len(), "and the copy is whole");
    for id in ids
        .into_iter()
        .flat_map(|id| keys.iter().map(move |k| (id, k)))
    {
        let (id, key) = id;
        if id == kvbench_core::StoreId::Upstash {
            // Read back with a plain GET (no base64) through the gateway.
            let upstash = crate::bindings::upstash_store(&env()).unwrap();
            let store_key = id.spec().store_key(key);
            assert_eq!(
                crate::testing::read(&upstash, &store_key).await.unwrap(),
                Some(v.len() as u64)
            );
            continue;
        }
        let store_key = id.spec().store_key(key);
        let stored: Vec<u8> = match id {
            kvbench_core::StoreId::Kv => env()
                .kv(BENCH_KV)
                .unwrap()
                .get(&store_key)
                .bytes()
                .await
                .unwrap()
                .expect("kv has the key"),
            kvbench_core::StoreId::R2 => env()
                .bucket(BENCH_R2)
                .unwrap()
                .get(&store_key)
                .execute()
                .await
                .unwrap()
                .expect("r2 has the key")
                .body()
                .unwrap()
                .bytes()
                .await
                .unwrap(),
            kvbench_core::StoreId::Cache => worker::Cache::default()
                .get(
                    kvbench_core::stores::cache::url(
                        origin.origin().ascii_serialization().as_str(),
                        &store_key,
                    ),
                    false,
                )
                .await
                .unwrap()
                .expect("the cache has the key")
                .bytes()
                .await
                .unwrap(),
            _ => env()
                .durable_object(BENCH_DO)
                .unwrap()
                .get_by_name(&durable::object_name(
                    Default::default(),
                    None,
                    None,
                    &store_key,
                ))
                .unwrap()
                .fetch_with_str(&durable::url(&store_key, None))
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap(),
        };
        assert!(
            stored == v.bytes(),
            "{id:?} stored {} bytes, not the {} written",
            stored.len(),
            v.len()
        );
    }
}

/// Vars and secrets are read once per environment: a value read stays what it was (a deployment
/// cannot change under its isolate), and another environment object is read afresh.
#[wasm_bindgen_test]
fn vars_are_read_once_per_environment() {
    let first: js_sys::Object = js_sys::Object::new();
    js_sys::Reflect::set(&first, &"KVBENCH_TEST_VAR".into(), &"one".into()).unwrap();
    let first_env: worker::Env = first.clone().unchecked_into();
    assert_eq!(
        env_text(&first_env, "KVBENCH_TEST_VAR").as_deref(),
        Some("one")
    );
    js_sys::Reflect::set(&first, &"KVBENCH_TEST_VAR".into(), &"two".into()).unwrap();
    assert_eq!(
        env_text(&first_env, "KVBENCH_TEST_VAR").as_deref(),
        Some("one"),
        "read once"
    );
    let second = js_sys::Object::new();
    js_sys::Reflect::set(&second, &"KVBENCH_TEST_VAR".into(), &"three".into()).unwrap();
    let second_env: worker::Env = second.unchecked_into();
    assert_eq!(
        env_text(&second_env, "KVBENCH_TEST_VAR").as_deref(),
        Some("three")
    );
    assert_eq!(env_text(&empty_env(), "KVBENCH_TEST_VAR"), None);
}

/// One `Headers` object per header set, reused; an invalid header is named, its value never
/// quoted (it may be a token).
#[wasm_bindgen_test]
fn header_sets_are_made_once() {
    let pairs = vec![
        ("Authorization".to_string(), "Bearer s3cret".to_string()),
        ("Content-Type".to_string(), "application/json".to_string()),
    ];
    let a = crate::js_strings::headers(&pairs).unwrap();
    let b = crate::js_strings::headers(&pairs.clone()).unwrap();
    assert!(js_sys::Object::is(&a, &b), "the same set, the same object");
    assert_eq!(
        a.get("authorization").unwrap().as_deref(),
        Some("Bearer s3cret")
    );
    let other = crate::js_strings::headers(&pairs[..1]).unwrap();
    assert!(!js_sys::Object::is(&a, &other));
    assert_eq!(other.get("content-type").unwrap(), None);
    let bad = vec![("Bad Name".to_string(), "Bearer s3cret".to_string())];
    let e = crate::js_strings::headers(&bad).unwrap_err();
    assert!(e.contains("Bad Name") && !e.contains("s3cret"), "{e}");
    assert_eq!(
        crate::js_strings::name("get").as_string().as_deref(),
        Some("get")
    );
}
