//! The whole `/test` endpoint as a pure function of its inputs: auth, parameters, probe, and the
//! HTTP status and body to send. The worker only gathers the inputs, so every answer — including
//! each 400 and 401 — is tested natively against mocks.

use serde_json::json;

use crate::auth::{self, TokenConfig, TOKEN_VAR};
use crate::budget::request_cost;
use crate::params::{parse_query, Defaults, ParamError, Params};
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
    /// The raw query string (without `?`), still percent-encoded: decoded strictly here.
    pub query: &'a str,
    pub authorization: Option<&'a str>,
    /// `BENCH_TOKEN` as stored (untrimmed), when set.
    pub token: Option<&'a str>,
    /// Defaults from `[vars]`, or the var that is invalid.
    pub defaults: Result<Defaults, ParamError>,
}

/// Answers one `/test` call. Stores are touched only after auth and every parameter passed.
pub async fn handle(call: Call<'_>, stores: &StoreSet<'_>, isolate: &Isolate<'_>) -> Reply {
    let token = match TokenConfig::from_raw(call.token) {
        TokenConfig::Open => None,
        TokenConfig::Required(t) => Some(t),
        // Fail closed: a token that was meant to be set must not open /test to everyone.
        TokenConfig::Blank => {
            return Reply::error(
                500,
                &ParamError::new(
                    TOKEN_VAR,
                    "is set but blank: /test refuses to run without its token; set a token or delete the secret",
                ),
            )
        }
    };
    if let Err(e) = auth::check(call.authorization, token.as_deref()) {
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
    let pairs = match parse_query(call.query) {
        Ok(p) => p,
        Err(e) => return Reply::error(400, &e),
    };
    let params = match Params::parse(&pairs, &defaults) {
        Ok(p) => p,
        Err(e) => return Reply::error(400, &e),
    };
    let cost = request_cost(params.max_bytes, params.stores.len());
    let Some(_reservation) = isolate.budget.reserve(cost) else {
        return Reply::error(
            503,
            &ParamError::new(
                "max_bytes",
                format!(
                    "this isolate has {} of its {} bytes of values in flight and this request may need {cost}: retry shortly, or use smaller values",
                    isolate.budget.reserved(),
                    isolate.budget.limit()
                ),
            ),
        );
    };
    let answer = probe(&params, stores, isolate).await;
    Reply {
        status: 200,
        body: answer.to_json(),
    }
}
