//! The operations plane, the main worker's only (feature `main-worker`).
//! - objects: `probes`, `directory`, `run_archive`, their shared `kept_table`, and `object`
//!   (calling any of them); the worker's side of the probes, `probe_client`;
//! - routes: `route` (error, guards, query), `probe_control` (and the cron), `answer_routes`,
//!   `report_route` (`/report` and the bill).

pub mod answer_routes;
pub mod directory;
pub mod kept_table;
pub mod object;
pub mod probe_client;
pub mod probe_control;
pub mod probes;
pub mod report_route;
pub mod route;
pub mod run_archive;

use kvbench_wire::object::ProbeCall;
use worker::{Env, Request, Response, Result};

use crate::routes::Route;

/// The answer of an operations route (`crate::routes`); the measured routes are the worker's.
pub async fn serve(route: Route<'_>, req: Request, env: &Env) -> Result<Response> {
    match route {
        Route::Probes => route::answer(probe_control::list(req, env).await),
        Route::ProbesStart => {
            route::answer(probe_control::control(req, env, ProbeCall::Start).await)
        }
        Route::ProbesStop => route::answer(probe_control::control(req, env, ProbeCall::Stop).await),
        Route::ProbesCheck => route::answer(probe_control::check(req, env).await),
        Route::ProbeAnswers => route::answer(answer_routes::probe_answers(req, env).await),
        Route::RunAnswers(id) => route::answer(answer_routes::run_answers(req, env, id).await),
        Route::Report => route::answer(report_route::report(req, env).await),
        Route::Index
        | Route::Healthz
        | Route::Test
        | Route::Fresh
        | Route::MethodNotAllowed(_)
        | Route::NotFound => Response::error("Not Found", 404),
    }
}
