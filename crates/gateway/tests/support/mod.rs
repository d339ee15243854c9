//! Shared helpers for the integration tests: drive the router without a socket.

#![allow(dead_code)]

use axum::http::{Method, StatusCode};
use axum::Router;
use serde_json::Value;

pub const TOKEN: &str = "integration-token";

pub use upstash_gateway::testing::call;

/// `POST /` (or another route) with the right token and a JSON body.
pub async fn post(app: &Router, uri: &str, body: Value) -> (StatusCode, Value) {
    call(app, Method::POST, uri, &[auth()], body.to_string()).await
}

pub fn auth() -> (&'static str, &'static str) {
    ("authorization", "Bearer integration-token")
}
