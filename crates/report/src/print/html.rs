//! `report.html`: one self-contained page (inline CSS and SVG; no script, font or image from the
//! network) with the runs, the latency table, the comparative charts, errors, per label and per
//! colo table-charts and the cost projection. Every number comes from the derived [`Summary`]
//! (the same one `report.json` carries) through the tables' views ([`super::view`]), and each
//! figure cell carries its exact value in `data-value`, so a test can check the page against the
//! file. The markup is `maud` templates: every value written into them is escaped by
//! construction; only the page's frame and CSS (no data in them), the charts' SVG and the
//! History section (escaped by [`super::history`]) go in as they are.

use maud::{html, Markup, PreEscaped, Render};

use crate::comparison::{Comparison, Row};
use crate::derived::Derived;
use crate::print::chart::{color_hex, Chart};
use crate::print::view::cell::{percent, quantile_cell, FEW_NOTE};
use crate::print::view::{self, cost::Cost, errors::Errors, grid, runs::Run, totals::Totals};
use crate::report::{Provenance, Report};
use crate::summary::Summary;

const CSS: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1240px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
p.lead{color:#555;margin:0 0 16px}
table{border-collapse:collapse;background:#fff;margin:8px 0;font-variant-numeric:tabular-nums;display:block;overflow-x:auto;max-width:100%}
th,td{border:1px solid #ddd;padding:4px 6px;text-align:right;white-space:nowrap}
th:first-child,td:first-child,th.text{text-align:left}
thead th{background:#f0f0f0}
td.text{text-align:left;white-space:normal}
td.plan{min-width:14em}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:6px;vertical-align:-1px}
.legend span{margin-right:16px}
figure{margin:16px 0;background:#fff;border:1px solid #ddd;padding:8px}
figure svg{width:100%;height:auto;display:block}
figcaption{color:#555;margin-bottom:6px}
.bar{display:block;height:6px;border-radius:3px;margin-top:3px}
td.best{background:#eef8ee}
td.where{text-align:left}
small.sub{color:#666;display:block}
small.out{color:#b45309}
.warn{background:#fff4e5;border:1px solid #f0c36d;padding:8px 12px;margin:8px 0}
.note{color:#666;font-size:13px}
tr.across td{color:#555;font-size:13px;text-align:left;border-top:none;padding-top:0}
.unstable{color:#b45309;font-weight:600}
tr.changed td{background:#fff4e5}td.mark,td.moved{color:#b45309;font-weight:600}
ul.changes{margin:4px 0 8px;padding-left:20px}
"#;

/// `&`, `<`, `>`, `"` and `'` escaped for text and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A string from the data in a template, escaped by [`esc`]: maud escapes every value already,
/// this also writes `'` as `&#39;`, as the page always has.
pub(super) struct Esc<'a>(pub(super) &'a str);

impl Render for Esc<'_> {
    fn render_to(&self, buffer: &mut String) {
        buffer.push_str(&esc(self.0));
    }
}

/// A figure of `count` values: two decimals shown (`few` when the count cannot support it), the
/// exact value in `data-value`.
fn ms_td(row: &str, col: &str, count: u64, ms: Option<f64>) -> Markup {
    html! {
        td data-row=(Esc(row)) data-col=(col) data-value=(exact(ms)) { (quantile_cell(count, ms)) }
    }
}

fn count_td(row: &str, col: &str, n: u64) -> Markup {
    html! { td data-row=(Esc(row)) data-col=(col) data-value=(n) { (n) } }
}

fn swatch(store: &str, report: &Report) -> Markup {
    html! {
        span class="swatch" style={ "background:" (color_hex(store, report)) } {}
        (Esc(store))
    }
}

/// The page's head: title, where it ran, the answer, what went wrong, the runs and the totals.
fn header(report: &Report, summary: &Summary, totals: &Totals) -> Markup {
    let labels: Vec<&str> = report.labels.keys().map(String::as_str).collect();
    html! {
        h1 { "kvbench report" }
        p class="lead" {
            (report.runs.len()) " run(s) · labels: " (Esc(&labels.join(", ")))
            " · written by " (Esc(&report.tool))
        }
        @if let Some(p) = &report.provenance {
            p class="lead" id="where" { (Esc(&super::where_line(report, p))) }
        }
        @if report.runs.iter().any(|r| r.interrupted) {
            p class="warn" { "A run was interrupted: this report is partial." }
        }
        @if let Some(c) = &summary.comparison { (comparison(report, c)) }
        @if !report.freshness.is_empty() { (freshness(&crate::freshness::rows(&report.freshness))) }
        @if !summary.trouble.is_empty() { (trouble(&summary.trouble)) }
        (runs_table(&view::runs::of(report)))
        (totals_table(totals))
        @if let Some(p) = &report.provenance { (provenance(p)) }
    }
}

/// The runs, each with what it imported.
fn runs_table(runs: &[Run]) -> Markup {
    html! {
        table {
            thead { tr {
                th { "label" } th class="text" { "engine" } th class="text" { "URL" }
                th { "started" } th { "requested req/s" } th { "planned s" }
                th { "sent for s" } th { "pacer lag p99 ms" }
            } }
            tbody { @for r in runs {
                tr {
                    td { (Esc(&r.run.label)) } td { (Esc(&r.run.engine)) }
                    td class="text" { (Esc(&r.run.url)) } td { (Esc(&r.run.started_at)) }
                    td { (r.rate) } td { (r.planned_s) } td { (r.sent_s) } td { (r.lag_p99) }
                }
                @if let Some(i) = &r.import {
                    tr { td {} td colspan="7" class="text note" {
                        "imported " (i.info.lines) " line(s) from " (Esc(&i.files)) ": "
                        (i.info.malformed_lines) " malformed line(s)" (Esc(&i.refused)) ", "
                        (i.info.incomplete_requests) " incomplete request(s)"
                        @if i.info.truncated { ", file cut short" }
                        @if let Some(n) = i.info.keep_failed { ", " (n) " answer(s) measured but not kept" }
                    } }
                }
            } }
        }
    }
}

/// All runs' counts, then what the end-to-end latency includes.
fn totals_table(t: &Totals) -> Markup {
    html! {
        table {
            thead { tr {
                th { "requests" } th { "scheduled" } th { "sent" } th { "answered" } th { "failed" }
                th title="no byte of an answer reached kvbench" { "client failed" }
                th title="the worker answered, not with a /test answer" { "worker failed" }
                th { "not sent" }
                th title="sent again on a new connection after the idle one it was sent on failed before any answer byte" { "retried" }
                th title="answers of a new instance: in the cold rows only" { "cold" }
                th title="answers the worker measured but could not keep: in no other count" { "not kept" }
                th { "achieved req/s" } th { "send window s" }
            } }
            tbody { tr {
                td { "all runs" }
                (count_td("total", "scheduled", t.scheduled)) (count_td("total", "sent", t.sent))
                (count_td("total", "answered", t.answered)) (count_td("total", "failed", t.failed))
                (count_td("total", "client_failed", t.client_failed))
                (count_td("total", "worker_failed", t.worker_failed))
                (count_td("total", "not_sent", t.not_sent)) (count_td("total", "retried", t.retried))
                (count_td("total", "cold", t.cold))
                @match t.keep_failed {
                    Some(n) => (count_td("total", "keep_failed", n)),
                    None => td title="this source does not count them" { "-" },
                }
                td data-row="total" data-col="achieved_rate" data-value=(t.achieved_rate) { (t.achieved_rate_text) }
                td { (t.send_window_s) }
            } }
        }
        p class="note" {
            "Store latencies are timed by the worker around each store call. End-to-end latency is "
            (Esc(&t.latency_origin)) "."
        }
    }
}

/// Whether `href` may be a link: relative (no scheme: `report.json`, `../runs/a.csv`, `//host/x`)
/// or `http:`/`https:`. Anything else — `javascript:`, `data:`, `vbscript:` — could run in the
/// page, and so could a scheme a browser reads through white space or control characters
/// (`java\tscript:`), so an href holding any of those is refused outright.
pub fn safe_href(href: &str) -> bool {
    if href.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    // A scheme is what comes before the first `:`, if no `/`, `?` or `#` comes first.
    match href.split_once(':') {
        Some((scheme, _)) if !scheme.contains(['/', '?', '#']) => {
            scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")
        }
        _ => true,
    }
}

/// A link to `href` labelled `text`, or, when `href` is not [`safe_href`], both as text.
fn link(href: &str, text: &str) -> Markup {
    html! {
        @if safe_href(href) { a href=(Esc(href)) { (Esc(text)) } }
        @else { (Esc(text)) " (" (Esc(href)) ")" }
    }
}

/// How the figures were made: the builds, the settings and the raw data to download.
fn provenance(p: &Provenance) -> Markup {
    let pairs = |m: &std::collections::BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(" · ")
    };
    let mut rows = vec![
        ("stack", p.stack.clone()),
        ("updated", p.updated_at.clone()),
    ];
    if let Some((from, to)) = &p.window {
        rows.push(("window", format!("{from} to {to}")));
    }
    if !p.build.is_empty() {
        rows.push(("build", pairs(&p.build)));
    }
    if !p.settings.is_empty() {
        rows.push(("settings", pairs(&p.settings)));
    }
    if let Some(e) = &p.worker_error {
        rows.push(("not known", e.clone()));
    }
    html! {
        h2 { "How this was measured" }
        table id="provenance" { tbody {
            @for (what, value) in &rows {
                tr { th class="text" { (Esc(what)) } td class="text" { (Esc(value)) } }
            }
            @if !p.raw.is_empty() {
                tr { th class="text" { "raw data" } td class="text" {
                    @for (i, r) in p.raw.iter().enumerate() {
                        @if i > 0 { " · " }
                        (link(&r.href, &r.what))
                    }
                } }
            }
        } }
    }
}

/// Fresh or fast, right under the answer ([`crate::freshness`]).
fn freshness(rows: &[crate::freshness::Row]) -> Markup {
    use crate::freshness::{cells, COLUMNS, NOTE, TITLE};
    html! {
        h2 { (TITLE) }
        p class="note" { (NOTE) }
        table id="freshness" {
            thead { tr { @for (i, c) in COLUMNS.iter().enumerate() {
                th class=[(i < 3).then_some("text")] { (c) }
            } } }
            tbody { @for row in rows { tr { @for (i, c) in cells(row).iter().enumerate() {
                td class=[(i < 3).then_some("text")] data-col=(COLUMNS[i]) { (Esc(c)) }
            } } } }
        }
    }
}

/// The answer first ([`crate::comparison`]): each store ranked by its read p50, every
/// percentile with its interval, or why its sample cannot support one, and under each row how
/// steady the store was across the run.
fn comparison(report: &Report, c: &Comparison) -> Markup {
    html! {
        h2 { "The answer" }
        p class="note" {
            "Successful reads of warm answers (an instance that had answered before), ms: each \
             percentile with its " (format!("{:.0}", c.level * 100.0)) "% interval — from order \
             statistics (no assumption about the distribution), widened by how much the share of \
             reads below it moved between spans of the run's timeline windows (answers close in time \
             move together, so a second run would differ by more than one run's answers suggest) — or \
             why the sample is too small for one. " b { "†" } ": the within-run interval alone (too few \
             windows to measure the spread). Under each row: each percentile's range across the \
             spans, and " span class="unstable" { "unstable" } " when the spans disagree beyond \
             their own intervals. Ranked by p50; " b { "tie" } ": the sample does not tell its p50 from \
             the row above's — where the two are paired (the same answers timed both), by the \
             interval of the ratio of their p50s span by span, which cancels what moved both; \
             else by whether their intervals overlap. Cost: the store's cheapest \
             current plan at the rate of the cost table below."
        }
        p class="note" id="cold" {
            b { (c.cold_answers) " cold answer(s) left out" } " (the " i { "cold" }
            " rows of the latency table); cold = " (Esc(&c.cold_means.join("; "))) "."
        }
        table id="answer" {
            thead { tr {
                th { "rank" } th class="text" { "store" } th { "reads" } th { "p50" } th { "p90" }
                th { "p99" } th { "read errors" } th { "$/month" }
            } }
            tbody { @for (i, row) in c.rows.iter().enumerate() {
                @if let Some(v) = row.vantage.as_ref().filter(|_| {
                    i == 0 || c.rows.get(i - 1).map(|r| &r.vantage) != Some(&row.vantage)
                }) {
                    tr { td colspan="8" class="text" { b { (Esc(v)) } } }
                }
                (comparison_row(report, row))
            } }
        }
    }
}

/// One row of the answer, and the row under it: its stability (or why its intervals are the
/// within-run ones alone) and its flag.
fn comparison_row(report: &Report, row: &Row) -> Markup {
    let key = match &row.vantage {
        Some(v) => format!("answer {v} {}", row.store),
        None => format!("answer {}", row.store),
    };
    let cell = |col: &str, c: &crate::comparison::Cell| {
        html! { td data-row=(Esc(&key)) data-col=(col) data-value=(exact(c.ms)) { (Esc(&c.text())) } }
    };
    html! {
        tr {
            td { (row.rank) @if row.tie { " " b { "tie" } } }
            td class="text" { (swatch(&row.store, report)) }
            (count_td(&key, "reads", row.reads))
            (cell("p50_ms", &row.p50)) (cell("p90_ms", &row.p90)) (cell("p99_ms", &row.p99))
            @match row.error_rate {
                Some(r) => td data-row=(Esc(&key)) data-col="error_rate" data-value=(r) { (percent(r)) },
                None => td { "-" },
            }
            @match (row.monthly_usd, &row.plan) {
                (Some(usd), Some(plan)) => td title=(Esc(plan)) data-row=(Esc(&key)) data-col="monthly_usd" data-value=(usd) {
                    (format!("{usd:.2}"))
                },
                _ => td { "-" },
            }
        }
        tr class="across" {
            td {}
            td colspan="7" data-row=(Esc(&key)) data-col="stability" data-value="" {
                (Esc(&row.note()))
                @if let Some(f) = row.flag() { " · " span class="unstable" { (Esc(&f)) } }
            }
        }
        @if let Some(v) = &row.versus {
            tr class="across" {
                td {}
                td colspan="7" data-row=(Esc(&key)) data-col="versus" data-value="" { (Esc(&v.text(&row.store))) }
            }
        }
    }
}

/// What went wrong, explained ([`crate::trouble`]); every count is in the errors table too.
fn trouble(trouble: &[crate::trouble::Trouble]) -> Markup {
    html! {
        h2 { "What went wrong" }
        p class="note" {
            "Failures and store errors over " (percent(crate::trouble::THRESHOLD)) " of their \
             requests or operations, the most common first, with their likely cause; every count is \
             in the errors table below."
        }
        ul class="trouble" { @for t in trouble {
            li {
                b { (Esc(&t.source)) " " (Esc(&t.kind)) } ": " (t.count) " of " (t.of) " ("
                (percent(t.share)) "): " (Esc(&t.cause))
            }
        } }
    }
}

fn latency_table(report: &Report, summary: &Summary) -> Markup {
    html! {
        h2 { "Latency (ms)" }
        table id="latency" {
            thead { tr {
                th { "operation" } th { "count" } th { "p50" } th { "p90" } th { "p95" } th { "p99" }
                th { "max" } th { "mean" } th { "errors" }
            } }
            tbody { @for row in &summary.latency {
                @let q = &row.quantiles;
                tr {
                    td { @match &row.store {
                        Some(store) => {
                            (swatch(store, report))
                            (Esc(row.name.get(store.len()..).unwrap_or(&row.name)))
                        },
                        None => (Esc(&row.name)),
                    } }
                    (count_td(&row.name, "count", q.count))
                    (ms_td(&row.name, "p50_ms", q.count, q.p50_ms))
                    (ms_td(&row.name, "p90_ms", q.count, q.p90_ms))
                    (ms_td(&row.name, "p95_ms", q.count, q.p95_ms))
                    (ms_td(&row.name, "p99_ms", q.count, q.p99_ms))
                    (ms_td(&row.name, "max_ms", q.count, q.max_ms))
                    (ms_td(&row.name, "mean_ms", q.count, q.mean_ms))
                    @match row.errors { Some(e) => (count_td(&row.name, "errors", e)), None => td {} }
                }
            } }
        }
        p class="note" { (FEW_NOTE) "." }
    }
}

/// The charts' legend and each chart, its SVG inline: one figure at a time into the page (a
/// month's timelines are megabytes of SVG).
fn charts(report: &Report, charts: &[Chart], out: &mut String) {
    html! {
        h2 { "Charts" }
        p class="legend" {
            @for store in report.total.stores.keys() { span { (swatch(store, report)) } }
            span { (swatch("end-to-end", report)) }
        }
    }
    .render_to(out);
    for c in charts {
        html! {
            figure id=(Esc(c.file)) {
                figcaption { (Esc(c.title)) " " span class="note" { "(" (Esc(c.file)) ")" } }
                (PreEscaped(bare_svg(&c.svg)))
            }
        }
        .render_to(out);
    }
}

/// plotters writes an XML declaration before its `<svg>` element: the element alone, to inline.
fn bare_svg(svg: &str) -> &str {
    let svg = svg.trim_start_matches(|ch: char| ch != '<');
    match svg.strip_prefix("<?xml") {
        Some(rest) => rest
            .get(rest.find("?>").map_or(0, |i| i + 2)..)
            .unwrap_or(rest),
        None => svg,
    }
}

/// Failed requests by side, then the stores' errors in answers.
fn errors(report: &Report, t: &Totals, e: &Errors) -> Markup {
    html! {
        h2 { "Errors" }
        @if t.failed > 0 || t.retried > 0 {
            p class="note" {
                "A request's failure is the client's when no byte of an answer reached kvbench \
                 (not sent, connect, transport, timeout, cancelled): " (t.client_failed)
                "; the worker's when it answered, not with a " code { "/test" } " answer (a status, \
                 malformed, truncated): " (t.worker_failed) ". Retried on a new connection after the \
                 idle connection it was sent on failed before any byte of an answer: " (t.retried) "."
            }
        }
        @if e.is_empty() {
            p { "No errors." }
        } @else {
            table id="errors" {
                thead { tr { th { "where" } th { "kind" } th { "count" } th class="text" { "example" } } }
                tbody {
                    @for r in &e.requests { tr {
                        td { "request (" (r.side.name()) ")" } td { (Esc(r.kind)) }
                        (count_td(&format!("request {}", r.kind), "count", r.count))
                        td class="text" { (Esc(r.example)) }
                    } }
                    @for s in &e.stores { @for (kind, n) in &s.errors { tr {
                        td { (swatch(s.store, report)) } td { (Esc(kind)) }
                        (count_td(&format!("{} {kind}", s.store), "count", *n)) td {}
                    } } }
                }
            }
        }
    }
}

/// An exact figure for `data-value`: empty when there is none.
fn exact(ms: Option<f64>) -> String {
    ms.map(|v| v.to_string()).unwrap_or_default()
}

/// A store's bar under its figure: its p99 against the row's slowest.
fn bar(percent: f64, store: &str, report: &Report) -> Markup {
    html! {
        span class="bar" style={ "width:" (format!("{percent:.0}")) "%;background:" (color_hex(store, report)) } {}
    }
}

/// A table-chart ([`grid`]): one row per label or colo, one cell per store with its read p50/p99
/// and a bar scaled to the row's slowest p99; the store with the lowest p50 in the row is
/// highlighted.
fn grid(report: &Report, id: &str, title: &str, rows: &[grid::Row]) -> Markup {
    html! {
        h2 { (title) }
        table id=(id) {
            thead { tr {
                th { @if id == "labels" { "label" } @else { "colo" } }
                th { "answered" } th { "end-to-end p50 / p99" }
                @for s in report.total.stores.keys() { th { (swatch(s, report)) " read p50 / p99" } }
            } }
            tbody { @for row in rows { tr {
                td { (Esc(row.name)) }
                (count_td(&format!("{id} {}", row.name), "answered", row.answered))
                td { (row.e2e.p50) " / " (row.e2e.p99) }
                @for c in &row.stores {
                    td class=[c.best.then_some("best")] data-row=(Esc(&format!("{id} {} {}", row.name, c.store)))
                        data-col="p50_ms" data-value=(exact(c.p50_ms)) {
                        (c.reads.p50) " / " (c.reads.p99) (bar(c.bar_percent, c.store, report))
                    }
                }
            } } }
        }
        p class="note" {
            "Successful reads as timed by the worker; the bar is the p99 relative to the row's slowest \
             store; the shaded cell has the lowest p50; " (FEW_NOTE) "."
        }
    }
}

/// Under a vantage row's colos: a member's two witnesses of where it ran (`cf-placement`, the
/// trace), and the answers it left out of its row.
fn where_notes(row: &view::vantage::Row<'_>) -> Markup {
    html! {
        @if !row.placed.is_empty() {
            // The header's values as they came, `local-…` included: what placed the member, or
            // did not (the answers outside its region are counted apart, below).
            small class="sub" title="the answers' cf-placement header, by count" { "cf-placement " (Esc(&row.placed)) }
        }
        @if !row.traced.is_empty() {
            small class="sub" title="the colo each answer's isolate was told by Cloudflare's trace, by count" { "trace " (Esc(&row.traced)) }
        }
        @if !row.not_placed.is_empty() {
            small class="sub out" title="answers that ran outside this member's region: kept, not counted in this row" { "not counted: " (Esc(&row.not_placed)) }
        }
    }
}

/// The vantage × store table of kept answers ([`view::vantage`]).
fn vantage_table(report: &Report, rows: &[view::vantage::Row]) -> Markup {
    html! {
        h2 { "Per vantage point" }
        table id="vantages" {
            thead { tr {
                th class="text" { "vantage point" } th class="text" { "ran in" }
                th { "warm" } th { "cold" } th { "failed" }
                @for s in report.total.stores.keys() { th { (swatch(s, report)) } }
            } }
            tbody { @for row in rows { (vantage_row(report, row)) } }
        }
        p class="note" {
            "Each store's cell: its read p50 in ms, then p90 and p99. Successful reads as timed by the worker, over the warm answers of the vantage point: a cold answer is a new instance's, whose connections and metadata exchanges started afresh, and is counted in its own column. A row marked " i { "cold answers" } " had no warm answer, so its cells are over the cold ones. The shaded cell has the lowest p50 of its row; the bar is the p99 relative to the row's slowest store. Members are placed workers called over HTTP; a member's row counts only the answers that ran in its region's metro — by the colo Cloudflare's trace told its isolate, or where that is unknown by its " code { "cf-placement" } " (its handler time, as every row: the probe's round trip to it is kept apart) — and says how many others it left out (" i { "not counted" } ": unplaced, placed elsewhere, or a trace elsewhere) and how many answers' two witnesses disagree. Hints are Durable Objects created with a location hint, measuring in their own isolate. " (FEW_NOTE) "."
        }
    }
}

fn vantage_row(report: &Report, row: &view::vantage::Row) -> Markup {
    let p = row.point;
    let id = format!("vantage {}", row.label);
    html! {
        tr {
            td {
                (Esc(row.label))
                small class="sub" { (Esc(&p.vantage)) @if !row.warm { " · " i { "cold answers" } } }
            }
            td class="where" { (Esc(&row.ran_in)) (where_notes(row)) }
            (count_td(&id, "warm", p.warm)) (count_td(&id, "cold", p.cold)) (count_td(&id, "failed", p.failed))
            @for c in &row.cells {
                td class=[c.fastest.then_some("best")] data-row=(Esc(&id)) data-col=(Esc(c.store)) data-value=(exact(c.p50_ms)) {
                    b { (c.p50) } small class="sub" { "p90 " (c.p90) " · p99 " (c.p99) }
                    (bar(c.bar_percent, c.store, report))
                }
            }
        }
    }
}

/// The cost section ([`view::cost`]): what it prices, the month a deployer pays, and the table.
fn cost(report: &Report, e: &Cost) -> Markup {
    html! {
        h2 { "Cost" }
        p {
            "Per 30-day month at " (e.rps) " requests/s (" (Esc(e.rps_source)) "), USD, at current plans"
            @if e.withdrawn { " (and, as asked, withdrawn ones: marked)" }
            "; billing units per request as measured in this report, successful operations only (failed ones are counted apart: a store may or may not bill them); bandwidth where the provider bills it beyond an included amount; storage: "
            (e.keys) " keys × each store's mean value size, beyond what the plan includes. A plan whose limits the month passes is marked and never a store's cheapest."
        }
        @if let Some(month) = &e.month {
            p class="lead" id="month" {
                b {
                    "The month a deployer pays: "
                    span data-row="month" data-col="usd" data-value=(month.usd) { (format!("{:.2}", month.usd)) }
                    " USD"
                }
                " — the worker's plan and each store's cheapest plan that fits: " (Esc(&month.parts.join(" + "))) "."
            }
        }
        table id="cost" {
            thead { tr {
                th { "store" } th { "read units/req" } th { "write units/req" } th { "failed ops/req" }
                th { "$/M read" } th { "$/M write" } th { "GB/month" } th { "bandwidth $" } th { "stored GB" }
                th { "storage $" } th { "$/month" } th class="text" { "plan (prices as of; hover for the source)" }
            } }
            tbody {
                @for l in &e.lines { (cost_line(report, l)) }
                @if let Some(w) = &e.worker { (worker_line(w)) }
            }
        }
    }
}

/// A store at a plan, then its billing units (stores priced per unit of their description).
fn cost_line(report: &Report, l: &view::cost::Line) -> Markup {
    let c = l.line;
    let per_million = |p: &str| if l.per_unit { "per unit ↓" } else { p }.to_string();
    html! {
        tr {
            td { (swatch(&c.store, report)) } td { (l.read_units) } td { (l.write_units) }
            td { (l.failed_ops) } td { (per_million(&l.read_per_million)) }
            td { (per_million(&l.write_per_million)) } td { (l.monthly_gb) } td { (l.bandwidth_usd) }
            td { (l.stored_gb) } td { (l.storage_usd) }
            td data-row=(Esc(&format!("cost {} {}", c.store, c.plan))) data-col="monthly_usd" data-value=(c.monthly_usd) { (l.monthly_usd) }
            td class="text plan" title=(Esc(&c.source)) {
                @if c.historical { b { "withdrawn:" } " " }
                (Esc(&c.plan))
                @if let Some(why) = &c.over_limit { " " small class="sub out" { "does not fit: " (Esc(why)) } }
                " " span class="note" { "(" (Esc(&c.as_of)) ")" }
            }
        }
        @for u in &l.units {
            tr { td {} td colspan="11" class="text note" {
                (u.per_request) " " (Esc(u.unit)) " per request "
                @match u.per_million {
                    Some(p) => { "× $" (p) " per million" },
                    None => "not in the price table (priced at 0)",
                }
                (u.included)
            } }
        }
    }
}

/// The worker's plan: its requests and CPU time a month.
fn worker_line(w: &view::cost::Worker) -> Markup {
    let l = w.line;
    html! {
        tr {
            td { "worker" }
            td colspan="9" class="text" {
                (w.requests_m) "M requests (" (l.included_requests) " included; " (w.requests_usd) " beyond), "
                (w.cpu_ms_m) "M CPU-ms at " (l.cpu_ms_per_request) " ms a request ("
                @if l.cpu_given { "given" } @else { "assumed: a run cannot measure a deployed worker's CPU; --worker-cpu-ms sets it" }
                "; " (l.included_cpu_ms) " included; " (w.cpu_usd) " beyond), plan " (w.minimum_usd)
            }
            td data-row="cost worker" data-col="monthly_usd" data-value=(l.monthly_usd) { (w.monthly_usd) }
            td class="text plan" title=(Esc(&l.source)) { (Esc(&l.plan)) " " span class="note" { "(" (Esc(&l.as_of)) ")" } }
        }
    }
}

/// The page up to its first section: no value from the data in it.
const OPEN: &str = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
    <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
    <title>kvbench report</title><style>";

/// The whole page, its sections one after the other into one buffer: a section is dropped once
/// written, and the History section (3 MB for a month of a fleet) is written in place, so the
/// page is never held twice.
pub fn render(report: &Report, derived: &Derived, rendered: &[Chart]) -> String {
    let summary = &derived.summary;
    let totals = view::totals::of(report);
    let mut out = String::with_capacity(64 * 1024);
    out.push_str(OPEN);
    out.push_str(CSS);
    out.push_str("</style></head><body><main>");
    header(report, summary, &totals).render_to(&mut out);
    latency_table(report, summary).render_to(&mut out);
    charts(report, rendered, &mut out);
    errors(report, &totals, &view::errors::of(&report.total)).render_to(&mut out);
    per_place(report, summary).render_to(&mut out);
    if !derived.history.series.is_empty() {
        super::history::html(&derived.history, &mut out);
    }
    if !summary.colos.is_empty() {
        let title = "Per colo (Cloudflare data center that ran the worker)";
        grid(report, "colos", title, &colo_rows(report, summary)).render_to(&mut out);
    }
    if let Some(e) = &derived.cost {
        cost(report, &view::cost::of(e)).render_to(&mut out);
    }
    html! {
        p class="note" {
            "Regenerate with " code { "kvbench report DIR" } ". Histograms, counts and the schema are in report.json (see REPORT.md)."
        }
    }
    .render_to(&mut out);
    out.push_str("</main></body></html>\n");
    out
}

/// The vantage table of kept answers, else one row per label when there are several.
fn per_place(report: &Report, summary: &Summary) -> Markup {
    if !report.vantages.is_empty() {
        return vantage_table(report, &view::vantage::rows(report, summary));
    }
    if summary.labels.len() < 2 {
        return html! {};
    }
    let stores: Vec<&str> = report.total.stores.keys().map(String::as_str).collect();
    let rows = grid::of(
        &stores,
        summary
            .labels
            .iter()
            .map(|(k, l)| (k, l.answered, &l.latency, &l.read)),
    );
    grid(report, "labels", "Per label (vantage point)", &rows)
}

fn colo_rows<'a>(report: &'a Report, summary: &'a Summary) -> Vec<grid::Row<'a>> {
    let stores: Vec<&str> = report.total.stores.keys().map(String::as_str).collect();
    grid::of(
        &stores,
        summary
            .colos
            .iter()
            .map(|(k, c)| (k, c.answered, &c.latency, &c.read)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    /// Text from the data is escaped wherever the page shows it: a run's label, engine and URL
    /// in the lead and the runs table, through the templates.
    #[test]
    fn data_in_the_page_is_escaped() {
        use crate::collect::Collector;
        use crate::report::RunInfo;
        use std::time::Duration;

        let evil = "<img src=x onerror=alert('1')>";
        let report =
            Collector::new(Duration::from_secs(1), Duration::from_secs(1)).finish(RunInfo {
                label: evil.into(),
                url: format!("http://x/\"{evil}"),
                engine: evil.into(),
                latency_from: "sent".into(),
                ..RunInfo::empty()
            });
        let derived = crate::derived::Derived::of(&report, None);
        let page = render(&report, &derived, &[]);
        assert!(!page.contains("<img"), "{page}");
        let escaped = "&lt;img src=x onerror=alert(&#39;1&#39;)&gt;";
        assert_eq!(page.matches(escaped).count(), 4, "{page}");
        assert!(page.contains("http://x/&quot;&lt;img"), "{page}");
    }

    /// Only relative and http(s) links are links; anything else is printed as text.
    #[test]
    fn only_relative_and_http_links_are_links() {
        for ok in [
            "report.json",
            "../runs/a.csv",
            "samples.csv?x=1:2",
            "#summary",
            "/abs/path:1",
            "//example.com/x",
            "http://example.com/a",
            "HTTPS://example.com/a",
        ] {
            assert!(safe_href(ok), "{ok}");
            assert!(link(ok, "t").into_string().starts_with("<a href="), "{ok}");
        }
        for bad in [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "java\tscript:alert(1)",
            " javascript:alert(1)",
            "java\nscript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "vbscript:x",
            "file:///etc/passwd",
            "a b",
        ] {
            assert!(!safe_href(bad), "{bad:?}");
            let printed = link(bad, "raw").into_string();
            assert!(!printed.contains("<a"), "{bad:?}: {printed}");
            assert!(printed.starts_with("raw ("), "{printed}");
        }
    }
}
