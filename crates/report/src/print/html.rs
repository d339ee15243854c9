//! `report.html`: one self-contained page (inline CSS and SVG; no script, font or image from the
//! network) with the runs, the latency table, the comparative charts, errors, per label and per
//! colo table-charts and the cost projection. Every number comes from the derived [`Summary`]
//! (the same one `report.json` carries), and each figure cell carries its exact value in
//! `data-value`, so a test can check the page against the file.

use std::fmt::Write as _;

use crate::comparison::{Comparison, Row};
use crate::cost::Estimate;
use crate::derived::Derived;
use crate::print::chart::{color_hex, Chart};
use crate::print::text::{latency_origin, quantile_cell, FEW_NOTE};
use crate::report::Report;
use crate::sample::Side;
use crate::summary::{Quantiles, Summary};

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

/// A figure of `count` values: two decimals shown (`few` when the count cannot support it), the
/// exact value in `data-value`.
fn ms_td(row: &str, col: &str, count: u64, ms: Option<f64>) -> String {
    let value = ms.map(|v| v.to_string()).unwrap_or_default();
    format!(
        r#"<td data-row="{}" data-col="{col}" data-value="{value}">{}</td>"#,
        esc(row),
        quantile_cell(count, ms)
    )
}

fn count_td(row: &str, col: &str, n: impl std::fmt::Display) -> String {
    format!(
        r#"<td data-row="{}" data-col="{col}" data-value="{n}">{n}</td>"#,
        esc(row)
    )
}

fn swatch(store: &str, report: &Report) -> String {
    format!(
        r#"<span class="swatch" style="background:{}"></span>{}"#,
        color_hex(store, report),
        esc(store)
    )
}

fn header(report: &Report, summary: &Summary, out: &mut String) {
    let t = &report.total;
    let labels: Vec<&str> = report.labels.keys().map(String::as_str).collect();
    let _ = write!(
        out,
        r#"<h1>kvbench report</h1><p class="lead">{} run(s) · labels: {} · written by {}</p>"#,
        report.runs.len(),
        esc(&labels.join(", ")),
        esc(&report.tool)
    );
    if let Some(p) = &report.provenance {
        let _ = write!(
            out,
            r#"<p class="lead" id="where">{}</p>"#,
            esc(&super::where_line(report, p))
        );
    }
    if report.runs.iter().any(|r| r.interrupted) {
        out.push_str(r#"<p class="warn">A run was interrupted: this report is partial.</p>"#);
    }
    if let Some(c) = &summary.comparison {
        comparison(report, c, out);
    }
    if !summary.trouble.is_empty() {
        trouble(&summary.trouble, out);
    }
    out.push_str(
        "<table><thead><tr><th>label</th><th class=\"text\">engine</th><th class=\"text\">URL</th><th>started</th>\
         <th>requested req/s</th><th>planned s</th><th>sent for s</th><th>pacer lag p99 ms</th></tr></thead><tbody>",
    );
    for r in &report.runs {
        let lag = crate::summary::Quantiles::of(&r.pacer_lag_us);
        let lag = quantile_cell(lag.count, lag.p99_ms);
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"text\">{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.1}</td><td>{}</td></tr>",
            esc(&r.label),
            esc(&r.engine),
            esc(&r.url),
            esc(&r.started_at),
            super::text::rate_text(r.requested_rate),
            r.planned_duration_s,
            r.send_window_s,
            lag
        );
        if let Some(i) = &r.import {
            let _ = write!(
                out,
                "<tr><td></td><td colspan=\"7\" class=\"text note\">imported {} line(s) from {}: \
                 {} malformed line(s){}, {} incomplete request(s){}{}</td></tr>",
                i.lines,
                esc(&i.files.join(", ")),
                i.malformed_lines,
                esc(&super::text::refused_text(&i.refused)),
                i.incomplete_requests,
                if i.truncated { ", file cut short" } else { "" },
                match i.keep_failed {
                    Some(n) => format!(", {n} answer(s) measured but not kept"),
                    None => String::new(),
                }
            );
        }
    }
    out.push_str("</tbody></table>");
    let _ = write!(
        out,
        r#"<table><thead><tr><th>requests</th><th>scheduled</th><th>sent</th><th>answered</th><th>failed</th><th title="no byte of an answer reached kvbench">client failed</th><th title="the worker answered, not with a /test answer">worker failed</th><th>not sent</th><th title="sent again on a new connection after the idle one it was sent on failed before any answer byte">retried</th><th title="answers of a new instance: in the cold rows only">cold</th><th title="answers the worker measured but could not keep: in no other count">not kept</th><th>achieved req/s</th><th>send window s</th></tr></thead><tbody><tr><td>all runs</td>{}{}{}{}{}{}{}{}{}{}<td data-row="total" data-col="achieved_rate" data-value="{}">{:.2}</td><td>{:.1}</td></tr></tbody></table>"#,
        count_td("total", "scheduled", t.scheduled),
        count_td("total", "sent", t.sent),
        count_td("total", "answered", t.answered),
        count_td("total", "failed", t.failed()),
        count_td("total", "client_failed", t.client_failed()),
        count_td("total", "worker_failed", t.worker_failed()),
        count_td("total", "not_sent", t.not_sent()),
        count_td("total", "retried", t.retried),
        count_td("total", "cold", t.cold),
        match report.keep_failed() {
            Some(n) => count_td("total", "keep_failed", n),
            None => "<td title=\"this source does not count them\">-</td>".into(),
        },
        t.achieved_rate,
        t.achieved_rate,
        t.send_window_s
    );
    let _ = write!(
        out,
        r#"<p class="note">Store latencies are timed by the worker around each store call. End-to-end latency is {}.</p>"#,
        esc(&latency_origin(report))
    );
    if let Some(p) = &report.provenance {
        provenance(p, out);
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
fn link(href: &str, text: &str) -> String {
    if safe_href(href) {
        format!(r#"<a href="{}">{}</a>"#, esc(href), esc(text))
    } else {
        format!("{} ({})", esc(text), esc(href))
    }
}

/// How the figures were made: the builds, the settings and the raw data to download.
fn provenance(p: &crate::report::Provenance, out: &mut String) {
    out.push_str("<h2>How this was measured</h2><table id=\"provenance\"><tbody>");
    let row = |out: &mut String, what: &str, value: &str| {
        let _ = write!(
            out,
            r#"<tr><th class="text">{}</th><td class="text">{}</td></tr>"#,
            esc(what),
            esc(value)
        );
    };
    row(out, "stack", &p.stack);
    row(out, "updated", &p.updated_at);
    if let Some((from, to)) = &p.window {
        row(out, "window", &format!("{from} to {to}"));
    }
    let pairs = |m: &std::collections::BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(" · ")
    };
    if !p.build.is_empty() {
        row(out, "build", &pairs(&p.build));
    }
    if !p.settings.is_empty() {
        row(out, "settings", &pairs(&p.settings));
    }
    if let Some(e) = &p.worker_error {
        row(out, "not known", e);
    }
    if !p.raw.is_empty() {
        let links: Vec<String> = p.raw.iter().map(|r| link(&r.href, &r.what)).collect();
        let _ = write!(
            out,
            r#"<tr><th class="text">raw data</th><td class="text">{}</td></tr>"#,
            links.join(" · ")
        );
    }
    out.push_str("</tbody></table>");
}

/// The answer first ([`crate::comparison`]): each store ranked by its read p50, every
/// percentile with its interval, or why its sample cannot support one, and under each row how
/// steady the store was across the run.
fn comparison(report: &Report, c: &Comparison, out: &mut String) {
    let _ = write!(
        out,
        "<h2>The answer</h2><p class=\"note\">Successful reads of warm answers (an instance that \
         had answered before), ms: each percentile with its {:.0}% interval — from order \
         statistics (no assumption about the distribution), widened by how much the share of \
         reads below it moved between spans of the run's timeline windows (answers close in time \
         move together, so a second run would differ by more than one run's answers suggest) — or \
         why the sample is too small for one. <b>†</b>: the within-run interval alone (too few \
         windows to measure the spread). Under each row: each percentile's range across the \
         spans, and <span class=\"unstable\">unstable</span> when the spans disagree beyond \
         their own intervals. Ranked by p50; <b>tie</b>: its p50 interval overlaps the one of \
         the row above, so these intervals do not order the two. Cost: the store's cheapest \
         current plan at the rate of the cost table below.</p><p class=\"note\" id=\"cold\"><b>{} \
         cold answer(s) left out</b> (the <i>cold</i> rows of the latency table); cold = {}.</p>",
        c.level * 100.0,
        c.cold_answers,
        esc(&c.cold_means.join("; "))
    );
    out.push_str(
        "<table id=\"answer\"><thead><tr><th>rank</th><th class=\"text\">store</th><th>reads</th>\
         <th>p50</th><th>p90</th><th>p99</th><th>read errors</th><th>$/month</th></tr></thead><tbody>",
    );
    let mut vantage = None;
    for row in &c.rows {
        if row.vantage != vantage {
            vantage.clone_from(&row.vantage);
            if let Some(v) = &row.vantage {
                let _ = write!(
                    out,
                    "<tr><td colspan=\"8\" class=\"text\"><b>{}</b></td></tr>",
                    esc(v)
                );
            }
        }
        comparison_row(report, row, out);
    }
    out.push_str("</tbody></table>");
}

/// One row of the answer, and the row under it: its stability (or why its intervals are the
/// within-run ones alone) and its flag.
fn comparison_row(report: &Report, row: &Row, out: &mut String) {
    let key = match &row.vantage {
        Some(v) => format!("answer {v} {}", row.store),
        None => format!("answer {}", row.store),
    };
    let cell = |col: &str, c: &crate::comparison::Cell| {
        format!(
            r#"<td data-row="{}" data-col="{col}" data-value="{}">{}</td>"#,
            esc(&key),
            c.ms.map(|v| v.to_string()).unwrap_or_default(),
            esc(&c.text())
        )
    };
    let td = |col: &str, value: String, shown: String| {
        format!(
            r#"<td data-row="{}" data-col="{col}" data-value="{value}">{shown}</td>"#,
            esc(&key)
        )
    };
    let _ = write!(
        out,
        "<tr><td>{}{}</td><td class=\"text\">{}</td>{}{}{}{}{}{}</tr>",
        row.rank,
        if row.tie { " <b>tie</b>" } else { "" },
        swatch(&row.store, report),
        count_td(&key, "reads", row.reads),
        cell("p50_ms", &row.p50),
        cell("p90_ms", &row.p90),
        cell("p99_ms", &row.p99),
        row.error_rate.map_or("<td>-</td>".into(), |r| {
            td("error_rate", r.to_string(), super::text::percent(r))
        }),
        match (row.monthly_usd, &row.plan) {
            (Some(usd), Some(plan)) => td("monthly_usd", usd.to_string(), format!("{usd:.2}"))
                .replacen("<td ", &format!("<td title=\"{}\" ", esc(plan)), 1),
            _ => "<td>-</td>".into(),
        }
    );
    let flag = row.flag().map_or(String::new(), |f| {
        format!(" · <span class=\"unstable\">{}</span>", esc(&f))
    });
    let _ = write!(
        out,
        "<tr class=\"across\"><td></td><td colspan=\"7\" data-row=\"{}\" data-col=\"stability\" data-value=\"\">{}{flag}</td></tr>",
        esc(&key),
        esc(&row.note())
    );
}

/// What went wrong, explained ([`crate::trouble`]); every count is in the errors table too.
fn trouble(trouble: &[crate::trouble::Trouble], out: &mut String) {
    let _ = write!(
        out,
        "<h2>What went wrong</h2><p class=\"note\">Failures and store errors over {} of their \
         requests or operations, the most common first, with their likely cause; every count is \
         in the errors table below.</p><ul class=\"trouble\">",
        super::text::percent(crate::trouble::THRESHOLD)
    );
    for t in trouble {
        let _ = write!(
            out,
            "<li><b>{} {}</b>: {} of {} ({}): {}</li>",
            esc(&t.source),
            esc(&t.kind),
            t.count,
            t.of,
            super::text::percent(t.share),
            esc(&t.cause)
        );
    }
    out.push_str("</ul>");
}

fn latency_table(report: &Report, summary: &Summary, out: &mut String) {
    out.push_str("<h2>Latency (ms)</h2>");
    out.push_str(
        "<table id=\"latency\"><thead><tr><th>operation</th><th>count</th><th>p50</th><th>p90</th>\
         <th>p95</th><th>p99</th><th>max</th><th>mean</th><th>errors</th></tr></thead><tbody>",
    );
    for row in &summary.latency {
        let q = &row.quantiles;
        let name = match &row.store {
            Some(store) => format!(
                "{}{}",
                swatch(store, report),
                esc(row.name.get(store.len()..).unwrap_or(&row.name))
            ),
            None => esc(&row.name),
        };
        let _ = write!(
            out,
            "<tr><td>{name}</td>{}{}{}{}{}{}{}{}</tr>",
            count_td(&row.name, "count", q.count),
            ms_td(&row.name, "p50_ms", q.count, q.p50_ms),
            ms_td(&row.name, "p90_ms", q.count, q.p90_ms),
            ms_td(&row.name, "p95_ms", q.count, q.p95_ms),
            ms_td(&row.name, "p99_ms", q.count, q.p99_ms),
            ms_td(&row.name, "max_ms", q.count, q.max_ms),
            ms_td(&row.name, "mean_ms", q.count, q.mean_ms),
            match row.errors {
                Some(e) => count_td(&row.name, "errors", e),
                None => "<td></td>".into(),
            }
        );
    }
    let _ = write!(out, "</tbody></table><p class=\"note\">{FEW_NOTE}.</p>");
}

fn charts(report: &Report, charts: &[Chart], out: &mut String) {
    out.push_str("<h2>Charts</h2><p class=\"legend\">");
    for store in report.total.stores.keys() {
        let _ = write!(out, "<span>{}</span>", swatch(store, report));
    }
    let _ = write!(out, "<span>{}</span></p>", swatch("end-to-end", report));
    for c in charts {
        // plotters writes a bare <svg> element: inline it as it is.
        let svg = c.svg.trim_start_matches(|ch: char| ch != '<');
        let svg = match svg.strip_prefix("<?xml") {
            Some(rest) => rest
                .get(rest.find("?>").map_or(0, |i| i + 2)..)
                .unwrap_or(rest),
            None => svg,
        };
        let _ = write!(
            out,
            "<figure id=\"{}\"><figcaption>{} <span class=\"note\">({})</span></figcaption>{}</figure>",
            esc(c.file),
            esc(c.title),
            esc(c.file),
            svg
        );
    }
}

fn errors(report: &Report, out: &mut String) {
    let t = &report.total;
    out.push_str("<h2>Errors</h2>");
    if t.failed() > 0 || t.retried > 0 {
        let _ = write!(
            out,
            "<p class=\"note\">A request's failure is the client's when no byte of an answer reached kvbench \
             (not sent, connect, transport, timeout, cancelled): {}; the worker's when it answered, not with a \
             <code>/test</code> answer (a status, malformed, truncated): {}. Retried on a new connection after the \
             idle connection it was sent on failed before any byte of an answer: {}.</p>",
            t.client_failed(),
            t.worker_failed(),
            t.retried
        );
    }
    if t.failures.is_empty() && t.stores.values().all(|s| s.errors.is_empty()) {
        out.push_str("<p>No errors.</p>");
        return;
    }
    out.push_str(
        "<table id=\"errors\"><thead><tr><th>where</th><th>kind</th><th>count</th><th class=\"text\">example</th></tr></thead><tbody>",
    );
    // Requests the client's, then the worker's; then the stores' errors the answers reported.
    for side in [Side::Client, Side::Worker] {
        for (kind, n) in t.failures.iter().filter(|(k, _)| Side::of_name(k) == side) {
            let example = t
                .failure_examples
                .get(kind)
                .and_then(|e| e.first())
                .map(String::as_str)
                .unwrap_or("");
            let _ = write!(
                out,
                "<tr><td>request ({})</td><td>{}</td>{}<td class=\"text\">{}</td></tr>",
                side.name(),
                esc(kind),
                count_td(&format!("request {kind}"), "count", n),
                esc(example)
            );
        }
    }
    for (store, s) in &t.stores {
        for (kind, n) in &s.errors {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td>{}<td></td></tr>",
                swatch(store, report),
                esc(kind),
                count_td(&format!("{store} {kind}"), "count", n)
            );
        }
    }
    out.push_str("</tbody></table>");
}

/// A table-chart: one row per label or colo, one cell per store with its read p50/p99 and a bar
/// scaled to the row's slowest p99; the store with the lowest p50 in the row is highlighted.
fn per_row_chart<'a>(
    report: &Report,
    id: &str,
    title: &str,
    rows: impl Iterator<
        Item = (
            &'a String,
            u64,
            &'a Quantiles,
            &'a std::collections::BTreeMap<String, Quantiles>,
        ),
    >,
    out: &mut String,
) {
    let stores: Vec<&String> = report.total.stores.keys().collect();
    let _ = write!(
        out,
        "<h2>{}</h2><table id=\"{id}\"><thead><tr><th>{}</th><th>answered</th><th>end-to-end p50 / p99</th>",
        esc(title),
        if id == "labels" { "label" } else { "colo" }
    );
    for s in &stores {
        let _ = write!(out, "<th>{} read p50 / p99</th>", swatch(s, report));
    }
    out.push_str("</tr></thead><tbody>");
    for (name, answered, e2e, reads) in rows {
        let row_max = reads.values().filter_map(|q| q.p99_ms).fold(0.0, f64::max);
        let best = reads
            .iter()
            .filter_map(|(s, q)| q.p50_ms.map(|p| (s, p)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(s, _)| s.clone());
        let _ = write!(
            out,
            "<tr><td>{}</td>{}<td>{} / {}</td>",
            esc(name),
            count_td(&format!("{id} {name}"), "answered", answered),
            quantile_cell(e2e.count, e2e.p50_ms),
            quantile_cell(e2e.count, e2e.p99_ms)
        );
        for s in &stores {
            let q = reads.get(*s).cloned().unwrap_or_default();
            let width = match (q.p99_ms, row_max > 0.0) {
                (Some(p), true) => (p / row_max * 100.0).clamp(2.0, 100.0),
                _ => 0.0,
            };
            let class = if best.as_deref() == Some(s.as_str()) && reads.len() > 1 {
                " class=\"best\""
            } else {
                ""
            };
            let _ = write!(
                out,
                "<td{class} data-row=\"{} {}\" data-col=\"p50_ms\" data-value=\"{}\">{} / {}<span class=\"bar\" style=\"width:{width:.0}%;background:{}\"></span></td>",
                esc(&format!("{id} {name}")),
                esc(s),
                q.p50_ms.map(|v| v.to_string()).unwrap_or_default(),
                quantile_cell(q.count, q.p50_ms),
                quantile_cell(q.count, q.p99_ms),
                color_hex(s, report)
            );
        }
        out.push_str("</tr>");
    }
    let _ = write!(out, "</tbody></table><p class=\"note\">Successful reads as timed by the worker; the bar is the p99 relative to the row's slowest store; the shaded cell has the lowest p50; {FEW_NOTE}.</p>");
}

/// The vantage × store table of kept answers ([`super::vantage::rows`]).
/// Under a vantage row's colos: a member's two witnesses of where it ran (`cf-placement`, the
/// trace), and the answers it left out of its row.
fn where_notes(row: &super::vantage::Row<'_>) -> String {
    let mut placed = if row.placed.is_empty() {
        String::new()
    } else {
        // The header's values as they came, `local-…` included: what placed the member, or
        // did not (the answers outside its region are counted apart, below).
        format!(
            "<small class=\"sub\" title=\"the answers' cf-placement header, by count\">cf-placement {}</small>",
            esc(&row.placed)
        )
    };
    if !row.traced.is_empty() {
        let _ = write!(
            placed,
            "<small class=\"sub\" title=\"the colo each answer's isolate was told by Cloudflare's trace, by count\">trace {}</small>",
            esc(&row.traced)
        );
    }
    if !row.not_placed.is_empty() {
        let _ = write!(
            placed,
            "<small class=\"sub out\" title=\"answers that ran outside this member's region: kept, not counted in this row\">not counted: {}</small>",
            esc(&row.not_placed)
        );
    }
    placed
}

fn vantage_table(report: &Report, summary: &Summary, out: &mut String) {
    let stores: Vec<&String> = report.total.stores.keys().collect();
    out.push_str(
        "<h2>Per vantage point</h2><table id=\"vantages\"><thead><tr><th class=\"text\">vantage point</th>\
         <th class=\"text\">ran in</th><th>warm</th><th>cold</th><th>failed</th>",
    );
    for s in &stores {
        let _ = write!(out, "<th>{}</th>", swatch(s, report));
    }
    out.push_str("</tr></thead><tbody>");
    for row in super::vantage::rows(report, summary) {
        let p = row.point;
        let id = format!("vantage {}", row.label);
        let placed = where_notes(&row);
        let _ = write!(
            out,
            "<tr><td>{}<small class=\"sub\">{}{}</small></td><td class=\"where\">{}{placed}</td>{}{}{}",
            esc(row.label),
            esc(&p.vantage),
            if row.warm { "" } else { " · <i>cold answers</i>" },
            esc(&row.ran_in),
            count_td(&id, "warm", p.warm),
            count_td(&id, "cold", p.cold),
            count_td(&id, "failed", p.failed),
        );
        let row_max = row
            .reads
            .values()
            .filter_map(|q| q.p99_ms)
            .fold(0.0, f64::max);
        for s in &stores {
            let q = row.reads.get(*s).cloned().unwrap_or_default();
            let width = match (q.p99_ms, row_max > 0.0) {
                (Some(v), true) => (v / row_max * 100.0).clamp(2.0, 100.0),
                _ => 0.0,
            };
            let class = if row.fastest == Some(s.as_str()) {
                " class=\"best\""
            } else {
                ""
            };
            let _ = write!(
                out,
                "<td{class} data-row=\"{}\" data-col=\"{}\" data-value=\"{}\"><b>{}</b><small class=\"sub\">p90 {} · p99 {}</small><span class=\"bar\" style=\"width:{width:.0}%;background:{}\"></span></td>",
                esc(&id),
                esc(s),
                q.p50_ms.map(|v| v.to_string()).unwrap_or_default(),
                quantile_cell(q.count, q.p50_ms),
                quantile_cell(q.count, q.p90_ms),
                quantile_cell(q.count, q.p99_ms),
                color_hex(s, report)
            );
        }
        out.push_str("</tr>");
    }
    let _ = write!(out, "</tbody></table><p class=\"note\">Each store's cell: its read p50 in ms, then p90 and p99. Successful reads as timed by the worker, over the warm answers of the vantage point: a cold answer is a new instance's, whose connections and metadata exchanges started afresh, and is counted in its own column. A row marked <i>cold answers</i> had no warm answer, so its cells are over the cold ones. The shaded cell has the lowest p50 of its row; the bar is the p99 relative to the row's slowest store. Members are placed workers called over HTTP; a member's row counts only the answers that ran in its region's metro — by the colo Cloudflare's trace told its isolate, or where that is unknown by its <code>cf-placement</code> (its handler time, as every row: the probe's round trip to it is kept apart) — and says how many others it left out (<i>not counted</i>: unplaced, placed elsewhere, or a trace elsewhere) and how many answers' two witnesses disagree. Hints are Durable Objects created with a location hint, measuring in their own isolate. {FEW_NOTE}.</p>");
}

fn cost(report: &Report, estimate: Option<&Estimate>, out: &mut String) {
    let Some(e) = estimate else {
        return;
    };
    let _ = write!(
        out,
        "<h2>Cost</h2><p>Per 30-day month at {:.2} requests/s ({}), USD, at current plans{}; billing units per request as measured in this report, successful operations only (failed ones are counted apart: a store may or may not bill them); bandwidth where the provider bills it beyond an included amount; storage: {} keys × each store's mean value size, beyond what the plan includes. A plan whose limits the month passes is marked and never a store's cheapest.</p>",
        e.project_rps,
        esc(&e.rps_source),
        if e.lines.iter().any(|l| l.historical) {
            " (and, as asked, withdrawn ones: marked)"
        } else {
            ""
        },
        e.keys
    );
    if let Some(month) = crate::cost::cheapest_month(e) {
        let _ = write!(
            out,
            r#"<p class="lead" id="month"><b>The month a deployer pays: <span data-row="month" data-col="usd" data-value="{}">{:.2}</span> USD</b> — the worker's plan and each store's cheapest plan that fits: {}.</p>"#,
            month.usd,
            month.usd,
            esc(&month.parts.join(" + "))
        );
    }
    out.push_str(
        "<table id=\"cost\"><thead><tr><th>store</th><th>read units/req</th><th>write units/req</th>\
         <th>failed ops/req</th><th>$/M read</th><th>$/M write</th><th>GB/month</th><th>bandwidth $</th><th>stored GB</th><th>storage $</th><th>$/month</th><th class=\"text\">plan (prices as of; hover for the source)</th></tr></thead><tbody>",
    );
    for l in &e.lines {
        // Stores priced per unit of their description list those units below their line.
        let per_million = |p: f64| {
            if l.units.is_empty() {
                format!("{p:.2}")
            } else {
                "per unit ↓".to_string()
            }
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.4}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.2}</td><td>{:.4}</td><td>{:.2}</td><td data-row=\"cost {} {}\" data-col=\"monthly_usd\" data-value=\"{}\">{:.2}</td><td class=\"text plan\" title=\"{}\">{}{}{} <span class=\"note\">({})</span></td></tr>",
            swatch(&l.store, report),
            l.read_units_per_request,
            l.write_units_per_request,
            l.failed_reads_per_request + l.failed_writes_per_request,
            per_million(l.read_per_million),
            per_million(l.write_per_million),
            l.monthly_gb,
            l.bandwidth_usd,
            l.stored_gb,
            l.storage_usd,
            esc(&l.store),
            esc(&l.plan),
            l.monthly_usd,
            l.monthly_usd,
            esc(&l.source),
            if l.historical { "<b>withdrawn:</b> " } else { "" },
            esc(&l.plan),
            match &l.over_limit {
                Some(why) => format!(" <small class=\"sub out\">does not fit: {}</small>", esc(why)),
                None => String::new(),
            },
            esc(&l.as_of)
        );
        for u in &l.units {
            let price = u
                .per_million
                .map_or("not in the price table (priced at 0)".to_string(), |p| {
                    format!("× ${p} per million")
                });
            let included = if u.included_per_month > 0.0 {
                format!(
                    " beyond {} a month included ({:.0} of {:.0} billed)",
                    u.included_per_month, u.billed_units, u.monthly_units
                )
            } else {
                String::new()
            };
            let _ = write!(
                out,
                "<tr><td></td><td colspan=\"11\" class=\"text note\">{:.3} {} per request {}{}</td></tr>",
                u.per_request,
                esc(&u.unit),
                price,
                included
            );
        }
    }
    if let Some(w) = &e.worker {
        let _ = write!(
            out,
            "<tr><td>worker</td><td colspan=\"9\" class=\"text\">{:.1}M requests ({} included; {:.2} beyond), {:.1}M CPU-ms at {} ms a request ({}; {} included; {:.2} beyond), plan {:.2}</td><td data-row=\"cost worker\" data-col=\"monthly_usd\" data-value=\"{}\">{:.2}</td><td class=\"text plan\" title=\"{}\">{} <span class=\"note\">({})</span></td></tr>",
            w.requests_per_month / 1e6,
            w.included_requests,
            w.requests_usd,
            w.cpu_ms_per_month / 1e6,
            w.cpu_ms_per_request,
            if w.cpu_given {
                "given"
            } else {
                "assumed: a run cannot measure a deployed worker's CPU; --worker-cpu-ms sets it"
            },
            w.included_cpu_ms,
            w.cpu_usd,
            w.minimum_usd,
            w.monthly_usd,
            w.monthly_usd,
            esc(&w.source),
            esc(&w.plan),
            esc(&w.as_of)
        );
    }
    out.push_str("</tbody></table>");
}

/// The whole page of `report` and what derives from it.
pub fn render(report: &Report, derived: &Derived, rendered: &[Chart]) -> String {
    let summary = &derived.summary;
    let mut out = String::with_capacity(64 * 1024);
    out.push_str("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    out.push_str("<title>kvbench report</title><style>");
    out.push_str(CSS);
    out.push_str("</style></head><body><main>");
    header(report, summary, &mut out);
    latency_table(report, summary, &mut out);
    charts(report, rendered, &mut out);
    errors(report, &mut out);
    if !report.vantages.is_empty() {
        vantage_table(report, summary, &mut out);
    } else if summary.labels.len() > 1 {
        per_row_chart(
            report,
            "labels",
            "Per label (vantage point)",
            summary
                .labels
                .iter()
                .map(|(k, l)| (k, l.answered, &l.latency, &l.read)),
            &mut out,
        );
    }
    if !derived.history.series.is_empty() {
        crate::print::history::html(&derived.history, &mut out);
    }
    if !summary.colos.is_empty() {
        per_row_chart(
            report,
            "colos",
            "Per colo (Cloudflare data center that ran the worker)",
            summary
                .colos
                .iter()
                .map(|(k, c)| (k, c.answered, &c.latency, &c.read)),
            &mut out,
        );
    }
    cost(report, derived.cost.as_ref(), &mut out);
    out.push_str("<p class=\"note\">Regenerate with <code>kvbench report DIR</code>. Histograms, counts and the schema are in report.json (see REPORT.md).</p>");
    out.push_str("</main></body></html>\n");
    out
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
            assert!(link(ok, "t").starts_with("<a href="), "{ok}");
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
            let printed = link(bad, "raw");
            assert!(!printed.contains("<a"), "{bad:?}: {printed}");
            assert!(printed.starts_with("raw ("), "{printed}");
        }
    }
}
