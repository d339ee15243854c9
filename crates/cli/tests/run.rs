//! `kvbench run` end to end against an in-test server with known answers.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    answer, kvbench, read_json, scratch, serve, serve_closing_idle, serve_counted, Reply,
};
use kvbench_report::hist::Hist;

fn hist(v: &serde_json::Value) -> Hist {
    Hist::decode(v.as_str().expect("histogram string")).unwrap()
}

/// Within HdrHistogram's 3-significant-figure precision.
fn close(got_us: u64, want_us: u64) -> bool {
    (got_us as f64 - want_us as f64).abs() <= want_us as f64 * 0.001 + 1.0
}

#[test]
fn counts_and_percentiles_match_the_known_latencies() {
    // Request n: kv read (n % 10 + 1) ms, a hit for even n; upstash a 3 ms miss plus a 2 ms write.
    let addr = serve(|n| {
        let kv_ms = n % 10 + 1;
        Reply::ok(answer(
            "TST",
            &format!(
                r#""kv":{{"read_ms":{kv_ms},"hit":{},"value_bytes":5000,"write_ms":null,"error":null}},
                   "upstash":{{"read_ms":3.0,"hit":false,"value_bytes":5000,"write_ms":2.0,"error":null}}"#,
                n % 2 == 0
            ),
        ))
    });
    let out = scratch("known");
    let url = format!("http://{addr}/test");
    let o = kvbench(&[
        "run",
        "--url",
        &url,
        "--rate",
        "200",
        "--duration",
        "1s",
        "--interval",
        "500ms",
        "--label",
        "t1",
        "--out",
        out.to_str().unwrap(),
        "--samples-csv",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let r = read_json(&out.join("report.json"));
    assert_eq!(r["schema_version"], kvbench_report::report::SCHEMA_VERSION);
    // Its provenance: a loopback worker is the local stack; this server's GET / is no kvbench
    // worker's description, which the report says instead of a build.
    let p = &r["provenance"];
    assert_eq!(p["stack"], "local");
    assert!(
        p["worker_error"]
            .as_str()
            .unwrap()
            .contains("KVBENCH_PROVENANCE"),
        "{p}"
    );
    assert_eq!(p["raw"][0]["href"], "report.json");
    assert_eq!(p["raw"][1]["href"], "samples.csv");
    let t = &r["total"];
    assert_eq!(
        (
            t["scheduled"].as_u64(),
            t["sent"].as_u64(),
            t["answered"].as_u64()
        ),
        (Some(200), Some(200), Some(200))
    );
    assert_eq!(t["failures"].as_object().unwrap().len(), 0);
    assert_eq!(hist(&t["latency_us"]).len(), 200);

    let kv = &t["stores"]["kv"];
    let all = hist(&kv["read_us"]);
    assert_eq!(all.len(), 200);
    // 20 of each of 1..=10 ms.
    for (q, want_ms) in [(0.5, 5), (0.9, 9), (0.99, 10), (1.0, 10)] {
        assert!(
            close(all.quantile(q), want_ms * 1000),
            "kv p{q}: {}",
            all.quantile(q)
        );
    }
    assert!((all.mean() - 5500.0).abs() < 10.0, "mean {}", all.mean());
    let (hit, miss) = (hist(&kv["read_hit_us"]), hist(&kv["read_miss_us"]));
    assert_eq!((hit.len(), miss.len()), (100, 100));
    assert!(close(hit.max(), 9000) && close(miss.max(), 10_000));
    assert_eq!(
        (kv["reads"].as_u64(), kv["writes"].as_u64()),
        (Some(200), Some(0))
    );
    // 100 hits of 5000 B: ceil(5000 / 4096) = 2 units each; 100 misses read nothing: 1 unit each.
    assert_eq!(kv["read_units_4k"], 300);

    let up = &t["stores"]["upstash"];
    assert!(close(hist(&up["write_us"]).quantile(0.5), 2000));
    assert_eq!(up["write_units_1k"], 1000); // ceil(5000 / 1024) = 5 per write
    assert_eq!(hist(&up["read_hit_us"]).len(), 0);

    assert_eq!(r["labels"]["t1"]["answered"], 200);
    assert_eq!(r["colos"]["TST"]["answered"], 200);
    let intervals = r["timeline"]["intervals"].as_array().unwrap();
    assert_eq!(intervals.len(), 2);
    let per_interval: u64 = intervals
        .iter()
        .map(|iv| iv["scheduled"].as_u64().unwrap())
        .sum();
    assert_eq!(per_interval, 200);
    let rate = t["achieved_rate"].as_f64().unwrap();
    assert!((rate - 200.0).abs() < 20.0, "achieved {rate}");
    assert!(r["cost"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["store"] == "kv"));

    for file in ["timeline.svg", "timeline-hits.svg", "latency.svg"] {
        let svg = std::fs::read_to_string(out.join(file)).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("latency (ms") && svg.contains("\nkv"),
            "{file}"
        );
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains(r#"data-row="kv read all""#));
    let csv = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 200 * 2);
    for needle in [
        "kv read hit",
        "kv read miss",
        "upstash write",
        "TST",
        "cost per 30-day month",
    ] {
        assert!(
            stdout.contains(needle),
            "terminal report lacks {needle:?}:\n{stdout}"
        );
    }
}

#[test]
fn failures_are_counted_by_kind() {
    let addr = serve(|n| match n % 5 {
        0 => Reply::ok(answer(
            "TST",
            r#""kv":{"read_ms":1,"hit":true,"error":null}"#,
        )),
        1 => Reply {
            status: 400,
            body: r#"{"error":{"parameter":"size","message":"too big"}}"#.into(),
            delay: Duration::ZERO,
        },
        2 => Reply {
            status: 401,
            body: r#"{"error":"unauthorized"}"#.into(),
            delay: Duration::ZERO,
        },
        3 => Reply::ok("<html>not json</html>"),
        _ => Reply {
            status: 200,
            body: "{}".into(),
            delay: Duration::from_secs(3),
        },
    });
    let out = scratch("kinds");
    let url = format!("http://{addr}/test");
    let o = kvbench(&[
        "run",
        "--url",
        &url,
        "--rate",
        "100",
        "--duration",
        "1s",
        "--timeout",
        "300ms",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = &read_json(&out.join("report.json"))["total"];
    assert_eq!(t["scheduled"], 100);
    assert_eq!(t["answered"], 20);
    let f = &t["failures"];
    assert_eq!(
        (f["http_400"].as_u64(), f["http_401"].as_u64()),
        (Some(20), Some(20))
    );
    assert_eq!(
        (f["malformed"].as_u64(), f["timeout"].as_u64()),
        (Some(20), Some(20))
    );
    assert_eq!(t["failure_examples"]["http_400"][0], "size: too big");
    // Answered non-200s and malformed bodies have a response time; timeouts do not.
    assert_eq!(hist(&t["latency_us"]).len(), 80);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("http_401") && stdout.contains("timeout"),
        "{stdout}"
    );
}

#[test]
fn connection_errors_and_max_in_flight_are_counted() {
    // A port that was just free: nothing listens, so every request fails to connect.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = scratch("connect");
    let url = format!("http://127.0.0.1:{port}/test");
    let o = kvbench(&[
        "run",
        "--url",
        &url,
        "--rate",
        "20",
        "--duration",
        "500ms",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let t = &read_json(&out.join("report.json"))["total"];
    assert_eq!(
        (t["scheduled"].as_u64(), t["failures"]["connect"].as_u64()),
        (Some(10), Some(10))
    );

    // One slow answer occupies the only slot: the rest are not sent (not delayed).
    let addr = serve(|_| Reply {
        status: 200,
        body: answer("TST", r#""kv":{"read_ms":1}"#),
        delay: Duration::from_millis(1500),
    });
    let out = scratch("in-flight");
    let url = format!("http://{addr}/test");
    let o = kvbench(&[
        "run",
        "--url",
        &url,
        "--rate",
        "50",
        "--duration",
        "500ms",
        "--max-in-flight",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let t = &read_json(&out.join("report.json"))["total"];
    assert_eq!(
        (
            t["scheduled"].as_u64(),
            t["sent"].as_u64(),
            t["answered"].as_u64()
        ),
        (Some(25), Some(1), Some(1))
    );
    assert_eq!(t["failures"]["not_sent"], 24);
}

#[test]
fn the_pool_is_fixed_and_requests_beyond_max_in_flight_are_not_sent() {
    // 3 connections to a server that takes 200 ms per answer can carry 15 req/s: at 100 req/s the
    // queue fills to --max-in-flight and the rest is refused — never a fourth connection.
    let (addr, connections) = serve_counted(|_| Reply {
        status: 200,
        body: answer("TST", r#""kv":{"read_ms":1}"#),
        delay: Duration::from_millis(200),
    });
    let out = scratch("fixed-pool");
    let url = format!("http://{addr}/test");
    let o = kvbench(&[
        "run",
        // The server counts every connection: no GET / after the run.
        "--no-describe",
        "--url",
        &url,
        "--rate",
        "100",
        "--duration",
        "1s",
        "--connections",
        "3",
        "--max-in-flight",
        "10",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 3);
    let r = read_json(&out.join("report.json"));
    let t = &r["total"];
    let not_sent = t["failures"]["not_sent"].as_u64().unwrap();
    assert!(not_sent > 0, "{t}");
    let failed: u64 = t["failures"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(t["answered"].as_u64().unwrap() + failed, 100);
    assert_eq!(t["scheduled"], 100);
    assert_eq!(r["runs"][0]["max_in_flight"], 10);
}

#[test]
fn a_connection_the_server_closed_while_idle_is_reopened_not_failed() {
    let (addr, requests) = serve_closing_idle(
        answer("TST", r#""kv":{"read_ms":1}"#),
        Duration::from_millis(30),
    );
    let out = scratch("closed-idle");
    let url = format!("http://{addr}/test");
    let o = kvbench(&[
        "run",
        // The server counts every connection: no GET / after the run.
        "--no-describe",
        "--url",
        &url,
        "--rate",
        "10",
        "--duration",
        "1s",
        "--connections",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = &read_json(&out.join("report.json"))["total"];
    assert_eq!(
        (t["scheduled"].as_u64(), t["answered"].as_u64()),
        (Some(10), Some(10)),
        "{t}"
    );
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 10);
}

#[test]
fn threads_split_the_schedule_exactly() {
    let (addr, _) = serve_counted(|_| Reply::ok(answer("TST", r#""kv":{"read_ms":1}"#)));
    let out = scratch("threads");
    let url = format!("http://{addr}/test");
    let o = kvbench(&[
        "run",
        "--url",
        &url,
        "--rate",
        "300",
        "--duration",
        "1s",
        "--threads",
        "3",
        "--connections",
        "4",
        "--samples-csv",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = &read_json(&out.join("report.json"))["total"];
    assert_eq!(
        (t["scheduled"].as_u64(), t["answered"].as_u64()),
        (Some(300), Some(300))
    );
    // Every intended start of the schedule, once: i / 300 s.
    let csv = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    let mut intended: Vec<u64> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    intended.sort_unstable();
    let want: Vec<u64> = (0..300u64).map(|i| i * 1_000_000 / 300).collect();
    assert_eq!(intended, want);
}

#[test]
fn several_urls_get_the_same_share_of_the_schedule() {
    let servers: Vec<_> = (0..3)
        .map(|_| {
            let seen = Arc::new(AtomicU64::new(0));
            let counted = seen.clone();
            let (addr, connections) = serve_counted(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
                Reply::ok(answer("TST", r#""kv":{"read_ms":1}"#))
            });
            (format!("http://{addr}/test"), seen, connections)
        })
        .collect();
    let out = scratch("several-urls");
    let mut args = vec!["run", "--no-describe"];
    for (url, _, _) in &servers {
        args.extend(["--url", url.as_str()]);
    }
    // Two threads asked for: three (one per URL).
    args.extend([
        "--rate",
        "300",
        "--duration",
        "1s",
        "--threads",
        "2",
        "--connections",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    let o = kvbench(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = read_json(&out.join("report.json"));
    let t = &report["total"];
    assert_eq!(
        (t["scheduled"].as_u64(), t["answered"].as_u64()),
        (Some(300), Some(300))
    );
    for (url, seen, connections) in &servers {
        assert_eq!(
            seen.load(Ordering::SeqCst),
            100,
            "{url}: a third of the schedule"
        );
        assert!(connections.load(Ordering::SeqCst) >= 1, "{url}");
    }
    let listed: Vec<&str> = servers.iter().map(|(u, _, _)| u.as_str()).collect();
    assert_eq!(
        report["runs"][0]["url"].as_str(),
        Some(listed.join(" ").as_str())
    );
}

#[test]
fn ctrl_c_writes_a_partial_report() {
    let addr = serve(|_| Reply::ok(answer("TST", r#""kv":{"read_ms":1,"hit":true}"#)));
    let out = scratch("ctrl-c");
    let url = format!("http://{addr}/test");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kvbench"))
        .args([
            "run",
            "--url",
            &url,
            "--rate",
            "50",
            "--duration",
            "60s",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first line is printed once the handler is installed.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.starts_with("kvbench:"), "{first}");
    std::thread::sleep(Duration::from_millis(500));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("kvbench did not stop after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(130));
    let r = read_json(&out.join("report.json"));
    assert_eq!(r["runs"][0]["interrupted"], true);
    let scheduled = r["total"]["scheduled"].as_u64().unwrap();
    assert!(scheduled > 0 && scheduled < 3000, "{scheduled}");
    assert_eq!(
        r["total"]["answered"].as_u64().unwrap()
            + r["total"]["failures"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum::<u64>(),
        scheduled
    );
    assert!(rest.contains("INTERRUPTED"), "{rest}");
}

#[test]
fn bad_flags_name_the_flag() {
    let prices = scratch("bad-prices").join("prices.toml");
    std::fs::write(&prices, "price = 3").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--rate", "0"], "--rate"),
        (&["--rate", "fast"], "--rate"),
        (&["--duration", "ten"], "--duration"),
        (&["--timeout", "0s"], "--timeout"),
        (&["--interval=-1s"], "--interval"),
        (&["--header", "NoColon"], "--header"),
        (
            &["--header", "Authorization Bearer s3cret-in-header"],
            "--header",
        ),
        (&["--header", "Bad Name: s3cret-in-header"], "--header"),
        (&["--max-in-flight", "0"], "--max-in-flight"),
        (&["--project-rps=-3"], "--project-rps"),
        (&["--prices", "/nonexistent/prices.toml"], "--prices"),
        (&["--prices", prices.to_str().unwrap()], "--prices"),
    ];
    for (extra, flag) in cases {
        let mut args = vec![
            "run",
            "--url",
            "http://127.0.0.1:9/test",
            "--duration",
            "1s",
        ];
        args.extend_from_slice(extra);
        let o = kvbench(&args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{extra:?} was accepted");
        assert!(
            stderr.contains(flag),
            "{extra:?}: message does not name {flag}: {stderr}"
        );
        assert!(
            !stderr.contains("s3cret"),
            "a header value was echoed: {stderr}"
        );
    }
    let o = kvbench(&["run", "--url", "ftp://x/test"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--url"));
    let o = kvbench(&["run", "--url", "http://me:s3cret@127.0.0.1:9/test"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && stderr.contains("--url") && stderr.contains("credentials"));
    assert!(
        !stderr.contains("s3cret"),
        "the password was echoed: {stderr}"
    );
    let o = kvbench(&["run"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--url"));
}
