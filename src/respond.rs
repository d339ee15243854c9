//! HTTP answers of the worker: JSON with `Cache-Control: no-store`, and the shapes of its errors.

use kvbench_core::error::ParamError;
use kvbench_core::operations::auth::TokenConfig;
use kvbench_core::{Defaults, Order, StoreError, StoreId};
use serde_json::json;
use worker::{Response, Result};

pub fn json(status: u16, body: &str) -> Result<Response> {
    json_with(status, body, &[])
}

/// A message to the worker from one of its objects (`kvbench_wire::object`), as a 200 JSON
/// answer.
#[cfg(feature = "main-worker")]
pub fn message<T: serde::Serialize>(message: &T) -> Result<Response> {
    json(200, &serde_json::to_string(message)?)
}

/// JSON with `extra` headers as one JS `Response` (the SDK's copies the body into wasm and each
/// header across on its own).
pub fn json_with(status: u16, body: &str, extra: &[(&str, &str)]) -> Result<Response> {
    json_raw(status, Some(body), extra).map(Response::from)
}

/// [`json_with`] as the runtime's own `Response` (what `/test` answers); `None` for a HEAD
/// answer: the same status and headers, no body.
pub fn json_raw(
    status: u16,
    body: Option<&str>,
    extra: &[(&str, &str)],
) -> Result<worker::web_sys::Response> {
    let mut pairs = vec![
        ("Content-Type".to_string(), "application/json".to_string()),
        ("Cache-Control".to_string(), "no-store".to_string()),
    ];
    pairs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let headers = crate::js_strings::headers(&pairs).map_err(worker::Error::RustError)?;
    let init = worker::web_sys::ResponseInit::new();
    init.set_status(status);
    init.set_headers(&headers);
    worker::web_sys::Response::new_with_opt_str_and_init(body, &init).map_err(worker::Error::from)
}

pub fn text(body: &str) -> Result<Response> {
    let mut response = Response::ok(body)?;
    response.headers_mut().set("Cache-Control", "no-store")?;
    Ok(response)
}

/// 405 for any other method than `allow`, in the `Allow` header RFC 9110 requires.
pub fn method_not_allowed(allow: &str) -> Result<Response> {
    let body = json!({ "error": { "parameter": "method", "message": format!("only {allow} allowed here") } });
    let mut response = json(405, &body.to_string())?;
    response.headers_mut().set("Allow", allow)?;
    Ok(response)
}

/// A HEAD answer: the GET answer's status and headers, no body.
pub fn without_body(response: Response) -> Result<Response> {
    let headers = response.headers().clone();
    Ok(Response::empty()?
        .with_status(response.status_code())
        .with_headers(headers))
}

/// `GET /`'s `defaults`: the settings every `/test` starts from (or why they are invalid).
pub fn defaults_json(defaults: std::result::Result<Defaults, ParamError>) -> serde_json::Value {
    match defaults {
        Ok(d) => json!({
            "keys": d.keys,
            "min_bytes": d.min_bytes,
            "max_bytes": d.max_bytes,
            "ttl": d.ttl_s,
            "stores": d.stores.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            "order": match &d.order {
                Order::Random => json!("random"),
                Order::Fixed(list) => json!(list.iter().map(|s| s.as_str()).collect::<Vec<_>>()),
            },
            "cache_ttl": d.cache_ttl_s,
            "timeout_ms": d.timeout_ms,
            "consistency": d.consistency.as_str(),
            "do_scope": d.do_scope.as_str(),
            "do_location": d.do_location.map(|h| h.as_str()),
            "d1_session": d.d1_session.map(|s| s.as_str()),
        }),
        Err(e) => json!({ "error": e }),
    }
}

/// The var the serve and deploy scripts write the build into (`commit`, `wrangler`, ...), shown
/// as `GET /`'s `provenance`.
pub const PROVENANCE_VAR: &str = "KVBENCH_PROVENANCE";

/// `GET /`'s `provenance`: the var's object, `null` without it, or what is wrong with it.
pub fn provenance(raw: Option<&str>) -> serde_json::Value {
    match raw.map(serde_json::from_str::<serde_json::Value>) {
        None => serde_json::Value::Null,
        Some(Ok(v)) if v.is_object() => v,
        Some(_) => json!({ "error": format!("{PROVENANCE_VAR} is not a JSON object") }),
    }
}

/// The body of `GET /`: routes, active configuration and every store's description with
/// whether it is configured here (and why not) — never a secret's value.
pub fn index(
    defaults: std::result::Result<Defaults, ParamError>,
    configured: &[(StoreId, std::result::Result<(), StoreError>)],
    token: TokenConfig,
    open: bool,
    isolate: serde_json::Value,
    operations: bool,
    provenance: serde_json::Value,
) -> String {
    let auth = match token {
        TokenConfig::Open if open => json!({
            "bearer_token_required": false,
            "open": true,
            "without_token": "BENCH_TOKEN is not set and BENCH_OPEN = \"true\": anyone may call /test and start or stop the probes",
        }),
        TokenConfig::Open => json!({
            "bearer_token_required": false,
            "open": false,
            "without_token": "BENCH_TOKEN is not set: /test, POST /probes/start, /probes/stop and /probes/check answer 403 naming BENCH_TOKEN (closed) unless the var BENCH_OPEN = \"true\" opens them to anyone",
        }),
        TokenConfig::Required(_) => json!({ "bearer_token_required": true }),
        TokenConfig::Blank => json!({
            "bearer_token_required": true,
            "error": "BENCH_TOKEN is set but blank: /test answers 500 until it is fixed",
        }),
    };
    let defaults = defaults_json(defaults);
    let mut stores = serde_json::Map::new();
    for (id, state) in configured {
        let mut description = serde_json::to_value(id.spec()).unwrap_or_default();
        if let Some(object) = description.as_object_mut() {
            object.insert("configured".into(), json!(state.is_ok()));
            if let Err(e) = state {
                object.insert("not_configured".into(), json!(e.message));
            }
        }
        stores.insert(id.as_str().into(), description);
    }
    let mut routes = json!({
        "GET /": "this description",
        "GET /healthz": "liveness: answers `ok`",
        "GET /test": "one measurement of every selected store (see docs/measuring.md); ?run=<id> or the Kvbench-Run header also keeps the answer under that run",
    });
    if let (true, Some(routes)) = (operations, routes.as_object_mut()) {
        for (route, what) in [
            ("GET /probes", "the probes (one Durable Object per location hint) and their projected monthly bill"),
            ("POST /probes/start", "arm every probe now (?hints=, ?every=, ?keep= for this start)"),
            ("POST /probes/stop", "stop every probe"),
            ("POST /probes/check", "check every fleet member's /test answer and placement"),
            ("GET /probes/answers", "every kept probe answer, NDJSON (?since=, ?until=)"),
            ("GET /runs/<id>/answers", "a run's kept answers, NDJSON (?since=, ?until=)"),
            ("GET /report", "report.html over the probes' recent answers (?window=24h)"),
        ] {
            routes.insert(route.into(), what.into());
        }
    }
    json!({
        "name": "kvbench-worker",
        "version": env!("CARGO_PKG_VERSION"),
        // The main worker, or a fleet member's build (only /, /healthz and /test).
        "build": if operations { "main" } else { "member" },
        "routes": routes,
        "parameters": kvbench_core::measurement::parameter::ALL.iter().map(|p| p.name).collect::<Vec<_>>(),
        "parameter_table": kvbench_core::measurement::parameter::ALL,
        "vars": kvbench_core::measurement::params::vars().map(|(v, _)| v).collect::<Vec<_>>(),
        "defaults": defaults,
        "provenance": provenance,
        "stores": stores,
        "auth": auth,
        "isolate": isolate,
    })
    .to_string()
}
