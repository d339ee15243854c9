//! The gateway under hostile or careless requests, against a real redis-server: a Lua busy loop,
//! admin and connection-state commands, a connection Redis killed, a command that times out,
//! numbers too large for a float, a pipeline whose answer would be huge, and a body that never
//! finishes. Times are only lower bounds or generous upper bounds.

mod support;

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use axum::Router;
use serde_json::{json, Value};
use support::{auth, call, post, TOKEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use upstash_gateway::testing::RedisServer;
use upstash_gateway::{app, server, AppState, Settings};

/// Generous bound for anything that should take milliseconds, on a loaded 2-core machine.
const GENEROUS: Duration = Duration::from_secs(10);

fn gateway(redis: &RedisServer, tune: impl FnOnce(&mut Settings)) -> Router {
    let mut settings = Settings::new(redis.url(), TOKEN);
    tune(&mut settings);
    app(AppState::new(settings).unwrap())
}

/// Sends one command straight to Redis (not through the gateway) and returns its first reply line.
async fn redis_direct(port: u16, command: &str) -> String {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    conn.write_all(command.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 512];
    let n = tokio::time::timeout(GENEROUS, conn.read(&mut buf))
        .await
        .expect("redis answers")
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn error_text(body: &Value) -> &str {
    body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error in {body}"))
}

/// Redis that answers BUSY (and accepts SCRIPT KILL) 100 ms into a script, instead of 5 s.
fn redis_for_scripts() -> RedisServer {
    RedisServer::start_with(&["--busy-reply-threshold", "100"])
}

#[tokio::test]
async fn a_busy_script_is_stopped_at_the_limit_and_others_keep_being_served() {
    let redis = redis_for_scripts();
    let app = gateway(&redis, |s| {
        s.script_timeout_ms = 300;
        s.redis_timeout_ms = 5_000;
    });
    let started = Instant::now();
    let looping = tokio::spawn({
        let app = app.clone();
        async move { post(&app, "/", json!(["EVAL", "while true do end", 0])).await }
    });
    // Meanwhile another client is answered: at worst with Redis' BUSY while the script runs,
    // never a gateway failure, and within a bound.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let (status, body) = tokio::time::timeout(GENEROUS, post(&app, "/", json!(["PING"])))
        .await
        .expect("PING answered while a script loops");
    assert!(
        status == StatusCode::OK
            || (status == StatusCode::BAD_REQUEST && error_text(&body).starts_with("BUSY")),
        "{status} {body}"
    );

    let (status, body) = tokio::time::timeout(GENEROUS, looping)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let msg = error_text(&body);
    assert!(msg.contains("killed"), "{msg}");
    assert!(msg.contains("--script-timeout-ms"), "{msg}");
    assert!(started.elapsed() >= Duration::from_millis(300));

    // Redis is free again and nobody gets a stale answer.
    for i in 0..5 {
        let (status, body) = post(&app, "/", json!(["ECHO", format!("after-{i}")])).await;
        assert_eq!(
            (status, body),
            (StatusCode::OK, json!({"result": format!("after-{i}")}))
        );
    }
}

#[tokio::test]
async fn scripts_inside_pipelines_and_functions_are_stopped_too() {
    let redis = redis_for_scripts();
    let app = gateway(&redis, |s| s.script_timeout_ms = 300);
    let (status, body) = post(
        &app,
        "/pipeline",
        json!([
            ["SET", "p", "1"],
            ["EVAL", "while true do end", 0],
            ["GET", "p"]
        ]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body[0], json!({"result": "OK"}));
    assert!(error_text(&body[1]).contains("killed"), "{body}");
    assert_eq!(body[2], json!({"result": "1"}));

    let library =
        "#!lua name=spinlib\nredis.register_function('spin', function() while true do end end)";
    let (status, body) = post(&app, "/", json!(["FUNCTION", "LOAD", library])).await;
    assert_eq!(
        (status, &body),
        (StatusCode::OK, &json!({"result": "spinlib"}))
    );
    let (status, body) = post(&app, "/", json!(["FCALL", "spin", 0])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // Stopped with FUNCTION KILL (SCRIPT KILL answers BUSY for a function); Redis 7.0 still
    // words the error "killed by user with SCRIPT KILL".
    let msg = error_text(&body);
    assert!(
        msg.contains("killed") && msg.contains("--script-timeout-ms"),
        "{msg}"
    );
    let (status, _) = post(&app, "/", json!(["PING"])).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_script_is_stopped_even_when_its_client_goes_away() {
    let redis = redis_for_scripts();
    let app = gateway(&redis, |s| s.script_timeout_ms = 300);
    let looping = tokio::spawn({
        let app = app.clone();
        async move { post(&app, "/", json!(["EVAL", "while true do end", 0])).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The client hangs up: its request future is dropped mid-script.
    looping.abort();
    // Redis must come back (answers BUSY meanwhile). Bounded: 100 tries, 100 ms apart.
    let mut answered = None;
    for _ in 0..100 {
        let (status, body) = post(&app, "/", json!(["PING"])).await;
        if status == StatusCode::OK {
            answered = Some(body);
            break;
        }
        assert!(error_text(&body).starts_with("BUSY"), "{body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        answered,
        Some(json!({"result": "PONG"})),
        "Redis stayed busy"
    );
}

#[tokio::test]
async fn script_kill_sent_by_a_client_is_not_queued_behind_the_script() {
    let redis = redis_for_scripts();
    // The gateway's own limit is far away: the client's SCRIPT KILL is what stops the loop.
    let app = gateway(&redis, |s| s.script_timeout_ms = 60_000);
    let looping = tokio::spawn({
        let app = app.clone();
        async move { post(&app, "/", json!(["EVAL", "while true do end", 0])).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Bounded retries: the kill may land before Redis starts the script (NOTBUSY).
    let mut killed = false;
    for _ in 0..50 {
        let (status, body) =
            tokio::time::timeout(GENEROUS, post(&app, "/", json!(["SCRIPT", "KILL"])))
                .await
                .expect("SCRIPT KILL answered");
        if status == StatusCode::OK {
            killed = true;
            break;
        }
        assert!(error_text(&body).starts_with("NOTBUSY"), "{body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(killed);
    let (status, body) = tokio::time::timeout(GENEROUS, looping)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_text(&body).contains("killed"), "{body}");
}

#[tokio::test]
async fn a_script_that_wrote_cannot_be_stopped_and_the_answer_says_so() {
    let redis = redis_for_scripts();
    let app = gateway(&redis, |s| {
        s.script_timeout_ms = 300;
        s.redis_timeout_ms = 1_000;
    });
    let (status, body) = tokio::time::timeout(
        GENEROUS,
        post(
            &app,
            "/",
            json!(["EVAL", "redis.call('SET', 'w', 1) while true do end", 0]),
        ),
    )
    .await
    .expect("answered although Redis stays busy");
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    let msg = error_text(&body);
    assert!(msg.starts_with("ERR unknown outcome"), "{msg}");
    assert!(msg.contains("UNKILLABLE"), "{msg}");
    // Redis keeps answering BUSY until the script ends; the test's redis-server is killed on drop.
}

#[tokio::test]
async fn admin_and_connection_state_commands_are_refused_and_change_nothing() {
    let redis = RedisServer::start();
    let app = gateway(&redis, |_| {});
    let refused = [
        json!(["REPLICAOF", "127.0.0.1", 1]),
        json!(["SLAVEOF", "127.0.0.1", 1]),
        json!(["CONFIG", "SET", "maxmemory", "1"]),
        json!(["CONFIG", "GET", "*"]),
        json!(["ACL", "SETUSER", "default", "off"]),
        json!(["SHUTDOWN", "NOSAVE"]),
        json!(["SAVE"]),
        json!(["DEBUG", "SLEEP", 5]),
        json!(["MONITOR"]),
        json!(["CLIENT", "KILL", "TYPE", "normal"]),
        json!(["CLIENT", "PAUSE", 20000]),
        json!(["client", "reply", "off"]),
        json!(["SELECT", 1]),
        json!(["BLPOP", "l", 0]),
    ];
    for command in &refused {
        let (status, body) = post(&app, "/", command.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{command}");
        let name = command[0].as_str().unwrap().to_ascii_uppercase();
        assert!(
            error_text(&body).starts_with(&format!("ERR command is not allowed: {name}")),
            "{command}: {body}"
        );
    }
    // Also inside pipelines and transactions: nothing of those runs.
    for route in ["/pipeline", "/multi-exec"] {
        let (status, body) = post(
            &app,
            route,
            json!([["SET", "x", "1"], ["CONFIG", "SET", "appendonly", "yes"]]),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{route}: {body}");
    }
    let (_, body) = post(&app, "/", json!(["EXISTS", "x"])).await;
    assert_eq!(body, json!({"result": 0}));
    // Redis is still a writable primary with its settings untouched.
    let (status, body) = post(&app, "/", json!(["SET", "k", "v"])).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"result": "OK"})));
    let role = redis_direct(redis.port, "ROLE\r\n").await;
    assert!(role.contains("master"), "{role}");
    let maxmemory = redis_direct(redis.port, "CONFIG GET maxmemory\r\n").await;
    assert!(maxmemory.ends_with("$1\r\n0\r\n"), "{maxmemory:?}");
}

#[tokio::test]
async fn the_next_request_after_redis_kills_the_connections_gets_through() {
    let redis = RedisServer::start();
    let app = gateway(&redis, |_| {});
    for round in 0..3 {
        // Fill the pool with a few idle connections.
        let warm: Vec<_> = (0..4)
            .map(|_| {
                let app = app.clone();
                tokio::spawn(async move { post(&app, "/", json!(["PING"])).await })
            })
            .collect();
        for w in warm {
            assert_eq!(w.await.unwrap().0, StatusCode::OK);
        }
        let killed = redis_direct(redis.port, "CLIENT KILL TYPE normal SKIPME yes\r\n").await;
        assert!(killed.starts_with(':'), "{killed}");
        // Give the kernel a moment to deliver the FINs; correctness does not depend on it.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let (status, body) = post(&app, "/", json!(["SET", "r", round])).await;
        assert_eq!(
            (status, body),
            (StatusCode::OK, json!({"result": "OK"})),
            "round {round}"
        );
        let (status, body) = post(&app, "/pipeline", json!([["GET", "r"], ["PING"]])).await;
        assert_eq!(
            (status, body),
            (
                StatusCode::OK,
                json!([{"result": round.to_string()}, {"result": "PONG"}])
            )
        );
    }
}

#[tokio::test]
async fn a_timed_out_command_is_an_unknown_outcome_and_leaves_no_reply_behind() {
    let redis = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    let app = gateway(&redis, |s| s.redis_timeout_ms = 300);
    let (status, _) = post(&app, "/", json!(["PING"])).await;
    assert_eq!(status, StatusCode::OK);

    // Another client of Redis (not the gateway) blocks it for a second.
    let port = redis.port;
    let sleeper = tokio::spawn(async move { redis_direct(port, "DEBUG SLEEP 1\r\n").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, body) = post(&app, "/", json!(["ECHO", "first"])).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    let msg = error_text(&body);
    assert!(msg.starts_with("ERR unknown outcome"), "{msg}");
    assert!(msg.contains("may have run"), "{msg}");
    assert!(sleeper.await.unwrap().starts_with("+OK"));

    // Redis answered "first" eventually; nobody must receive it.
    for word in ["second", "third"] {
        let (status, body) = post(&app, "/", json!(["ECHO", word])).await;
        assert_eq!((status, body), (StatusCode::OK, json!({"result": word})));
    }
}

#[tokio::test]
async fn a_large_write_to_a_redis_that_stopped_reading_is_bounded_too() {
    let redis = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    let app = gateway(&redis, |s| s.redis_timeout_ms = 300);
    let (status, _) = post(&app, "/", json!(["PING"])).await;
    assert_eq!(status, StatusCode::OK);
    // Redis sleeps for 30 s: it reads nothing, so an 8 MB command fills the socket buffers.
    let port = redis.port;
    let _sleeper = tokio::spawn(async move { redis_direct(port, "DEBUG SLEEP 30\r\n").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let value = vec![b'x'; 8 * 1024 * 1024];
    let (status, body) = tokio::time::timeout(
        GENEROUS,
        call(&app, Method::POST, "/set/huge", &[auth()], value),
    )
    .await
    .expect("answered while Redis sleeps");
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert!(
        error_text(&body).starts_with("ERR unknown outcome"),
        "{body}"
    );
}

#[tokio::test]
async fn redis_down_is_502_not_sent() {
    let app = app(AppState::new(Settings::new("redis://127.0.0.1:1", TOKEN)).unwrap());
    let (status, body) = post(&app, "/", json!(["SET", "k", "v"])).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(error_text(&body).contains("not sent"), "{body}");
}

#[tokio::test]
async fn large_integers_are_passed_as_their_exact_text() {
    let redis = RedisServer::start();
    let app = gateway(&redis, |_| {});
    let body = r#"["SET","big",123456789012345678901234567890]"#;
    let (status, _) = call(&app, Method::POST, "/", &[auth()], body).await;
    assert_eq!(status, StatusCode::OK);
    let (_, body) = post(&app, "/", json!(["GET", "big"])).await;
    assert_eq!(body, json!({"result": "123456789012345678901234567890"}));

    // An integer Redis cannot hold is Redis' error, not a silently rounded float.
    let body = r#"["INCRBY","n",99999999999999999999]"#;
    let (status, json) = call(&app, Method::POST, "/", &[auth()], body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_text(&json).contains("not an integer"), "{json}");
    let body = r#"[["SET","p",-9007199254740993],["GET","p"]]"#;
    let (_, json) = call(&app, Method::POST, "/pipeline", &[auth()], body).await;
    assert_eq!(json[1], serde_json::json!({"result": "-9007199254740993"}));
}

#[tokio::test]
async fn answers_over_the_response_cap_are_refused() {
    let redis = RedisServer::start();
    let cap = 1024 * 1024;
    let app = gateway(&redis, |s| s.max_response_bytes = cap);
    let value = "x".repeat(300 * 1024);
    let (status, _) = post(&app, "/", json!(["SET", "big", value])).await;
    assert_eq!(status, StatusCode::OK);

    // 30 GETs of 300 KB: 9 MB of answer for a request of a few hundred bytes.
    let gets: Vec<Value> = (0..30).map(|_| json!(["GET", "big"])).collect();
    for route in ["/pipeline", "/multi-exec"] {
        let (status, body) = post(&app, route, json!(gets)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{route}");
        let msg = error_text(&body);
        assert!(msg.starts_with("ERR max response size exceeded"), "{msg}");
        assert!(msg.contains(&cap.to_string()), "{msg}");
    }
    // Under the cap is fine, and the connection the refused answer was cut from is not reused.
    let (status, body) = post(
        &app,
        "/pipeline",
        json!([["GET", "big"], ["GET", "big"], ["PING"]]),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body[2], json!({"result": "PONG"}));

    // One value over the cap, in any encoding.
    let (_, _) = post(&app, "/", json!(["APPEND", "big", "x".repeat(800 * 1024)])).await;
    for headers in [vec![auth()], vec![auth(), ("upstash-encoding", "base64")]] {
        let (status, body) = call(&app, Method::GET, "/get/big", &headers, "").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(error_text(&body).contains("max response size"));
    }
    let (status, body) = post(&app, "/", json!(["STRLEN", "big"])).await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"result": 1_126_400}))
    );
}

/// A gateway on a real socket; stopped when the returned sender is dropped.
async fn serve(
    app: Router,
    limits: upstash_gateway::connection::Limits,
) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server::serve_with(listener, app, limits, async {
        let _ = stopped.await;
    }));
    (addr, stop)
}

/// Sends one request on a fresh connection and returns the response text.
async fn fresh_request(addr: std::net::SocketAddr) -> String {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET /echo/fresh HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// Whether the server closed `conn` within `wait` (end of stream or a reset).
async fn closed_within(conn: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 256];
    let deadline = tokio::time::Instant::now() + wait;
    // Bounded: each read returns data, end of stream, an error, or the deadline passes.
    loop {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn idle_and_slow_clients_are_closed_and_a_fresh_client_is_served() {
    let redis = RedisServer::start();
    let app = gateway(&redis, |_| {});
    let limits = upstash_gateway::connection::Limits {
        max_connections: 1_000,
        idle_timeout: Duration::from_millis(500),
        header_read_timeout: Duration::from_millis(500),
    };
    let (addr, _stop) = serve(app, limits).await;

    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    // A keep-alive client that made one request and then went quiet is idle too.
    let mut used = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET /ping HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
    used.write_all(request.as_bytes()).await.unwrap();
    let mut buf = [0u8; 512];
    let n = used.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));

    // Slowloris: a request head one byte every 100 ms, for at most 4 s.
    let slow: Vec<_> = (0..20)
        .map(|_| {
            tokio::spawn(async move {
                let mut conn = TcpStream::connect(addr).await.unwrap();
                let head = b"GET /ping HTTP/1.1\r\nHost: g\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
                for byte in head.iter() {
                    if conn.write_all(&[*byte]).await.is_err() {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                closed_within(&mut conn, Duration::from_millis(100)).await
            })
        })
        .collect();

    // Meanwhile a fresh client is served, within a generous bound.
    let answer = tokio::time::timeout(GENEROUS, fresh_request(addr))
        .await
        .expect("served");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("{\"result\":\"fresh\"}"), "{answer}");

    // All of them get closed.
    for conn in idle.iter_mut().chain([&mut used]) {
        assert!(
            closed_within(conn, GENEROUS).await,
            "an idle connection stayed open"
        );
    }
    for s in slow {
        assert!(s.await.unwrap(), "a slowloris connection stayed open");
    }
}

#[tokio::test]
async fn at_the_cap_a_new_client_sheds_the_longest_idle_connection() {
    let redis = RedisServer::start();
    let app = gateway(&redis, |_| {});
    let limits = upstash_gateway::connection::Limits {
        max_connections: 50,
        // Far away: only the cap closes connections here.
        idle_timeout: Duration::from_secs(600),
        header_read_timeout: Duration::from_secs(600),
    };
    let (addr, _stop) = serve(app, limits).await;
    let mut conns = Vec::new();
    for _ in 0..200 {
        conns.push(TcpStream::connect(addr).await.unwrap());
    }
    let answer = tokio::time::timeout(GENEROUS, fresh_request(addr))
        .await
        .expect("served");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The 150 oldest (and one more, for the fresh client) were shed, the newest stayed.
    for (i, conn) in conns.iter_mut().enumerate().take(151) {
        assert!(
            closed_within(conn, GENEROUS).await,
            "connection {i} was not shed"
        );
    }
    for (i, conn) in conns.iter_mut().enumerate().skip(151) {
        assert!(
            !closed_within(conn, Duration::from_millis(50)).await,
            "connection {i} was shed although newer than others"
        );
    }
}

#[tokio::test]
async fn a_body_that_never_finishes_is_a_408() {
    let redis = RedisServer::start();
    let app = gateway(&redis, |s| s.body_read_timeout_ms = 300);
    let (addr, _stop) = serve(app, Default::default()).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100\r\n\r\n[\"SET\","
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    tokio::time::timeout(GENEROUS, conn.read_to_end(&mut answer))
        .await
        .expect("answered and closed")
        .ok();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request body not received"), "{answer}");
    assert!(started.elapsed() >= Duration::from_millis(300));
}
