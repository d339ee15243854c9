//! Golden files for the collector's report.json and the terminal report. Refresh with
//! `UPDATE_GOLDEN=1 cargo test --test golden`, then review the diff; never edit them by hand.

mod common;

use std::path::Path;

use kvbench::cost::{estimate, PriceTable};
use kvbench::print::text::render;
use kvbench::report::{Report, Summary};

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

fn golden_report() -> Report {
    let samples = common::samples(7, 600, 60);
    let mut r = common::collect(&samples, 10, common::run_info("fra-1", 10.0, 60.0));
    r.cost = Some(estimate(&r.total, &PriceTable::default_table(), None));
    r.summary = Some(Summary::of(&r));
    r
}

#[test]
fn report_json_matches_golden() {
    let r = golden_report();
    let json = serde_json::to_string_pretty(&r).unwrap() + "\n";
    check("report.json", &json);
    // What was written reads back to the same report.
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
}

#[test]
fn terminal_report_matches_golden() {
    let mut out = Vec::new();
    render(&golden_report(), &mut out).unwrap();
    check("report.txt", &String::from_utf8(out).unwrap());
}
