//! The `/test` answer contract, writer's side: core's serializer must produce
//! `crates/wire/tests/golden/answer.jsonl` byte for byte — one line per answer, each exactly a body the
//! worker sends. kvbench's parser reads the same file (crates/cli/tests/answer_contract.rs), so
//! the two sides cannot drift apart unnoticed. The answers are assembled as `probe` assembles
//! them (`Answer::new`, then `push` per store in measurement order, times through `round_ms`)
//! and cover every shape a store result takes: hit, miss with a write, a failed write, a failed
//! read, a store that is not configured, a connection setup time (with and without a read after
//! it), a shuffled order — for the original stores and for the bindings' and Redis's.
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
    vec![first, second, third, fourth, fifth, sixth]
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
