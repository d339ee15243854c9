//! Probe control: `GET /probes`, `POST /probes/start|stop|check` and the Cron Trigger that keeps
//! the probes alive. A request reads every probe's status at most once ([`Probes::sweep`]).

use kvbench_core::error::ParamError;
use kvbench_core::operations::auth::TOKEN_VAR;
use kvbench_core::operations::fleet::{Member, FLEET_VAR};
use kvbench_core::operations::spend::{self, Arming, ProbeNow, Projection};
use kvbench_wire::object::{ObjectCall, ProbeCall};
use kvbench_wire::report::BillHead;
use serde_json::json;
use worker::{Env, Request};

use crate::bindings::env_raw;
use crate::operations::probe_client::{check_member, Point, Probes, Sweep};
use crate::operations::report_route::bill;
use crate::operations::route::{
    admit, admit_control, origin_of, probes_of, query, Answer, RouteError,
};
use crate::respond;

/// `POST /probes/check[?members=label,...]`: each member of `FLEET` (or those named) called once
/// from this worker as its probe calls it (so error 1042 shows here), read as a deploy check:
/// status, placement, handler time, problem. Nothing is kept; `ok: false` when a member has a
/// problem. Closed like a start (each call is a paid `/test`).
pub async fn check(req: Request, env: &Env) -> Answer {
    admit_control(&req, env)?;
    let probes = probes_of(env)?;
    let members = chosen_members(&query(&req)?, &probes.config.members).map_err(RouteError::bad)?;
    let token = env_raw(env, TOKEN_VAR);
    let checks =
        futures::future::join_all(members.iter().map(|m| check_member(m, token.as_deref()))).await;
    let ok = checks.iter().all(|c| c.problem.is_none());
    Ok(respond::json(
        200,
        &json!({ "ok": ok, "members": checks }).to_string(),
    )?)
}

/// The members a check names (`members=a,b`), or all of `FLEET`.
fn chosen_members(query: &[(String, String)], fleet: &[Member]) -> Result<Vec<Member>, ParamError> {
    let mut chosen = None;
    for (name, value) in query {
        if name != "members" || chosen.is_some() {
            return Err(ParamError::new(
                name,
                "POST /probes/check takes one parameter, members (labels of FLEET, comma-separated)",
            ));
        }
        let mut list = Vec::new();
        for label in value.split(',').map(str::trim).filter(|l| !l.is_empty()) {
            match fleet.iter().find(|m| m.label == label) {
                Some(m) => list.push(m.clone()),
                None => {
                    return Err(ParamError::new(
                        "members",
                        format!("{label:?} is not a member of {FLEET_VAR}"),
                    ))
                }
            }
        }
        chosen = Some(list);
    }
    Ok(chosen.unwrap_or_else(|| fleet.to_vec()))
}

/// `GET /probes`: each probe's hint, colo, interval, kept answers, last answer and last error.
pub async fn list(req: Request, env: &Env) -> Answer {
    admit(&req, env)?;
    if let Some((name, _)) = query(&req)?.first() {
        return Err(RouteError::bad(ParamError::new(
            name,
            "GET /probes takes no parameters",
        )));
    }
    let probes = probes_of(env)?;
    // Every status read once: the list, the budget, the cron's verdict and the bill's sources.
    let sweep = probes.sweep().await;
    let (list, running) = entries(&sweep);
    // Every probe as the budget counts it (the cron's verdict).
    let now = sweep.budget_view();
    let bill = bill(env, &probes, &sweep, &origin_of(&req)).await;
    let per_answer = per_answer_usd(&bill);
    // The projection of what runs (each running probe at its own interval), not of the vars.
    let projection = spend::project(
        running.iter().copied(),
        probes.config.budget_usd,
        per_answer,
    );
    let body = json!({
        // The vars' (what the cron arms a probe that never ran with); `bill` is projected at them.
        "every_s": probes.config.every_s,
        "keep_s": probes.config.keep_s,
        "bill": bill,
        // What runs now: each probe at its own interval (per probe, `every_s`).
        "running": { "probes": running.len(), "wakes_per_s": projection.wakes_per_s() },
        "budget": projection,
        // What the cron's next tick does: re-arm what is not stopped, or nothing over budget.
        "cron": match cron_verdict(&probes, &now, per_answer) {
            Ok(None) => json!({ "arms": true, "to_arm": 0 }),
            Ok(Some(p)) => json!({
                "arms": true,
                "to_arm": now.iter().filter(|p| p.tick_arms()).count(),
                "monthly_usd": p.monthly_usd,
            }),
            Err(e) => json!({ "arms": false, "why": e.message }),
        },
        "colo_from": "PROBE_COLO_URL (Cloudflare's /cdn-cgi/trace), asked by a hint probe once per object instance and by a member once per isolate and at most hourly (its kvbench-trace-colo header, kept as trace_colo); unknown where it cannot be told",
        "probes": list,
    });
    Ok(respond::json(200, &body.to_string())?)
}

/// `GET /probes`'s entries, each probe's description with its status as the object sent it
/// (or why it could not be read), and the interval of each probe that runs now.
fn entries(sweep: &Sweep) -> (Vec<serde_json::Value>, Vec<u32>) {
    let mut list = Vec::new();
    let mut running: Vec<u32> = Vec::new();
    for (point, status) in &sweep.configured {
        let mut entry = point.describe();
        match status {
            Ok(read) => {
                running.extend(read.status.running.then_some(read.status.every_s));
                merge(&mut entry, read.shown.clone());
            }
            Err(e) => merge(&mut entry, json!({ "error": e })),
        }
        list.push(entry);
    }
    for (point, status) in &sweep.outside.live {
        let mut entry = point.describe();
        let outside = match point {
            Point::Hint(_) => format!(
                "started beyond {} (POST /probes/stop stops it)",
                kvbench_core::operations::probes::HINTS_VAR
            ),
            Point::Member(_) => format!(
                "no longer in {FLEET_VAR} (it stops at its next wake, or POST /probes/stop; listed while it keeps answers)"
            ),
        };
        merge(&mut entry, json!({ "outside": outside }));
        running.extend(status.status.running.then_some(status.status.every_s));
        merge(&mut entry, status.shown.clone());
        list.push(entry);
    }
    (list, running)
}

/// `extra`'s fields added to `entry` (both JSON objects); `entry`'s own win.
fn merge(entry: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(fields), serde_json::Value::Object(more)) = (entry.as_object_mut(), extra) {
        for (k, v) in more {
            fields.entry(k).or_insert(v);
        }
    }
}

/// `POST /probes/start[?hints=..&every=..&keep=..]` and `POST /probes/stop`.
pub async fn control(req: Request, env: &Env, call: ProbeCall) -> Answer {
    admit_control(&req, env)?;
    let mut probes = probes_of(env)?;
    let pairs = query(&req)?;
    probes.config = probes
        .config
        .clone()
        .with_query(&pairs)
        .map_err(RouteError::bad)?;
    if call == ProbeCall::Stop && pairs.iter().all(|(name, _)| name != "hints") {
        // A stop without hints stops every probe there is, in PROBE_HINTS and FLEET or not
        // (again, for one already stopped: its answers' expiry alarm is set anew).
        let outside = probes.outside().await;
        probes.forget(outside.gone).await;
        for (point, _) in outside.live {
            match point {
                Point::Hint(hint) => probes.config.hints.push(hint),
                Point::Member(member) => probes.config.members.push(member),
            }
        }
    }
    if call == ProbeCall::Start {
        // What would run after it: the probes it starts, and those already running beside them.
        let sweep = probes.sweep().await;
        let bill = bill(env, &probes, &sweep, &origin_of(&req)).await;
        let now = sweep.budget_view();
        probes.forget(sweep.outside.gone).await;
        probes
            .config
            .check_arming(&now, Arming::Start, per_answer_usd(&bill))
            .map_err(RouteError::bad)?;
    }
    respond_each(&probes, call).await
}

/// The cron's budget check of what would run after its tick ([`Arming::Tick`]); `Ok(None)`:
/// the tick arms nothing.
fn cron_verdict(
    probes: &Probes,
    now: &[ProbeNow],
    per_answer_usd: Option<f64>,
) -> Result<Option<Projection>, ParamError> {
    if !now.iter().any(ProbeNow::tick_arms) {
        return Ok(None);
    }
    probes
        .config
        .check_arming(now, Arming::Tick, per_answer_usd)
        .map(Some)
}

/// What one answer costs, from a bill of the last day's answers (none before any was kept).
fn per_answer_usd(bill: &serde_json::Value) -> Option<f64> {
    BillHead::read(bill).per_answer_usd()
}

async fn respond_each(probes: &Probes, call: ProbeCall) -> Answer {
    let (results, directory_error) = probes.each(call).await;
    let failed = results.iter().any(|(_, r)| r.is_err());
    let list: Vec<_> = results
        .into_iter()
        .map(|(point, r)| {
            let mut entry = point.describe();
            match r {
                Ok(v) => merge(&mut entry, json!({ "result": v })),
                Err(e) => merge(&mut entry, json!({ "error": e })),
            }
            entry
        })
        .collect();
    let name = call.path().trim_start_matches('/');
    let mut body = json!({ "call": name, "every_s": probes.config.every_s, "probes": list });
    if let Some(e) = &directory_error {
        // The probes are armed; only a member's listing after it leaves FLEET is at stake.
        merge(&mut body, json!({ "directory_error": e }));
    }
    Ok(respond::json(
        if failed { 502 } else { 200 },
        &body.to_string(),
    )?)
}

/// The Cron Trigger: re-arms every probe not stopped and without an alarm, unless that would be
/// over `PROBE_BUDGET_USD` (then nothing, and `GET /probes` says why).
pub async fn tick(env: &Env) {
    let probes = match Probes::from_env(env) {
        Ok(p) => p,
        Err(e) => return worker::console_error!("probes: {e}"),
    };
    let sweep = probes.sweep().await;
    let now = sweep.budget_view();
    // No bill when the tick arms nothing: the steady state spares each tick a render.
    let per_answer = match now.iter().any(ProbeNow::tick_arms) {
        true => per_answer_usd(&bill(env, &probes, &sweep, "").await),
        false => None,
    };
    if let Err(e) = cron_verdict(&probes, &now, per_answer) {
        worker::console_error!("probes: the cron armed nothing: {}", e.message);
        return;
    }
    probes.forget(sweep.outside.gone).await;
    let (results, directory_error) = probes.each(ProbeCall::Tick).await;
    for (point, r) in results {
        if let Err(e) = r {
            worker::console_error!("probe {}: tick failed: {e}", point.label());
        }
    }
    if let Some(e) = directory_error {
        worker::console_error!("probes: recording the members failed: {e}");
    }
}
