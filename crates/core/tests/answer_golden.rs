//! The `/test` answer contract, writer's side: core's serializer must produce
//! `crates/wire/tests/golden/answer.jsonl` byte for byte — one line per answer, each exactly a body the
//! worker sends. kvbench's parser reads the same file (crates/cli/tests/answer_contract.rs), so
//! the two sides cannot drift apart unnoticed. The answers are assembled as `probe` assembles
//! them (`Answer::new`, then `push` per store in measurement order, times through `round_ms`)
//! and cover every shape a store result takes: hit, miss with a write, a failed write, a failed
//! read, a store that is not configured, a connection setup time (with and without a read after
//! it), a shuffled order — for the original stores and for the bindings' and Redis's — and what
//! a store reported about its own calls (D1's meta, KV's cache status).
//!
//! Refresh with `UPDATE_GOLDEN=1 cargo test -p kvbench-core --test answer_golden` after an
//! intended change, then review the diff and run kvbench's tests; never edit it by hand.

use std::path::Path;

use kvbench_core::measurement::answer::{failed, round_ms, Abandoned, Answer, Op, StoreResult};
use kvbench_core::{ErrorKind, StoreError, StoreId};

fn ok(read_ms: f64, hit: bool, value_bytes: u64, write_ms: Option<f64>) -> StoreResult {
    StoreResult {
        read_ms: Some(round_ms(read_ms)),
        hit: Some(hit),
        value_bytes: Some(value_bytes),
        write_ms: write_ms.map(round_ms),
        connect_ms: None,
        error: None,
        abandoned: None,
        location_hint: None,
        near_colo: None,
        read_meta: None,
        read_retried: None,
        write_meta: None,
    }
}

fn answers() -> Vec<Answer> {
    // An isolate's first request: every store misses and writes; Deno KV's metadata exchange
    // is timed apart.
    let mut first = Answer::new("417".into(), "FRA".into(), 1);
    first.push(StoreId::Kv, ok(12.3456, false, 23_456, Some(48.0004)));
    first.push(StoreId::Upstash, ok(3.5, false, 23_456, Some(2.25)));
    first.push(
        StoreId::DenoKv,
        StoreResult {
            connect_ms: Some(round_ms(7.125)),
            ..ok(5.0, false, 23_456, Some(9.75))
        },
    );

    // The next request: hits everywhere, in a shuffled order, no setup.
    let mut second = Answer::new("417".into(), "FRA".into(), 2);
    second.push(StoreId::DenoKv, ok(4.5, true, 23_456, None));
    second.push(StoreId::Kv, ok(0.875, true, 23_456, None));
    second.push(StoreId::Upstash, ok(2.0, true, 23_456, None));

    // Failures are data points: a failed write after a miss, a read that timed out, a store that
    // is not configured in this deployment.
    let mut third = Answer::new("k-9".into(), "local".into(), 3);
    // Two other requests of the isolate overlapped this one.
    third.concurrent = Some(2);
    third.push(
        StoreId::Kv,
        StoreResult {
            error: Some(failed(
                StoreError::new(ErrorKind::Runtime, "KV put failed"),
                Op::Write,
            )),
            ..ok(11.0, false, 100, Some(30.5))
        },
    );
    third.push(
        StoreId::Upstash,
        StoreResult {
            read_ms: Some(2500.0),
            error: Some(failed(
                StoreError::new(ErrorKind::Timeout, "no answer within 2500 ms"),
                Op::Read,
            )),
            // The timed-out call, waited for before the next store, finished 310.5 ms later.
            abandoned: Some(Abandoned {
                finished: true,
                waited_ms: 310.5,
            }),
            ..StoreResult::default()
        },
    );
    third.push(
        StoreId::DenoKv,
        StoreResult {
            error: Some(failed(
                StoreError::new(ErrorKind::NotConfigured, "DENO_KV_URL is not set"),
                Op::Read,
            )),
            ..StoreResult::default()
        },
    );

    // The stores of the bindings and sockets: a miss and write in the Durable Object, D1 and
    // R2, Redis's per-request connection timed apart, the Cache API not usable on *.workers.dev,
    // and a Redis whose setup failed (no read made, the setup's time kept). The Durable Object
    // is one placed by a location hint (`do_location`, as a hint probe measures it).
    let mut fourth = Answer::new("7".into(), "SIN".into(), 4);
    fourth.push(
        StoreId::Do,
        StoreResult {
            location_hint: Some("apac".into()),
            ..ok(21.5, false, 4096, Some(19.25))
        },
    );
    fourth.push(StoreId::D1, ok(31.0, true, 4096, None));
    fourth.push(StoreId::R2, ok(44.125, false, 4096, Some(80.0)));
    fourth.push(
        StoreId::Redis,
        StoreResult {
            connect_ms: Some(round_ms(17.5)),
            ..ok(1.75, true, 4096, None)
        },
    );
    fourth.push(
        StoreId::Cache,
        StoreResult {
            error: Some(failed(
                StoreError::new(
                    ErrorKind::NotConfigured,
                    "the Cache API has no effect on *.workers.dev",
                ),
                Op::Read,
            )),
            ..StoreResult::default()
        },
    );
    let mut fifth = Answer::new("8".into(), "SIN".into(), 5);
    fifth.push(
        StoreId::Redis,
        StoreResult {
            connect_ms: Some(round_ms(12.0)),
            error: Some(failed(
                StoreError::new(
                    ErrorKind::Auth,
                    "Redis: WRONGPASS invalid username-password pair",
                ),
                Op::Read,
            )),
            ..StoreResult::default()
        },
    );
    // A placed fleet member's answer: its `do` object is its colo's own (`do_scope=colo`).
    let mut sixth = Answer::new("9".into(), "IAD".into(), 2);
    sixth.push(
        StoreId::Do,
        StoreResult {
            near_colo: Some("IAD".into()),
            ..ok(3.25, true, 4096, None)
        },
    );
    // What the stores reported about their own calls, read after the spans
    // (`kvbench_core::stores::meta`): a D1 read that D1 ran twice on a replica, then its write
    // on the primary (the batch's SQL time summed); a KV read with its cache status; a D1 read
    // as Miniflare reports it (no colo, a SQL time of 0).
    let d1_meta = |json: &str| Some(kvbench_core::stores::meta::d1(json));
    let mut seventh = Answer::new("10".into(), "AMS".into(), 6);
    seventh.push(
        StoreId::D1,
        StoreResult {
            read_meta: d1_meta(
                r#"{"served_by_colo":"AMS","served_by_primary":false,"timings":{"sql_duration_ms":0.2741},"total_attempts":2}"#,
            ),
            read_retried: Some(true),
            write_meta: Some(kvbench_core::stores::meta::d1_batch([
                r#"{"served_by_colo":"CDG","served_by_primary":true,"timings":{"sql_duration_ms":0.5},"total_attempts":1}"#,
                r#"{"served_by_colo":"CDG","served_by_primary":true,"timings":{"sql_duration_ms":0.125},"total_attempts":1}"#,
            ])),
            ..ok(38.5, false, 4096, Some(61.25))
        },
    );
    seventh.push(
        StoreId::Kv,
        StoreResult {
            read_meta: Some(kvbench_core::stores::meta::kv(Some("HIT".into()))),
            ..ok(1.5, true, 4096, None)
        },
    );
    let mut eighth = Answer::new("11".into(), "local".into(), 2);
    eighth.push(
        StoreId::D1,
        StoreResult {
            read_meta: d1_meta(
                r#"{"served_by":"miniflare.db","served_by_primary":true,"total_attempts":1,"timings":{"sql_duration_ms":0}}"#,
            ),
            ..ok(2.0, true, 4096, None)
        },
    );
    vec![first, second, third, fourth, fifth, sixth, seventh, eighth]
}

#[test]
fn serializer_writes_the_golden_answers() {
    let actual: String = answers().iter().map(|a| a.to_json() + "\n").collect();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wire/tests/golden/answer.jsonl");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "the /test answer changed: if intended, rerun with UPDATE_GOLDEN=1, review the diff and \
         run kvbench's tests (its parser reads the same file)\n--- actual ---\n{actual}"
    );
}
