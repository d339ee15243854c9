//! `kvbench import worker` against servers written to misbehave (issue 27), each on 127.0.0.1,
//! bounded in connections and lifetime: every wait runs out with the flag's name in the error
//! (headers that never come or drip, a body that stalls or drips, a stream that sends lines too
//! slowly to ever end), every bound on what a server brings holds (an endless stream, a huge
//! error body in flat memory, too many or too long labels), and no terminal escape of the
//! server's reaches stderr raw. The timeouts are set low by flag; no assertion depends on the
//! machine's speed beyond a generous upper bound.

#![cfg(target_os = "linux")]

mod common;

use std::time::Duration;

use common::{kvbench_bounded, scratch, serve_script, Ran, Step};

/// Far above any expected run: only a hung import reaches it.
const LIMIT: Duration = Duration::from_secs(60);
/// How long a test server accepts and plays its script.
const LIFETIME: Duration = Duration::from_secs(40);

const OK_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\nconnection: close\r\n\r\n";

fn line(seq: u64, label: &str) -> String {
    let answer = common::answer(
        "LHR",
        r#""kv":{"read_ms":2.5,"hit":true,"value_bytes":4096,"write_ms":null,"error":null}"#,
    );
    format!(
        r#"{{"seq":{seq},"t_ms":{},"label":"{label}","vantage":"hint","hint":"{label}","colo":"LHR","cold":false,"colo_changed":false,"handler_ms":12.5,"answer":{answer}}}"#,
        1_000_000 + seq * 1000
    ) + "\n"
}

fn import(addr: std::net::SocketAddr, name: &str, flags: &[&str]) -> Ran {
    let out = scratch(name);
    let url = format!("http://{addr}");
    let mut args = vec![
        "import",
        "worker",
        &url,
        "--probes",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let ran = kvbench_bounded(&args, LIMIT);
    assert!(!ran.success, "{name} should fail: {}", ran.stderr);
    assert!(!out.join("report.json").exists(), "{name} wrote a report");
    ran
}

#[test]
fn headers_that_never_come_or_drip_time_out_naming_the_flag() {
    let silent = serve_script(2, LIFETIME, vec![Step::Sleep(LIFETIME)]);
    let ran = import(silent, "limits-no-headers", &["--header-timeout", "1s"]);
    assert!(
        ran.stderr
            .contains("sent no response headers within 1s (--header-timeout)"),
        "{}",
        ran.stderr
    );
    // A slowloris: a byte of the head every second, never its end.
    let drip = serve_script(
        2,
        LIFETIME,
        vec![Step::Drip(
            b"HTTP/1.1 200 OK\r\nx-slow: ".repeat(4),
            Duration::from_secs(1),
        )],
    );
    let ran = import(drip, "limits-drip-headers", &["--header-timeout", "2s"]);
    assert!(
        ran.stderr
            .contains("sent no response headers within 2s (--header-timeout)"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_body_that_stalls_or_drips_is_resumed_then_fails_naming_the_flag() {
    let half = line(1, "weur");
    let stall = serve_script(
        5,
        LIFETIME,
        vec![
            Step::Send(OK_HEAD.to_vec()),
            Step::Send(half.as_bytes()[..40].to_vec()),
            Step::Sleep(LIFETIME),
        ],
    );
    let ran = import(stall, "limits-stall", &["--idle-timeout", "1s"]);
    assert!(
        ran.stderr
            .contains("the answers stream sent no line for 1s (--idle-timeout); resuming"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains(
            "ended short 4 times (0 answers read): not writing a partial report (the last time it sent no line for 1s (--idle-timeout))"
        ),
        "{}",
        ran.stderr
    );
    // A byte a second arrives more often than the idle timeout, yet never completes a line.
    let drip = serve_script(
        5,
        LIFETIME,
        vec![
            Step::Send(OK_HEAD.to_vec()),
            Step::Drip(line(1, "weur").into_bytes(), Duration::from_secs(1)),
        ],
    );
    let ran = import(drip, "limits-drip-body", &["--idle-timeout", "2s"]);
    assert!(
        ran.stderr
            .contains("(the last time it sent no line for 2s (--idle-timeout))"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_stream_of_slow_lines_ends_at_max_time() {
    // A whole line every 200 ms: never idle, never done.
    let slow = serve_script(
        2,
        LIFETIME,
        vec![
            Step::Send(OK_HEAD.to_vec()),
            Step::Lines(
                Box::new(|i| line(i + 1, "weur").into_bytes()),
                1_000,
                Duration::from_millis(200),
            ),
        ],
    );
    let ran = import(
        slow,
        "limits-max-time",
        &["--idle-timeout", "5s", "--max-time", "2s"],
    );
    assert!(
        ran.stderr.contains("did not finish within 2s (--max-time)"),
        "{}",
        ran.stderr
    );
}

#[test]
fn an_endless_stream_stops_at_the_spool_and_answer_bounds() {
    let endless = || {
        serve_script(
            2,
            LIFETIME,
            vec![
                Step::Send(OK_HEAD.to_vec()),
                Step::Lines(
                    Box::new(|i| line(i + 1, "weur").into_bytes()),
                    10_000_000,
                    Duration::ZERO,
                ),
            ],
        )
    };
    let ran = import(endless(), "limits-spool", &["--max-spool", "1MiB"]);
    assert!(
        ran.stderr.contains("pass 1 MiB (--max-spool)"),
        "{}",
        ran.stderr
    );
    let ran = import(endless(), "limits-answers", &["--max-answers", "500"]);
    assert!(
        ran.stderr.contains("pass 500 answers (--max-answers)"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_huge_error_body_is_never_read_whole() {
    const BODY: u64 = 64 << 20;
    let head = format!("HTTP/1.1 500 Internal Server Error\r\ncontent-length: {BODY}\r\n\r\n");
    let huge = serve_script(
        2,
        LIFETIME,
        vec![
            Step::Send(head.into_bytes()),
            Step::Lines(
                Box::new(|_| vec![b'x'; 64 << 10]),
                BODY / (64 << 10),
                Duration::ZERO,
            ),
        ],
    );
    let ran = import(huge, "limits-huge-500", &[]);
    assert!(ran.stderr.contains("answered 500: xxx"), "{}", ran.stderr);
    assert!(ran.stderr.len() < 1000, "{} bytes", ran.stderr.len());
    // A body read whole would be 64 MiB on its own.
    assert!(
        ran.max_rss_kib < 40 << 10,
        "peak memory {} KiB",
        ran.max_rss_kib
    );
}

#[test]
fn too_many_or_too_long_labels_are_refused() {
    let many = serve_script(
        2,
        LIFETIME,
        vec![
            Step::Send(OK_HEAD.to_vec()),
            Step::Lines(
                Box::new(|i| line(1, &format!("label-{i}")).into_bytes()),
                20_000,
                Duration::ZERO,
            ),
        ],
    );
    let ran = import(many, "limits-labels", &["--max-labels", "10"]);
    assert!(
        ran.stderr.contains("more than 10 labels") && ran.stderr.contains("--max-labels"),
        "{}",
        ran.stderr
    );
    let long = "n".repeat(500_000);
    let one = serve_script(
        2,
        LIFETIME,
        vec![
            Step::Send(OK_HEAD.to_vec()),
            Step::Send(line(1, &long).into_bytes()),
        ],
    );
    let ran = import(one, "limits-long-label", &[]);
    assert!(
        ran.stderr.contains("a name of 500000 bytes (at most 128)"),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.len() < 1000, "{} bytes", ran.stderr.len());
}

#[test]
fn the_servers_terminal_escapes_never_reach_stderr_raw() {
    let red = "\u{1b}[31mred\u{1b}[0m\u{1b}]0;pwned\u{7}\u{9b}2J";
    let body = format!("{red} error");
    let error = serve_script(
        2,
        LIFETIME,
        vec![Step::Send(
            format!(
                "HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        )],
    );
    let stopped = serve_script(
        5,
        LIFETIME,
        vec![
            Step::Send(OK_HEAD.to_vec()),
            Step::Send(line(1, "weur").into_bytes()),
            Step::Send(br#"{"error":"\u001b[31mboom\u001b]0;pwned\u0007"}"#.to_vec()),
            Step::Send(b"\n".to_vec()),
        ],
    );
    let malformed = serve_script(
        2,
        LIFETIME,
        vec![
            Step::Send(OK_HEAD.to_vec()),
            Step::Send(format!("{{\"x\":\"{red}\"}}\n").into_bytes()),
        ],
    );
    for (addr, name, shown) in [
        (error, "limits-escape-500", "answered 500: \\u{1b}[31mred"),
        (
            stopped,
            "limits-escape-error-line",
            "stopped by the worker (\\u{1b}[31mboom",
        ),
        (malformed, "limits-escape-malformed", "not a kept answer"),
    ] {
        let ran = import(addr, name, &[]);
        assert!(ran.stderr.contains(shown), "{name}: {}", ran.stderr);
        for raw in ['\u{1b}', '\u{7}', '\u{9b}'] {
            assert!(
                !ran.stderr.contains(raw) && !ran.stdout.contains(raw),
                "{name}: a raw {raw:?} reached the terminal: {:?}",
                ran.stderr
            );
        }
    }
}
