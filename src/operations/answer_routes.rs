//! The answer streams: `GET /probes/answers` (every probe's kept answers) and
//! `GET /runs/<id>/answers` (a run's, every shard's in one stream), NDJSON, each behind
//! `BENCH_TOKEN` when it is set, like `/test`. Both read and write nothing.

use kvbench_core::error::ParamError;
use kvbench_core::operations::runs::parse_run;
use kvbench_core::operations::window::Window;
use kvbench_core::Clock;
use worker::{Env, Request, Response};

use crate::bindings::JsClock;
use crate::keep::Archive;
use crate::operations::kept_table::{answers_stream, Source};
use crate::operations::route::{admit, probes_of, query, Answer, RouteError};
use crate::operations::run_archive;

fn ndjson(stream: impl futures::Stream<Item = worker::Result<Vec<u8>>> + 'static) -> Answer {
    let mut r = Response::from_stream(stream)?;
    r.headers_mut()
        .set("Content-Type", "application/x-ndjson")?;
    r.headers_mut().set("Cache-Control", "no-store")?;
    Ok(r)
}

/// The request's `since` and `until`.
fn window(req: &Request) -> Result<Window, RouteError> {
    Window::parse(&query(req)?, JsClock.now_ms() as i64).map_err(RouteError::bad)
}

/// `GET /probes/answers?since=..&until=..`: every probe's kept answers, NDJSON.
pub async fn probe_answers(req: Request, env: &Env) -> Answer {
    admit(&req, env)?;
    let window = window(&req)?;
    let probes = probes_of(env)?;
    let mut sources = Vec::new();
    for point in probes.all_points().await {
        sources.push(Source {
            label: point.label(),
            stub: probes.stub(&point)?,
            seq_base: 0,
        });
    }
    ndjson(answers_stream(sources, window))
}

/// `GET /runs/<id>/answers?since=..&until=..`: a run's kept answers, NDJSON, every shard's in
/// one stream whose end line counts them and the keeps that failed; 404 for a run that kept
/// nothing and failed nothing.
pub async fn run_answers(req: Request, env: &Env, id: &str) -> Answer {
    admit(&req, env)?;
    let window = window(&req)?;
    let run = parse_run("run", id).map_err(RouteError::bad)?;
    let archive = Archive::from_env(env).map_err(|e| RouteError::Param(500, e))?;
    let (kept, failed) = run_archive::totals(&archive, &run)
        .await
        .map_err(|e| RouteError::Param(503, ParamError::new("run", e)))?;
    let sources = run_archive::sources(&archive, &run)?;
    if kept == 0 && failed == 0 {
        return Err(RouteError::Param(
            404,
            ParamError::new("run", format!("no answers are kept under run {run}")),
        ));
    }
    ndjson(answers_stream(sources, window))
}
