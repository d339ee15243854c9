//! The whole `/test` endpoint as a pure function of its inputs (auth, parameters, measurement,
//! status and body), so every answer, each 400, 401 and 403 included, is tested natively.

use serde_json::json;

use crate::error::ParamError;
use crate::measurement::budget::request_cost;
use crate::measurement::measure::{measure, Access, Isolate, StoreSet};
use crate::measurement::params::{parse_query, Defaults, Params};
use crate::operations::auth;
use crate::operations::runs::{parse_run, RUN_HEADER};

/// What the endpoint answers: an HTTP status and a JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    /// The run id (`?run=` or `Kvbench-Run`) to keep this answer under after sending it (a 401
    /// is never kept).
    pub run: Option<String>,
}

impl Reply {
    fn error(status: u16, e: &ParamError) -> Self {
        Self {
            status,
            body: json!({ "error": e }).to_string(),
            run: None,
        }
    }

    fn of_run(self, run: Option<String>) -> Self {
        Self { run, ..self }
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
    /// The `Kvbench-Run` header, when the request has one.
    pub run_header: Option<&'a str>,
    /// `BENCH_OPEN = "true"` ([`auth::admit_test`]). A caller inside the deployment without a
    /// token (a hint probe) passes `true`.
    pub open: bool,
    /// Whether this deployment can keep a run's answers, asked only of a request with a run:
    /// `Err` names the var or binding that prevents it (a bad `RUN_SHARDS`, say).
    pub keeping: &'a dyn Fn() -> Result<(), ParamError>,
}

/// Answers one `/test` call. Stores are touched only after auth and every parameter passed.
pub async fn handle(call: Call<'_>, stores: &dyn StoreSet, isolate: &Isolate<'_>) -> Reply {
    handle_as(call, stores, isolate, false).await
}

/// Answers one `/fresh` call: `/test`'s parameters (a `key` required) and `op=read` (each store's
/// read alone, the answer's `value_bytes` being the version it holds) or `op=write` (each store
/// written, whatever it holds, with `min_bytes` = `max_bytes` bytes: the version).
pub async fn handle_fresh(call: Call<'_>, stores: &dyn StoreSet, isolate: &Isolate<'_>) -> Reply {
    handle_as(call, stores, isolate, true).await
}

async fn handle_as(
    call: Call<'_>,
    stores: &dyn StoreSet,
    isolate: &Isolate<'_>,
    fresh: bool,
) -> Reply {
    let visit = isolate.in_flight.enter();
    // Every `/test` writes to the deployment's stores on a miss (and a run's answers are kept):
    // closed without a token unless BENCH_OPEN.
    if let Err((status, e)) = auth::admit_test(call.authorization, call.token, call.open) {
        return Reply::error(status, &e);
    }
    let defaults = match call.defaults {
        Ok(d) => d,
        Err(e) => return Reply::error(500, &e),
    };
    let mut pairs = match parse_query(call.query) {
        Ok(p) => p,
        Err(e) => return Reply::error(400, &e),
    };
    let access = match fresh.then(|| take_op(&mut pairs)).transpose() {
        Ok(access) => access.unwrap_or(Access::Test),
        Err(e) => return Reply::error(400, &e),
    };
    let run = match take_run(&mut pairs, call.run_header) {
        Ok(run) => run,
        Err(e) => return Reply::error(400, &e),
    };
    // Refused before it is measured when its answer could not be kept: the client counts a
    // 500, where a measured answer would have been sent and then lost.
    if run.is_some() {
        if let Err(e) = (call.keeping)() {
            return Reply::error(500, &e);
        }
    }
    // From here on an answer belongs to its run whatever its status: a run keeps its 400s and
    // 503s too (as failures), so its report counts every request.
    let params = match Params::parse(&pairs, &defaults) {
        Ok(p) => p,
        Err(e) => return Reply::error(400, &e).of_run(run),
    };
    if fresh && (params.key.is_none() || params.min_bytes != params.max_bytes) {
        let e = ParamError::new(
            "key",
            "a freshness call names its key, and min_bytes = max_bytes (the version)",
        );
        return Reply::error(400, &e);
    }
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
        )
        .of_run(run);
    };
    let mut answer = measure(&params, stores, isolate, &visit, access).await;
    answer.concurrent = Some(visit.others());
    Reply {
        status: 200,
        body: answer.to_json(),
        run,
    }
}

/// `op` of a `/fresh` call, removed from the pairs.
fn take_op(pairs: &mut Vec<(String, String)>) -> Result<Access, ParamError> {
    let ops: Vec<String> = pairs
        .iter()
        .filter(|(n, _)| n == "op")
        .map(|(_, v)| v.clone())
        .collect();
    pairs.retain(|(name, _)| name != "op");
    match ops.as_slice() {
        [op] if op == "read" => Ok(Access::Read),
        [op] if op == "write" => Ok(Access::Write),
        _ => Err(ParamError::new("op", "expected once: read or write")),
    }
}

/// The run id of `?run=` or the header (they must agree), removed from the pairs the measurement's
/// parameters are parsed from.
fn take_run(
    pairs: &mut Vec<(String, String)>,
    header: Option<&str>,
) -> Result<Option<String>, ParamError> {
    let mut from_query = None;
    for (_, value) in pairs.iter().filter(|(name, _)| name == "run") {
        if from_query.is_some() {
            return Err(ParamError::new("run", "given more than once"));
        }
        from_query = Some(parse_run("run", value)?);
    }
    pairs.retain(|(name, _)| name != "run");
    let from_header = header
        .map(|h| parse_run(RUN_HEADER, h.trim()))
        .transpose()?;
    match (from_query, from_header) {
        (Some(q), Some(h)) if q != h => Err(ParamError::new(
            "run",
            format!("?run={q} and the {RUN_HEADER} header ({h}) disagree"),
        )),
        (q, h) => Ok(q.or(h)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measurement::params::pairs;

    #[test]
    fn run_ids_come_from_the_query_or_the_header() {
        let mut p = pairs(&[("stores", "kv"), ("run", "r1")]);
        assert_eq!(take_run(&mut p, None).unwrap().as_deref(), Some("r1"));
        assert_eq!(
            p,
            pairs(&[("stores", "kv")]),
            "run is not a measurement parameter"
        );
        let mut p = pairs(&[]);
        assert_eq!(
            take_run(&mut p, Some(" r2 ")).unwrap().as_deref(),
            Some("r2")
        );
        let mut p = pairs(&[("run", "r1")]);
        assert_eq!(take_run(&mut p, Some("r1")).unwrap().as_deref(), Some("r1"));
        assert_eq!(take_run(&mut pairs(&[]), None).unwrap(), None);
        for (list, header, parameter) in [
            (vec![("run", "r1")], Some("r2"), "run"),
            (vec![("run", "a b")], None, "run"),
            (vec![("run", "")], None, "run"),
            (vec![("run", "a"), ("run", "b")], None, "run"),
            (vec![], Some("x/y"), RUN_HEADER),
        ] {
            let e = take_run(&mut pairs(&list), header).unwrap_err();
            assert_eq!(e.parameter, parameter, "{list:?} {header:?}");
        }
    }
}
