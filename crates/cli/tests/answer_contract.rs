//! The `/test` answer contract, reader's side: kvbench's parser must read every answer in core's
//! golden file (crates/wire/tests/golden/answer.jsonl, written by core's serializer) and agree
//! with it field by field. Both sides test the same file, so neither can drift alone.

use std::path::Path;

use kvbench::batch::{self, Read, RequestEnd};
use kvbench_report::answer::{parse, parse_ref, StoreResult};
use kvbench_wire::answer::Op;
use serde_json::Value;

fn golden() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wire/tests/golden/answer.jsonl");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Milliseconds as the worker writes them, in kvbench's whole microseconds.
fn us(v: &Value) -> Option<u64> {
    v.as_f64().map(|ms| (ms * 1000.0).round() as u64)
}

/// Fields kvbench reads, or knowingly ignores: a field renamed or added on the worker's side
/// fails here instead of silently reading as absent.
const ANSWER_FIELDS: [&str; 8] = [
    "key",
    "colo",
    "stores",
    "order",
    "isolate_requests",
    "concurrent",
    "kvLatency",
    "redisLatency",
];
const STORE_FIELDS: [&str; 12] = [
    "read_ms",
    "hit",
    "value_bytes",
    "write_ms",
    "connect_ms",
    "error",
    "abandoned",
    // Ignored: the kept line's label already says which probe (and so which hint or colo) measured.
    "location_hint",
    "near_colo",
    // Read for their `sql_ms`; the rest stays in the kept answers.
    "read_meta",
    "write_meta",
    // Ignored: `read_meta.attempts` says the same.
    "read_retried",
];
const ERROR_FIELDS: [&str; 3] = ["kind", "message", "op"];

fn known(at: &str, wire: &Value, fields: &[&str]) {
    for key in wire.as_object().unwrap().keys() {
        assert!(
            fields.contains(&key.as_str()),
            "{at}: field {key:?} is unknown to kvbench's parser (crates/report/src/answer.rs)"
        );
    }
}

fn check_store(line: usize, name: &str, wire: &Value, got: &StoreResult) {
    let at = format!("line {line}, store {name}");
    known(&at, wire, &STORE_FIELDS);
    if wire["error"].is_object() {
        known(&at, &wire["error"], &ERROR_FIELDS);
    }
    assert_eq!(got.read_us, us(&wire["read_ms"]), "{at}: read_ms");
    assert_eq!(
        got.abandoned,
        wire["abandoned"]["finished"].as_bool(),
        "{at}: abandoned"
    );
    assert_eq!(got.write_us, us(&wire["write_ms"]), "{at}: write_ms");
    assert_eq!(
        got.connect_us,
        wire.get("connect_ms").and_then(us),
        "{at}: connect_ms"
    );
    assert_eq!(
        got.read_sql_us,
        us(&wire["read_meta"]["sql_ms"]),
        "{at}: read_meta.sql_ms"
    );
    assert_eq!(
        got.write_sql_us,
        us(&wire["write_meta"]["sql_ms"]),
        "{at}: write_meta.sql_ms"
    );
    assert_eq!(got.hit, wire["hit"].as_bool(), "{at}: hit");
    assert_eq!(
        got.value_bytes,
        wire["value_bytes"].as_u64(),
        "{at}: value_bytes"
    );
    match (&got.error, &wire["error"]) {
        (None, Value::Null) => {}
        (Some(e), w) => {
            assert_eq!(
                Some(e.kind.as_str()),
                w["kind"].as_str(),
                "{at}: error.kind"
            );
            assert_eq!(Some(e.message.as_str()), w["message"].as_str(), "{at}");
            assert_eq!(
                e.op.map(|op| if op == Op::Read { "read" } else { "write" }),
                w["op"].as_str(),
                "{at}: error.op"
            );
        }
        (None, w) => panic!("{at}: error {w} was not read"),
    }
}

#[test]
fn parser_reads_every_golden_answer_field_by_field() {
    let text = golden();
    let mut shapes = std::collections::BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let wire: Value = serde_json::from_str(line).unwrap();
        known(&format!("line {n}"), &wire, &ANSWER_FIELDS);
        let a = parse(line.as_bytes()).unwrap_or_else(|e| panic!("line {n}: {e}"));
        assert_eq!(a.key.as_deref(), wire["key"].as_str(), "line {n}: key");
        assert_eq!(
            a.concurrent.map(u64::from),
            wire["concurrent"].as_u64(),
            "line {n}: concurrent"
        );
        assert_eq!(
            Some(a.colo.as_str()),
            wire["colo"].as_str(),
            "line {n}: colo"
        );
        let stores = wire["stores"].as_object().unwrap();
        assert_eq!(
            a.stores.keys().collect::<Vec<_>>(),
            {
                let mut names: Vec<_> = stores.keys().collect();
                names.sort();
                names
            },
            "line {n}: every store, once"
        );
        for (name, w) in stores {
            let got = &a.stores[name];
            check_store(n, name, w, got);
            shapes.insert(match (&got.error, got.hit) {
                (Some(e), _) if e.is_write() => "failed write",
                (Some(e), _) if e.kind.as_str() == "not_configured" => "not configured",
                (Some(_), _) => "failed read",
                (None, Some(true)) => "hit",
                (None, Some(false)) if got.write_us.is_some() => "miss and write",
                (None, _) => "other",
            });
            if got.connect_us.is_some() {
                shapes.insert("connect");
            }
        }
        // The engine's path (borrowing, through the results batch) reads the same answer.
        assert_eq!(parse_ref(line.as_bytes()).unwrap().into_owned(), a);
        match batch::read(RequestEnd::Answered(200), line.as_bytes()) {
            Read::Answer(r) => assert_eq!(r.into_owned(), a, "line {n}"),
            Read::Failure(kind, detail) => panic!("line {n}: {kind:?} {}", detail.describe()),
        }
    }
    // The file keeps covering every shape a store result takes.
    for shape in [
        "hit",
        "miss and write",
        "failed write",
        "failed read",
        "not configured",
        "connect",
    ] {
        assert!(shapes.contains(shape), "no {shape} in the golden answers");
    }
}
