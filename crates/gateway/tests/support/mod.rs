//! Shared helpers for the integration tests: drive the router without a socket.

#![allow(dead_code)]

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

pub const TOKEN: &str = "integration-token";

pub async fn call(
    app: &Router,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: impl Into<Body>,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = app
        .clone()
        .oneshot(req.body(body.into()).unwrap())
        .await
        .unwrap();
    let status = res.status();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    let json = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("not JSON: {:?}", String::from_utf8_lossy(&bytes)));
    (status, json)
}

/// `POST /` (or another route) with the right token and a JSON body.
pub async fn post(app: &Router, uri: &str, body: Value) -> (StatusCode, Value) {
    call(app, Method::POST, uri, &[auth()], body.to_string()).await
}

pub fn auth() -> (&'static str, &'static str) {
    ("authorization", "Bearer integration-token")
}
