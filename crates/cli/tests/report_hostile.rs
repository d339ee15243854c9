//! `kvbench report`, `merge` and `cost` on hostile report.json files (issue 49 parts 2 and 4):
//! each ends in an error naming the file and the field — or, for a dangerous link or a wide but
//! valid histogram, in a safe result — within bounded memory: never a panic, a wrapped count or an
//! allocation the file asks for. The files are the golden report with one part replaced; the
//! histograms are built here byte by byte (HdrHistogram V2 + deflate, base64). Memory is bounded
//! the way it fails in the field: kvbench runs under an address-space limit ([`LIMIT_KIB`]), so
//! an allocation sized by the file aborts it and fails the test. (A child's `ru_maxrss` would not
//! do: it includes the test process's own peak, the memory the child is spawned from.)

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use common::scratch;
use serde_json::{json, Value};

/// The address space kvbench runs in, KiB: the debug build re-renders the golden report in
/// under 50 MB of it; before these checks, one 48-character histogram asked for 4 GiB.
const LIMIT_KIB: u64 = 64 * 1024;

/// How a limited run of `kvbench` went.
struct Ran {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs `kvbench` in [`LIMIT_KIB`] of address space, killed if still running after two minutes.
fn run(args: &[&str]) -> Ran {
    use std::os::unix::process::CommandExt as _;
    use std::process::{Command, Stdio};
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kvbench"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; it only limits the child about to exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: LIMIT_KIB * 1024,
                rlim_max: LIMIT_KIB * 1024,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = cmd.spawn().expect("kvbench starts");
    let end = std::time::Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > end {
            let _ = child.kill();
            panic!("kvbench {args:?} still ran after 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Ran {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn golden() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/report.json");
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let o = r.as_object_mut().unwrap();
    o.remove("cost");
    o.remove("summary");
    r
}

/// Writes `report` as `name/report.json` in a fresh directory; the directory.
fn write(name: &str, report: &Value) -> PathBuf {
    let dir = scratch(&format!("report-hostile-{name}"));
    std::fs::write(dir.join("report.json"), report.to_string()).unwrap();
    dir
}

/// A count, or a run of `-n` zero counts, as V2 writes it (zig-zag, then LEB128).
fn varint(n: i64) -> Vec<u8> {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    let mut out = Vec::new();
    for _ in 0..8 {
        if z < 0x80 {
            out.push(z as u8);
            return out;
        }
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
    out
}

/// The text form of a V2-deflate histogram with these header fields and this payload (declared
/// as `declared` bytes when given).
fn craft(sigfig: u32, highest: u64, payload: &[u8], declared: Option<u32>) -> String {
    let mut v2 = Vec::new();
    v2.extend(0x1c84_9313u32.to_be_bytes());
    v2.extend(declared.unwrap_or(payload.len() as u32).to_be_bytes());
    v2.extend(0u32.to_be_bytes());
    v2.extend(sigfig.to_be_bytes());
    v2.extend(1u64.to_be_bytes());
    v2.extend(highest.to_be_bytes());
    v2.extend(1f64.to_bits().to_be_bytes());
    v2.extend(payload);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(&v2).unwrap();
    let z = z.finish().unwrap();
    let mut out = Vec::new();
    out.extend(0x1c84_9314u32.to_be_bytes());
    out.extend((z.len() as u32).to_be_bytes());
    out.extend(z);
    base64::engine::general_purpose::STANDARD.encode(out)
}

/// `kvbench` failed with an error containing `want`: no panic, no abort.
fn refused(ran: &Ran, want: &str) {
    assert!(!ran.success, "succeeded; stdout: {}", ran.stdout);
    assert!(
        ran.stderr.contains(want),
        "want {want:?} in: {}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
}

fn report_of(dir: &Path) -> Ran {
    run(&["report", dir.to_str().unwrap(), "--no-charts"])
}

#[test]
fn a_histogram_declaring_gigabytes_of_payload_is_refused_before_any_is_allocated() {
    for (declared, name) in [(u32::MAX, "4gib"), (1 << 30, "1gib")] {
        let mut r = golden();
        let text = craft(3, 2048, &[], Some(declared));
        assert!(text.len() < 60, "{} characters", text.len());
        r["total"]["stores"]["kv"]["read_hit_us"] = json!(text);
        let dir = write(name, &r);
        refused(
            &report_of(&dir),
            &format!(
                "{}: total.stores.kv.read_hit_us: histogram declares {declared} bytes of payload, \
                 more than the 27648 its range",
                dir.join("report.json").display()
            ),
        );
    }
}

/// Many histograms at 5 significant figures over 2^62 (48 MB of counts each, once decoded).
#[test]
fn a_precision_or_range_kvbench_never_writes_is_refused() {
    let payload = [varint(-100), varint(1)].concat();
    for (sigfig, highest, want) in [
        (
            5,
            1 << 62,
            "declares 5 significant figures; kvbench writes 3",
        ),
        (2, 1 << 62, "declares 2 significant figures"),
        (3, 1, "lowest trackable value 1 and highest 1"),
    ] {
        let mut r = golden();
        let h = json!(craft(sigfig, highest, &payload, None));
        let stores = r["total"]["stores"].as_object_mut().unwrap();
        for i in 0..20 {
            stores.insert(format!("s{i:02}"), stores["kv"].clone());
            for field in ["read_us", "write_us", "read_bytes"] {
                stores[&format!("s{i:02}")][field] = h.clone();
            }
        }
        let dir = write(&format!("sigfig{sigfig}-{highest}"), &r);
        refused(&report_of(&dir), want);
        let d = dir.to_str().unwrap();
        let out = scratch("report-hostile-merged-sigfig");
        refused(
            &run(&["merge", d, d, "--out", out.to_str().unwrap()]),
            "total.stores.s00.read_bytes: histogram declares",
        );
    }
}

/// Histograms as kvbench may write them, each over the widest range (a value near 2^62
/// recorded) in a few dozen characters: 200 of them would hold 90 MB of counts decoded at once
/// (more than [`LIMIT_KIB`]). Read, printed and merged, they stay at rest.
#[test]
fn wide_histograms_stay_in_memory_in_proportion_to_the_file() {
    let mut r = golden();
    let h = json!(craft(
        3,
        1 << 62,
        &[varint(-50_000), varint(1)].concat(),
        None
    ));
    let stores = r["total"]["stores"].as_object_mut().unwrap();
    let kv = stores["kv"].clone();
    for i in 0..20 {
        let mut s = kv.clone();
        for (k, v) in s.as_object_mut().unwrap() {
            if k.ends_with("_us") || k.ends_with("_bytes") {
                *v = h.clone();
            }
        }
        stores.insert(format!("s{i:02}"), s);
    }
    let dir = write("wide", &r);
    let ran = report_of(&dir);
    assert!(ran.success, "{}", ran.stderr);
    let out = scratch("report-hostile-merged-wide");
    let d = dir.to_str().unwrap();
    let merged = run(&["merge", d, d, "--out", out.to_str().unwrap()]);
    assert!(merged.success, "{}", merged.stderr);
}

#[test]
fn counts_that_cannot_be_added_are_an_error_naming_the_file_and_the_field() {
    // Each file's histogram counts 2^52 + 1: two copies pass 2^53.
    let mut r = golden();
    let half = [varint(-10), varint((1 << 52) + 1)].concat();
    r["total"]["stores"]["kv"]["read_hit_us"] = json!(craft(3, 2048, &half, None));
    let a = write("half-a", &r);
    let b = write("half-b", &r);
    let out = scratch("report-hostile-merged-half");
    let merge = |a: &Path, b: &Path| {
        run(&[
            "merge",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
    };
    refused(
        &merge(&a, &b),
        &format!(
            "merge: {}: total.stores.kv.read_hit_us: histograms of 4503599627370497 and \
             4503599627370497 samples add past the 9007199254740992",
            b.join("report.json").display()
        ),
    );
    // A count of 2^53 in each: the sum is refused, not wrapped.
    let mut r = golden();
    r["total"]["failures"] = json!({"timeout": 1u64 << 53});
    let (a, b) = (write("max-a", &r), write("max-b", &r));
    refused(
        &merge(&a, &b),
        "total.failures.timeout: 9007199254740992 + 9007199254740992 is more than",
    );
    // Counts no run reaches are refused when read: in a count, in a histogram.
    let mut r = golden();
    r["total"]["failures"] = json!({"timeout": u64::MAX, "connect": 5});
    refused(
        &report_of(&write("u64max", &r)),
        "total.failures.timeout: 18446744073709551615 is more than 9007199254740992",
    );
    let mut r = golden();
    let over = [varint(-10), varint((1 << 62) + 1)].concat();
    r["total"]["stores"]["kv"]["read_hit_us"] = json!(craft(3, 2048, &over, None));
    refused(
        &report_of(&write("count62", &r)),
        "total.stores.kv.read_hit_us: histogram counts 4611686018427387905 samples",
    );
    // Many counts, each within the limit, whose sum (a printer's "failed") is past u64.
    let mut r = golden();
    let many: serde_json::Map<String, Value> = (0..2049)
        .map(|i| (format!("http_{i}"), json!(1u64 << 53)))
        .collect();
    r["total"]["failures"] = Value::Object(many);
    refused(
        &report_of(&write("sum", &r)),
        "total.failures: its counts add up to more than 2^64",
    );
}

#[test]
fn a_link_other_than_relative_or_http_is_printed_as_text() {
    let mut r = golden();
    r["provenance"]["raw"] = json!([
        {"what": "click me", "href": "javascript:alert(document.domain)"},
        {"what": "tabbed", "href": "java\tscript:alert(1)"},
        {"what": "the histograms", "href": "report.json"},
    ]);
    let dir = write("href", &r);
    let ran = run(&["report", dir.to_str().unwrap()]);
    assert!(ran.success, "{}", ran.stderr);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(!html.contains(r#"href="java"#), "a link survived");
    assert!(html.contains("click me (javascript:alert(document.domain))"));
    assert!(html.contains(r#"<a href="report.json">the histograms</a>"#));
}

#[test]
fn rates_and_prices_must_be_finite_and_not_negative() {
    for (path, value, want) in [
        (
            "/total/achieved_rate",
            json!(-5.0),
            "total.achieved_rate: -5 is not a rate",
        ),
        (
            "/runs/0/requested_rate",
            json!(-1.0),
            "runs[0].requested_rate: -1 is not a rate",
        ),
        (
            "/timeline/intervals/3/start_s",
            json!(1e15),
            "timeline.intervals[3].start_s: 1000000000000000 is not 15",
        ),
    ] {
        let mut r = golden();
        *r.pointer_mut(path).unwrap() = value;
        let name = path.replace('/', "-");
        refused(&report_of(&write(&name, &r)), want);
    }
    // Stretches of no length.
    let mut r = golden();
    let h = r.pointer("/total/stores/kv/read_us").unwrap().clone();
    r["stretches"] = json!({"stretch_s": -1.0, "reads": {"0": {"FRA": {"kv": h}}}});
    refused(
        &report_of(&write("stretch-s", &r)),
        "stretches.stretch_s: -1 is not a length of time",
    );
    let prices = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/prices.toml"),
    )
    .unwrap();
    let golden_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    for (value, shown) in [("nan", "NaN"), ("inf", "inf"), ("-0.5", "-0.5")] {
        let table = prices.replacen(
            "read_per_million = ",
            &format!("read_per_million = {value} #"),
            1,
        );
        let file = scratch(&format!("report-hostile-prices-{value}")).join("prices.toml");
        std::fs::write(&file, table).unwrap();
        refused(
            &run(&[
                "cost",
                golden_dir.to_str().unwrap(),
                "--prices",
                file.to_str().unwrap(),
            ]),
            &format!("read_per_million = {shown} is not a price or an amount (finite, 0 or more)"),
        );
    }
}
