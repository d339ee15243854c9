//! An Upstash-REST-compatible HTTP gateway in front of a real redis-server, so the benchmark can
//! run locally on the same protocol it meets in production. `app` builds the router (drive it with
//! `tower::ServiceExt::oneshot` in tests); `server::serve` runs it on a socket.

pub mod allowlist;
pub mod auth;
pub mod command;
pub mod config;
pub mod connection;
pub mod error;
pub mod fault;
pub mod meter;
pub mod name;
pub mod pool;
pub mod reply;
pub mod server;
pub mod store;
#[doc(hidden)]
pub mod testing;

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use crate::command::Command;
use crate::connection::Limits;
use crate::error::ApiError;
use crate::fault::{DropConnection, FaultConfig, FaultInjector, Outcome};
use crate::reply::{Encoding, Reply};
use crate::store::{Store, StoreConfig};

/// Everything the gateway needs to run; built from flags by `config::Args::into_settings`.
/// Its `Debug` leaves the tokens out.
#[derive(Clone)]
pub struct Settings {
    pub redis_url: String,
    /// A replica that answers single reads (a read region), when set.
    pub read_url: Option<String>,
    pub token: String,
    pub admin_token: Option<String>,
    pub max_request_bytes: usize,
    /// Largest answer (JSON bytes) one request may get back; Upstash's documented 10 MB.
    pub max_response_bytes: usize,
    pub redis_timeout_ms: u64,
    /// A request that runs a script is stopped (`SCRIPT KILL`) after this long.
    pub script_timeout_ms: u64,
    /// Redis connections in use at once.
    pub redis_pool_size: usize,
    /// A request body must arrive within this long after its head.
    pub body_read_timeout_ms: u64,
    pub connections: Limits,
    pub faults: FaultConfig,
    pub fault_seed: Option<u64>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("admin_route", &self.admin_token.is_some())
            .field("max_request_bytes", &self.max_request_bytes)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("redis_timeout_ms", &self.redis_timeout_ms)
            .field("script_timeout_ms", &self.script_timeout_ms)
            .field("redis_pool_size", &self.redis_pool_size)
            .field("body_read_timeout_ms", &self.body_read_timeout_ms)
            .field("connections", &self.connections)
            .field("faults", &self.faults)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// Defaults for tests and embedding: no faults, no admin route, the flags' default limits.
    pub fn new(redis_url: impl Into<String>, token: impl Into<String>) -> Self {
        Self {
            redis_url: redis_url.into(),
            read_url: None,
            token: token.into(),
            admin_token: None,
            max_request_bytes: 10 * 1024 * 1024,
            max_response_bytes: 10 * 1024 * 1024,
            redis_timeout_ms: 10_000,
            script_timeout_ms: 5_000,
            redis_pool_size: 64,
            body_read_timeout_ms: 30_000,
            connections: Limits::default(),
            faults: FaultConfig::default(),
            fault_seed: None,
        }
    }
}

/// Shared state of all routes. Holds the tokens, so it deliberately has no `Debug`.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    store: Store,
    reader: Option<Store>,
    token: Vec<u8>,
    admin_token: Option<Vec<u8>>,
    max_request_bytes: usize,
    body_read_timeout: Duration,
    faults: FaultInjector,
}

impl AppState {
    /// Prepares the state; Redis is connected lazily on the first command.
    pub fn new(settings: Settings) -> anyhow::Result<Self> {
        let config = StoreConfig {
            timeout: Duration::from_millis(settings.redis_timeout_ms),
            script_timeout: Duration::from_millis(settings.script_timeout_ms),
            max_response_bytes: settings.max_response_bytes,
            pool_size: settings.redis_pool_size,
        };
        let store = Store::new(&settings.redis_url, config.clone()).map_err(anyhow::Error::msg)?;
        let reader = settings
            .read_url
            .as_deref()
            .map(|url| Store::new(url, config))
            .transpose()
            .map_err(anyhow::Error::msg)?;
        let seed = settings.fault_seed.unwrap_or_else(random_seed);
        Ok(Self(Arc::new(Inner {
            store,
            reader,
            token: settings.token.into_bytes(),
            admin_token: settings.admin_token.map(String::into_bytes),
            max_request_bytes: settings.max_request_bytes,
            body_read_timeout: Duration::from_millis(settings.body_read_timeout_ms),
            faults: FaultInjector::new(settings.faults, seed),
        })))
    }

    /// Where `command` runs: the read region's replica for a single read, else the primary.
    fn store_for(&self, command: &Command) -> &Store {
        match &self.0.reader {
            Some(reader) if command.is_read() => reader,
            _ => &self.0.store,
        }
    }

    pub fn faults(&self) -> &FaultInjector {
        &self.0.faults
    }
}

fn random_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 32)
}

/// The gateway's routes. Command routes sit behind fault injection, then auth; the admin route
/// has its own token and is never faulted (so a demo can always switch faults off).
pub fn app(state: AppState) -> Router {
    let commands = Router::new()
        .route("/", post(handle_command))
        .route("/pipeline", post(handle_pipeline))
        .route("/multi-exec", post(handle_multi_exec))
        .route("/{*command}", get(handle_path).post(handle_path))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token))
        .layer(middleware::from_fn_with_state(state.clone(), inject_faults));
    Router::new()
        .route("/admin/faults", get(get_faults).put(put_faults))
        .merge(commands)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        message: "Method not allowed".to_owned(),
    }
}

async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match auth::check(req.headers(), req.uri(), &state.0.token) {
        Ok(()) => next.run(req).await,
        Err(err) => err.into_response(),
    }
}

async fn inject_faults(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let decision = state.0.faults.decide();
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    match decision.outcome {
        Outcome::Pass => next.run(req).await,
        Outcome::Status(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            let body = json!({ "error": format!("injected fault: HTTP {code}") });
            (status, Json(body)).into_response()
        }
        Outcome::Drop => {
            let mut response = StatusCode::SERVICE_UNAVAILABLE.into_response();
            response.extensions_mut().insert(DropConnection);
            response
        }
    }
}

/// Reads the whole body within the body-read timeout, refusing more than the configured limit
/// as Upstash does.
async fn read_body(state: &AppState, body: Body) -> Result<Bytes, ApiError> {
    let limit = state.0.max_request_bytes;
    let timeout = state.0.body_read_timeout;
    let read = tokio::time::timeout(timeout, axum::body::to_bytes(body, limit))
        .await
        .map_err(|_| {
            ApiError::request_timeout(format!(
                "ERR request body not received within {} ms",
                timeout.as_millis()
            ))
        })?;
    read.map_err(|err| {
        let too_large =
            std::iter::successors(Some(&err as &(dyn std::error::Error + 'static)), |e| {
                e.source()
            })
            .any(|e| e.is::<http_body_util::LengthLimitError>());
        if too_large {
            ApiError::bad_request("ERR max request size exceeded")
        } else {
            ApiError::bad_request(format!("ERR could not read request body: {err}"))
        }
    })
}

fn encoding(headers: &HeaderMap) -> Encoding {
    Encoding::from_header(headers.get("upstash-encoding").map(|v| v.as_bytes()))
}

fn json_response(body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// `{"result": ...}`, or `{"error": ...}` with 400 for a Redis error reply.
fn single(reply: Reply) -> Response {
    match reply {
        Reply::Json(result) => {
            let mut body = Vec::with_capacity(result.len() + 11);
            body.extend_from_slice(b"{\"result\":");
            body.extend_from_slice(&result);
            body.push(b'}');
            json_response(body)
        }
        Reply::Error(message) => ApiError::bad_request(message).into_response(),
    }
}

/// The per-command entries of `/pipeline` and `/multi-exec` answers.
fn entries(replies: Vec<Reply>) -> Response {
    let size: usize = replies
        .iter()
        .map(|r| match r {
            Reply::Json(j) => j.len(),
            Reply::Error(m) => m.len(),
        } + reply::ENTRY_OVERHEAD)
        .sum();
    let mut body = Vec::with_capacity(size + 2);
    body.push(b'[');
    for (i, reply) in replies.into_iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        match reply {
            Reply::Json(result) => {
                body.extend_from_slice(b"{\"result\":");
                body.extend_from_slice(&result);
            }
            Reply::Error(message) => {
                body.extend_from_slice(b"{\"error\":");
                reply::write_json_str(&mut body, &message);
            }
        }
        body.push(b'}');
    }
    body.push(b']');
    json_response(body)
}

async fn handle_command(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let command = Command::from_json(&read_body(&state, body).await?)?;
    tracing::debug!(command = %command.display_name(), "command");
    Ok(single(
        state
            .store_for(&command)
            .run(&command, encoding(&headers))
            .await?,
    ))
}

async fn handle_path(State(state): State<AppState>, req: Request) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let body = read_body(&state, body).await?;
    let command = Command::from_path(parts.uri.path(), parts.uri.query(), &body)?;
    tracing::debug!(command = %command.display_name(), "path command");
    Ok(single(
        state
            .store_for(&command)
            .run(&command, encoding(&parts.headers))
            .await?,
    ))
}

async fn handle_pipeline(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let commands = Command::list_from_json(&read_body(&state, body).await?)?;
    tracing::debug!(commands = commands.len(), "pipeline");
    Ok(entries(
        state
            .0
            .store
            .pipeline(&commands, encoding(&headers))
            .await?,
    ))
}

async fn handle_multi_exec(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let commands = Command::list_from_json(&read_body(&state, body).await?)?;
    tracing::debug!(commands = commands.len(), "multi-exec");
    match state
        .0
        .store
        .transaction(&commands, encoding(&headers))
        .await?
    {
        Ok(replies) => Ok(entries(replies)),
        Err(message) => Err(ApiError::bad_request(message)),
    }
}

fn check_admin(state: &AppState, req_headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = &state.0.admin_token else {
        return Err(ApiError::not_found(
            "admin route disabled: start with --admin-token",
        ));
    };
    // Only the header is accepted here: an admin token in a URL ends up in logs and histories.
    let presented = req_headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    match presented {
        Some(token) if auth::token_matches(token, expected) => Ok(()),
        _ => Err(ApiError::unauthorized("Unauthorized: admin token required")),
    }
}

async fn get_faults(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<FaultConfig>, ApiError> {
    check_admin(&state, &headers)?;
    Ok(Json(state.0.faults.config()))
}

async fn put_faults(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<FaultConfig>, ApiError> {
    check_admin(&state, &headers)?;
    let bytes = read_body(&state, body).await?;
    let config: FaultConfig = serde_json::from_slice(&bytes)
        .map_err(|err| ApiError::bad_request(format!("ERR invalid fault config: {err}")))?;
    config
        .validate()
        .map_err(|msg| ApiError::bad_request(format!("ERR invalid fault config: {msg}")))?;
    tracing::info!(?config, "faults changed");
    state.0.faults.set_config(config.clone());
    Ok(Json(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{call, RedisServer};
    use axum::http::Method;

    const TOKEN: &str = "unit-token";

    /// State whose Redis is never reached: for requests that must be refused before any command.
    fn offline_app(max_request_bytes: usize) -> Router {
        let mut settings = Settings::new("redis://127.0.0.1:1", TOKEN);
        settings.max_request_bytes = max_request_bytes;
        app(AppState::new(settings).unwrap())
    }

    const AUTH: (&str, &str) = ("authorization", "Bearer unit-token");

    #[tokio::test]
    async fn missing_or_wrong_token_is_401_before_anything_else() {
        let app = offline_app(1024);
        for headers in [vec![], vec![("authorization", "Bearer wrong")]] {
            for (method, uri) in [
                (Method::POST, "/"),
                (Method::POST, "/pipeline"),
                (Method::POST, "/multi-exec"),
                (Method::GET, "/get/k"),
                (Method::GET, "/get/k?_token=wrong"),
            ] {
                let (status, body) = call(&app, method, uri, &headers, "[\"GET\",\"k\"]").await;
                assert_eq!(status, StatusCode::UNAUTHORIZED, "{uri}");
                let msg = body["error"].as_str().unwrap();
                assert!(
                    msg.starts_with("Unauthorized") && !msg.contains(TOKEN),
                    "{msg}"
                );
            }
        }
    }

    #[tokio::test]
    async fn other_methods_are_405() {
        let app = offline_app(1024);
        for (method, uri) in [
            (Method::GET, "/"),
            (Method::PUT, "/"),
            (Method::GET, "/pipeline"),
            (Method::DELETE, "/multi-exec"),
            (Method::PUT, "/set/k/v"),
            (Method::PATCH, "/get/k"),
        ] {
            let (status, body) = call(&app, method.clone(), uri, &[AUTH], "").await;
            assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
            assert!(body["error"].is_string());
        }
    }

    #[tokio::test]
    async fn malformed_bodies_are_400_with_a_message() {
        let app = offline_app(1024);
        for (uri, body, needle) in [
            ("/", "not json", "not valid JSON"),
            ("/", "{\"a\":1}", "JSON array"),
            ("/", "[]", "empty command"),
            ("/", "[\"GET\", null]", "strings or numbers"),
            ("/", "[\"MULTI\"]", "/multi-exec"),
            ("/pipeline", "[\"GET\",\"k\"]", "JSON array"),
            ("/pipeline", "[]", "empty pipeline"),
            ("/multi-exec", "[[\"GET\", true]]", "strings or numbers"),
        ] {
            let (status, json) = call(&app, Method::POST, uri, &[AUTH], body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{uri} {body}");
            let msg = json["error"].as_str().unwrap();
            assert!(msg.contains(needle), "{uri} {body}: {msg}");
        }
    }

    #[tokio::test]
    async fn bodies_over_the_limit_are_refused_as_upstash_does() {
        let app = offline_app(64);
        let big = format!("[\"SET\",\"k\",\"{}\"]", "x".repeat(100));
        for uri in ["/", "/pipeline", "/multi-exec", "/set/k"] {
            let (status, json) = call(&app, Method::POST, uri, &[AUTH], big.clone()).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
            assert_eq!(json["error"], "ERR max request size exceeded", "{uri}");
        }
    }

    #[tokio::test]
    async fn admin_route_is_404_without_an_admin_token() {
        let app = offline_app(1024);
        let (status, _) = call(&app, Method::GET, "/admin/faults", &[AUTH], "").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn redis_down_is_502_not_a_hang() {
        let app = offline_app(1024);
        let (status, json) = call(&app, Method::POST, "/", &[AUTH], "[\"PING\"]").await;
        assert_eq!(status, StatusCode::BAD_GATEWAY);
        assert!(json["error"]
            .as_str()
            .unwrap()
            .starts_with("ERR redis unavailable"));
    }

    #[tokio::test]
    async fn routes_and_encodings_against_redis() {
        let redis = RedisServer::start();
        let app = app(AppState::new(Settings::new(redis.url(), TOKEN)).unwrap());
        let b64 = ("upstash-encoding", "base64");

        let (s, j) = call(
            &app,
            Method::POST,
            "/",
            &[AUTH],
            "[\"SET\",\"k\",\"v\",\"EX\",60]",
        )
        .await;
        assert_eq!(
            (s, j),
            (StatusCode::OK, serde_json::json!({"result": "OK"}))
        );
        let (_, j) = call(&app, Method::GET, "/get/k", &[AUTH], "").await;
        assert_eq!(j, serde_json::json!({"result": "v"}));
        let (_, j) = call(&app, Method::GET, "/get/k?_token=unit-token", &[], "").await;
        assert_eq!(j, serde_json::json!({"result": "v"}));
        let (_, j) = call(&app, Method::GET, "/get/k", &[AUTH, b64], "").await;
        assert_eq!(j, serde_json::json!({"result": "dg=="}));
        // Status "OK" stays plain under base64.
        let (_, j) = call(&app, Method::POST, "/set/p", &[AUTH, b64], "posted body").await;
        assert_eq!(j, serde_json::json!({"result": "OK"}));
        let (_, j) = call(&app, Method::POST, "/", &[AUTH], "[\"GET\",\"p\"]").await;
        assert_eq!(j, serde_json::json!({"result": "posted body"}));
        let (_, j) = call(&app, Method::GET, "/ttl/k", &[AUTH], "").await;
        assert!((1..=60).contains(&j["result"].as_i64().unwrap()));
        let (s, j) = call(&app, Method::GET, "/lpush/k/x", &[AUTH], "").await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        assert!(j["error"].as_str().unwrap().starts_with("WRONGTYPE "));
    }
}
