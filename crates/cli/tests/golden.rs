//! Golden files for the collector's report.json and the terminal report. Refresh with
//! `UPDATE_GOLDEN=1 cargo test --test golden`, then review the diff; never edit them by hand.

mod common;

use std::path::Path;

use kvbench_report::cost::{estimate, Deployment};
use kvbench_report::prices::PriceTable;
use kvbench_report::print::text::render;
use kvbench_report::report::{Provenance, RawData, Report};
use kvbench_report::{Analysed, Derived};

fn check(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
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
        "{name} differs from its golden file; if intended, rerun with UPDATE_GOLDEN=1\n--- actual ---\n{actual}"
    );
}

/// The golden run's measurements, with what derives from them.
fn golden_report() -> Analysed {
    let samples = common::samples(7, 600, 60);
    let mut r = common::collect(&samples, 5, common::run_info("fra-1", 10.0, 60.0));
    r.provenance = Some(Provenance {
        stack: "local".into(),
        updated_at: "2026-01-01T00:01:00Z".into(),
        window: None,
        build: [
            ("commit", "0123456789ab"),
            ("wrangler", "4.86.0"),
            ("workerd", "1.20260426.1"),
            ("workers-rs", "0.8.7"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into(),
        settings: [
            ("keys", "1000"),
            ("stores", "kv,upstash,denokv"),
            ("ttl", "60"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into(),
        worker_error: None,
        raw: vec![RawData {
            what: "report.json (every histogram)".into(),
            href: "report.json".into(),
        }],
    });
    let cost = estimate(
        &r.total,
        &PriceTable::default_table().unwrap(),
        None,
        &Deployment::default(),
    );
    let derived = Derived::of(&r, Some(cost));
    Analysed { report: r, derived }
}

#[test]
fn report_json_matches_golden() {
    let a = golden_report();
    let json = serde_json::to_string_pretty(&a).unwrap() + "\n";
    check("report.json", &json);
    // What was written reads back to the same measurements.
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, a.report);
}

#[test]
fn terminal_report_matches_golden() {
    let a = golden_report();
    let mut out = Vec::new();
    render(&a.report, &a.derived, &mut out).unwrap();
    check("report.txt", &String::from_utf8(out).unwrap());
}

/// Store, colo, label, URL and error strings come from answers, k6 files and flags: none of
/// their control characters may reach the terminal (`\x1b[2J` clears it, `\x1b]0;…\x07`
/// retitles it). They are shown escaped, so the report still says what arrived.
#[test]
fn terminal_report_escapes_control_characters() {
    const HOSTILE: &str = "x\x1b[2J\x1b]0;owned\x07\r\u{9b}\u{202e}";
    let mut r = golden_report().report;
    let section = r.total.clone();
    r.labels.insert(format!("label{HOSTILE}"), section.clone());
    r.labels.insert("plain".into(), section);
    let colo = r.colos.values().next().unwrap().clone();
    r.colos.insert(format!("colo{HOSTILE}"), colo);
    let store = r.total.stores.values().next().unwrap().clone();
    let mut store = store;
    store.errors.insert(format!("kind{HOSTILE}/read"), 1);
    r.total.stores.insert(format!("store{HOSTILE}"), store);
    r.total.failures.insert(format!("failure{HOSTILE}"), 1);
    r.total.failure_examples.insert(
        format!("failure{HOSTILE}"),
        vec![format!("example{HOSTILE}")],
    );
    r.runs[0].label = format!("run{HOSTILE}");
    r.runs[0].url = format!("http://h/{HOSTILE}");
    r.runs[0].started_at = format!("when{HOSTILE}");
    r.runs[0].engine = format!("engine{HOSTILE}");
    r.runs[0].import = Some(kvbench_report::report::ImportInfo {
        files: vec![format!("file{HOSTILE}")],
        ..Default::default()
    });
    if let Some(p) = &mut r.provenance {
        p.stack = format!("stack{HOSTILE}");
        p.build
            .insert(format!("build{HOSTILE}"), format!("v{HOSTILE}"));
        p.settings.insert("stores".into(), format!("kv{HOSTILE}"));
        p.worker_error = Some(format!("error{HOSTILE}"));
        p.raw.push(RawData {
            what: format!("raw{HOSTILE}"),
            href: format!("href{HOSTILE}"),
        });
    }
    let cost = estimate(
        &r.total,
        &PriceTable::default_table().unwrap(),
        None,
        &Deployment::default(),
    );
    let derived = Derived::of(&r, Some(cost));
    let mut out = Vec::new();
    render(&r, &derived, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let raw: Vec<(usize, char)> = text
        .char_indices()
        .filter(|(_, c)| (c.is_control() && *c != '\n') || ('\u{202a}'..='\u{202e}').contains(c))
        .collect();
    assert!(raw.is_empty(), "raw control characters {raw:?} in\n{text}");
    for what in [
        "label",
        "colo",
        "store",
        "kind",
        "failure",
        "example",
        "run",
        "http://h/",
        "when",
        "engine",
        "file",
    ] {
        assert!(
            text.contains(&format!(
                r"{what}x\u{{1b}}[2J\u{{1b}}]0;owned\u{{7}}\r\u{{9b}}\u{{202e}}"
            )),
            "{what} not shown escaped in\n{text}"
        );
    }
}
