//! The operations plane, the main worker's only (a fleet member is built without it, feature
//! `main-worker`). Objects: the probes' Durable Object class (`probes`), the fleet's directory
//! (`directory`), the run archive's shards (`run_archive`, with the reads over a run's shards),
//! the kept-answers table both the probes and the shards hold (`kept_table`), and talking to
//! any of them (`object`). The worker's side of the probes (`probe_client`). Routes: what they
//! share — the error, the guards, the query (`route`) — probe control and the cron
//! (`probe_control`), the answer streams (`answer_routes`) and `/report` with the bill
//! (`report_route`).

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
