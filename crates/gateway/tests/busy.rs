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
