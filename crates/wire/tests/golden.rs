//! One golden file per shape, in `tests/golden/`:
//!
//! - `answer.jsonl`, the `/test` answer, is written by the worker's own types (core's
//!   `answer_golden` test builds it the way a request does); here every line is read as kvbench
//!   reads it and must write back byte for byte — the reader loses nothing the writer wrote;
//! - `kept.jsonl`, the kept line (as a stream hands it out, `seq` first), and `control.jsonl`,
//!   a stream's end and error lines, and `object.jsonl`, the messages between the worker and
//!   its Durable Objects, are written here and read back equal;
//! - `calls.txt`, the calls of each Durable Object class (method and path), and `report.txt`,
//!   the worker ↔ report worker queries and the bill's head, likewise.
//!
//! Refresh with `UPDATE_GOLDEN=1 cargo test -p kvbench-wire --test golden` after an intended
//! change, review the diff, and run the readers' tests; never edit them by hand.

use std::path::{Path, PathBuf};

use kvbench_wire::answer::Answer;
use kvbench_wire::kept::{with_seq, Embedded, Failure, FailureKind, Kept, PlacementCheck, Vantage};
use kvbench_wire::stream::{Control, Frame};
use kvbench_wire::Name;

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

fn check(name: &str, actual: &str) {
    let path = golden(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 creates it)", path.display()));
    assert!(
        expected == actual,
        "{name} changed: if intended, rerun with UPDATE_GOLDEN=1 and review the diff\n--- actual ---\n{actual}"
    );
}

const ANSWER: &str = r#"{"key":"417","colo":"FRA","order":["kv"],"isolate_requests":3,"concurrent":1,"stores":{"kv":{"read_ms":0.875,"hit":true,"value_bytes":23456,"write_ms":null,"error":null}},"kvLatency":0.875,"redisLatency":null}"#;

fn kept_lines() -> Vec<Kept<'static>> {
    let hint = Kept {
        seq: None,
        t_ms: 1_764_547_200_000,
        label: "weur".into(),
        vantage: Vantage::Hint,
        hint: Some("weur".into()),
        colo: "LHR".into(),
        placement: None,
        trace_colo: None,
        trace_disagrees: false,
        placement_check: None,
        cold: true,
        colo_changed: false,
        handler_ms: Some(41.25),
        call_ms: None,
        answer: Embedded::new(ANSWER),
        failure: None,
    };
    let member = Kept {
        label: "aws:us-east-1".into(),
        vantage: Vantage::Member,
        hint: None,
        colo: "IAD".into(),
        placement: Some("remote-IAD".into()),
        trace_colo: Some("IAD".into()),
        placement_check: Some(PlacementCheck::Placed),
        cold: false,
        handler_ms: Some(38.5),
        call_ms: Some(112.75),
        ..hint.clone()
    };
    let unplaced = Kept {
        placement: Some("local-EWR".into()),
        trace_colo: Some("unknown".into()),
        placement_check: Some(PlacementCheck::Unplaced),
        ..member.clone()
    };
    // Its trace names a colo outside the region, and cf-placement another: both counted.
    let astray = Kept {
        trace_colo: Some("NRT".into()),
        trace_disagrees: true,
        placement_check: Some(PlacementCheck::TraceElsewhere),
        ..member.clone()
    };
    let unreachable = Kept {
        colo: "unknown".into(),
        placement: None,
        trace_colo: None,
        placement_check: None,
        handler_ms: None,
        call_ms: Some(150_000.0),
        answer: None,
        failure: Some(Failure {
            kind: FailureKind::Timeout,
            status: None,
            detail: "no answer within 150 s".into(),
        }),
        ..member.clone()
    };
    let refused = Kept {
        failure: Some(Failure {
            kind: FailureKind::Status,
            status: Some(503),
            detail: "busy".into(),
        }),
        ..unreachable.clone()
    };
    let run = Kept {
        label: "FRA".into(),
        vantage: Vantage::Run,
        hint: None,
        colo: "FRA".into(),
        colo_changed: false,
        ..hint.clone()
    };
    vec![hint, member, unplaced, astray, unreachable, refused, run]
}

#[test]
fn every_golden_answer_reads_back_and_writes_the_same_bytes() {
    let text = std::fs::read_to_string(golden("answer.jsonl")).unwrap();
    assert!(text.lines().count() >= 5);
    for line in text.lines() {
        let answer: Answer<Name> = serde_json::from_str(line).unwrap();
        assert_eq!(answer.to_json(), line);
    }
}

#[test]
fn the_kept_line_is_the_golden_one_and_reads_back() {
    let lines = kept_lines();
    let actual: String = lines
        .iter()
        .enumerate()
        .map(|(i, k)| with_seq(i as i64 + 1, &k.to_line()) + "\n")
        .collect();
    check("kept.jsonl", &actual);
    for (i, (line, want)) in actual.lines().zip(&lines).enumerate() {
        let Frame::Kept(back) = Frame::parse(line.as_bytes()).unwrap() else {
            panic!("line {i} is not a kept line");
        };
        assert_eq!(back.seq, Some(i as i64 + 1));
        assert_eq!(&Kept { seq: None, ..back }, want);
    }
}

#[test]
fn the_control_lines_are_the_golden_ones_and_read_back() {
    let actual = format!(
        "{}\n{}\n",
        Control::end_line(5, 2),
        Control::error_line("reading the kept answers of weur after seq 500 failed: status 500")
    );
    check("control.jsonl", &actual);
    let frames: Vec<Frame> = actual
        .lines()
        .map(|l| Frame::parse(l.as_bytes()).unwrap())
        .collect();
    assert_eq!(
        frames[0],
        Frame::End {
            lines: Some(5),
            keep_failed: Some(2)
        }
    );
    assert!(matches!(&frames[1], Frame::Stopped(m) if m.contains("after seq 500")));
}

/// The messages between the worker and its Durable Objects (`object`): each written once,
/// read back equal.
#[test]
fn the_object_messages_are_the_golden_ones_and_read_back() {
    use kvbench_wire::object::{
        Arm, ArmMember, Armed, Directory, DirectoryChange, PlacementCounts, ProbeStatus,
        ShardStatus, Stopped,
    };
    let hint_arm = Arm {
        hint: Some("weur".into()),
        member: None,
        every_s: 300,
        keep_s: 604_800,
    };
    let member_arm = Arm {
        hint: None,
        member: Some(ArmMember {
            label: "aws:us-east-1".into(),
            url: "https://kvbench-aws-us-east-1.example.workers.dev".into(),
        }),
        every_s: 300,
        keep_s: 604_800,
    };
    let armed = Armed {
        armed: true,
        stopped: false,
    };
    let hint_status = ProbeStatus {
        hint: Some("weur".into()),
        member: None,
        colo: Some("LHR".into()),
        every_s: 300,
        keep_s: 604_800,
        running: true,
        stopped: false,
        next_alarm_ms: Some(1_790_000_300_000),
        kept: 288,
        first_t_ms: Some(1_789_913_900_000),
        last_t_ms: Some(1_790_000_000_000),
        last_error: None,
        keep_failed: 0,
        expire_failed: 0,
        placement: None,
    };
    let member_status = ProbeStatus {
        hint: None,
        member: Some("aws:us-east-1".into()),
        colo: Some("IAD".into()),
        last_error: Some("unplaced: the answer has no cf-placement header".into()),
        keep_failed: 1,
        expire_failed: 2,
        placement: Some(PlacementCounts {
            placed: 280,
            unplaced: 3,
            elsewhere: 1,
            trace_elsewhere: 2,
            trace_disagrees: 4,
            last: Some("remote-IAD".into()),
            last_trace: Some("IAD".into()),
        }),
        ..hint_status.clone()
    };
    let shard = ShardStatus {
        kept: 1_200,
        first_t_ms: Some(1_790_000_000_000),
        last_t_ms: Some(1_790_000_060_000),
        keep_failed: 2,
    };
    let stopped = Stopped { stopped: true };
    let change = DirectoryChange {
        armed: [(
            "aws:us-east-1".to_string(),
            "https://kvbench-aws-us-east-1.example.workers.dev".to_string(),
        )]
        .into(),
        forget: vec!["gcp:asia-east1".into()],
    };
    let directory = Directory {
        members: change.armed.clone(),
    };
    let lines = [
        serde_json::to_string(&hint_arm).unwrap(),
        serde_json::to_string(&member_arm).unwrap(),
        serde_json::to_string(&armed).unwrap(),
        serde_json::to_string(&hint_status).unwrap(),
        serde_json::to_string(&member_status).unwrap(),
        serde_json::to_string(&shard).unwrap(),
        serde_json::to_string(&stopped).unwrap(),
        serde_json::to_string(&change).unwrap(),
        serde_json::to_string(&directory).unwrap(),
    ];
    check("object.jsonl", &(lines.join("\n") + "\n"));
    assert_eq!(serde_json::from_str::<Arm>(&lines[0]).unwrap(), hint_arm);
    assert_eq!(serde_json::from_str::<Arm>(&lines[1]).unwrap(), member_arm);
    assert_eq!(serde_json::from_str::<Armed>(&lines[2]).unwrap(), armed);
    assert_eq!(
        serde_json::from_str::<ProbeStatus>(&lines[3]).unwrap(),
        hint_status
    );
    assert_eq!(
        serde_json::from_str::<ProbeStatus>(&lines[4]).unwrap(),
        member_status
    );
    assert_eq!(
        serde_json::from_str::<ShardStatus>(&lines[5]).unwrap(),
        shard
    );
    assert_eq!(serde_json::from_str::<Stopped>(&lines[6]).unwrap(), stopped);
    assert_eq!(
        serde_json::from_str::<DirectoryChange>(&lines[7]).unwrap(),
        change
    );
    assert_eq!(
        serde_json::from_str::<Directory>(&lines[8]).unwrap(),
        directory
    );
    // The lean readers the worker uses read what `Deserialize` reads.
    let value = |i: usize| serde_json::from_str::<serde_json::Value>(&lines[i]).unwrap();
    assert_eq!(DirectoryChange::read(&value(7)), change);
    assert_eq!(Directory::read(&value(8)), directory);
    assert_eq!(
        Directory::read(&serde_json::json!({})),
        Directory::default()
    );
    // The status readers behind the budget's `running`/`every_s` and the run totals: a field
    // they misread would be a silent 0 or false there.
    assert_eq!(ProbeStatus::read(&value(3)), hint_status);
    assert_eq!(ProbeStatus::read(&value(4)), member_status);
    assert_eq!(ShardStatus::read(&value(5)), shard);
    assert_eq!(Armed::read(&value(2)), armed);
    assert_eq!(Stopped::read(&value(6)), stopped);
    assert_eq!(
        Armed::read(&serde_json::json!({"armed": "yes"})),
        serde_json::from_value::<Armed>(serde_json::json!({"armed": false, "stopped": false}))
            .unwrap()
    );
    for empty in [
        serde_json::json!({}),
        serde_json::json!({"kept": "many", "running": 1}),
    ] {
        assert_eq!(
            ProbeStatus::read(&empty),
            serde_json::from_value::<ProbeStatus>(serde_json::json!({})).unwrap()
        );
        assert_eq!(ShardStatus::read(&empty), ShardStatus::default());
    }
}

/// The calls of each Durable Object class (`object::ObjectCall`), one line each, as the worker
/// sends them and the object's `fetch` dispatches them: each read back as itself, and nothing
/// else is one.
#[test]
fn the_object_calls_are_the_golden_ones_and_read_back() {
    use kvbench_wire::object::{DirectoryCall, ObjectCall, ProbeCall, ShardCall};
    fn lines<C: ObjectCall + std::fmt::Debug + PartialEq>(class: &str, out: &mut String) {
        for &call in C::ALL {
            out.push_str(&format!("{class} {} {}\n", call.method(), call.path()));
            assert_eq!(C::of(call.method(), call.path()), Some(call));
        }
        let other = if C::ALL[0].method() == "GET" {
            "PUT"
        } else {
            "DELETE"
        };
        assert_eq!(C::of(other, C::ALL[0].path()), None);
        assert_eq!(C::of("GET", "/nothing"), None);
    }
    let mut actual = String::new();
    lines::<ProbeCall>("probe", &mut actual);
    lines::<ShardCall>("shard", &mut actual);
    lines::<DirectoryCall>("directory", &mut actual);
    check("calls.txt", &actual);
    // One stream reads the pages of probes and shards alike (the worker's `answers_stream`).
    assert_eq!(ProbeCall::Answers.path(), ShardCall::Answers.path());
    assert_eq!(ProbeCall::Answers.method(), ShardCall::Answers.method());
}

/// The worker ↔ report worker exchange (`report`): the render and bill queries as the worker
/// writes them, read back equal by the report worker's reader; the bill's head as the worker
/// reads it, by `BillHead::read` and by `Deserialize`.
#[test]
fn the_report_exchange_is_the_golden_one_and_reads_back() {
    use kvbench_wire::report::{BillHead, BillQuery, Format, RenderQuery, Span};
    let span = Span {
        origin_ms: 1_790_000_000_000,
        span_ms: 86_400_000,
        since_ms: Some(1_789_913_600_000),
        until_ms: Some(1_790_000_000_001),
    };
    let render = RenderQuery {
        span,
        window_s: Some(86_400),
        format: Format::Json,
    };
    let bill = BillQuery {
        span,
        probes: 14,
        every_s: 300,
        keep_s: 604_800,
    };
    let priced = BillHead {
        monthly_usd: Some(12.5),
        answers_per_month: Some(120_960.0),
        why: None,
    };
    let unpriced = BillHead {
        monthly_usd: None,
        answers_per_month: None,
        why: Some("no probe answer is kept yet".into()),
    };
    let lines = [
        render.query(),
        bill.query(),
        serde_json::to_string(&priced).unwrap(),
        serde_json::to_string(&unpriced).unwrap(),
    ];
    check("report.txt", &(lines.join("\n") + "\n"));
    let pairs = |q: &str| -> Vec<(String, String)> {
        q.split('&')
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let get = |q: &str| {
        let pairs = pairs(q);
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    };
    assert_eq!(RenderQuery::read(get(&lines[0])), Ok(render));
    assert_eq!(BillQuery::read(get(&lines[1])), Ok(bill));
    for (line, head) in [(&lines[2], &priced), (&lines[3], &unpriced)] {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(&BillHead::read(&value), head);
        assert_eq!(&serde_json::from_str::<BillHead>(line).unwrap(), head);
    }
    assert_eq!(priced.per_answer_usd(), Some(12.5 / 120_960.0));
    assert_eq!(unpriced.per_answer_usd(), None);
    // A bill that carries more (the report worker's whole `Bill`) reads as its head.
    let whole = serde_json::json!({"monthly_usd": 3.0, "answers_per_month": 6.0, "stores": [], "note": "n"});
    assert_eq!(BillHead::read(&whole).per_answer_usd(), Some(0.5));
    assert_eq!(BillHead::read(&serde_json::json!({})), BillHead::default());
    // The report worker's rules for a bill's query.
    let without = "origin_ms=1&span_ms=0&every_s=300";
    assert!(BillQuery::read(get(without)).is_err());
    let zero = "origin_ms=1&span_ms=0&probes=0&every_s=300";
    assert_eq!(
        BillQuery::read(get(zero)),
        Err("probes >= 1 and every_s > 0".into())
    );
    assert!(
        RenderQuery::read(get("span_ms=1")).is_err(),
        "origin_ms is required"
    );
    let bare = RenderQuery::read(get("origin_ms=5")).unwrap();
    assert_eq!(
        (bare.span.span_ms, bare.window_s, bare.format),
        (0, None, Format::Html)
    );
}
