//! `kvbench import k6` reads an over-long line without holding it (issue 16 item 8): a small gzip
//! of one 100 MB line must not raise the process's peak memory by anywhere near that. Alone in its
//! test binary, so no other test moves the peak (`VmHWM` in /proc/self/status) meanwhile.

use std::io::Write as _;

use kvbench::import::{import_k6, ImportOptions};

/// Peak resident memory of this process so far, KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/self/status");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_hundred_megabyte_line_is_skipped_in_flat_memory() {
    let dir = std::env::temp_dir().join(format!("kvbench-memory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("long.json.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::fast(),
    );
    let t = "2026-11-30T10:00:01.000000000Z";
    let ok = |id: &str| {
        format!(
            r#"{{"metric":"kvbench_request_ms","type":"Point","data":{{"time":"{t}","value":20,"tags":{{"outcome":"ok","colo":"FRA"}},"metadata":{{"kvbench_req":"{id}"}}}}}}"#
        )
    };
    writeln!(enc, "{}", ok("1:0")).unwrap();
    // A valid point whose detail tag is 100 MB, written in 1 MiB pieces.
    write!(
        enc,
        r#"{{"metric":"kvbench_request_ms","type":"Point","data":{{"time":"{t}","value":20,"tags":{{"outcome":"http_500","detail":""#
    )
    .unwrap();
    let piece = vec![b'x'; 1 << 20];
    for _ in 0..100 {
        enc.write_all(&piece).unwrap();
    }
    writeln!(enc, r#""}},"metadata":{{"kvbench_req":"1:1"}}}}}}"#).unwrap();
    writeln!(enc, "{}", ok("1:2")).unwrap();
    enc.finish().unwrap();
    drop(piece);

    let before = peak_kib();
    let r = import_k6(
        &[path],
        &ImportOptions {
            label: None,
            interval: None,
        },
    )
    .unwrap();
    let grown_kib = peak_kib().saturating_sub(before);
    assert_eq!(r.total.answered, 2);
    let info = r.runs[0].import.as_ref().unwrap();
    assert_eq!(info.malformed_lines, 1);
    assert!(
        grown_kib < 32 * 1024,
        "peak memory grew by {grown_kib} KiB reading one 100 MB line"
    );
    assert!(serde_json::to_vec(&r).unwrap().len() < 64 * 1024);
    let _ = std::fs::remove_dir_all(&dir);
}
