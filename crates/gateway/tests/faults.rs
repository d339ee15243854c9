//! Fault injection against a real redis-server: injected statuses, added delay (checked only as a
//! lower bound), connections dropped unanswered on a real socket, and the admin route.

mod support;

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use axum::Router;
use serde_json::json;
use support::{auth, call, post, TOKEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use upstash_gateway::fault::FaultConfig;
use upstash_gateway::testing::RedisServer;
use upstash_gateway::{app, server, AppState, Settings};

const ADMIN: (&str, &str) = ("authorization", "Bearer admin-secret");

fn gateway(redis: &RedisServer, faults: FaultConfig) -> Router {
    let mut settings = Settings::new(redis.url(), TOKEN);
    settings.admin_token = Some("admin-secret".into());
    settings.faults = faults;
    settings.fault_seed = Some(1);
    app(AppState::new(settings).unwrap())
}

#[tokio::test]
async fn status_fraction_one_answers_every_request_with_that_status() {
    let redis = RedisServer::start();
    let app = gateway(
        &redis,
        FaultConfig {
            status_fraction: 1.0,
            status: 500,
            ..FaultConfig::default()
        },
    );
    for _ in 0..20 {
        let (status, body) = post(&app, "/", json!(["SET", "k", "v"])).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body["error"], "injected fault: HTTP 500");
    }
    // Faults come before auth, like a failing load balancer in front of the service.
    let (status, _) = call(&app, Method::GET, "/get/k", &[], "").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    // The command never ran.
    let (_, body) = call(&app, Method::PUT, "/admin/faults", &[ADMIN], "{}").await;
    assert_eq!(body, serde_json::to_value(FaultConfig::default()).unwrap());
    let (_, body) = post(&app, "/", json!(["EXISTS", "k"])).await;
    assert_eq!(body, json!({"result": 0}));
}

#[tokio::test]
async fn delay_is_added_before_answering() {
    let redis = RedisServer::start();
    let app = gateway(
        &redis,
        FaultConfig {
            delay_min_ms: 150,
            delay_max_ms: 150,
            ..FaultConfig::default()
        },
    );
    let started = Instant::now();
    let (status, _) = post(&app, "/", json!(["PING"])).await;
    assert_eq!(status, StatusCode::OK);
    // Only a lower bound: a loaded machine may add any amount on top.
    assert!(started.elapsed() >= Duration::from_millis(150));
}

/// Sends one raw HTTP/1.1 request and returns everything the server wrote before closing.
async fn raw_request(addr: std::net::SocketAddr, path: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    // A safety bound so a broken server fails the test instead of hanging it.
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer))
        .await
        .expect("server neither answered nor closed within 30 s")
        .ok();
    answer
}

#[tokio::test]
async fn dropped_connections_are_closed_without_an_answer() {
    let redis = RedisServer::start();
    let app = gateway(
        &redis,
        FaultConfig {
            drop_fraction: 1.0,
            ..FaultConfig::default()
        },
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(server::serve(listener, app.clone(), async {
        let _ = stop_rx.await;
    }));

    for _ in 0..5 {
        assert!(
            raw_request(addr, "/ping").await.is_empty(),
            "expected a silent close"
        );
    }

    // Switched off at run time through the admin route, the same request is answered.
    let (status, _) = call(&app, Method::PUT, "/admin/faults", &[ADMIN], "{}").await;
    assert_eq!(status, StatusCode::OK);
    let answer = String::from_utf8(raw_request(addr, "/ping").await).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("{\"result\":\"PONG\"}"), "{answer}");

    stop_tx.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn admin_route_needs_its_own_token_and_validates() {
    let redis = RedisServer::start();
    let app = gateway(&redis, FaultConfig::default());
    for headers in [
        vec![],
        vec![auth()],
        vec![("authorization", "Bearer wrong")],
    ] {
        let (status, body) = call(&app, Method::GET, "/admin/faults", &headers, "").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(!body["error"].as_str().unwrap().contains("admin-secret"));
    }
    let (status, body) = call(&app, Method::GET, "/admin/faults", &[ADMIN], "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, serde_json::to_value(FaultConfig::default()).unwrap());

    for bad in [
        r#"{"drop_fraction": 2}"#,
        r#"{"delay_min_ms": 10, "delay_max_ms": 1}"#,
        r#"{"status": 42}"#,
        // Statuses that cannot carry the JSON error body.
        r#"{"status_fraction": 1, "status": 101}"#,
        r#"{"status_fraction": 1, "status": 204}"#,
        r#"{"status_fraction": 1, "status": 304}"#,
        r#"{"unknown_field": 1}"#,
        "not json",
    ] {
        let (status, body) = call(&app, Method::PUT, "/admin/faults", &[ADMIN], bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(body["error"]
            .as_str()
            .unwrap()
            .contains("invalid fault config"));
    }

    let new = r#"{"status_fraction": 1, "status": 429}"#;
    let (status, body) = call(&app, Method::PUT, "/admin/faults", &[ADMIN], new).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], 429);
    let (status, _) = post(&app, "/", json!(["PING"])).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    // The admin route itself is never faulted, so faults can always be switched off.
    let (status, body) = call(&app, Method::GET, "/admin/faults", &[ADMIN], "").await;
    assert_eq!(
        (status, body["status_fraction"].as_f64()),
        (StatusCode::OK, Some(1.0))
    );
}
