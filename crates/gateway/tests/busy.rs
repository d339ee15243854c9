//! Commands that arrive while a runaway Lua script holds Redis (issue 16 item 7): past its
//! `busy-reply-threshold` Redis answers them BUSY, although the gateway is about to stop the
//! script. The gateway waits for the stop and then serves them — bounded by the script limit plus
//! a margin — instead of passing BUSY on. Against a real redis-server; times are generous bounds.

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use axum::Router;
use serde_json::{json, Value};
use support::{post, TOKEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use upstash_gateway::testing::RedisServer;
use upstash_gateway::{app, AppState, Settings};

const GENEROUS: Duration = Duration::from_secs(10);

fn gateway(redis: &RedisServer, script_timeout_ms: u64) -> Router {
    let mut settings = Settings::new(redis.url(), TOKEN);
    settings.script_timeout_ms = script_timeout_ms;
    settings.redis_timeout_ms = 2_000;
    app(AppState::new(settings).unwrap())
}

/// Redis answers BUSY 100 ms into a script (instead of 5 s).
fn redis_for_scripts() -> RedisServer {
    RedisServer::start_with(&["--busy-reply-threshold", "100"])
}

/// Waits (bounded) until Redis itself answers BUSY to a PING sent straight to it: the window in
/// which a command through the gateway would get BUSY too.
async fn until_redis_is_busy(port: u16) {
    for _ in 0..100 {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        conn.write_all(b"PING\r\n").await.unwrap();
        let mut buf = vec![0u8; 256];
        let n = tokio::time::timeout(GENEROUS, conn.read(&mut buf))
            .await
            .expect("redis answers PING within the bound")
            .unwrap();
        if buf[..n].starts_with(b"-BUSY") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("redis never became busy");
}

fn error_text(body: &Value) -> &str {
    body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error in {body}"))
}

#[tokio::test]
async fn commands_during_a_runaway_script_wait_for_its_stop_and_are_served() {
    let redis = redis_for_scripts();
    // The script limit well past Redis' BUSY threshold: a wide window of BUSY answers.
    let app = gateway(&redis, 1_000);
    let looping = tokio::spawn({
        let app = app.clone();
        async move { post(&app, "/", json!(["EVAL", "while true do end", 0])).await }
    });
    until_redis_is_busy(redis.port).await;

    let requests = [
        ("/", json!(["PING"]), json!({"result": "PONG"})),
        ("/", json!(["SET", "k", "v"]), json!({"result": "OK"})),
        (
            "/pipeline",
            json!([["INCR", "n"], ["ECHO", "e"]]),
            json!([{"result": 1}, {"result": "e"}]),
        ),
        (
            "/multi-exec",
            json!([["INCR", "m"], ["INCR", "m"]]),
            json!([{"result": 1}, {"result": 2}]),
        ),
    ];
    let mut answers = Vec::new();
    for (uri, body, want) in requests {
        let app = app.clone();
        answers.push((
            want,
            tokio::spawn(
                async move { tokio::time::timeout(GENEROUS, post(&app, uri, body)).await },
            ),
        ));
    }
    for (want, answer) in answers {
        let (status, body) = answer.await.unwrap().expect("answered within the bound");
        assert_eq!((status, body), (StatusCode::OK, want));
    }

    let (status, body) = tokio::time::timeout(GENEROUS, looping)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(error_text(&body).contains("--script-timeout-ms"), "{body}");
}

/// A script Redis cannot stop (it wrote): the wait is bounded, and the BUSY answer then says the
/// gateway waited.
#[tokio::test]
async fn the_wait_for_a_script_that_cannot_be_stopped_is_bounded() {
    let redis = redis_for_scripts();
    let app = gateway(&redis, 300);
    let _looping = tokio::spawn({
        let app = app.clone();
        async move {
            post(
                &app,
                "/",
                json!(["EVAL", "redis.call('SET', 'w', 1) while true do end", 0]),
            )
            .await
        }
    });
    until_redis_is_busy(redis.port).await;
    let (status, body) = tokio::time::timeout(GENEROUS, post(&app, "/", json!(["PING"])))
        .await
        .expect("answered although Redis stays busy");
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let msg = error_text(&body);
    assert!(msg.starts_with("BUSY"), "{msg}");
    assert!(
        msg.contains("waited") && msg.contains("--script-timeout-ms"),
        "{msg}"
    );
    // The test's redis-server (still busy) is killed on drop.
}

/// One RESP command array off `buf`, if a whole one is there: its words, and the bytes it took.
fn resp_command(buf: &[u8]) -> Option<(Vec<String>, usize)> {
    fn line(buf: &[u8], at: usize) -> Option<(&str, usize)> {
        let end = buf.get(at..)?.windows(2).position(|w| w == b"\r\n")? + at;
        Some((std::str::from_utf8(&buf[at..end]).ok()?, end + 2))
    }
    let (head, mut at) = line(buf, 0)?;
    let n: usize = head.strip_prefix('*')?.parse().ok()?;
    let mut words = Vec::with_capacity(n);
    for _ in 0..n {
        let (len, next) = line(buf, at)?;
        let len: usize = len.strip_prefix('$')?.parse().ok()?;
        let word = buf.get(next..next + len)?;
        words.push(String::from_utf8_lossy(word).into_owned());
        at = next + len + 2;
        if buf.len() < at {
            return None;
        }
    }
    Some((words, at))
}

type Seen = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// A stand-in Redis on one connection that refuses the first `refusals` `INCR`s BUSY, answers
/// the others and `ECHO`, `+OK` to anything else (the client's set-up); what it was sent of
/// `INCR` and `ECHO`, each with its answer's first two bytes.
async fn busy_stand_in(refusals: usize) -> (u16, Seen, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Seen::default();
    let task = tokio::spawn({
        let seen = seen.clone();
        async move {
            let (mut refused, mut counter) = (0, 0);
            let (mut conn, _) = listener.accept().await.unwrap();
            let (mut buf, mut chunk) = (Vec::new(), [0u8; 4096]);
            loop {
                let n = match conn.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                while let Some((words, used)) = resp_command(&buf) {
                    buf.drain(..used);
                    let name = words[0].to_ascii_uppercase();
                    let answer = match name.as_str() {
                        "INCR" if refused < refusals => {
                            refused += 1;
                            "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n".to_string()
                        }
                        "INCR" => {
                            counter += 1;
                            format!(":{counter}\r\n")
                        }
                        "ECHO" => format!("${}\r\n{}\r\n", words[1].len(), words[1]),
                        _ => "+OK\r\n".to_string(),
                    };
                    if matches!(name.as_str(), "INCR" | "ECHO") {
                        seen.lock()
                            .unwrap()
                            .push(format!("{name} {}", &answer[..2]));
                    }
                    conn.write_all(answer.as_bytes()).await.unwrap();
                }
            }
        }
    });
    (port, seen, task)
}

fn gateway_on(port: u16, script_timeout_ms: u64) -> Router {
    let mut settings = Settings::new(format!("redis://127.0.0.1:{port}"), TOKEN);
    settings.redis_pool_size = 1;
    settings.redis_timeout_ms = 2_000;
    settings.script_timeout_ms = script_timeout_ms;
    app(AppState::new(settings).unwrap())
}

/// A pipeline refused BUSY at its first command, while a script is being stopped, and answered
/// at once after it (the race of a script that ends between two of its commands): the gateway
/// sent nothing after the refused command, and sends the pipeline again from there — each
/// command runs once, in order. Against a stand-in Redis that refuses the first `INCR` once, so
/// the race is certain, not a matter of timing. Refused past the wait, every command has a
/// reply: the refused one's says the gateway waited, those never sent say so.
#[tokio::test]
async fn a_pipeline_refused_part_way_resumes_from_the_refused_command_in_order() {
    let (port, seen, stand_in) = busy_stand_in(1).await;
    let app = gateway_on(port, 1_000);
    let pipeline = json!([["INCR", "n"], ["ECHO", "e"], ["INCR", "n"]]);
    let (status, body) = tokio::time::timeout(GENEROUS, post(&app, "/pipeline", pipeline))
        .await
        .expect("answered within the bound");
    assert_eq!(
        (status, body),
        (
            StatusCode::OK,
            json!([{"result": 1}, {"result": "e"}, {"result": 2}])
        )
    );
    // Refused, then again from the refused command on: nothing was sent after the refusal.
    assert_eq!(
        *seen.lock().unwrap(),
        ["INCR -B", "INCR :1", "ECHO $1", "INCR :2"]
    );
    stand_in.abort();

    let (port, seen, stand_in) = busy_stand_in(usize::MAX).await;
    let app = gateway_on(port, 100);
    let pipeline = json!([["ECHO", "a"], ["INCR", "n"], ["ECHO", "b"]]);
    let (status, body) = tokio::time::timeout(GENEROUS, post(&app, "/pipeline", pipeline))
        .await
        .expect("answered within the bound");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body[0], json!({"result": "a"}));
    let refused = error_text(&body[1]);
    assert!(
        refused.starts_with("BUSY") && refused.contains("waited"),
        "{refused}"
    );
    assert_eq!(
        error_text(&body[2]),
        "BUSY not sent: a command before it in the pipeline was refused BUSY"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], "ECHO $1");
    assert!(seen[1..].iter().all(|s| s == "INCR -B"), "{seen:?}");
    stand_in.abort();
}
