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
mod probe_routes;
mod probes;
mod r2;
mod respond;
mod socket;
mod stores;

use std::cell::{Cell, RefCell};

use kvbench_core::budget::ISOLATE_BUDGET_BYTES;
use kvbench_core::probes::{Kept, RUN_HEADER};
use kvbench_core::{
    handle, Budget, Call, Clock, Defaults, InFlight, Isolate, MetadataCache, ValueGen,
};
use worker::{
    event, Context, Env, Method, Request, Response, Result, RouteContext, Router, ScheduleContext,
    ScheduledEvent,
};

use crate::bindings::{colo, env_raw, env_text, JsClock, JsTimer};
use crate::stores::Stores;

pub use crate::durable::BenchObject;
pub use crate::probes::ProbeObject;

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

#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> Result<Response> {
    REQUESTS.with(|r| r.set(r.get() + 1));
    let head = req.method() == Method::Head;
    let path = req.path();
    // The measured route first, without building the router (~20 routes' worth of matching
    // and handler boxes per request): its CPU is every answer's noise floor.
    if path == "/test" && (head || req.method() == Method::Get) {
        let response = test(req, &env, &ctx).await?;
        return if head {
            respond::without_body(response)
        } else {
            Ok(response)
        };
    }
    // HEAD is GET without the body (RFC 9110): same handlers, same status and headers.
    let response = Router::with_data(std::rc::Rc::new(ctx))
        .get_async("/", handle_index)
        .head_async("/", handle_index)
        .get("/healthz", |_, _| respond::text("ok"))
        .head("/healthz", |_, _| respond::text("ok"))
        .get_async("/test", handle_test)
        .head_async("/test", handle_test)
        .get_async("/probes", probe_routes::list)
        .post_async("/probes/start", |req, ctx| {
            probe_routes::control(req, ctx, "start")
        })
        .post_async("/probes/stop", |req, ctx| {
            probe_routes::control(req, ctx, "stop")
        })
        .get_async("/probes/answers", probe_routes::probe_answers)
        .get_async("/runs/:id/answers", probe_routes::run_answers)
        .get_async("/report", probe_routes::report)
        .run(req, env)
        .await?;
    if response.status_code() == 405 {
        return respond::method_not_allowed(&path);
    }
    if head {
        return respond::without_body(response);
    }
    Ok(response)
}

/// The Cron Trigger: keeps the probes alive (re-arms any whose alarm chain died).
#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    probe_routes::tick(&env).await;
}

async fn handle_test(req: Request, ctx: RouteContext<Data>) -> Result<Response> {
    test(req, &ctx.env, &ctx.data).await
}

/// `GET /test`: one measurement (`kvbench_core::handle`).
async fn test(req: Request, env: &Env, ctx: &Context) -> Result<Response> {
    let url = req.url()?;
    let query = url.query().unwrap_or("");
    let authorization = req.headers().get("Authorization").ok().flatten();
    let run_header = req.headers().get(RUN_HEADER).ok().flatten();
    let token = env_raw(env, kvbench_core::auth::TOKEN_VAR);
    let call = Call {
        query,
        authorization: authorization.as_deref(),
        token: token.as_deref(),
        defaults: Defaults::from_vars(|name| env_text(env, name)),
        run_header: run_header.as_deref(),
    };
    let started_ms = JsClock.now_ms();
    let stores = Stores::from_env(env, Ok(url.clone()), DENO_KV_META.with(|m| *m));
    let isolate = Isolate {
        gen: GEN.with(|g| *g),
        clock: &JsClock,
        timer: &JsTimer,
        requests: REQUESTS.with(Cell::get),
        colo: colo(&req),
        budget: BUDGET.with(|b| *b),
        in_flight: IN_FLIGHT.with(|f| *f),
    };
    let reply = handle(call, &stores, &isolate).await;
    stores.finish().await;
    if let (Some(run), 200) = (&reply.run, reply.status) {
        keep_run_answer(env, ctx, run, started_ms, &reply.body, &isolate.colo);
    }
    let extra: &[(&str, &str)] = match reply.status {
        401 => &[("WWW-Authenticate", "Bearer realm=\"kvbench\"")],
        503 => &[("Retry-After", "1")],
        _ => &[],
    };
    respond::json_with(reply.status, &reply.body, extra)
}

/// Keeps a `/test` answer under its run id after the response is sent (`waitUntil`): no span
/// is open any more and the answer is not delayed.
fn keep_run_answer(env: &Env, ctx: &Context, run: &str, started_ms: f64, body: &str, colo: &str) {
    let Some((stub, keep_s)) = probe_routes::run_stub(env, run) else {
        return;
    };
    let duration_ms = kvbench_core::answer::round_ms(JsClock.now_ms() - started_ms);
    let cold = REQUESTS.with(Cell::get) == 1;
    let line = Kept {
        t_ms: started_ms as i64,
        label: colo,
        hint: None,
        colo,
        cold,
        colo_changed: false,
        concurrent: 0,
        duration_ms,
        answer: body,
    }
    .to_line();
    let run = run.to_string();
    let t_ms = started_ms as i64;
    ctx.wait_until(async move {
        if let Err(e) = probes::keep_run_answer(stub, t_ms, keep_s, line).await {
            worker::console_error!("run {run}: keeping an answer failed: {e}");
        }
    });
}

async fn handle_index(req: Request, ctx: RouteContext<Data>) -> Result<Response> {
    let env = &ctx.env;
    let defaults = Defaults::from_vars(|name| env_text(env, name));
    let stores = Stores::from_env(env, Ok(req.url()?), DENO_KV_META.with(|m| *m));
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
        isolate_state(),
    );
    respond::json(200, &body)
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
