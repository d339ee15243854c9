//! The operations plane, the main worker's only (a fleet member is built without it, feature
//! `main-worker`): the probes' Durable Object class (`probes`) and the worker's side of them
//! (`probe_client`), their routes and the
//! report route (`probe_routes`), the fleet's directory and its Durable Object class (`directory`), the run archive's
//! class and reads (`run_archive`), and the kept-answers table both classes hold (`kept_table`).

pub mod directory;
pub mod kept_table;
pub mod object;
pub mod probe_client;
pub mod probe_routes;
pub mod probes;
pub mod run_archive;

use worker::{Env, Request, Response, Result};

use crate::routes::Route;

/// The answer of an operations route (`crate::routes`); the measured routes are the worker's.
pub async fn serve(route: Route<'_>, req: Request, env: &Env) -> Result<Response> {
    match route {
        Route::Probes => probe_routes::list(req, env).await,
        Route::ProbesStart => probe_routes::control(req, env, "start").await,
        Route::ProbesStop => probe_routes::control(req, env, "stop").await,
        Route::ProbesCheck => probe_routes::check(req, env).await,
        Route::ProbeAnswers => probe_routes::probe_answers(req, env).await,
        Route::RunAnswers(id) => probe_routes::run_answers(req, env, id).await,
        Route::Report => probe_routes::report(req, env).await,
        Route::Index
        | Route::Healthz
        | Route::Test
        | Route::MethodNotAllowed(_)
        | Route::NotFound => Response::error("Not Found", 404),
    }
}
