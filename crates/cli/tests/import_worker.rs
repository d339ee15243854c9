//! `kvbench import worker` against in-test HTTP servers that play the worker's answers routes:
//! a stream cut short (no `end` line, or an `error` line) is fetched again and every answer is
//! read exactly once; one that keeps ending short fails the import, which writes no report; a
//! worker with a token gets it from the env var, never on the command line or in the output.

mod common;

use common::{kvbench, read_json, scratch, serve, Reply};

fn line(seq: u64, label: &str, t_ms: u64) -> String {
    let answer = common::answer(
        "LHR",
        r#""kv":{"read_ms":2.5,"hit":true,"value_bytes":4096,"write_ms":null,"error":null}"#,
    );
    format!(
        r#"{{"seq":{seq},"t_ms":{t_ms},"label":"{label}","vantage":"hint","hint":"{label}","colo":"LHR","cold":false,"colo_changed":false,"handler_ms":12.5,"answer":{answer}}}"#
    )
}

/// Five answers of `weur` then four of `apac`, as the worker streams them.
fn lines() -> Vec<String> {
    let mut out: Vec<String> = (1..=5)
        .map(|s| line(s, "weur", 1_000 + s * 300_000))
        .collect();
    out.extend((1..=4).map(|s| line(s, "apac", 2_000 + s * 300_000)));
    out
}

fn body(lines: &[String], end: Option<&str>) -> String {
    let mut b = lines.join("\n");
    b.push('\n');
    if let Some(end) = end {
        b.push_str(end);
        b.push('\n');
    }
    b
}

#[test]
fn a_cut_stream_is_resumed_and_every_answer_read_once() {
    let all = lines();
    let addr = serve(move |n| match n {
        // First: cut in the middle of apac, no end line. Second: an error line after weur.
        0 => Reply::ok(body(&all[..7], None)),
        1 => Reply::ok(body(
            &all[..5],
            Some(
                r#"{"error":"reading kept answers failed: status 500","label":"apac","after_seq":0}"#,
            ),
        )),
        _ => Reply::ok(body(&all, Some(r#"{"end":true,"lines":9}"#))),
    });
    let out = scratch("import-worker-resume");
    let o = kvbench(&[
        "import",
        "worker",
        &format!("http://{addr}"),
        "--probes",
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    assert!(text.contains("resumed 2 time(s)"), "{text}");
    let r = read_json(&out.join("report.json"));
    assert_eq!(r["total"]["answered"], 9, "each answer once");
    assert_eq!(r["total"]["stores"]["kv"]["reads"], 9);
    let labels: Vec<_> = r["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["label"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(labels, ["apac", "weur"]);
    assert_eq!(r["runs"][0]["engine"], "probes");
    assert!(out.join("report.html").exists());
}

#[test]
fn an_end_line_that_counts_more_lines_than_arrived_fails_the_import() {
    let all = lines();
    // Nine answers kept, eight delivered: the end line's count shows the loss.
    let addr = serve(move |_| {
        let mut got = all.clone();
        got.remove(3);
        Reply::ok(body(&got, Some(r#"{"end":true,"lines":9}"#)))
    });
    let out = scratch("import-worker-lost");
    let o = kvbench(&[
        "import",
        "worker",
        &format!("http://{addr}"),
        "--probes",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("end line says 9 lines were sent, 8 arrived"),
        "{err}"
    );
    assert!(!out.join("report.json").exists());
}

#[test]
fn a_stream_that_keeps_ending_short_fails_and_writes_nothing() {
    let all = lines();
    let addr = serve(move |_| Reply::ok(body(&all[..3], None)));
    let out = scratch("import-worker-short");
    let o = kvbench(&[
        "import",
        "worker",
        &format!("http://{addr}"),
        "--run",
        "r-1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("ended short 4 times (3 answers read)"),
        "{err}"
    );
    assert!(err.contains("not writing a partial report"), "{err}");
    assert!(!out.join("report.json").exists());
}

#[test]
fn the_token_comes_from_the_env_and_is_never_printed() {
    const TOKEN: &str = "import-worker-token-9d2a";
    let addr = serve(move |_| {
        Reply {
        status: 401,
        body: r#"{"error":{"parameter":"Authorization","message":"missing Authorization: Bearer header"}}"#.into(),
        delay: std::time::Duration::ZERO,
    }
    });
    let out = scratch("import-worker-401");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_kvbench"))
        .args([
            "import",
            "worker",
            &format!("http://{addr}"),
            "--probes",
            "--token-env",
            "KVB_T",
            "--out",
        ])
        .arg(&out)
        .env("KVB_T", TOKEN)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!o.status.success());
    assert!(text.contains("answered 401"), "{text}");
    assert!(!text.contains(TOKEN), "the token leaked: {text}");
}

#[test]
fn bad_flags_are_named() {
    let o = kvbench(&[
        "import",
        "worker",
        "http://127.0.0.1:1",
        "--run",
        "a/b",
        "--out",
        "/tmp/x",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--run"));
    let o = kvbench(&[
        "import",
        "worker",
        "http://127.0.0.1:1",
        "--probes",
        "--since",
        "yesterday",
        "--out",
        "/tmp/x",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--since"));
    let o = kvbench(&["import", "worker", "http://127.0.0.1:1", "--out", "/tmp/x"]);
    assert!(!o.status.success(), "--run or --probes is required");
}
