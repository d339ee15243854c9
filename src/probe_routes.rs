//! The routes of the probes and of kept runs: `GET /probes`, `POST /probes/start` and
//! `/probes/stop`, `GET /probes/answers`, `GET /runs/<id>/answers`, and the Cron Trigger that
//! keeps the probes alive. All behind `BENCH_TOKEN` when it is set, like `/test`.

use kvbench_core::auth::{self, TOKEN_VAR};
use kvbench_core::params::{parse_query, ParamError};
use kvbench_core::probes::{self, Window};
use kvbench_core::Clock;
use serde_json::json;
use worker::{Env, Request, Response, Result, RouteContext};

use crate::bindings::{env_raw, JsClock};
use crate::probes::{answers_stream, status_of, Probes, Source};
use crate::respond;

fn error(status: u16, e: &ParamError) -> Result<Response> {
    respond::json(status, &json!({ "error": e }).to_string())
}

/// `None` when the request may go on, else the 401 or 500 to send (`/test`'s rule).
fn refused(req: &Request, env: &Env) -> Result<Option<Response>> {
    let authorization = req.headers().get("Authorization").ok().flatten();
    match auth::admit(authorization.as_deref(), env_raw(env, TOKEN_VAR).as_deref()) {
        Ok(()) => Ok(None),
        Err((status, e)) => {
            let mut r = error(status, &e)?;
            if status == 401 {
                r.headers_mut()
                    .set("WWW-Authenticate", "Bearer realm=\"kvbench\"")?;
            }
            Ok(Some(r))
        }
    }
}

fn probes_of(env: &Env) -> std::result::Result<Probes, Result<Response>> {
    Probes::from_env(env).map_err(|e| error(500, &ParamError::new("probes", e)))
}

fn query(req: &Request) -> std::result::Result<Vec<(String, String)>, ParamError> {
    let url = req
        .url()
        .map_err(|e| ParamError::new("query", e.to_string()))?;
    parse_query(url.query().unwrap_or(""))
}

/// `GET /probes`: each probe's hint, colo, interval, kept answers, last answer and last error.
pub async fn list(req: Request, ctx: RouteContext<super::Data>) -> Result<Response> {
    if let Some(r) = refused(&req, &ctx.env)? {
        return Ok(r);
    }
    if let Err(e) = query(&req).and_then(|q| match q.first() {
        Some((name, _)) => Err(ParamError::new(name, "GET /probes takes no parameters")),
        None => Ok(()),
    }) {
        return error(400, &e);
    }
    let probes = match probes_of(&ctx.env) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let mut list = Vec::new();
    for &hint in &probes.config.hints {
        list.push(match probes.status(hint).await {
            Ok(mut status) => {
                status["hint"] = json!(hint.as_str());
                status
            }
            Err(e) => json!({ "hint": hint.as_str(), "error": e }),
        });
    }
    let body = json!({
        "every_s": probes.config.every_s,
        "keep_s": probes.config.keep_s,
        "colo_from": "PROBE_COLO_URL (Cloudflare's /cdn-cgi/trace), asked once per object wake; unknown where it cannot be told",
        "probes": list,
    });
    respond::json(200, &body.to_string())
}

/// `POST /probes/start[?hints=..&every=..&keep=..]` and `POST /probes/stop`.
pub async fn control(req: Request, ctx: RouteContext<super::Data>, call: &str) -> Result<Response> {
    if let Some(r) = refused(&req, &ctx.env)? {
        return Ok(r);
    }
    let mut probes = match probes_of(&ctx.env) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let pairs = match query(&req) {
        Ok(p) => p,
        Err(e) => return error(400, &e),
    };
    match probes.config.clone().with_query(&pairs) {
        Ok(cfg) => probes.config = cfg,
        Err(e) => return error(400, &e),
    }
    respond_each(&probes, call).await
}

async fn respond_each(probes: &Probes, call: &str) -> Result<Response> {
    let results = probes.each(call).await;
    let failed = results.iter().any(|(_, r)| r.is_err());
    let list: Vec<_> = results
        .into_iter()
        .map(|(hint, r)| match r {
            Ok(v) => json!({ "hint": hint.as_str(), "result": v }),
            Err(e) => json!({ "hint": hint.as_str(), "error": e }),
        })
        .collect();
    let body = json!({ "call": call, "every_s": probes.config.every_s, "probes": list });
    respond::json(if failed { 502 } else { 200 }, &body.to_string())
}

/// The Cron Trigger: re-arms every probe that is not stopped and has no alarm.
pub async fn tick(env: &Env) {
    match Probes::from_env(env) {
        Ok(probes) => {
            for (hint, r) in probes.each("tick").await {
                if let Err(e) = r {
                    worker::console_error!("probe {}: tick failed: {e}", hint.as_str());
                }
            }
        }
        Err(e) => worker::console_error!("probes: {e}"),
    }
}

fn ndjson(stream: impl futures::Stream<Item = Result<Vec<u8>>> + 'static) -> Result<Response> {
    let mut r = Response::from_stream(stream)?;
    r.headers_mut()
        .set("Content-Type", "application/x-ndjson")?;
    r.headers_mut().set("Cache-Control", "no-store")?;
    Ok(r)
}

fn window(req: &Request) -> std::result::Result<Window, ParamError> {
    Window::parse(&query(req)?, JsClock.now_ms() as i64)
}

/// What both answers routes check first: the token, the window, the probes' namespace.
async fn answers_prelude(
    req: &Request,
    env: &Env,
) -> Result<std::result::Result<(Window, Probes), Response>> {
    if let Some(r) = refused(req, env)? {
        return Ok(Err(r));
    }
    let window = match window(req) {
        Ok(w) => w,
        Err(e) => return error(400, &e).map(Err),
    };
    match probes_of(env) {
        Ok(p) => Ok(Ok((window, p))),
        Err(r) => r.map(Err),
    }
}

/// `GET /probes/answers?since=..&until=..`: every probe's kept answers, NDJSON.
pub async fn probe_answers(req: Request, ctx: RouteContext<super::Data>) -> Result<Response> {
    let (window, probes) = match answers_prelude(&req, &ctx.env).await? {
        Ok(v) => v,
        Err(r) => return Ok(r),
    };
    let mut sources = Vec::new();
    for &hint in &probes.config.hints {
        sources.push(Source {
            label: hint.as_str().to_string(),
            stub: probes.probe(hint)?,
        });
    }
    ndjson(answers_stream(sources, window))
}

/// `GET /runs/<id>/answers?since=..&until=..`: a run's kept answers, NDJSON; 404 for a run
/// that kept nothing.
pub async fn run_answers(req: Request, ctx: RouteContext<super::Data>) -> Result<Response> {
    let id = ctx.param("id").cloned().unwrap_or_default();
    let (window, probes) = match answers_prelude(&req, &ctx.env).await? {
        Ok(v) => v,
        Err(r) => return Ok(r),
    };
    let run = match probes::parse_run("run", &id) {
        Ok(r) => r,
        Err(e) => return error(400, &e),
    };
    let stub = probes.run(&run)?;
    let kept = status_of(&stub)
        .await
        .ok()
        .and_then(|v| v["kept"].as_u64())
        .unwrap_or(0);
    if kept == 0 {
        return error(
            404,
            &ParamError::new("run", format!("no answers are kept under run {run}")),
        );
    }
    ndjson(answers_stream(vec![Source { label: run, stub }], window))
}

/// The object keeping a run's answers, and how long it keeps them (`PROBE_KEEP`).
pub fn run_stub(env: &Env, run: &str) -> Option<(worker::durable::Stub, u32)> {
    let probes = Probes::from_env(env).ok()?;
    Some((probes.run(run).ok()?, probes.config.keep_s))
}
