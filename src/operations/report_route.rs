//! `GET /report` (report.html or report.json over a window of the probes' answers, rendered by
//! the report worker, cached a minute, one render shared by concurrent viewers) and the bill
//! (`POST /bill`: the probes' projected month), both streamed from one sweep of the probes.

use kvbench_core::error::ParamError;
use kvbench_core::operations::window::{self, Window};
use kvbench_core::Clock;
use serde_json::json;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{Env, Request, Response};

use kvbench_wire::report::{
    BillQuery, Format, RenderQuery, Span, DESCRIBE_HEADER, WORKER_URL_HEADER,
};

use crate::bindings::{js_text, JsClock};
use crate::operations::kept_table::answers_stream;
use crate::operations::probe_client::{Probes, Sweep};
use crate::operations::route::{admit, origin_of, probes_of, query, Answer, RouteError};

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

/// A call of the report worker, its query made once the answers' span is known.
#[derive(Clone, Copy)]
enum ReportCall {
    Render {
        window_s: u32,
        format: Format,
    },
    Bill {
        probes: u32,
        every_s: u32,
        keep_s: u32,
    },
}

impl ReportCall {
    fn url(self, span: Span) -> String {
        match self {
            ReportCall::Render { window_s, format } => {
                let query = RenderQuery {
                    span,
                    window_s: Some(window_s),
                    format,
                };
                format!("https://report{}?{}", RenderQuery::PATH, query.query())
            }
            ReportCall::Bill {
                probes,
                every_s,
                keep_s,
            } => {
                let query = BillQuery {
                    span,
                    probes,
                    every_s,
                    keep_s,
                };
                format!("https://report{}?{}", BillQuery::PATH, query.query())
            }
        }
    }
}

/// Streams the probes' answers in `window` to the report worker's `call`: its status and body,
/// and whether any answer is kept (an empty report is not cached).
async fn report_call(
    env: &Env,
    probes: &Probes,
    sweep: &Sweep,
    window: Window,
    call: ReportCall,
    worker_url: &str,
) -> Result<(u16, String, bool), String> {
    let service = env
        .service(REPORT_BINDING)
        .map_err(|_| format!("the report worker is not bound ({REPORT_BINDING}): deploy crates/report-worker (npm run deploy does)"))?;
    let sources = probes.sources_of(sweep).map_err(|e| e.to_string())?;
    let first = sweep.first_t_ms();
    let origin_ms = first.unwrap_or(window.since_ms).max(window.since_ms);
    let span = Span {
        origin_ms,
        span_ms: (window.until_ms - origin_ms).max(0),
        since_ms: Some(window.since_ms),
        until_ms: Some(window.until_ms),
    };
    // Through a TransformStream: a Rust stream as the body would need this isolate to pull it
    // while it waits, which workerd takes for a hang.
    let pipe = worker::web_sys::TransformStream::new().map_err(|e| js_text(&e))?;
    let writer = pipe.writable().get_writer().map_err(|e| js_text(&e))?;
    let url = call.url(span);
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
            (WORKER_URL_HEADER, worker_url),
            (DESCRIBE_HEADER, &describe),
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

/// `GET /report`'s `?window=` (`DEFAULT_WINDOW` without it) as the window the report covers in
/// seconds, and `?format=html|json`; each at most once, nothing else.
fn report_query_of(pairs: Vec<(String, String)>, keep_s: u32) -> Result<(u32, Format), ParamError> {
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
pub async fn report(req: Request, env: &Env) -> Answer {
    let public = crate::bindings::env_text(env, REPORT_PUBLIC_VAR).as_deref() == Some("true");
    if !public {
        admit(&req, env)?;
    }
    let probes = probes_of(env)?;
    let (window_s, format) =
        report_query_of(query(&req)?, probes.config.keep_s).map_err(RouteError::bad)?;
    let key = format!("report:{window_s}:{}", format.as_str());
    if let Some((status, body)) = cached(&key) {
        return page(status, body, window_s, format, "cached");
    }
    // Viewers of the same window while it renders wait for that render (single flight): twenty
    // at once cost one render, not twenty.
    if let Some(shared) = wait_for_render(&key).await {
        return report_response(shared, window_s, format, "shared");
    }
    // The render went away unfinished (its viewer left) or took too long: another minute's
    // page, or a render of this request's own.
    if let Some((status, body)) = cached(&key) {
        return page(status, body, window_s, format, "cached");
    }
    let render = start_render(env.clone(), origin_of(&req), key.clone(), window_s, format);
    RENDERING.with(|r| r.borrow_mut().insert(key.clone(), render.clone()));
    // However this request ends (done, or its viewer gone), the render is no longer under way.
    let _under_way = Rendered(key);
    let result = render.await;
    report_response(result, window_s, format, "made")
}

/// The result of the render of `key` under way, if it ends in time. A waiter watches on a timer
/// of its own: workerd cancels a request awaiting another request's I/O as hung.
async fn wait_for_render(key: &str) -> Option<RenderResult> {
    let running = RENDERING.with(|r| r.borrow().get(key).cloned())?;
    let deadline = JsClock.now_ms() + WAIT_FOR_RENDER_MS;
    loop {
        if let Some(result) = running.peek() {
            return Some(result.clone());
        }
        let still = RENDERING.with(|r| r.borrow().contains_key(key));
        if !still || JsClock.now_ms() > deadline {
            return None;
        }
        worker::Delay::from(std::time::Duration::from_millis(WAIT_TICK_MS)).await;
    }
}

/// The render of the last `window_s` seconds, as a future other viewers can share; a page
/// with any answer in it is remembered under `key` for a minute.
fn start_render(env: Env, origin: String, key: String, window_s: u32, format: Format) -> Rendering {
    futures::FutureExt::shared(Box::pin(async move {
        let probes = Probes::from_env(&env).map_err(|e| e.to_string())?;
        let now = JsClock.now_ms() as i64;
        let window = Window {
            since_ms: now - i64::from(window_s) * 1000,
            until_ms: now + 1,
        };
        let sweep = probes.sweep().await;
        let (status, body, kept) = report_call(
            &env,
            &probes,
            &sweep,
            window,
            ReportCall::Render { window_s, format },
            &origin,
        )
        .await?;
        if kept {
            remember(&key, status, &body);
        }
        Ok((status, body))
    })
        as std::pin::Pin<Box<dyn std::future::Future<Output = RenderResult>>>)
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

fn report_response(result: RenderResult, window_s: u32, format: Format, how: &str) -> Answer {
    match result {
        // Over the report's budget (too many answers in the window): the parameter to change.
        Ok((413, body)) => Err(RouteError::Param(413, ParamError::new("window", body))),
        Ok((status, body)) => page(status, body, window_s, format, how),
        Err(e) => Err(RouteError::Param(503, ParamError::new("report", e))),
    }
}

type RenderResult = Result<(u16, String), String>;
type Rendering =
    futures::future::Shared<std::pin::Pin<Box<dyn std::future::Future<Output = RenderResult>>>>;

thread_local! {
    /// Renders under way, by key: a viewer who arrives meanwhile awaits the same one.
    static RENDERING: std::cell::RefCell<std::collections::BTreeMap<String, Rendering>> =
        Default::default();
}

/// The page, with `kvbench-window-s` (the widened window) and `kvbench-render` (`made`,
/// `shared` or `cached`).
fn page(status: u16, body: String, window_s: u32, format: Format, how: &str) -> Answer {
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
pub async fn bill(
    env: &Env,
    probes: &Probes,
    sweep: &Sweep,
    worker_url: &str,
) -> serde_json::Value {
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
            let call = ReportCall::Bill {
                probes: u32::try_from(probes.config.vantage_points()).unwrap_or(u32::MAX),
                every_s: probes.config.every_s,
                keep_s: probes.config.keep_s,
            };
            match report_call(env, probes, sweep, window, call, worker_url).await {
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
