//! The keep-alive race: a server closes a connection that waited idle just as a request is
//! written on it (workerd closes idle connections after 5 s, and its close can cross a request
//! on the wire). Against a server that closes at that worst moment on purpose — after the
//! request's first bytes, before any byte of an answer — a request is retried once on a new
//! connection and counted; a failure on a connection opened for the request is not retried, and
//! is reported as the client's. Nothing here is timed: the tests count what happened.

mod common;

use std::sync::atomic::Ordering;

use common::{answer, kvbench, read_json, scratch, serve_dropping, Close};
use kvbench::attack::Attacker;
use kvbench_report::sample::FailureKind;

const REQUESTS: u64 = 10;

fn body() -> String {
    answer("TST", r#""kv":{"read_ms":1}"#)
}

fn attacker(addr: std::net::SocketAddr) -> Attacker {
    Attacker::new(&format!("http://{addr}/test").parse().unwrap(), &[]).unwrap()
}

/// Sends `REQUESTS` requests one after the other, reusing the connection as `kvbench run` does;
/// returns (answered, failures by kind, retried).
async fn send_all(a: &Attacker) -> (u64, Vec<FailureKind>, u64) {
    let (mut conn, mut body) = (None, Vec::new());
    let (mut answered, mut failed, mut retried) = (0, Vec::new(), 0);
    for _ in 0..REQUESTS {
        let mut again = false;
        match a.send(&mut conn, &mut body, &mut again).await {
            Ok(200) => answered += 1,
            Ok(status) => panic!("status {status}"),
            Err((kind, _)) => failed.push(kind),
        }
        retried += u64::from(again);
    }
    (answered, failed, retried)
}

/// (a) Without the retry the race costs requests: every request on a kept-alive connection
/// fails, as the soak's resets did, with no byte of an answer (`transport`, the client's side).
#[tokio::test]
async fn without_the_retry_a_request_the_idle_close_crosses_fails() {
    for close in [Close::Reset, Close::Eof] {
        let (addr, seen) = serve_dropping(body(), 1, close, 2 * REQUESTS);
        let (answered, failed, retried) = send_all(&attacker(addr).without_retry()).await;
        // Request 1 on a new connection is answered, request 2 on it kept alive is dropped,
        // request 3 opens a new one, and so on.
        assert_eq!((answered, failed.len() as u64), (5, 5), "{close:?}");
        assert!(
            failed.iter().all(|k| *k == FailureKind::Transport),
            "{close:?}: {failed:?}"
        );
        assert_eq!(retried, 0, "{close:?}");
        assert_eq!(seen.dropped.load(Ordering::SeqCst), 5, "{close:?}");
        assert_eq!(seen.connections.load(Ordering::SeqCst), 5, "{close:?}");
    }
}

/// (b) With it, every request is answered: each one the close crossed is sent once more on a
/// new connection, and counted.
#[tokio::test]
async fn with_the_retry_every_request_is_answered_and_the_retries_counted() {
    for close in [Close::Reset, Close::Eof] {
        let (addr, seen) = serve_dropping(body(), 1, close, 2 * REQUESTS);
        let (answered, failed, retried) = send_all(&attacker(addr)).await;
        assert_eq!((answered, failed), (REQUESTS, vec![]), "{close:?}");
        // Every request after the first went out on a kept-alive connection and was dropped.
        assert_eq!(retried, REQUESTS - 1, "{close:?}");
        assert_eq!(
            seen.dropped.load(Ordering::SeqCst),
            REQUESTS - 1,
            "{close:?}"
        );
        assert_eq!(seen.answered.load(Ordering::SeqCst), REQUESTS, "{close:?}");
        assert_eq!(
            seen.connections.load(Ordering::SeqCst),
            REQUESTS,
            "{close:?}"
        );
    }
}

/// (c) A request that fails on a connection opened for it is not retried: the server saw it,
/// and another attempt would be a second request.
#[tokio::test]
async fn a_failure_on_a_new_connection_is_not_retried() {
    let (addr, seen) = serve_dropping(body(), 0, Close::Reset, 2 * REQUESTS);
    let (answered, failed, retried) = send_all(&attacker(addr)).await;
    assert_eq!(answered, 0);
    assert_eq!(failed, vec![FailureKind::Transport; REQUESTS as usize]);
    assert_eq!(retried, 0);
    assert_eq!(seen.connections.load(Ordering::SeqCst), REQUESTS);
    assert_eq!(seen.dropped.load(Ordering::SeqCst), REQUESTS);
}

/// Bytes of an answer that arrived make a broken exchange the worker's (`truncated`), never
/// retried: the server saw the request and began to answer it.
#[tokio::test]
async fn a_connection_broken_after_answer_bytes_is_truncated_not_retried() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        // One connection: one request answered whole, then half of the next one's answer.
        for stream in listener.incoming().take(1) {
            let Ok(mut s) = stream else { return };
            s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            let mut buf = [0u8; 4096];
            let whole = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{}",
                body().len(),
                body()
            );
            for reply in [
                whole.as_str(),
                "HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"col",
            ] {
                if !matches!(s.read(&mut buf), Ok(n) if n > 0) {
                    return;
                }
                if s.write_all(reply.as_bytes()).is_err() {
                    return;
                }
            }
        }
    });
    let a = attacker(addr);
    let (mut conn, mut body) = (None, Vec::new());
    let mut retried = false;
    assert_eq!(a.send(&mut conn, &mut body, &mut retried).await, Ok(200));
    let second = a.send(&mut conn, &mut body, &mut retried).await;
    assert!(
        matches!(&second, Err((FailureKind::Truncated, _))),
        "{second:?}"
    );
    assert!(!retried);
}

/// `kvbench run` for a second at `rate` on one connection, into a scratch directory.
fn run_on_one_connection(
    addr: std::net::SocketAddr,
    rate: u32,
    name: &str,
) -> (std::path::PathBuf, std::process::Output) {
    let out = scratch(name);
    let url = format!("http://{addr}/test");
    let rate = rate.to_string();
    // The server counts every connection: no GET / after the run.
    let o = kvbench(&[
        "run",
        "--no-describe",
        "--url",
        &url,
        "--rate",
        &rate,
        "--duration",
        "1s",
        "--connections",
        "1",
        "--samples-csv",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (out, o)
}

/// `kvbench run` end to end: the retries are in report.json, and every request is answered.
#[test]
fn a_run_retries_on_a_new_connection_and_reports_the_retries() {
    let (addr, seen) = serve_dropping(body(), 1, Close::Reset, 100);
    let (out, o) = run_on_one_connection(addr, 20, "resets-retried");
    let r = read_json(&out.join("report.json"));
    let t = &r["total"];
    assert_eq!(
        (t["scheduled"].as_u64(), t["answered"].as_u64()),
        (Some(20), Some(20)),
        "{t}"
    );
    assert_eq!(t["failures"].as_object().unwrap().len(), 0, "{t}");
    // The one connection, opened before the run, answers the first request; each later one is
    // dropped on it, sent again on a new connection, and answered there.
    assert_eq!(t["retried"], 19);
    assert_eq!(r["summary"]["retried"], 19);
    assert_eq!(r["labels"]["default"]["retried"], 19, "{}", r["labels"]);
    assert_eq!(seen.dropped.load(Ordering::SeqCst), 19);
    assert_eq!(seen.connections.load(Ordering::SeqCst), 20);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("retried on a new connection 19"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(r#"data-row="total" data-col="retried" data-value="19""#));
    // samples.csv marks each of them: its last column.
    let csv = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().ends_with(",retried"));
    let marks: Vec<&str> = lines.map(|l| l.rsplit(',').next().unwrap()).collect();
    assert_eq!(marks.len(), 20);
    assert_eq!(marks.iter().filter(|m| **m == "true").count(), 19, "{csv}");
    assert_eq!(marks.iter().filter(|m| **m == "false").count(), 1, "{csv}");
}

/// `kvbench run` against a server that never answers: every request fails as the client's
/// (`transport`, in report.json, the text report and report.html), none as the worker's, and
/// only the request that found the pre-opened connection idle was sent twice.
#[test]
fn a_run_reports_the_clients_failures_apart_from_the_workers() {
    let (addr, seen) = serve_dropping(body(), 0, Close::Reset, 100);
    let (out, o) = run_on_one_connection(addr, 10, "resets-client");
    let r = read_json(&out.join("report.json"));
    let (t, s) = (&r["total"], &r["summary"]);
    assert_eq!(
        (t["scheduled"].as_u64(), t["failures"]["transport"].as_u64()),
        (Some(10), Some(10)),
        "{t}"
    );
    assert_eq!(
        (s["client_failed"].as_u64(), s["worker_failed"].as_u64()),
        (Some(10), Some(0))
    );
    // The pre-opened connection had waited idle: its request was retried once, on a new
    // connection that failed too; the nine after it were each sent once, on a new connection.
    assert_eq!(t["retried"], 1);
    assert_eq!(seen.connections.load(Ordering::SeqCst), 11);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("failed on the client's side 10") && stdout.contains("  client  transport"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    for cell in [
        r#"data-row="total" data-col="client_failed" data-value="10""#,
        r#"data-row="total" data-col="worker_failed" data-value="0""#,
        "<td>request (client)</td><td>transport</td>",
    ] {
        assert!(html.contains(cell), "{cell}");
    }
}
