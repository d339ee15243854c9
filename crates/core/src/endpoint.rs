//! The whole `/test` endpoint as a pure function of its inputs: auth, parameters, probe, and the
//! HTTP status and body to send. The worker only gathers the inputs, so every answer — including
//! each 400 and 401 — is tested natively against mocks.

use serde_json::json;

use crate::auth;
use crate::params::{Defaults, ParamError, Params};
use crate::probe::{probe, Isolate, StoreSet};

/// What the endpoint answers: an HTTP status and a JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    fn error(status: u16, e: &ParamError) -> Self {
        Self {
            status,
            body: json!({ "error": e }).to_string(),
        }
    }
}

/// Inputs of one `/test` call that come from the request and the deployment.
pub struct Call<'a> {
    /// Percent-decoded query pairs, in order.
    pub query: &'a [(String, String)],
    pub authorization: Option<&'a str>,
    /// `BENCH_TOKEN`, when set.
    pub token: Option<&'a str>,
    /// Defaults from `[vars]`, or the var that is invalid.
    pub defaults: Result<Defaults, ParamError>,
}

/// Answers one `/test` call. Stores are touched only after auth and every parameter passed.
pub async fn handle(call: Call<'_>, stores: &StoreSet<'_>, isolate: &Isolate<'_>) -> Reply {
    if let Err(e) = auth::check(call.authorization, call.token) {
        return Reply::error(
            401,
            &ParamError {
                parameter: "Authorization".into(),
                message: e.to_string(),
            },
        );
    }
    let defaults = match call.defaults {
        Ok(d) => d,
        Err(e) => return Reply::error(500, &e),
    };
    let params = match Params::parse(call.query, &defaults) {
        Ok(p) => p,
        Err(e) => return Reply::error(400, &e),
    };
    let answer = probe(&params, stores, isolate).await;
    Reply {
        status: 200,
        body: answer.to_json(),
    }
}
