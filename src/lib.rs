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
mod js_copy;
mod js_strings;
mod keep;
mod microtasks;
#[cfg(feature = "main-worker")]
mod operations;
mod respond;
pub mod routes;
mod stores;
mod trace;

use std::cell::{Cell, RefCell};

use kvbench_core::measurement::budget::ISOLATE_BUDGET_BYTES;
use kvbench_core::operations::runs::RUN_HEADER;
use kvbench_core::{
    handle, handle_fresh, Budget, Call, Clock, InFlight, Isolate, MetadataCache, Served, ValueGen,
};
use worker::{event, Context, Env, Response, Result};

use crate::bindings::{colo, env_raw, JsClock, JsTimer};
use crate::routes::Route;
use crate::stores::Stores;

#[cfg(feature = "main-worker")]
pub use crate::operations::{
    directory::FleetDirectory, probes::ProbeObject, run_archive::RunArchive,
};
#[cfg(feature = "main-worker")]
pub use crate::stores::durable::BenchObject;

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
    let url = req.url();
    // The measured route on the runtime's own request and response objects: no SDK request
    // (its method, path, headers and `cf` read across JS up front) and no SDK response (rebuilt
    // as a second JS `Response` on the way out). Its CPU is every answer's noise floor.
    let route = routes::route(&method, routes::path_of(&url), OPERATIONS);
    // Every route is a request in flight of the isolate, so an answer's `concurrent` sees it;
    // `/test` enters in `handle`, which reads its own visit.
    let _visit = (!matches!(route, Route::Test | Route::Fresh)).then(|| in_flight().enter());
    let response = match route {
        Route::Test => return test(&req, &url, (&env, &ctx), head, false).await,
        Route::Fresh => return test(&req, &url, (&env, &ctx), head, true).await,
        Route::Index => handle_index(&url, &env)?,
        Route::Healthz => respond::text("ok")?,
        Route::MethodNotAllowed(allow) => respond::method_not_allowed(allow)?,
        Route::NotFound => Response::error("Not Found", 404)?,
        #[cfg(feature = "main-worker")]
        other => operations::serve(other, worker::Request::from(req), &env).await?,
        #[cfg(not(feature = "main-worker"))]
        _ => Response::error("Not Found", 404)?,
    };
    // HEAD is GET without the body (RFC 9110): same handlers, same status and headers.
    let response = if head {
        respond::without_body(response)?
    } else {
        response
    };
    Ok(response.into())
}

/// Whether this build serves the operations plane: the main worker does, a fleet member does
/// not (`routes`).
const OPERATIONS: bool = cfg!(feature = "main-worker");

/// The Cron Trigger (the main worker's): keeps the probes alive (re-arms any whose alarm chain
/// died) and deletes expired R2 objects (`r2::sweep`), side by side: neither waits for the
/// other, and each logs its own failure, so one failing never stops the other.
#[cfg(feature = "main-worker")]
#[event(scheduled)]
async fn scheduled(_event: worker::ScheduledEvent, env: Env, _ctx: worker::ScheduleContext) {
    let _visit = in_flight().enter();
    futures::join!(
        operations::probe_control::tick(&env),
        stores::r2::sweep::run(&env)
    );
}

/// `GET /test`: one measurement (`kvbench_core::handle`); `head` answers it without the body.
/// `/test`, or with `fresh` a freshness round's `/fresh` call.
async fn test(
    req: &worker::web_sys::Request,
    url: &str,
    (env, ctx): (&Env, &Context),
    head: bool,
    fresh: bool,
) -> Result<worker::web_sys::Response> {
    let query = routes::query_of(url);
    let headers = req.headers();
    let authorization = headers.get("Authorization").ok().flatten();
    let run_header = headers.get(RUN_HEADER).ok().flatten();
    let token = env_raw(env, kvbench_core::operations::auth::TOKEN_VAR);
    let call = Call {
        query,
        authorization: authorization.as_deref(),
        token: token.as_deref(),
        defaults: crate::bindings::defaults(env),
        run_header: run_header.as_deref(),
        open: kvbench_core::operations::auth::open_from_raw(
            env_raw(env, kvbench_core::operations::auth::OPEN_VAR).as_deref(),
        ),
        keeping: &|| keep::Archive::from_env(env).map(|_| ()),
    };
    let started_ms = JsClock.now_ms();
    let stores = Stores::from_env(env, Ok(url), DENO_KV_META.with(|m| *m));
    let isolate = Isolate {
        gen: GEN.with(|g| *g),
        clock: &JsClock,
        timer: &JsTimer,
        served: Served::Isolate(REQUESTS.with(Cell::get)),
        colo: colo(req),
        budget: BUDGET.with(|b| *b),
        in_flight: IN_FLIGHT.with(|f| *f),
    };
    let reply = if fresh {
        handle_fresh(call, &stores, &isolate).await
    } else {
        handle(call, &stores, &isolate).await
    };
    stores.finish().await;
    // The handler's time, the quantity every vantage keeps (a run's line here, a member's
    // through its Server-Timing, a hint probe's in its object).
    let handler_ms = kvbench_core::measurement::answer::round_ms(JsClock.now_ms() - started_ms);
    if let Some(run) = &reply.run {
        let cold = isolate.served == Served::Isolate(1);
        keep::keep_run_answer(
            env,
            ctx,
            run,
            (started_ms, handler_ms, cold),
            &reply,
            &isolate.colo,
        );
    }
    let timing = kvbench_core::operations::fleet::server_timing(handler_ms);
    let mut extra = vec![("Server-Timing", timing.as_str())];
    // A fleet member says where its isolate runs, from Cloudflare's trace — asked after this
    // request's measurement (none of its spans is open), only for an answer, at most hourly per
    // isolate; a request in flight while it asks, so another's answer counts it in `concurrent`.
    let trace_colo = if OPERATIONS {
        None
    } else {
        let _visit = in_flight().enter();
        Some(crate::trace::member_colo(env, reply.status == 200).await)
    };
    if let Some(colo) = &trace_colo {
        extra.push((
            kvbench_wire::trace::HEADER,
            kvbench_wire::trace::header_value(colo.as_deref()),
        ));
    }
    match reply.status {
        401 => extra.push(("WWW-Authenticate", "Bearer realm=\"kvbench\"")),
        503 => extra.push(("Retry-After", "1")),
        _ => {}
    }
    respond::json_raw(reply.status, (!head).then_some(reply.body.as_str()), &extra)
}

/// `GET /`: this worker described (`respond::index`).
fn handle_index(url: &str, env: &Env) -> Result<Response> {
    let defaults = crate::bindings::defaults(env);
    let stores = Stores::from_env(env, Ok(url), DENO_KV_META.with(|m| *m));
    let configured: Vec<_> = stores
        .all()
        .into_iter()
        .map(|(id, store)| (id, store.map(|_| ())))
        .collect();
    let body = respond::index(
        defaults,
        &configured,
        kvbench_core::operations::auth::TokenConfig::from_raw(
            env_raw(env, kvbench_core::operations::auth::TOKEN_VAR).as_deref(),
        ),
        kvbench_core::operations::auth::open_from_raw(
            env_raw(env, kvbench_core::operations::auth::OPEN_VAR).as_deref(),
        ),
        isolate_state(),
        OPERATIONS,
        respond::provenance(env_raw(env, respond::PROVENANCE_VAR).as_deref()),
    );
    respond::json(200, &body)
}

/// This isolate's requests in flight: `/test`s, the probe objects' measurements, and the work
/// that outlives a response (a run's keep, an answers stream).
pub(crate) fn in_flight() -> &'static InFlight {
    IN_FLIGHT.with(|f| *f)
}

/// This isolate's memory budget for values in flight, shared by every request and object in it.
#[cfg(feature = "main-worker")]
pub(crate) fn budget() -> &'static Budget {
    BUDGET.with(|b| *b)
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
