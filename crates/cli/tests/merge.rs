//! Merging: counts add up and quantiles equal those of one run over the union of the samples.

mod common;

use common::{answer, collect, kvbench, read_json, run_info, samples, scratch, serve, Reply};
use kvbench_report::report::{MergeError, Report};

fn merge(reports: Vec<Report>) -> Result<Report, MergeError> {
    Report::merge(reports)
}

#[test]
fn merge_equals_a_single_run_over_the_union() {
    let (a, b) = (samples(1, 400, 40), samples(2, 250, 25));
    let ra = collect(&a, 5, run_info("fra", 10.0, 40.0));
    let rb = collect(&b, 5, run_info("sin", 10.0, 25.0));
    let union: Vec<_> = a.iter().chain(&b).cloned().collect();
    let ru = collect(&union, 5, run_info("all", 20.0, 40.0));

    let m = merge(vec![ra.clone(), rb.clone()]).unwrap();
    let (t, u) = (&m.total, &ru.total);
    assert_eq!(t.scheduled, ra.total.scheduled + rb.total.scheduled);
    assert_eq!(
        (t.scheduled, t.sent, t.answered),
        (u.scheduled, u.sent, u.answered)
    );
    assert_eq!(t.failures, u.failures);
    assert_eq!(t.latency_us, u.latency_us);
    assert_eq!(t.stores, u.stores, "every store histogram and counter");
    for q in [0.5, 0.9, 0.95, 0.99, 1.0] {
        assert_eq!(t.latency_us.quantile(q), u.latency_us.quantile(q));
        assert_eq!(
            t.stores["kv"].read_us.quantile(q),
            u.stores["kv"].read_us.quantile(q)
        );
    }
    assert_eq!(m.colos, ru.colos);
    assert_eq!(m.timeline.intervals.len(), 8);
    for (mi, ui) in m.timeline.intervals.iter().zip(&ru.timeline.intervals) {
        assert_eq!((mi.scheduled, mi.failed), (ui.scheduled, ui.failed));
        assert_eq!(mi.latency_us.unpack(), ui.latency_us.unpack());
    }
    // Labels stay apart; rates of concurrent vantage points add.
    assert_eq!(m.labels.keys().collect::<Vec<_>>(), ["fra", "sin"]);
    assert_eq!(m.labels["fra"], ra.total);
    assert!((t.achieved_rate - (ra.total.achieved_rate + rb.total.achieved_rate)).abs() < 1e-9);
    assert_eq!(m.runs.len(), 2);
}

/// A fine timeline beside a coarse one (e.g. a long run's, coarsened) adds up at the coarse
/// interval: the same as one run over the union collected at that interval.
#[test]
fn merge_coarsens_a_fine_timeline_to_a_coarse_one() {
    let (a, b) = (samples(1, 400, 40), samples(2, 250, 25));
    let fine = collect(&a, 5, run_info("fra", 10.0, 40.0));
    let coarse = collect(&b, 10, run_info("sin", 10.0, 25.0));
    let union: Vec<_> = a.iter().chain(&b).cloned().collect();
    let ru = collect(&union, 10, run_info("all", 20.0, 40.0));
    for reports in [vec![fine.clone(), coarse.clone()], vec![coarse, fine]] {
        let m = merge(reports).unwrap();
        assert_eq!(m.timeline.interval_s, 10.0);
        assert_eq!(m.timeline.intervals.len(), ru.timeline.intervals.len());
        for (mi, ui) in m.timeline.intervals.iter().zip(&ru.timeline.intervals) {
            assert_eq!(mi.start_s, ui.start_s);
            assert_eq!((mi.scheduled, mi.failed), (ui.scheduled, ui.failed));
            assert_eq!(mi.latency_us.unpack(), ui.latency_us.unpack());
            assert_eq!(
                mi.read_us.keys().collect::<Vec<_>>(),
                ui.read_us.keys().collect::<Vec<_>>()
            );
            for (k, p) in &mi.read_us {
                assert_eq!(
                    p.unpack(),
                    ui.read_us[k].unpack(),
                    "{k} at {} s",
                    mi.start_s
                );
            }
        }
        assert_eq!(m.total.latency_us, ru.total.latency_us);
    }
}

#[test]
fn merge_refuses_what_cannot_add() {
    assert_eq!(merge(vec![]).unwrap_err(), MergeError::Empty);
    let ra = collect(&samples(1, 50, 10), 5, run_info("a", 5.0, 10.0));
    let rb = collect(&samples(2, 50, 10), 2, run_info("b", 5.0, 10.0));
    let e = merge(vec![ra, rb]).unwrap_err();
    assert_eq!(
        e,
        MergeError::IntervalMismatch(2.0, 5.0),
        "2 s does not divide 5 s"
    );
    assert!(
        e.to_string().contains("do not divide (2 s into 5 s)"),
        "{e}"
    );
}

#[test]
fn merge_and_report_commands() {
    let addr = serve(|n| {
        Reply::ok(answer(
            if n % 2 == 0 { "FRA" } else { "AMS" },
            r#""kv":{"read_ms":2,"hit":true,"value_bytes":100}"#,
        ))
    });
    let url = format!("http://{addr}/test");
    let root = scratch("merge-cli");
    let mut dirs = Vec::new();
    for (label, rate) in [("fra", "100"), ("sin", "50")] {
        let dir = root.join(label);
        let o = kvbench(&[
            "run",
            "--url",
            &url,
            "--rate",
            rate,
            "--duration",
            "1s",
            "--interval",
            "500ms",
            "--label",
            label,
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        dirs.push(dir);
    }
    let merged = root.join("merged");
    let o = kvbench(&[
        "merge",
        dirs[0].join("report.json").to_str().unwrap(),
        dirs[1].to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
        "--project-rps",
        "1000",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = read_json(&merged.join("report.json"));
    assert_eq!(m["total"]["scheduled"], 150);
    assert_eq!(
        (
            m["labels"]["fra"]["answered"].as_u64(),
            m["labels"]["sin"]["answered"].as_u64()
        ),
        (Some(100), Some(50))
    );
    assert_eq!(m["cost"]["project_rps"], 1000.0);
    assert!(merged.join("timeline.svg").exists() && merged.join("latency.svg").exists());
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("fra") && stdout.contains("sin") && stdout.contains("AMS"),
        "{stdout}"
    );

    std::fs::remove_file(merged.join("timeline.svg")).unwrap();
    let o = kvbench(&["report", merged.to_str().unwrap()]);
    assert!(o.status.success());
    assert!(
        merged.join("timeline.svg").exists(),
        "report re-renders the charts"
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).lines().next(),
        stdout.lines().next()
    );

    let o = kvbench(&["cost", merged.to_str().unwrap(), "--project-rps", "10"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("at 10.00 req/s (--project-rps)"));

    std::fs::write(root.join("bad.json"), r#"{"schema_version": 99}"#).unwrap();
    let o = kvbench(&["report", root.join("bad.json").to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("schema_version 99"));
}
