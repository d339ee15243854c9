//! The report worker, a pure function of the kept answers the benchmark worker streams to it:
//! `POST /render` answers the same report.html `kvbench` writes, `POST /bill` the probes'
//! projected month. A worker of its own so `/test`'s bundle carries no renderer; reached only
//! through the `REPORT` service binding.

// A panic here ends the instance and every request in flight in it: none outside tests (the
// lint of tests/tests/panics.rs walks this crate too).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

use std::time::Duration;

use futures::StreamExt;
use kvbench_report::cost::Deployment;
use kvbench_report::kept::timeline_interval;
use kvbench_report::kept::{Aggregate, Source};
use kvbench_report::prices::PriceTable;
use kvbench_report::report::Report;
use kvbench_wire::report::{
    BillQuery, Format, RenderQuery, Span, DESCRIBE_HEADER, WORKER_URL_HEADER,
};
use kvbench_wire::stream::{Ending, Item, ReadError, Reader};
use serde_json::json;
use worker::{event, Context, Env, Request, Response, Result, RouteContext, Router};

#[wasm_bindgen::prelude::wasm_bindgen(module = "/src/text_metrics.js")]
extern "C" {
    /// plotters' text measurement, which wants a browser DOM (see text_metrics.js).
    fn install_text_metrics();
}

/// Longest accepted line of the stream.
const MAX_LINE: usize = 1 << 20;

/// Most answers one report is made of: more is a 413 as soon as the count passes (a fleet of 42
/// points over 24 h at 300 s is 12,096).
pub const MAX_ANSWERS: u64 = 100_000;

/// Why a report could not be made: the status to answer and the message.
struct Refusal(u16, String);

impl From<String> for Refusal {
    fn from(message: String) -> Refusal {
        Refusal(400, message)
    }
}

impl From<ReadError> for Refusal {
    fn from(e: ReadError) -> Refusal {
        Refusal(400, format!("the kept answers: {e}"))
    }
}

impl From<&str> for Refusal {
    fn from(message: &str) -> Refusal {
        Refusal(400, message.into())
    }
}

/// Bytes of the wasm memory, which only grows: after a render, the most it has needed.
fn wasm_memory_bytes() -> f64 {
    use wasm_bindgen::JsCast as _;
    let memory: js_sys::WebAssembly::Memory = wasm_bindgen::memory().unchecked_into();
    memory
        .buffer()
        .unchecked_into::<js_sys::ArrayBuffer>()
        .byte_length() as f64
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    Router::new()
        .post_async(RenderQuery::PATH, render)
        .post_async(BillQuery::PATH, bill)
        .run(req, env)
        .await
}

/// The request's query, a value by name (what `kvbench_wire::report`'s readers take).
fn query(req: &Request) -> impl Fn(&str) -> Option<String> {
    let pairs: Vec<(String, String)> = req
        .url()
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default();
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

fn bad(message: String) -> Result<Response> {
    Response::error(message, 400)
}

/// Reads the body's kept answers into a report; the stream must end with its `end` line.
async fn aggregate(
    req: &mut Request,
    span: Span,
    source: &Source,
) -> std::result::Result<Read, Refusal> {
    let interval = timeline_interval(Duration::from_millis(span.span_ms.max(0) as u64));
    let mut agg = Aggregate::new(span.origin_ms, interval);
    let mut stream = req.stream().map_err(|e| e.to_string())?;
    let mut reader = Reader::new(MAX_LINE);
    let mut take = |item: Item<'_>| -> std::result::Result<(), Refusal> {
        if agg.lines() >= MAX_ANSWERS {
            return Err(Refusal(
                413,
                format!(
                    "this window holds more than {MAX_ANSWERS} kept answers, more than one report is made of: ask for a shorter window"
                ),
            ));
        }
        match item {
            Item::Kept(kept) => agg.push(&kept),
            Item::Malformed { .. } => agg.push_malformed(),
            Item::Stopped(e) => {
                return Err(format!("the kept answers could not all be read: {e}").into())
            }
        }
        Ok(())
    };
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        reader.push(&chunk, &mut take)?;
    }
    let bytes = reader.bytes();
    match reader.finish() {
        Ending::Short { .. } => {
            return Err("the kept answers ended without their end line: cut short".into())
        }
        Ending::Complete { keep_failed, .. } => agg.set_keep_failed(keep_failed),
    }
    Ok(Read {
        lines: agg.lines(),
        bytes,
        report: agg.finish(source).map_err(|e| e.to_string())?,
    })
}

/// What a body of kept answers made.
struct Read {
    report: Option<Report>,
    /// Its lines, and what they weighed.
    lines: u64,
    bytes: u64,
}

fn source(req: &Request) -> Source {
    let url = req
        .headers()
        .get(WORKER_URL_HEADER)
        .ok()
        .flatten()
        .unwrap_or_else(|| "(the worker)".into());
    Source {
        read_from: format!("{url}/probes/answers"),
        url,
        engine: "probes".into(),
    }
}

/// The page's provenance: the worker's `kvbench-describe`, the window and links to its raw data.
fn provenance(req: &Request, query: &RenderQuery) -> kvbench_report::report::Provenance {
    let header = |name: &str| req.headers().get(name).ok().flatten();
    let worker_url = header(WORKER_URL_HEADER).unwrap_or_default();
    let describe = header(DESCRIBE_HEADER).and_then(|d| serde_json::from_str(&d).ok());
    let now = js_sys::Date::now() as i64;
    kvbench_report::kept::page_provenance(
        &worker_url,
        describe.as_ref(),
        (
            query.span.since_ms.unwrap_or(0),
            query.span.until_ms.unwrap_or(now),
        ),
        now,
        query.window_s.map(u64::from),
    )
}

/// `POST /render?origin_ms=..&span_ms=..&since_ms=..&until_ms=..&window_s=..&format=html|json`
/// ([`RenderQuery`]): report.html (or report.json) of the answers in the body.
async fn render(mut req: Request, _ctx: RouteContext<()>) -> Result<Response> {
    let source = source(&req);
    let query = match RenderQuery::read(query(&req)) {
        Ok(q) => q,
        Err(e) => return bad(e),
    };
    let json = query.format == Format::Json;
    let (report, answers) = match aggregate(&mut req, query.span, &source).await {
        Ok(Read {
            report: Some(r),
            lines,
            ..
        }) => (r, lines),
        Ok(Read { report: None, .. }) if json => {
            return Response::from_json(&json!({
                "report": null,
                "why": "no probe answer is kept in this window yet",
            }))
        }
        Ok(Read { report: None, .. }) => return empty_page(),
        Err(Refusal(status, e)) => return Response::error(e, status),
    };
    let prices = match PriceTable::default_table() {
        Ok(p) => p,
        Err(e) => return Response::error(format!("the embedded price table: {e}"), 500),
    };
    let mut report = kvbench_report::derive(report, &prices, None, &Deployment::default());
    report.report.provenance = Some(provenance(&req, &query));
    if json {
        return match serde_json::to_string(&report) {
            Ok(text) => {
                let mut r = Response::ok(text)?;
                r.headers_mut().set("Content-Type", "application/json")?;
                Ok(r)
            }
            Err(e) => Response::error(format!("serializing the report failed: {e}"), 500),
        };
    }
    install_text_metrics();
    match kvbench_report::print::page(&report) {
        Ok(html) => {
            let mut r = Response::ok(html)?;
            let headers = r.headers_mut();
            headers.set("Content-Type", "text/html; charset=utf-8")?;
            // What the render took, for the benchmark worker's log and the tests.
            headers.set("kvbench-render-answers", &answers.to_string())?;
            headers.set(
                "kvbench-render-wasm-bytes",
                &wasm_memory_bytes().to_string(),
            )?;
            Ok(r)
        }
        Err(e) => Response::error(format!("rendering the report failed: {e}"), 500),
    }
}

fn empty_page() -> Result<Response> {
    let mut r = Response::ok(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>kvbench report</title></head>\
         <body><h1>kvbench report</h1><p>No probe answers are kept in this window yet: start the probes \
         (POST /probes/start) or wait for the cron.</p></body></html>",
    )?;
    r.headers_mut()
        .set("Content-Type", "text/html; charset=utf-8")?;
    Ok(r)
}

/// `POST /bill?origin_ms=..&span_ms=..&probes=N&every_s=S&keep_s=K` ([`BillQuery`]): the month
/// of N probes waking every S s and keeping K s, from the answers in the body.
async fn bill(mut req: Request, _ctx: RouteContext<()>) -> Result<Response> {
    let query = match BillQuery::read(query(&req)) {
        Ok(q) => q,
        Err(e) => return bad(e),
    };
    // Seconds an answer stays at rest: `keep_s` plus the grace before its deletion.
    let stored_s = f64::from(query.keep_s) + f64::from(kvbench_spec::keep::EXPIRY_GRACE_S);
    let source = source(&req);
    let (report, lines, bytes) = match aggregate(&mut req, query.span, &source).await {
        Ok(Read {
            report: Some(r),
            lines,
            bytes,
        }) => (r, lines, bytes),
        Ok(Read { report: None, .. }) => {
            return Response::from_json(&json!({
                "monthly_usd": null,
                "why": "no probe answer is kept yet: the bill is projected from measured answers",
            }))
        }
        Err(Refusal(status, e)) => return Response::error(e, status),
    };
    let fleet = kvbench_report::bill::ProbeUsage {
        points: f64::from(query.probes),
        every_s: f64::from(query.every_s),
        stored_s,
        line_bytes: bytes as f64 / lines.max(1) as f64,
    };
    let prices = match PriceTable::default_table() {
        Ok(p) => p,
        Err(e) => return Response::error(format!("the embedded price table: {e}"), 500),
    };
    Response::from_json(&kvbench_report::bill::bill(
        &report,
        &prices,
        fleet,
        described_keys(&req),
    ))
}

/// The measuring worker's `keys` setting, from its description (`kvbench-describe`).
fn described_keys(req: &Request) -> Option<u64> {
    let describe: serde_json::Value =
        serde_json::from_str(&req.headers().get(DESCRIBE_HEADER).ok()??).ok()?;
    describe.get("defaults")?.get("keys")?.as_u64()
}
