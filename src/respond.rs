//! HTTP answers of the worker: JSON with `Cache-Control: no-store`, and the shapes of its errors.

use kvbench_core::params::{ParamError, PARAMETERS, VARS};
use kvbench_core::{Defaults, Order};
use serde_json::json;
use worker::{Response, Result};

pub fn json(status: u16, body: &str) -> Result<Response> {
    let mut response = Response::ok(body)?.with_status(status);
    let headers = response.headers_mut();
    headers.set("Content-Type", "application/json")?;
    headers.set("Cache-Control", "no-store")?;
    Ok(response)
}

pub fn text(body: &str) -> Result<Response> {
    let mut response = Response::ok(body)?;
    response.headers_mut().set("Cache-Control", "no-store")?;
    Ok(response)
}

/// The body of `GET /`: routes and active configuration, never a secret's value.
pub fn index(
    defaults: std::result::Result<Defaults, ParamError>,
    kv: bool,
    upstash: bool,
    denokv: bool,
    token_required: bool,
) -> String {
    let defaults = match defaults {
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
        }),
        Err(e) => json!({ "error": e }),
    };
    json!({
        "name": "kvbench-worker",
        "version": env!("CARGO_PKG_VERSION"),
        "routes": {
            "GET /": "this description",
            "GET /healthz": "liveness: answers `ok`",
            "GET /test": "one measurement of every configured store (see README)",
        },
        "parameters": PARAMETERS,
        "vars": VARS.iter().map(|(v, _)| *v).collect::<Vec<_>>(),
        "defaults": defaults,
        "stores": {
            "kv": { "configured": kv },
            "upstash": { "configured": upstash },
            "denokv": { "configured": denokv },
        },
        "auth": { "bearer_token_required": token_required },
    })
    .to_string()
}
