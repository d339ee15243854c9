//! `kvbench import k6` on small hand-written files in k6 v1.1.0's JSON shape: load zones become
//! labels, `dropped_iterations` become `not_sent`, store points rebuild the answers the collector
//! folds, and gzip reads like plain text.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use kvbench::import::{import_k6, ImportOptions};

fn point(metric: &str, time: &str, value: f64, tags: &str, req: Option<&str>) -> String {
    let meta = req.map_or(String::new(), |r| {
        format!(r#","metadata":{{"kvbench_req":"{r}"}}"#)
    });
    format!(
        r#"{{"metric":"{metric}","type":"Point","data":{{"time":"{time}","value":{value},"tags":{{{tags}}}{meta}}}}}"#
    )
}

/// One iteration as k6/kvbench.js writes it, with k6's own http points around it.
fn iteration(
    lines: &mut Vec<String>,
    vu_iter: &str,
    time: &str,
    zone: &str,
    stores: &[(&str, &str)],
    outcome: &str,
) {
    let z = format!(r#""load_zone":"{zone}","scenario":"kvbench""#);
    lines.push(point("http_reqs", time, 1.0, &z, Some(vu_iter)));
    lines.push(point("http_req_duration", time, 20.0, &z, Some(vu_iter)));
    for (store, result) in stores {
        let t = format!(r#"{z},"store":"{store}","colo":"FRA""#);
        lines.push(point(
            "kvbench_store_value_bytes",
            time,
            5000.0,
            &t,
            Some(vu_iter),
        ));
        lines.push(point(
            "kvbench_store_read_ms",
            time,
            7.5,
            &format!(r#"{t},"result":"{result}""#),
            Some(vu_iter),
        ));
        if *result == "miss" {
            lines.push(point(
                "kvbench_store_write_ms",
                time,
                11.0,
                &format!(r#"{t},"result":"ok""#),
                Some(vu_iter),
            ));
        }
        if *result == "error" {
            lines.push(point(
                "kvbench_store_errors",
                time,
                1.0,
                &format!(r#"{t},"kind":"timeout","op":"read""#),
                Some(vu_iter),
            ));
        }
    }
    let tags = if outcome == "ok" {
        format!(r#"{z},"outcome":"ok","colo":"FRA""#)
    } else {
        format!(r#"{z},"outcome":"{outcome}","detail":"boom""#)
    };
    lines.push(point(
        "kvbench_request_ms",
        time,
        20.0,
        &tags,
        Some(vu_iter),
    ));
    lines.push(point("iterations", time, 1.0, &z, Some(vu_iter)));
}

fn sample_file() -> Vec<String> {
    let mut lines = vec![
        r#"{"type":"Metric","data":{"name":"kvbench_config","type":"gauge","contains":"default","thresholds":[],"submetrics":null},"metric":"kvbench_config"}"#.to_string(),
        point(
            "kvbench_config",
            "2026-11-30T10:00:00.000000000Z",
            10.0,
            r#""group":"::setup","url":"https://w.example/test","duration":"10s""#,
            None,
        ),
    ];
    let ams = "amazon:nl:amsterdam";
    let sgp = "amazon:sg:singapore";
    for i in 0..6 {
        let t = format!("2026-11-30T10:00:0{i}.500000000+00:00");
        let stores: &[(&str, &str)] = &[
            ("kv", "hit"),
            ("upstash", if i % 2 == 0 { "miss" } else { "hit" }),
        ];
        iteration(&mut lines, &format!("1:{i}"), &t, ams, stores, "ok");
    }
    iteration(
        &mut lines,
        "2:0",
        "2026-11-30T10:00:02.000000000Z",
        sgp,
        &[("kv", "error")],
        "ok",
    );
    iteration(
        &mut lines,
        "2:1",
        "2026-11-30T10:00:03.000000000Z",
        sgp,
        &[],
        "http_503",
    );
    lines.push(point(
        "dropped_iterations",
        "2026-11-30T10:00:04.000000000Z",
        1.0,
        &format!(r#""load_zone":"{sgp}","scenario":"kvbench""#),
        None,
    ));
    lines
}

fn write(dir: &Path, name: &str, lines: &[String], gzip: bool) -> PathBuf {
    let path = dir.join(name);
    let text = lines.join("\n") + "\n";
    if gzip {
        let mut enc = flate2::write::GzEncoder::new(
            std::fs::File::create(&path).unwrap(),
            flate2::Compression::fast(),
        );
        enc.write_all(text.as_bytes()).unwrap();
        enc.finish().unwrap();
    } else {
        std::fs::write(&path, text).unwrap();
    }
    path
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kvbench-import-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn load_zones_become_labels_and_every_request_is_counted() {
    let dir = scratch("zones");
    let file = write(&dir, "run.json", &sample_file(), false);
    let options = ImportOptions {
        label: None,
        interval: None,
    };
    let r = import_k6(&[file], &options).unwrap();
    let t = &r.total;
    assert_eq!((t.scheduled, t.sent, t.answered), (9, 8, 7));
    assert_eq!(t.failures.get("not_sent"), Some(&1));
    assert_eq!(t.failures.get("http_503"), Some(&1));
    assert_eq!(
        r.labels.keys().collect::<Vec<_>>(),
        ["amazon:nl:amsterdam", "amazon:sg:singapore"]
    );
    assert_eq!(r.labels["amazon:nl:amsterdam"].answered, 6);
    assert_eq!(r.labels["amazon:sg:singapore"].not_sent(), 1);
    let kv = &t.stores["kv"];
    assert_eq!((kv.answers, kv.reads, kv.read_hit_us.len()), (7, 7, 6));
    assert_eq!(kv.errors.get("timeout/read"), Some(&1));
    let up = &t.stores["upstash"];
    assert_eq!((up.answers, up.writes, up.read_miss_us.len()), (6, 3, 3));
    let close = |got: u64, want: u64| got.abs_diff(want) <= want / 500;
    assert!(close(up.write_us.quantile(0.5), 11_000));
    // The store times are the worker's, end-to-end is k6's http_req_duration.
    assert!(close(kv.read_us.quantile(0.5), 7_500));
    assert!(close(t.latency_us.quantile(0.5), 20_000));
    assert_eq!(r.colos["FRA"].answered, 7);
    for run in &r.runs {
        assert_eq!(
            (run.engine.as_str(), run.latency_from.as_str()),
            ("k6", "sent")
        );
        assert_eq!(run.url, "https://w.example/test");
    }
    let info = r.runs.iter().find_map(|run| run.import.as_ref()).unwrap();
    assert_eq!(
        (
            info.malformed_lines,
            info.incomplete_requests,
            info.truncated
        ),
        (0, 0, false)
    );
}

#[test]
fn gzip_reads_like_plain_and_a_label_can_be_given() {
    let dir = scratch("gzip");
    let lines: Vec<String> = sample_file()
        .into_iter()
        .map(|l| {
            l.replace(r#""load_zone":"amazon:nl:amsterdam","#, "")
                .replace(r#""load_zone":"amazon:sg:singapore","#, "")
        })
        .collect();
    let plain = write(&dir, "fra.json", &lines, false);
    let gz = write(&dir, "fra.json.gz", &lines, true);
    let options = ImportOptions {
        label: None,
        interval: Some(std::time::Duration::from_secs(5)),
    };
    let a = import_k6(&[plain], &options).unwrap();
    let b = import_k6(&[gz], &options).unwrap();
    assert_eq!(a.total, b.total);
    assert_eq!(
        a.labels.keys().collect::<Vec<_>>(),
        ["fra"],
        "the file name is the label"
    );
    assert_eq!(a.timeline.interval_s, 5.0);
    let named = import_k6(
        &[write(&dir, "x.json", &lines, false)],
        &ImportOptions {
            label: Some("frankfurt".into()),
            interval: None,
        },
    )
    .unwrap();
    assert_eq!(named.labels.keys().collect::<Vec<_>>(), ["frankfurt"]);
}

#[test]
fn a_file_without_kvbench_points_is_an_error_naming_it() {
    let dir = scratch("empty");
    let file = write(
        &dir,
        "other.json",
        &[point("http_reqs", "2026-11-30T10:00:00Z", 1.0, "", None)],
        false,
    );
    let e = import_k6(
        &[file],
        &ImportOptions {
            label: None,
            interval: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("other.json") && e.contains("k6/kvbench.js"),
        "{e}"
    );
}

/// The script records its request timeout and which end-to-end time it wrote: the import reports
/// both (an older script, with neither, timed out at k6's 60 s and wrote http_req_duration).
#[test]
fn the_scripts_timeout_and_end_to_end_definition_are_reported() {
    let dir = scratch("e2e");
    let options = ImportOptions {
        label: None,
        interval: None,
    };
    let old = write(&dir, "old.json", &sample_file(), false);
    let r = import_k6(&[old], &options).unwrap();
    assert!(r
        .runs
        .iter()
        .all(|run| run.latency_from == "sent" && run.timeout_s == 60.0));

    let mut lines = sample_file();
    lines[1] = point(
        "kvbench_config",
        "2026-11-30T10:00:00.000000000Z",
        10.0,
        r#""group":"::setup","url":"https://w.example/test","duration":"10s","timeout":"325000ms","e2e":"total""#,
        None,
    );
    let new = write(&dir, "new.json", &lines, false);
    let r = import_k6(&[new], &options).unwrap();
    for run in &r.runs {
        assert_eq!(run.latency_from, "started", "{}", run.label);
        assert_eq!(run.timeout_s, 325.0);
    }
    let mut text = Vec::new();
    let derived = kvbench_report::Derived::of(&r, None);
    kvbench_report::print::text::render(&r, &derived, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("blocked, connecting and TLS handshaking included"),
        "{text}"
    );

    lines[1] = lines[1].replace(r#""e2e":"total""#, r#""e2e":"duration""#);
    let plain = write(&dir, "plain.json", &lines, false);
    let r = import_k6(&[plain], &options).unwrap();
    assert!(r.runs.iter().all(|run| run.latency_from == "sent"));
}
