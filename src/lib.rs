//! The benchmark worker: routes and glue only. What `/test` measures is decided in
//! `kvbench-core`; this crate connects it to the bindings (KV, Durable Objects, D1, R2, the
//! Cache API), `fetch`, TCP sockets, the clock and timers.

// A panic in a wasm worker ends the instance and every request in flight in it (panic = abort:
// catching it needs panic = unwind, which on wasm32 takes a nightly toolchain). So the request
// path must not panic: these are errors here, outside tests.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

mod bindings;
mod cache;
mod d1;
mod durable;
mod js_strings;
mod kept_table;
mod microtasks;
mod postgres;
mod prepared;
mod probe_directory;
mod probe_routes;
mod probes;
mod r2;
mod respond;
mod run_archive;
mod socket;
mod stores;

use std::cell::{Cell, RefCell};

use kvbench_core::budget::ISOLATE_BUDGET_BYTES;
use kvbench_core::probes::{Kept, RUN_HEADER};
use kvbench_core::{handle, Budget, Call, Clock, InFlight, Isolate, MetadataCache, ValueGen};
use worker::{
    event, Context, Env, Request, Response, Result, RouteContext, Router, ScheduleContext,
    ScheduledEvent,
};

use crate::bindings::{colo, env_raw, JsClock, JsTimer};
use crate::stores::Stores;

pub use crate::durable::BenchObject;
pub use crate::probes::ProbeObject;
pub use crate::run_archive::RunArchive;

/// What every route gets: the request's context, for work after the answer (`waitUntil`).
type Data = std::rc::Rc<Context>;

thread_local! {
    static REQUESTS: Cell<u64> = const { Cell::new(0) };
    static GEN: &'static RefCell<ValueGen> = Box::leak(Box::new(RefCell::new(bindings::seeded_gen())));
    /// Deno KV's KV Connect metadata (endpoints, short-lived token), shared by this isolate's requests.
    static DENO_KV_META: &'static MetadataCache = Box::leak(Box::default());
    /// Value bytes in flight across this isolate's concurrent requests.
    static BUDGET: &'static Budget = Box::leak(Box::new(Budget::new(ISOLATE_BUDGET_BYTES)));
    /// This isolate's requests in flight.
    static IN_FLIGHT: &'static InFlight = Box::leak(Box::default());
}

/// Once per instance, before any request: the executor's wake-ups as promise jobs
/// (`microtasks`).
#[event(start)]
fn start() {
    microtasks::prefer_promise_jobs();
}

#[event(fetch)]
async fn fetch(
    req: worker::web_sys::Request,
    env: Env,
    ctx: Context,
) -> Result<worker::web_sys::Response> {
    REQUESTS.with(|r| r.set(r.get() + 1));
    let method = req.method();
    let head = method == "HEAD";
    // The measured route first, on the runtime's own request and response objects: no router
    // (~20 routes' worth of matching and handler boxes), no SDK request (its method, path,
    // headers and `cf` read across JS up front) and no SDK response (rebuilt as a second JS
    // `Response` on the way out). Its CPU is every answer's noise floor.
    let url = req.url();
    if path_of(&url) == "/test" && (head || method == "GET") {
        return test(&req, &url, &env, &ctx, head).await;
    }
    let req = Request::from(req);
    let path = req.path();
    // HEAD is GET without the body (RFC 9110): same handlers, same status and headers.
    let response = Router::with_data(std::rc::Rc::new(ctx))
        .get_async("/", handle_index)
        .head_async("/", handle_index)
        .get("/healthz", |_, _| respond::text("ok"))
        .head("/healthz", |_, _| respond::text("ok"))
        .get_async("/probes", probe_routes::list)
        .post_async("/probes/start", |req, ctx| {
            probe_routes::control(req, ctx, "start")
        })
        .post_async("/probes/stop", |req, ctx| {
            probe_routes::control(req, ctx, "stop")
        })
        .post_async("/probes/check", probe_routes::check)
        .head_async("/probes", probe_routes::list)
        .get_async("/probes/answers", probe_routes::probe_answers)
        .head_async("/probes/answers", probe_routes::probe_answers)
        .get_async("/runs/:id/answers", probe_routes::run_answers)
        .head_async("/runs/:id/answers", probe_routes::run_answers)
        .get_async("/report", probe_routes::report)
        .head_async("/report", probe_routes::report)
        .run(req, env)
        .await?;
    let response = if response.status_code() == 405 || path == "/test" {
        respond::method_not_allowed(&path)?
    } else if head {
        respond::without_body(response)?
    } else {
        response
    };
    Ok(response.into())
}

/// The path of a request URL as the runtime serializes it (`scheme://host[:port]/path?query`):
/// from the first `/` after the host up to the query.
fn path_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let rest = url.get(after_scheme..).unwrap_or("");
    let path = rest.find('/').and_then(|i| rest.get(i..)).unwrap_or("/");
    path.split(['?', '#']).next().unwrap_or(path)
}

/// The query of a request URL, without its `?` (empty when there is none).
fn query_of(url: &str) -> &str {
    let url = url.split('#').next().unwrap_or(url);
    url.split_once('?').map_or("", |(_, q)| q)
}

/// The Cron Trigger: keeps the probes alive (re-arms any whose alarm chain died) and deletes
/// expired R2 objects (`r2::sweep`), side by side: neither waits for the other, and each logs
/// its own failure, so one failing never stops the other.
#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    futures::join!(probe_routes::tick(&env), r2::sweep::run(&env));
}

/// `GET /test`: one measurement (`kvbench_core::handle`); `head` answers it without the body.
async fn test(
    req: &worker::web_sys::Request,
    url: &str,
    env: &Env,
    ctx: &Context,
    head: bool,
) -> Result<worker::web_sys::Response> {
    let query = query_of(url);
    let headers = req.headers();
    let authorization = headers.get("Authorization").ok().flatten();
    let run_header = headers.get(RUN_HEADER).ok().flatten();
    let token = env_raw(env, kvbench_core::auth::TOKEN_VAR);
    let call = Call {
        query,
        authorization: authorization.as_deref(),
        token: token.as_deref(),
        defaults: crate::bindings::defaults(env),
        run_header: run_header.as_deref(),
        open: kvbench_core::auth::open_from_raw(
            env_raw(env, kvbench_core::auth::OPEN_VAR).as_deref(),
        ),
        keeping: &|| run_archive::Archive::from_env(env).map(|_| ()),
    };
    let started_ms = JsClock.now_ms();
    let stores = Stores::from_env(env, Ok(url), DENO_KV_META.with(|m| *m));
    let isolate = Isolate {
        gen: GEN.with(|g| *g),
        clock: &JsClock,
        timer: &JsTimer,
        requests: REQUESTS.with(Cell::get),
        colo: colo(req),
        budget: BUDGET.with(|b| *b),
        in_flight: IN_FLIGHT.with(|f| *f),
    };
    let reply = handle(call, &stores, &isolate).await;
    stores.finish().await;
    // The handler's time, the quantity every vantage keeps (a run's line here, a member's
    // through its Server-Timing, a hint probe's in its object).
    let handler_ms = kvbench_core::answer::round_ms(JsClock.now_ms() - started_ms);
    if let Some(run) = &reply.run {
        let cold = isolate.requests == 1;
        keep_run_answer(
            env,
            ctx,
            run,
            (started_ms, handler_ms, cold),
            &reply,
            &isolate.colo,
        );
    }
    let timing = kvbench_core::fleet::server_timing(handler_ms);
    let mut extra = vec![("Server-Timing", timing.as_str())];
    match reply.status {
        401 => extra.push(("WWW-Authenticate", "Bearer realm=\"kvbench\"")),
        503 => extra.push(("Retry-After", "1")),
        _ => {}
    }
    respond::json_raw(reply.status, (!head).then_some(reply.body.as_str()), &extra)
}

/// Keeps a `/test` answer under its run id after the response is sent (`waitUntil`): no span
/// is open any more and the answer is not delayed. A 200 is kept as its answer, any other
/// status as a failure with its error, so a run's report counts every request. The keep is a
/// request in flight of its own (`concurrent` of the answers it overlaps counts it); one that
/// fails is counted in the run's archive (`run_archive`).
fn keep_run_answer(
    env: &Env,
    ctx: &Context,
    run: &str,
    // When the request started, how long its handler took, and whether it was the isolate's
    // first (counted then: by the time it ends, requests that came in meanwhile have been
    // counted too).
    (started_ms, duration_ms, cold): (f64, f64, bool),
    reply: &kvbench_core::endpoint::Reply,
    colo: &str,
) {
    let archive = match run_archive::Archive::from_env(env) {
        Ok(a) => a,
        Err(e) => {
            // Unreachable: `/test` refuses a run whose archive this fails for (`Call::keeping`)
            // before measuring it, and the env does not change within a request.
            worker::console_error!("run {run}: not kept: {}: {}", e.parameter, e.message);
            return;
        }
    };
    let line = Kept {
        seq: None,
        t_ms: started_ms as i64,
        label: colo.into(),
        vantage: Some(kvbench_core::probes::Vantage::Run),
        hint: None,
        colo: colo.into(),
        placement: None,
        placement_check: None,
        cold,
        colo_changed: false,
        concurrent: 0,
        duration_ms,
        call_ms: None,
        answer: None,
        failure: None,
    };
    let line = match (
        reply.status,
        kvbench_core::probes::Embedded::new(&reply.body),
    ) {
        (200, Some(answer)) => Kept {
            answer: Some(answer),
            ..line
        },
        (status, _) => Kept {
            failure: Some(kvbench_core::probes::Failure {
                kind: kvbench_core::probes::FailureKind::Status,
                status: Some(status),
                detail: kvbench_core::probes::clean_detail(&reply.body, 300).into(),
            }),
            ..line
        },
    }
    .to_line();
    let run = run.to_string();
    let t_ms = started_ms as i64;
    let visit = in_flight().enter();
    ctx.wait_until(async move {
        let _visit = visit;
        run_archive::keep_answer(&archive, &run, t_ms, &line).await;
    });
}

async fn handle_index(req: Request, ctx: RouteContext<Data>) -> Result<Response> {
    let env = &ctx.env;
    let defaults = crate::bindings::defaults(env);
    let url = req.inner().url();
    let stores = Stores::from_env(env, Ok(&url), DENO_KV_META.with(|m| *m));
    let configured: Vec<_> = stores
        .all()
        .into_iter()
        .map(|(id, store)| (id, store.map(|_| ())))
        .collect();
    let body = respond::index(
        defaults,
        &configured,
        kvbench_core::auth::TokenConfig::from_raw(
            env_raw(env, kvbench_core::auth::TOKEN_VAR).as_deref(),
        ),
        kvbench_core::auth::open_from_raw(env_raw(env, kvbench_core::auth::OPEN_VAR).as_deref()),
        isolate_state(),
    );
    respond::json(200, &body)
}

/// This isolate's requests in flight: `/test`s, and the work that outlives a response (a run's
/// keep, an answers stream).
pub(crate) fn in_flight() -> &'static InFlight {
    IN_FLIGHT.with(|f| *f)
}

/// This isolate as it is now: what it has served and what it holds (GET / shows it; the memory
/// benchmark reads it).
fn isolate_state() -> serde_json::Value {
    let budget = BUDGET.with(|b| *b);
    let in_flight = IN_FLIGHT.with(|f| *f);
    #[cfg(target_arch = "wasm32")]
    let wasm_memory_bytes = core::arch::wasm32::memory_size(0) as u64 * 65_536;
    #[cfg(not(target_arch = "wasm32"))]
    let wasm_memory_bytes = 0u64;
    serde_json::json!({
        "requests": REQUESTS.with(Cell::get),
        "in_flight": in_flight.running(),
        "in_flight_peak": in_flight.peak(),
        "wasm_memory_bytes": wasm_memory_bytes,
        "budget_bytes": budget.limit(),
        "reserved_bytes": budget.reserved(),
    })
}

#[cfg(all(test, target_arch = "wasm32"))]
mod binding_tests;
#[cfg(all(test, target_arch = "wasm32"))]
mod testing;
#[cfg(all(test, target_arch = "wasm32"))]
mod wasm_tests;
