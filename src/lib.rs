//! The benchmark worker: routes and glue only. What `/test` measures is decided in
//! `kvbench-core`; this crate connects it to the bindings (KV, Durable Objects, D1, R2, the
//! Cache API), `fetch`, TCP sockets, the clock and timers.

mod bindings;
mod cache;
mod d1;
mod durable;
mod r2;
mod respond;
mod socket;
mod stores;

use std::cell::{Cell, RefCell};

use kvbench_core::budget::ISOLATE_BUDGET_BYTES;
use kvbench_core::{handle, Budget, Call, Defaults, Isolate, MetadataCache, ValueGen};
use worker::{event, Context, Env, Method, Request, Response, Result, RouteContext, Router};

use crate::bindings::{colo, env_raw, env_text, JsClock, JsTimer};
use crate::stores::Stores;

pub use crate::durable::BenchObject;

thread_local! {
    static REQUESTS: Cell<u64> = const { Cell::new(0) };
    static GEN: &'static RefCell<ValueGen> = Box::leak(Box::new(RefCell::new(bindings::seeded_gen())));
    /// Deno KV's KV Connect metadata (endpoints, short-lived token), shared by this isolate's requests.
    static DENO_KV_META: &'static MetadataCache = Box::leak(Box::default());
    /// Value bytes in flight across this isolate's concurrent requests.
    static BUDGET: &'static Budget = Box::leak(Box::new(Budget::new(ISOLATE_BUDGET_BYTES)));
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    REQUESTS.with(|r| r.set(r.get() + 1));
    let head = req.method() == Method::Head;
    // HEAD is GET without the body (RFC 9110): same handlers, same status and headers.
    let response = Router::new()
        .get_async("/", handle_index)
        .head_async("/", handle_index)
        .get("/healthz", |_, _| respond::text("ok"))
        .head("/healthz", |_, _| respond::text("ok"))
        .get_async("/test", handle_test)
        .head_async("/test", handle_test)
        .run(req, env)
        .await?;
    if response.status_code() == 405 {
        return respond::method_not_allowed();
    }
    if head {
        return respond::without_body(response);
    }
    Ok(response)
}

async fn handle_test(req: Request, ctx: RouteContext<()>) -> Result<Response> {
    let env = &ctx.env;
    let url = req.url()?;
    let query = url.query().unwrap_or("");
    let authorization = req.headers().get("Authorization").ok().flatten();
    let token = env_raw(env, kvbench_core::auth::TOKEN_VAR);
    let call = Call {
        query,
        authorization: authorization.as_deref(),
        token: token.as_deref(),
        defaults: Defaults::from_vars(|name| env_text(env, name)),
    };
    let stores = Stores::from_env(env, &url, DENO_KV_META.with(|m| *m));
    let isolate = Isolate {
        gen: GEN.with(|g| *g),
        clock: &JsClock,
        timer: &JsTimer,
        requests: REQUESTS.with(Cell::get),
        colo: colo(&req),
        budget: BUDGET.with(|b| *b),
    };
    let reply = handle(call, &stores.set(), &isolate).await;
    stores.finish().await;
    let mut response = respond::json(reply.status, &reply.body)?;
    if reply.status == 401 {
        response
            .headers_mut()
            .set("WWW-Authenticate", "Bearer realm=\"kvbench\"")?;
    }
    if reply.status == 503 {
        response.headers_mut().set("Retry-After", "1")?;
    }
    Ok(response)
}

async fn handle_index(req: Request, ctx: RouteContext<()>) -> Result<Response> {
    let env = &ctx.env;
    let defaults = Defaults::from_vars(|name| env_text(env, name));
    let stores = Stores::from_env(env, &req.url()?, DENO_KV_META.with(|m| *m));
    let configured: Vec<_> = stores
        .set()
        .into_iter()
        .map(|(id, store)| (id, store.map(|_| ())))
        .collect();
    let body = respond::index(
        defaults,
        &configured,
        kvbench_core::auth::TokenConfig::from_raw(
            env_raw(env, kvbench_core::auth::TOKEN_VAR).as_deref(),
        ),
    );
    respond::json(200, &body)
}

#[cfg(all(test, target_arch = "wasm32"))]
mod binding_tests;
#[cfg(all(test, target_arch = "wasm32"))]
mod testing;
#[cfg(all(test, target_arch = "wasm32"))]
mod wasm_tests;
