//! What every operations route shares: its error ([`RouteError`], one conversion so handlers use
//! `?`), the token guards, the query, and the probes of this deployment.

use kvbench_core::error::ParamError;
use kvbench_core::measurement::params::parse_query;
use kvbench_core::operations::auth::{self, TOKEN_VAR};
use serde_json::json;
use worker::{Env, Request, Response};

use crate::bindings::env_raw;
use crate::operations::probe_client::Probes;
use crate::respond;

/// Why an operations route answers no data.
#[derive(Debug)]
pub enum RouteError {
    /// `{"error": ...}` with this status (400, 401 with `WWW-Authenticate`, 403, 413, 500, 503).
    Param(u16, ParamError),
    /// The runtime failed: the worker's own 500, as an unanswered `?` would be.
    Worker(worker::Error),
}

/// What an operations handler answers.
pub type Answer = Result<Response, RouteError>;

impl RouteError {
    /// A 400 naming the parameter.
    pub fn bad(e: ParamError) -> RouteError {
        RouteError::Param(400, e)
    }

    /// The response it is.
    pub fn response(self) -> worker::Result<Response> {
        match self {
            RouteError::Param(status, e) => {
                let mut r = respond::json(status, &json!({ "error": e }).to_string())?;
                if status == 401 {
                    r.headers_mut()
                        .set("WWW-Authenticate", "Bearer realm=\"kvbench\"")?;
                }
                Ok(r)
            }
            RouteError::Worker(e) => Err(e),
        }
    }
}

impl From<worker::Error> for RouteError {
    fn from(e: worker::Error) -> RouteError {
        RouteError::Worker(e)
    }
}

/// A handler's answer as the worker sends it.
pub fn answer(a: Answer) -> worker::Result<Response> {
    a.or_else(RouteError::response)
}

/// The request may go on under `/test`'s rule: a 401 or 500 otherwise.
pub fn admit(req: &Request, env: &Env) -> Result<(), RouteError> {
    let authorization = req.headers().get("Authorization").ok().flatten();
    auth::admit(authorization.as_deref(), env_raw(env, TOKEN_VAR).as_deref())
        .map_err(|(status, e)| RouteError::Param(status, e))
}

/// [`admit`] for the routes that start or stop probes: also closed without a token unless
/// `BENCH_OPEN = "true"` (a 403 naming `BENCH_TOKEN`).
pub fn admit_control(req: &Request, env: &Env) -> Result<(), RouteError> {
    let authorization = req.headers().get("Authorization").ok().flatten();
    let open = auth::open_from_raw(env_raw(env, auth::OPEN_VAR).as_deref());
    match auth::admit_keeping(
        authorization.as_deref(),
        env_raw(env, TOKEN_VAR).as_deref(),
        open,
    ) {
        Ok(()) => Ok(()),
        Err((401, _)) => admit(req, env),
        Err((status, e)) => Err(RouteError::Param(status, e)),
    }
}

/// This deployment's probes; a 500 when a binding or a var is wrong.
pub fn probes_of(env: &Env) -> Result<Probes, RouteError> {
    Probes::from_env(env).map_err(|e| RouteError::Param(500, ParamError::new("probes", e)))
}

/// The request's query, name by name; a 400 when it cannot be read.
pub fn query(req: &Request) -> Result<Vec<(String, String)>, RouteError> {
    let url = req
        .url()
        .map_err(|e| RouteError::bad(ParamError::new("query", e.to_string())))?;
    parse_query(url.query().unwrap_or("")).map_err(RouteError::bad)
}

/// The request's origin (the report's links), empty where it cannot be told.
pub fn origin_of(req: &Request) -> String {
    req.url()
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_default()
}
