//! `kvbench import k6` on small hostile files (issue 16 item 8): far-apart or absurd times,
//! absurd counts and values, over-long lines and huge tags. Each is refused as malformed with its
//! reason, counted in the import figures, and what is kept stays small — asserted on the report's
//! structure (timeline length, JSON size), never on how long the import took.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use kvbench::import::{import_k6, ImportOptions};
use kvbench_report::report::{ImportInfo, Report};

const T0: &str = "2026-11-30T10:00:00.000000000Z";

fn point(metric: &str, time: &str, value: &str, tags: &str, req: Option<&str>) -> String {
    let meta = req.map_or(String::new(), |r| {
        format!(r#","metadata":{{"kvbench_req":"{r}"}}"#)
    });
    format!(
        r#"{{"metric":"{metric}","type":"Point","data":{{"time":"{time}","value":{value},"tags":{{{tags}}}{meta}}}}}"#
    )
}

fn config(duration: &str) -> String {
    point(
        "kvbench_config",
        T0,
        "10",
        &format!(r#""url":"https://w.example/test","duration":"{duration}""#),
        None,
    )
}

/// One answered request ending at `time`, with one store `kv` whose value size is `bytes`.
fn request(lines: &mut Vec<String>, id: &str, time: &str, bytes: &str, request_ms: &str) {
    let t = r#""store":"kv""#;
    lines.push(point("kvbench_store_value_bytes", time, bytes, t, Some(id)));
    lines.push(point(
        "kvbench_store_read_ms",
        time,
        "7.5",
        &format!(r#"{t},"result":"hit""#),
        Some(id),
    ));
    lines.push(point(
        "kvbench_request_ms",
        time,
        request_ms,
        r#""outcome":"ok","colo":"FRA""#,
        Some(id),
    ));
}

fn failed(lines: &mut Vec<String>, id: &str, time: &str, outcome: &str, detail: &str) {
    lines.push(point(
        "kvbench_request_ms",
        time,
        "20",
        &format!(r#""outcome":"{outcome}","detail":"{detail}""#),
        Some(id),
    ));
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kvbench-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn import(path: PathBuf) -> Report {
    import_k6(
        &[path],
        &ImportOptions {
            label: None,
            interval: None,
        },
    )
    .unwrap()
}

fn info(r: &Report) -> &ImportInfo {
    r.runs.iter().find_map(|run| run.import.as_ref()).unwrap()
}

/// Every refusal is a malformed line, and each has its reason.
fn refused(r: &Report, reason: &str) -> u64 {
    let i = info(r);
    assert_eq!(
        i.refused.values().sum::<u64>(),
        i.malformed_lines,
        "{:?}",
        i.refused
    );
    i.refused.get(reason).copied().unwrap_or(0)
}

fn json_len(r: &Report) -> usize {
    serde_json::to_vec(r).unwrap().len()
}

/// Two requests ten years apart, one in year 9999, and one 40 days after a 10 s run: the far ones
/// are refused, and the timeline covers the run, not the gap.
#[test]
fn points_far_outside_the_run_are_refused_and_the_timeline_stays_short() {
    let dir = scratch("span");
    for (name, far) in [
        ("ten-years", "2036-11-30T10:00:01.000000000Z"),
        ("year-9999", "9999-12-31T23:59:59.000000000Z"),
        ("forty-days", "2027-01-09T10:00:01.000000000Z"),
        ("years-before", "2016-11-30T10:00:01.000000000Z"),
    ] {
        let mut lines = vec![config("10s")];
        request(
            &mut lines,
            "1:0",
            "2026-11-30T10:00:01.000000000Z",
            "100",
            "20",
        );
        request(&mut lines, "1:1", far, "100", "20");
        request(
            &mut lines,
            "1:2",
            "2026-11-30T10:00:02.000000000Z",
            "100",
            "20",
        );
        let r = import(write(&dir, &format!("{name}.json"), &lines));
        assert_eq!(r.total.answered, 2, "{name}");
        // The far request's three points.
        assert_eq!(refused(&r, "time_outside_run"), 3, "{name}: {:?}", info(&r));
        assert!(
            r.timeline.intervals.len() <= 4,
            "{name}: {} intervals",
            r.timeline.intervals.len()
        );
        assert!(json_len(&r) < 64 * 1024, "{name}: {} bytes", json_len(&r));
    }
}

/// Without a declared duration the span is still capped (31 days), and however the points spread
/// inside it, the timeline has a bounded number of intervals.
#[test]
fn a_file_without_a_config_is_capped_and_its_timeline_bounded() {
    let dir = scratch("noconfig");
    let mut lines = Vec::new();
    // One request a day for 30 days at 10 s intervals would be 259,200 intervals.
    for day in 0..30 {
        let t = format!("2026-11-{:02}T10:00:00.000000000Z", day + 1);
        request(&mut lines, &format!("1:{day}"), &t, "100", "20");
    }
    request(
        &mut lines,
        "1:99",
        "2027-02-01T10:00:00.000000000Z",
        "100",
        "20",
    );
    let r = import(write(&dir, "noconfig.json", &lines));
    assert_eq!(r.total.answered, 30);
    assert_eq!(refused(&r, "time_outside_run"), 3);
    let n = r.timeline.intervals.len();
    assert!(n <= 10_000, "{n} intervals");
    assert_eq!(
        r.timeline
            .intervals
            .iter()
            .map(|iv| iv.scheduled)
            .sum::<u64>(),
        30
    );
    assert!(json_len(&r) < 4 * 1024 * 1024, "{} bytes", json_len(&r));
}

/// `dropped_iterations` is a count: a plausible one is added in bulk, an absurd one is refused.
#[test]
fn dropped_iterations_are_counted_in_bulk_and_absurd_counts_refused() {
    let dir = scratch("dropped");
    let mut lines = vec![config("10s")];
    request(
        &mut lines,
        "1:0",
        "2026-11-30T10:00:01.000000000Z",
        "100",
        "20",
    );
    for value in ["1e15", "1e9", "-3", "2.5", "1e308"] {
        lines.push(point(
            "dropped_iterations",
            "2026-11-30T10:00:02.000000000Z",
            value,
            "",
            None,
        ));
    }
    lines.push(point(
        "dropped_iterations",
        "2026-11-30T10:00:02.000000000Z",
        "250000",
        "",
        None,
    ));
    let r = import(write(&dir, "dropped.json", &lines));
    assert_eq!(r.total.not_sent(), 250_000);
    assert_eq!(r.total.scheduled, 250_001);
    assert_eq!(refused(&r, "value_out_of_range"), 5, "{:?}", info(&r));
    let sched: u64 = r.timeline.intervals.iter().map(|iv| iv.scheduled).sum();
    assert_eq!(sched, 250_001);
}

/// Durations and sizes no run can produce are refused, not printed.
#[test]
fn implausible_values_are_refused() {
    let dir = scratch("values");
    let mut lines = vec![config("10s")];
    request(
        &mut lines,
        "1:0",
        "2026-11-30T10:00:01.000000000Z",
        "100",
        "20",
    );
    // value_bytes: far over the benchmark's 1 MiB, negative, fractional.
    request(
        &mut lines,
        "1:1",
        "2026-11-30T10:00:01.100000000Z",
        "1e308",
        "20",
    );
    request(
        &mut lines,
        "1:2",
        "2026-11-30T10:00:01.200000000Z",
        "-5",
        "20",
    );
    request(
        &mut lines,
        "1:3",
        "2026-11-30T10:00:01.300000000Z",
        "1048577",
        "20",
    );
    // Request times: over a day, negative.
    request(
        &mut lines,
        "1:4",
        "2026-11-30T10:00:01.400000000Z",
        "100",
        "1e308",
    );
    request(
        &mut lines,
        "1:5",
        "2026-11-30T10:00:01.500000000Z",
        "100",
        "86400001",
    );
    request(
        &mut lines,
        "1:6",
        "2026-11-30T10:00:01.600000000Z",
        "100",
        "-1",
    );
    // A store time of 1e308 ms.
    lines.push(point(
        "kvbench_store_read_ms",
        "2026-11-30T10:00:01.700000000Z",
        "1e308",
        r#""store":"kv","result":"hit""#,
        Some("1:7"),
    ));
    lines.push(point(
        "kvbench_request_ms",
        "2026-11-30T10:00:01.700000000Z",
        "20",
        r#""outcome":"ok","colo":"FRA""#,
        Some("1:7"),
    ));
    // A status that is not HTTP.
    failed(
        &mut lines,
        "1:8",
        "2026-11-30T10:00:01.800000000Z",
        "http_65535",
        "x",
    );
    let r = import(write(&dir, "values.json", &lines));
    // 1:0, and the requests whose bad store point was refused (their other points are kept).
    assert_eq!(refused(&r, "value_out_of_range"), 8, "{:?}", info(&r));
    let kv = &r.total.stores["kv"];
    assert!(kv.read_us.max() <= 10_000, "{}", kv.read_us.max());
    assert!(r.total.latency_us.max() <= 100_000);
    assert!(r.total.stores["kv"].write_bytes.max() <= 1 << 20);
    assert!(r.total.failures.keys().all(|k| k != "http_65535"));
    // A declared duration of centuries is refused too (the config point).
    let lines = vec![
        config("1000years"),
        point(
            "kvbench_request_ms",
            "2026-11-30T10:00:01.000000000Z",
            "20",
            r#""outcome":"ok""#,
            Some("1"),
        ),
    ];
    let r = import(write(&dir, "centuries.json", &lines));
    assert_eq!(refused(&r, "value_out_of_range"), 1, "{:?}", info(&r));
    assert!(r.runs[0].planned_duration_s < 1.0);
}

/// A failure's detail is an example in report.json: it is shortened, however long the tag.
#[test]
fn failure_examples_are_short_however_long_the_detail() {
    let dir = scratch("examples");
    let mut lines = vec![config("10s")];
    let huge = "x".repeat(500_000);
    for i in 0..3 {
        failed(
            &mut lines,
            &format!("1:{i}"),
            "2026-11-30T10:00:01.000000000Z",
            "http_500",
            &format!("{i}{huge}"),
        );
    }
    let r = import(write(&dir, "examples.json", &lines));
    assert_eq!(r.total.failures.get("http_500"), Some(&3));
    let examples = &r.total.failure_examples["http_500"];
    assert!(!examples.is_empty());
    assert!(
        examples.iter().all(|e| e.len() <= 512),
        "{}",
        examples[0].len()
    );
    assert!(json_len(&r) < 64 * 1024, "{} bytes", json_len(&r));
}

/// A line over the cap is skipped to its end and counted; the lines after it are read.
#[test]
fn an_over_long_line_is_skipped_and_counted() {
    let dir = scratch("long");
    let mut lines = vec![config("10s")];
    request(
        &mut lines,
        "1:0",
        "2026-11-30T10:00:01.000000000Z",
        "100",
        "20",
    );
    // Valid JSON, 3 MiB: a detail tag far over any k6 line.
    failed(
        &mut lines,
        "1:1",
        "2026-11-30T10:00:01.000000000Z",
        "http_500",
        &"y".repeat(3 << 20),
    );
    request(
        &mut lines,
        "1:2",
        "2026-11-30T10:00:02.000000000Z",
        "100",
        "20",
    );
    let path = dir.join("long.json.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::fast(),
    );
    enc.write_all((lines.join("\n") + "\n").as_bytes()).unwrap();
    enc.finish().unwrap();
    let r = import(path);
    assert_eq!(r.total.answered, 2);
    assert_eq!(r.total.failures.get("http_500"), None);
    assert_eq!(refused(&r, "line_too_long"), 1, "{:?}", info(&r));
    assert_eq!(info(&r).lines, 8);
    assert!(!info(&r).truncated);

    // The same line as the last, without a newline: cut short, and still skipped.
    let mut cut = lines[..4].join("\n");
    cut.push('\n');
    cut.push_str(&format!(
        r#"{{"metric":"kvbench_request_ms","{}"#,
        "z".repeat(3 << 20)
    ));
    let path = dir.join("cut.json");
    std::fs::write(&path, cut).unwrap();
    let r = import(path);
    assert_eq!(refused(&r, "line_too_long"), 1, "{:?}", info(&r));
    assert!(info(&r).truncated);
}

/// Tags that name new stores, colos or load zones without end, and requests never closed, are
/// bounded in number: past the bound their points are refused.
#[test]
fn names_and_open_requests_are_bounded_in_number() {
    let dir = scratch("names");
    let mut lines = vec![config("10s")];
    for i in 0..2_000 {
        lines.push(point(
            "kvbench_store_value_bytes",
            "2026-11-30T10:00:01.000000000Z",
            "1",
            &format!(r#""store":"s{i}""#),
            Some("1:0"),
        ));
    }
    lines.push(point(
        "kvbench_request_ms",
        "2026-11-30T10:00:01.000000000Z",
        "20",
        r#""outcome":"ok","colo":"FRA""#,
        Some("1:0"),
    ));
    for i in 0..3_000 {
        lines.push(point(
            "kvbench_request_ms",
            "2026-11-30T10:00:01.000000000Z",
            "20",
            &format!(r#""outcome":"ok","colo":"C{i}","load_zone":"z{}""#, i % 2),
            Some(&format!("2:{i}")),
        ));
    }
    for i in 0..1_000 {
        lines.push(point(
            "kvbench_request_ms",
            "2026-11-30T10:00:01.000000000Z",
            "20",
            &format!(r#""outcome":"ok","load_zone":"zone{i}""#),
            Some(&format!("3:{i}")),
        ));
    }
    let long = "n".repeat(1000);
    lines.push(point(
        "kvbench_request_ms",
        "2026-11-30T10:00:01.000000000Z",
        "20",
        &format!(r#""outcome":"ok","colo":"{long}""#),
        Some("4:0"),
    ));
    let r = import(write(&dir, "names.json", &lines));
    assert!(
        r.total.stores.len() <= 64,
        "{} stores",
        r.total.stores.len()
    );
    assert!(r.colos.len() <= 1024, "{} colos", r.colos.len());
    assert!(r.labels.len() <= 256, "{} labels", r.labels.len());
    assert!(refused(&r, "too_many_names") > 0, "{:?}", info(&r));
    assert_eq!(refused(&r, "name_too_long"), 1, "{:?}", info(&r));
    assert!(json_len(&r) < 4 * 1024 * 1024, "{} bytes", json_len(&r));
}
