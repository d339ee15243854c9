//! The smallest workers-rs worker: every request answers `hello`. bench/cold.mjs starts it
//! beside the benchmark worker and the JS floor to time a new isolate's first answer.

use worker::{event, Context, Env, Request, Response, Result};

#[event(fetch)]
async fn fetch(_req: Request, _env: Env, _ctx: Context) -> Result<Response> {
    Response::ok("hello")
}
