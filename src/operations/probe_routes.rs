//! The routes of the probes and of kept runs: `GET /probes`, `POST /probes/start` and
//! `/probes/stop`, `GET /probes/answers`, `GET /runs/<id>/answers`, and the Cron Trigger that
//! keeps the probes alive. All behind `BENCH_TOKEN` when it is set, like `/test`.

use kvbench_core::error::ParamError;
use kvbench_core::measurement::params::parse_query;
use kvbench_core::operations::auth::{self, TOKEN_VAR};
use kvbench_core::operations::runs::parse_run;
use kvbench_core::operations::spend::{self, Arming, ProbeNow, Projection};
use kvbench_core::operations::window::{self, Window};
use kvbench_core::Clock;
use serde_json::json;
use worker::{Env, Request, Response, Result};

use worker::wasm_bindgen_futures::JsFuture;

use crate::bindings::{env_raw, js_text, JsClock};
use crate::keep::Archive;
use crate::operations::kept_table::{answers_stream, Source};
use crate::operations::probe_client::{Point, Probes};
use crate::operations::run_archive;
use crate::respond;

fn error(status: u16, e: &ParamError) -> Result<Response> {
    respond::json(status, &json!({ "error": e }).to_string())
}

/// `None` when the request may go on, else the 401 or 500 to send (`/test`'s rule).
fn refused(req: &Request, env: &Env) -> Result<Option<Response>> {
    let authorization = req.headers().get("Authorization").ok().flatten();
    match auth::admit(authorization.as_deref(), env_raw(env, TOKEN_VAR).as_deref()) {
        Ok(()) => Ok(None),
        Err((status, e)) => {
            let mut r = error(status, &e)?;
            if status == 401 {
                r.headers_mut()
                    .set("WWW-Authenticate", "Bearer realm=\"kvbench\"")?;
            }
            Ok(Some(r))
        }
    }
}

/// [`refused`] for the routes that start or stop probes: also closed without a token unless
/// `BENCH_OPEN = "true"` (a 403 naming `BENCH_TOKEN`).
fn refused_control(req: &Request, env: &Env) -> Result<Option<Response>> {
    let authorization = req.headers().get("Authorization").ok().flatten();
    let open = auth::open_from_raw(env_raw(env, auth::OPEN_VAR).as_deref());
    match auth::admit_keeping(
        authorization.as_deref(),
        env_raw(env, TOKEN_VAR).as_deref(),
        open,
    ) {
        Ok(()) => Ok(None),
        Err((401, _)) => refused(req, env),
        Err((status, e)) => error(status, &e).map(Some),
    }
}

fn probes_of(env: &Env) -> std::result::Result<Probes, Result<Response>> {
    Probes::from_env(env).map_err(|e| error(500, &ParamError::new("probes", e)))
}

fn query(req: &Request) -> std::result::Result<Vec<(String, String)>, ParamError> {
    let url = req
        .url()
        .map_err(|e| ParamError::new("query", e.to_string()))?;
    parse_query(url.query().unwrap_or(""))
}

/// `POST /probes/check[?members=label,...]`: each member of `FLEET` (or the ones named) called
/// once, at once, from this worker — as its probe calls it, so what Cloudflare does to one
/// worker fetching another (error 1042) shows here — and read as a deploy check reads it:
/// status, placement against its region's metro, handler time, and its problem if any.
/// Nothing is kept. 200 with `ok: false` when some member has a problem. Closed like a start
/// (each call is a `/test` the deployment pays for).
pub async fn check(req: Request, env: &Env) -> Result<Response> {
    if let Some(r) = refused_control(&req, env)? {
        return Ok(r);
    }
    let probes = match probes_of(env) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let members = match query(&req).and_then(|q| chosen_members(&q, &probes.config.members)) {
        Ok(m) => m,
        Err(e) => return error(400, &e),
    };
    let token = env_raw(env, TOKEN_VAR);
    let checks = futures::future::join_all(
        members
            .iter()
            .map(|m| crate::operations::probe_client::check_member(m, token.as_deref())),
    )
    .await;
    let ok = checks.iter().all(|c| c.problem.is_none());
    respond::json(200, &json!({ "ok": ok, "members": checks }).to_string())
}

/// The members a check names (`members=a,b`), or all of `FLEET`.
fn chosen_members(
    query: &[(String, String)],
    fleet: &[kvbench_core::operations::fleet::Member],
) -> std::result::Result<Vec<kvbench_core::operations::fleet::Member>, ParamError> {
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
                        format!(
                            "{label:?} is not a member of {}",
                            kvbench_core::operations::fleet::FLEET_VAR
                        ),
                    ))
                }
            }
        }
        chosen = Some(list);
    }
    Ok(chosen.unwrap_or_else(|| fleet.to_vec()))
}

/// `GET /probes`: each probe's hint, colo, interval, kept answers, last answer and last error.
pub async fn list(req: Request, env: &Env) -> Result<Response> {
    if let Some(r) = refused(&req, env)? {
        return Ok(r);
    }
    if let Err(e) = query(&req).and_then(|q| match q.first() {
        Some((name, _)) => Err(ParamError::new(name, "GET /probes takes no parameters")),
        None => Ok(()),
    }) {
        return error(400, &e);
    }
    let probes = match probes_of(env) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let mut list = Vec::new();
    // Every probe as the budget counts it, from the statuses read here (the cron's verdict).
    let mut now = Vec::new();
    // The interval of each probe that runs now.
    let mut running: Vec<u32> = Vec::new();
    let points = probes.points();
    let statuses = probes.statuses(&points).await;
    for (point, status) in points.iter().zip(statuses) {
        let mut entry = point.describe();
        now.push(kvbench_core::operations::probe::probe_now(
            status.as_ref().ok().map(|r| &r.status),
            true,
        ));
        match status {
            Ok(read) => {
                running.extend(read.status.running.then_some(read.status.every_s));
                merge(&mut entry, read.shown);
            }
            Err(e) => merge(&mut entry, json!({ "error": e })),
        }
        list.push(entry);
    }
    for (point, status) in probes.outside().await {
        let mut entry = point.describe();
        let outside = match point {
            Point::Hint(_) => format!(
                "started beyond {} (POST /probes/stop stops it)",
                kvbench_core::operations::probes::HINTS_VAR
            ),
            Point::Member(_) => format!(
                "no longer in {} (it stops at its next wake, or POST /probes/stop; listed while it keeps answers)",
                kvbench_core::operations::fleet::FLEET_VAR
            ),
        };
        merge(&mut entry, json!({ "outside": outside }));
        now.push(kvbench_core::operations::probe::probe_now(
            Some(&status.status),
            false,
        ));
        running.extend(status.status.running.then_some(status.status.every_s));
        merge(&mut entry, status.shown);
        list.push(entry);
    }
    let bill = bill(env, &probes, &origin_of(&req)).await;
    // The projection of what runs (each running probe at its own interval), not of the vars.
    let projection = spend::project(
        running.iter().copied(),
        probes.config.budget_usd,
        per_answer_usd(&bill),
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
        "cron": match cron_budget(env, &probes, &now).await {
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
    respond::json(200, &body.to_string())
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
pub async fn control(req: Request, env: &Env, call: &str) -> Result<Response> {
    if let Some(r) = refused_control(&req, env)? {
        return Ok(r);
    }
    let mut probes = match probes_of(env) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let pairs = match query(&req) {
        Ok(p) => p,
        Err(e) => return error(400, &e),
    };
    match probes.config.clone().with_query(&pairs) {
        Ok(cfg) => probes.config = cfg,
        Err(e) => return error(400, &e),
    }
    if call == "stop" && pairs.iter().all(|(name, _)| name != "hints") {
        // A stop without hints stops every probe there is, in PROBE_HINTS and FLEET or not
        // (again, for one already stopped: its answers' expiry alarm is set anew).
        for (point, _) in probes.outside().await {
            match point {
                Point::Hint(hint) => probes.config.hints.push(hint),
                Point::Member(member) => probes.config.members.push(member),
            }
        }
    }
    if call == "start" {
        // What would run after it: the probes it starts, and those already running beside them.
        let bill = bill(env, &probes, &origin_of(&req)).await;
        let now = probes.budget_view().await;
        if let Err(e) = probes
            .config
            .check_arming(&now, Arming::Start, per_answer_usd(&bill))
        {
            return error(400, &e);
        }
    }
    respond_each(&probes, call).await
}

/// The cron's budget check: what would run after its tick ([`Arming::Tick`]), given every
/// probe's state `now`. `Ok(None)`: the tick arms nothing (every configured probe runs or is
/// stopped), so there is nothing to check — and no bill to price, which in the steady state
/// spares each 5-minute tick a render of the last day's answers.
async fn cron_budget(
    env: &Env,
    probes: &Probes,
    now: &[ProbeNow],
) -> std::result::Result<Option<Projection>, ParamError> {
    if !now.iter().any(ProbeNow::tick_arms) {
        return Ok(None);
    }
    // The bill's links are not used here: no request, no origin.
    let bill = bill(env, probes, "").await;
    probes
        .config
        .check_arming(now, Arming::Tick, per_answer_usd(&bill))
        .map(Some)
}

/// What one answer costs, from a bill of the last day's answers (none before any was kept).
fn per_answer_usd(bill: &serde_json::Value) -> Option<f64> {
    let usd = bill.get("monthly_usd")?.as_f64()?;
    let answers = bill.get("answers_per_month")?.as_f64()?;
    (answers > 0.0).then(|| usd / answers)
}

async fn respond_each(probes: &Probes, call: &str) -> Result<Response> {
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
    let mut body = json!({ "call": call, "every_s": probes.config.every_s, "probes": list });
    if let Some(e) = &directory_error {
        // The probes are armed; only a member's listing after it leaves FLEET is at stake.
        merge(&mut body, json!({ "directory_error": e }));
    }
    respond::json(if failed { 502 } else { 200 }, &body.to_string())
}

/// The Cron Trigger: re-arms every probe that is not stopped and has no alarm — unless what
/// would then run is over `PROBE_BUDGET_USD`, in which case it arms nothing (`GET /probes`
/// says why, in `cron`).
pub async fn tick(env: &Env) {
    match Probes::from_env(env) {
        Ok(probes) => {
            let now = probes.budget_view().await;
            if let Err(e) = cron_budget(env, &probes, &now).await {
                worker::console_error!("probes: the cron armed nothing: {}", e.message);
                return;
            }
            let (results, directory_error) = probes.each("tick").await;
            for (point, r) in results {
                if let Err(e) = r {
                    worker::console_error!("probe {}: tick failed: {e}", point.label());
                }
            }
            if let Some(e) = directory_error {
                worker::console_error!("probes: recording the members failed: {e}");
            }
        }
        Err(e) => worker::console_error!("probes: {e}"),
    }
}

fn ndjson(stream: impl futures::Stream<Item = Result<Vec<u8>>> + 'static) -> Result<Response> {
    let mut r = Response::from_stream(stream)?;
    r.headers_mut()
        .set("Content-Type", "application/x-ndjson")?;
    r.headers_mut().set("Cache-Control", "no-store")?;
    Ok(r)
}

fn window(req: &Request) -> std::result::Result<Window, ParamError> {
    Window::parse(&query(req)?, JsClock.now_ms() as i64)
}

/// What both answers routes check first: the token, the window, the probes' namespace.
async fn answers_prelude(
    req: &Request,
    env: &Env,
) -> Result<std::result::Result<(Window, Probes), Response>> {
    if let Some(r) = refused(req, env)? {
        return Ok(Err(r));
    }
    let window = match window(req) {
        Ok(w) => w,
        Err(e) => return error(400, &e).map(Err),
    };
    match probes_of(env) {
        Ok(p) => Ok(Ok((window, p))),
        Err(r) => r.map(Err),
    }
}

/// `GET /probes/answers?since=..&until=..`: every probe's kept answers, NDJSON.
pub async fn probe_answers(req: Request, env: &Env) -> Result<Response> {
    let (window, probes) = match answers_prelude(&req, env).await? {
        Ok(v) => v,
        Err(r) => return Ok(r),
    };
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
pub async fn run_answers(req: Request, env: &Env, id: &str) -> Result<Response> {
    if let Some(r) = refused(&req, env)? {
        return Ok(r);
    }
    let window = match window(&req) {
        Ok(w) => w,
        Err(e) => return error(400, &e),
    };
    let run = match parse_run("run", id) {
        Ok(r) => r,
        Err(e) => return error(400, &e),
    };
    let archive = match Archive::from_env(env) {
        Ok(a) => a,
        Err(e) => return error(500, &e),
    };
    let (kept, failed) = match run_archive::totals(&archive, &run).await {
        Ok(t) => t,
        Err(e) => return error(503, &ParamError::new("run", e)),
    };
    let sources = run_archive::sources(&archive, &run)?;
    if kept == 0 && failed == 0 {
        return error(
            404,
            &ParamError::new("run", format!("no answers are kept under run {run}")),
        );
    }
    ndjson(answers_stream(sources, window))
}

/// The var that makes `GET /report` public (`true`); otherwise it is behind `BENCH_TOKEN` when set.
pub const REPORT_PUBLIC_VAR: &str = "REPORT_PUBLIC";
/// The service binding to the report worker (crates/report-worker).
pub const REPORT_BINDING: &str = "REPORT";
/// A rendered page or bill is reused for this long: a page view re-reads the window's answers at
/// most once a minute per isolate.
const CACHE_MS: f64 = 60_000.0;
/// Windows of `GET /report`: the default, and the bounds.
const DEFAULT_WINDOW: &str = "24h";

thread_local! {
    /// Rendered pages and bills by key, with when they were made.
    static RENDERED: std::cell::RefCell<std::collections::BTreeMap<String, (f64, u16, String)>> =
        Default::default();
}

fn cached(key: &str) -> Option<(u16, String)> {
    let now = JsClock.now_ms();
    RENDERED.with(|c| {
        c.borrow()
            .get(key)
            .filter(|(at, _, _)| now - at < CACHE_MS)
            .map(|(_, status, body)| (*status, body.clone()))
    })
}

fn remember(key: &str, status: u16, body: &str) {
    let now = JsClock.now_ms();
    RENDERED.with(|c| {
        let mut c = c.borrow_mut();
        c.retain(|_, (at, _, _)| now - *at < CACHE_MS);
        if c.len() < 16 {
            c.insert(key.to_string(), (now, status, body.to_string()));
        }
    });
}

/// Streams the probes' kept answers in `window` to the report worker's `path` and returns its
/// status and body, and whether any answer is kept at all (an empty answer is not cached: the
/// first probe answer must show at once); the report's clock starts at the first kept answer.
async fn report_call(
    env: &Env,
    probes: &Probes,
    window: Window,
    path: &str,
    extra_query: &str,
    worker_url: &str,
) -> std::result::Result<(u16, String, bool), String> {
    let service = env
        .service(REPORT_BINDING)
        .map_err(|_| format!("the report worker is not bound ({REPORT_BINDING}): deploy crates/report-worker (npm run deploy does)"))?;
    let mut sources = Vec::new();
    let mut first: Option<i64> = None;
    for (point, status) in probes.every_status().await {
        if let Some(t) = status.ok().and_then(|s| s.status.first_t_ms) {
            first = Some(first.map_or(t, |f| f.min(t)));
        }
        sources.push(Source {
            label: point.label(),
            stub: probes.stub(&point).map_err(|e| e.to_string())?,
            seq_base: 0,
        });
    }
    let origin = first.unwrap_or(window.since_ms).max(window.since_ms);
    let span = (window.until_ms - origin).max(0);
    // The answers flow through a TransformStream: this request writes each page as the report
    // worker reads the other end (a Rust stream handed over as the body would need this isolate
    // to pull it while it waits, which workerd takes for a hang).
    let pipe = worker::web_sys::TransformStream::new().map_err(|e| js_text(&e))?;
    let writer = pipe.writable().get_writer().map_err(|e| js_text(&e))?;
    let url = format!(
        "https://report{path}?origin_ms={origin}&span_ms={span}&since_ms={}&until_ms={}{extra_query}",
        window.since_ms, window.until_ms
    );
    // What the page names as its provenance: this worker's build and settings, as its GET / says.
    let describe = format!(
        r#"{{"provenance":{},"defaults":{}}}"#,
        crate::respond::provenance(
            crate::bindings::env_raw(env, crate::respond::PROVENANCE_VAR).as_deref()
        ),
        crate::respond::defaults_json(crate::bindings::defaults(env)),
    );
    let request = crate::bindings::js_request(
        "POST",
        &url,
        &[
            ("kvbench-worker-url", worker_url),
            ("kvbench-describe", &describe),
        ],
        Some(&pipe.readable().into()),
        false,
    )?;
    let pump = async {
        let mut answers = std::pin::pin!(answers_stream(sources, window));
        while let Some(chunk) = futures::StreamExt::next(&mut answers).await {
            let chunk = chunk.map_err(|e| e.to_string())?;
            let bytes = js_sys::Uint8Array::from(chunk.as_slice());
            JsFuture::from(writer.write_with_chunk(&bytes))
                .await
                .map_err(|e| js_text(&e))?;
        }
        JsFuture::from(writer.close())
            .await
            .map_err(|e| js_text(&e))?;
        Ok::<(), String>(())
    };
    let (pumped, response) = futures::join!(pump, service.fetch_request(request));
    let mut response = response.map_err(|e| e.to_string())?;
    pumped?;
    let status = response.status_code();
    let text = response.text().await.map_err(|e| e.to_string())?;
    Ok((status, text, first.is_some()))
}

fn origin_of(req: &Request) -> String {
    req.url()
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_default()
}

/// What `GET /report` serves: the page, or the report.json it is made of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Html,
    Json,
}

impl Format {
    fn as_str(self) -> &'static str {
        match self {
            Format::Html => "html",
            Format::Json => "json",
        }
    }
}

/// `GET /report`'s `?window=` (`DEFAULT_WINDOW` without it) as the window the report covers in
/// seconds, and `?format=html|json`; each at most once, nothing else.
fn report_query_of(req: &Request, keep_s: u32) -> std::result::Result<(u32, Format), ParamError> {
    let pairs = query(req)?;
    let mut window_text = None;
    let mut format = None;
    for (name, value) in pairs {
        let slot_given = match name.as_str() {
            "window" => window_text.replace(value).is_some(),
            "format" => {
                let f = match value.as_str() {
                    "html" => Format::Html,
                    "json" => Format::Json,
                    other => {
                        return Err(ParamError::new(
                            "format",
                            format!("expected html or json, got \"{other}\""),
                        ))
                    }
                };
                format.replace(f).is_some()
            }
            _ => {
                return Err(ParamError::new(
                    &name,
                    "unknown parameter; expected window or format",
                ))
            }
        };
        if slot_given {
            return Err(ParamError::new(&name, "given more than once"));
        }
    }
    let window_text = window_text.unwrap_or_else(|| DEFAULT_WINDOW.to_string());
    let asked_s = window::parse_seconds("window", &window_text, 60, keep_s)?;
    Ok((
        window::report_window(asked_s, keep_s),
        format.unwrap_or(Format::Html),
    ))
}

/// `GET /report?window=24h`: report.html over the probes' answers of the window (regions as
/// labels, stores side by side), rendered by the report worker, cached for a minute.
pub async fn report(req: Request, env: &Env) -> Result<Response> {
    let public = crate::bindings::env_text(env, REPORT_PUBLIC_VAR).as_deref() == Some("true");
    if !public {
        if let Some(r) = refused(&req, env)? {
            return Ok(r);
        }
    }
    let probes = match probes_of(env) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let (window_s, format) = match report_query_of(&req, probes.config.keep_s) {
        Ok(q) => q,
        Err(e) => return error(400, &e),
    };
    let key = format!("report:{window_s}:{}", format.as_str());
    if let Some((status, body)) = cached(&key) {
        return page(status, body, window_s, format, "cached");
    }
    // Viewers of the same window while it renders wait for that render (single flight): twenty
    // at once cost one render, not twenty. A waiter only watches the render, on a timer of its
    // own: workerd cancels a request that awaits another request's I/O as hung.
    let running = RENDERING.with(|r| r.borrow().get(&key).cloned());
    if let Some(running) = running {
        let deadline = JsClock.now_ms() + WAIT_FOR_RENDER_MS;
        loop {
            if let Some(result) = running.peek() {
                return report_response(result.clone(), window_s, format, "shared");
            }
            let still = RENDERING.with(|r| r.borrow().contains_key(&key));
            if !still || JsClock.now_ms() > deadline {
                break;
            }
            worker::Delay::from(std::time::Duration::from_millis(WAIT_TICK_MS)).await;
        }
        // The render went away unfinished (its viewer left) or took too long: another minute's
        // page, or a render of this request's own.
        if let Some((status, body)) = cached(&key) {
            return page(status, body, window_s, format, "cached");
        }
    }
    let env = env.clone();
    let origin = origin_of(&req);
    let key_done = key.clone();
    let render: Rendering = futures::FutureExt::shared(Box::pin(async move {
        let probes = Probes::from_env(&env).map_err(|e| e.to_string())?;
        let now = JsClock.now_ms() as i64;
        let window = Window {
            since_ms: now - i64::from(window_s) * 1000,
            until_ms: now + 1,
        };
        let (status, body, kept) = report_call(
            &env,
            &probes,
            window,
            "/render",
            &format!("&window_s={window_s}&format={}", format.as_str()),
            &origin,
        )
        .await?;
        if kept {
            remember(&key_done, status, &body);
        }
        Ok((status, body))
    })
        as std::pin::Pin<Box<dyn std::future::Future<Output = RenderResult>>>);
    RENDERING.with(|r| r.borrow_mut().insert(key.clone(), render.clone()));
    // However this request ends (done, or its viewer gone), the render is no longer under way.
    let _under_way = Rendered(key);
    let result = render.await;
    report_response(result, window_s, format, "made")
}

/// How long a viewer waits for another's render, and how often it looks.
const WAIT_FOR_RENDER_MS: f64 = 150_000.0;
const WAIT_TICK_MS: u64 = 25;

/// Removes its key from [`RENDERING`] when dropped.
struct Rendered(String);

impl Drop for Rendered {
    fn drop(&mut self) {
        RENDERING.with(|r| r.borrow_mut().remove(&self.0));
    }
}

fn report_response(
    result: RenderResult,
    window_s: u32,
    format: Format,
    how: &str,
) -> Result<Response> {
    match result {
        // Over the report's budget (too many answers in the window): the parameter to change.
        Ok((413, body)) => error(413, &ParamError::new("window", body)),
        Ok((status, body)) => page(status, body, window_s, format, how),
        Err(e) => error(503, &ParamError::new("report", e)),
    }
}

type RenderResult = std::result::Result<(u16, String), String>;
type Rendering =
    futures::future::Shared<std::pin::Pin<Box<dyn std::future::Future<Output = RenderResult>>>>;

thread_local! {
    /// Renders under way, by key: a viewer who arrives meanwhile awaits the same one.
    static RENDERING: std::cell::RefCell<std::collections::BTreeMap<String, Rendering>> =
        Default::default();
}

/// The page, saying which window it covers (`kvbench-window-s`: the preset the one asked for
/// was widened to) and where it came from (`kvbench-render`: `made` for this request, `shared`
/// with a viewer whose render was under way, `cached` from the last minute's).
fn page(status: u16, body: String, window_s: u32, format: Format, how: &str) -> Result<Response> {
    let mut r = Response::ok(body)?.with_status(status);
    let headers = r.headers_mut();
    let content_type = match format {
        Format::Html => "text/html; charset=utf-8",
        Format::Json => "application/json",
    };
    headers.set("Content-Type", content_type)?;
    headers.set("Cache-Control", "no-store")?;
    headers.set("kvbench-window-s", &window_s.to_string())?;
    headers.set("kvbench-render", how)?;
    Ok(r)
}

/// The projected monthly bill of these probes at this interval, from the last day's answers
/// (the report worker prices them with kvbench's cost model), cached for a minute.
async fn bill(env: &Env, probes: &Probes, worker_url: &str) -> serde_json::Value {
    let key = format!(
        "bill:{}:{}:{}",
        probes.config.vantage_points(),
        probes.config.every_s,
        probes.config.keep_s
    );
    let (status, body) = match cached(&key) {
        Some(hit) => hit,
        None => {
            let now = JsClock.now_ms() as i64;
            let window = Window {
                since_ms: now - 86_400_000,
                until_ms: now + 1,
            };
            let extra = format!(
                "&probes={}&every_s={}&keep_s={}",
                probes.config.vantage_points(),
                probes.config.every_s,
                probes.config.keep_s
            );
            match report_call(env, probes, window, "/bill", &extra, worker_url).await {
                Ok((status, body, kept)) => {
                    if kept {
                        remember(&key, status, &body);
                    }
                    (status, body)
                }
                Err(e) => return json!({ "monthly_usd": null, "why": e }),
            }
        }
    };
    match (status, serde_json::from_str::<serde_json::Value>(&body)) {
        (200, Ok(v)) => v,
        _ => {
            json!({ "monthly_usd": null, "why": format!("the report worker answered {status}: {body}") })
        }
    }
}
