//! The REST surface against a real redis-server: RESP → JSON for each reply type, pipeline and
//! multi-exec semantics, and base64 round trips of arbitrary bytes.

mod support;

use axum::http::{Method, StatusCode};
use axum::Router;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};
use support::{auth, call, post, TOKEN};
use upstash_gateway::testing::RedisServer;
use upstash_gateway::{app, AppState, Settings};

fn gateway(redis: &RedisServer) -> Router {
    app(AppState::new(Settings::new(redis.url(), TOKEN)).unwrap())
}

#[tokio::test]
async fn each_reply_type_maps_to_json() {
    let redis = RedisServer::start();
    let app = gateway(&redis);
    let ok = StatusCode::OK;
    let cases = [
        // status replies
        (json!(["SET", "s", "v"]), json!({"result": "OK"})),
        (json!(["PING"]), json!({"result": "PONG"})),
        (json!(["TYPE", "s"]), json!({"result": "string"})),
        // bulk and nil
        (json!(["GET", "s"]), json!({"result": "v"})),
        (json!(["GET", "missing"]), json!({"result": null})),
        // integers, including the extremes
        (json!(["SET", "n", i64::MAX - 1]), json!({"result": "OK"})),
        (json!(["INCR", "n"]), json!({"result": i64::MAX})),
        (json!(["DECRBY", "neg", 5]), json!({"result": -5})),
        // arrays, empty and nested
        (json!(["LRANGE", "nolist", 0, -1]), json!({"result": []})),
        (
            json!(["EVAL", "return {1, {'a', {2, 'b'}}, 'c'}", 0]),
            json!({"result": [1, ["a", [2, "b"]], "c"]}),
        ),
        // maps come back flat (RESP2, as Upstash answers), scores as strings
        (json!(["HSET", "h", "f", "v"]), json!({"result": 1})),
        (json!(["HGETALL", "h"]), json!({"result": ["f", "v"]})),
        (json!(["ZADD", "z", 1.5, "m"]), json!({"result": 1})),
        (
            json!(["ZRANGE", "z", 0, -1, "WITHSCORES"]),
            json!({"result": ["m", "1.5"]}),
        ),
        (json!(["ZSCORE", "z", "m"]), json!({"result": "1.5"})),
        (
            json!(["MGET", "s", "missing"]),
            json!({"result": ["v", null]}),
        ),
    ];
    for (command, want) in cases {
        let (status, got) = post(&app, "/", command.clone()).await;
        assert_eq!((status, &got), (ok, &want), "{command}");
    }
}

#[tokio::test]
async fn redis_errors_are_400_with_the_redis_message() {
    let redis = RedisServer::start();
    let app = gateway(&redis);
    post(&app, "/", json!(["SET", "s", "v"])).await;
    for (command, prefix) in [
        (
            json!(["LPUSH", "s", "x"]),
            "WRONGTYPE Operation against a key",
        ),
        (json!(["INCR", "s"]), "ERR value is not an integer"),
        // Refused by the allow-list before Redis sees it.
        (
            json!(["NOSUCHCOMMAND"]),
            "ERR command is not allowed: NOSUCHCOMMAND",
        ),
        (json!(["GET"]), "ERR wrong number of arguments"),
        (
            json!(["EVAL", "return redis.error_reply('MYERR custom')", 0]),
            "MYERR custom",
        ),
    ] {
        let (status, body) = post(&app, "/", command.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{command}");
        let msg = body["error"].as_str().unwrap();
        assert!(msg.starts_with(prefix), "{command}: {msg}");
    }
}

#[tokio::test]
async fn pipeline_runs_every_command_in_order_and_is_not_atomic() {
    let redis = RedisServer::start();
    let app = gateway(&redis);
    let (status, body) = post(
        &app,
        "/pipeline",
        json!([
            ["SET", "a", "1"],
            ["INCR", "a"],
            ["LPUSH", "a", "x"],
            ["INCR", "a"],
            ["GET", "none"]
        ]),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!([
            {"result": "OK"},
            {"result": 2},
            {"error": "WRONGTYPE Operation against a key holding the wrong kind of value"},
            {"result": 3},
            {"result": null},
        ])
    );
}

#[tokio::test]
async fn a_long_pipeline_runs_in_the_order_it_was_sent() {
    // Ten times the redis crate's queue of 50 requests per connection.
    let redis = RedisServer::start();
    let app = gateway(&redis);
    let pushes: Vec<Value> = (0..500).map(|i| json!(["RPUSH", "order", i])).collect();
    let (status, body) = post(&app, "/pipeline", Value::Array(pushes)).await;
    assert_eq!(status, StatusCode::OK);
    let lengths: Vec<Value> = (1..=500).map(|n| json!({"result": n})).collect();
    assert_eq!(body, Value::Array(lengths));
    let (_, body) = post(&app, "/", json!(["LRANGE", "order", 0, -1])).await;
    let want: Vec<String> = (0..500).map(|i: i32| i.to_string()).collect();
    assert_eq!(body, json!({"result": want}));
}

#[tokio::test]
async fn multi_exec_is_atomic_and_reports_errors() {
    let redis = RedisServer::start();
    let app = gateway(&redis);
    // A runtime error fails only its command, inside an otherwise applied transaction.
    let (status, body) = post(
        &app,
        "/multi-exec",
        json!([["SET", "a", "x"], ["INCR", "a"], ["GET", "a"]]),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body[0], json!({"result": "OK"}));
    assert!(body[1]["error"]
        .as_str()
        .unwrap()
        .starts_with("ERR value is not an integer"));
    assert_eq!(body[2], json!({"result": "x"}));

    // A command that cannot be queued discards the whole transaction: one error, nothing applied.
    let (status, body) = post(
        &app,
        "/multi-exec",
        json!([["SET", "b", "1"], ["GET"], ["SET", "c", "1"]]),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"].as_str().unwrap().starts_with("EXECABORT"),
        "{body}"
    );
    let (_, body) = post(&app, "/", json!(["EXISTS", "b", "c"])).await;
    assert_eq!(body, json!({"result": 0}));
}

#[tokio::test]
async fn concurrent_transactions_and_commands_do_not_interleave() {
    let redis = RedisServer::start();
    let app = gateway(&redis);
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let (tx, single) = tokio::join!(
                    post(
                        &app,
                        "/multi-exec",
                        json!([["INCR", "n"], ["INCR", "n"], ["INCR", "n"]])
                    ),
                    post(&app, "/", json!(["INCR", "n"])),
                );
                assert_eq!(single.0, StatusCode::OK);
                tx.1
            })
        })
        .collect();
    for task in tasks {
        let body = task.await.unwrap();
        let first = body[0]["result"].as_i64().unwrap();
        assert_eq!(
            body,
            json!([{"result": first}, {"result": first + 1}, {"result": first + 2}])
        );
    }
}

#[tokio::test]
async fn all_256_byte_values_round_trip_through_base64() {
    let redis = RedisServer::start();
    let app = gateway(&redis);
    let bytes: Vec<u8> = (0..=255u8).collect();
    let b64 = ("upstash-encoding", "base64");

    // Written as percent-encoded path segments...
    let encoded: String = bytes.iter().map(|b| format!("%{b:02X}")).collect();
    let (status, body) = call(
        &app,
        Method::GET,
        &format!("/set/path/{encoded}"),
        &[auth(), b64],
        "",
    )
    .await;
    assert_eq!((status, body), (StatusCode::OK, json!({"result": "OK"})));
    // ...and as a raw POST body appended to a path command.
    let (status, _) = call(&app, Method::POST, "/set/body", &[auth()], bytes.clone()).await;
    assert_eq!(status, StatusCode::OK);

    for key in ["path", "body"] {
        let (_, body) = post(&app, "/", json!(["GET", key])).await;
        let lossy = body["result"].as_str().unwrap();
        assert!(
            lossy.contains('\u{FFFD}'),
            "without base64, invalid UTF-8 is replaced"
        );

        let (_, body) = call(
            &app,
            Method::POST,
            "/",
            &[auth(), b64],
            json!(["GET", key]).to_string(),
        )
        .await;
        let got = BASE64.decode(body["result"].as_str().unwrap()).unwrap();
        assert_eq!(got, bytes, "{key}");
    }

    // Base64 applies inside pipelines and transactions too, but not to "OK" or numbers.
    for route in ["/pipeline", "/multi-exec"] {
        let (_, body) = call(
            &app,
            Method::POST,
            route,
            &[auth(), b64],
            json!([
                ["SET", "t", "v"],
                ["GET", "path"],
                ["STRLEN", "path"],
                ["LRANGE", "body", 0, 1]
            ])
            .to_string(),
        )
        .await;
        assert_eq!(body[0], json!({"result": "OK"}), "{route}");
        assert_eq!(
            BASE64.decode(body[1]["result"].as_str().unwrap()).unwrap(),
            bytes
        );
        assert_eq!(body[2], json!({"result": 256}));
        assert!(
            body[3]["error"].as_str().unwrap().starts_with("WRONGTYPE"),
            "errors stay plain"
        );
    }
}

/// A read region (`--read-url`): single reads come from the replica, writes and pipelines go to
/// the primary. Two unrelated servers stand in for primary and replica, so each answer shows
/// which one it came from.
#[tokio::test]
async fn a_read_region_reads_from_its_replica_and_writes_to_the_primary() {
    let (primary, replica) = (RedisServer::start(), RedisServer::start());
    let mut settings = Settings::new(primary.url(), TOKEN);
    settings.read_url = Some(replica.url());
    let region = app(AppState::new(settings).unwrap());
    let (at_primary, at_replica) = (gateway(&primary), gateway(&replica));
    post(&at_replica, "/", json!(["SET", "k", "replica's"])).await;

    assert_eq!(
        post(&region, "/", json!(["SET", "k", "new"])).await.1,
        json!({"result": "OK"})
    );
    assert_eq!(
        post(&at_primary, "/", json!(["GET", "k"])).await.1,
        json!({"result": "new"})
    );
    for read in [json!(["GET", "k"]), json!(["get", "k"])] {
        assert_eq!(
            post(&region, "/", read).await.1,
            json!({"result": "replica's"})
        );
    }
    let (_, path) = call(&region, Method::GET, "/get/k", &[auth()], "").await;
    assert_eq!(path, json!({"result": "replica's"}));
    // A pipeline goes to the primary whole, reads included.
    let (_, piped) = post(&region, "/pipeline", json!([["GET", "k"]])).await;
    assert_eq!(piped, json!([{"result": "new"}]));
}
