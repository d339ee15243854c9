//! How every printer shows a figure — milliseconds, rates, shares, percentiles too uncertain
//! to print — and the sentences every printer shares (what `few` means, what the end-to-end
//! latency includes), so the terminal, report.html and the views agree to the character.

use std::collections::BTreeMap;

use crate::report::Report;

/// An import's refused lines by reason, as ` (line_too_long 2, time_outside_run 1)`; empty
/// when none is counted by reason (older reports).
pub fn refused_text(refused: &BTreeMap<String, u64>) -> String {
    if refused.is_empty() {
        return String::new();
    }
    let reasons: Vec<String> = refused.iter().map(|(r, n)| format!("{r} {n}")).collect();
    format!(" ({})", reasons.join(", "))
}

/// A millisecond figure as every printer shows it: two decimals, `-` when there is none.
pub fn ms_cell(ms: Option<f64>) -> String {
    match ms {
        Some(ms) => format!("{ms:.2}"),
        None => "-".into(),
    }
}

/// A rate in requests per second as every printer shows it: one decimal from 1 req/s up, three
/// significant digits below (a probe every 300 s requests 0.00333 req/s, not "0.0").
pub fn rate_text(rate: f64) -> String {
    if rate >= 1.0 || rate <= 0.0 || !rate.is_finite() {
        format!("{rate:.1}")
    } else {
        let decimals = (2.0 - rate.log10().floor()).clamp(1.0, 12.0) as usize;
        format!("{rate:.decimals$}")
    }
}

/// A percentile of `count` values as every table shows it: its figure, `few` when the count
/// cannot support it ([`Quantiles`](crate::report::Quantiles) leaves it out), `-` when there is no value at all.
pub fn quantile_cell(count: u64, ms: Option<f64>) -> String {
    match ms {
        None if count > 0 => "few".into(),
        ms => ms_cell(ms),
    }
}

/// What `few` means, under every table that can show it.
pub const FEW_NOTE: &str =
    "few: too few values to bound that percentile at 95% (p50 needs 6, p90 36, p95 72, p99 368)";

/// What the end-to-end latency of runs with this `latency_from` includes, in words.
fn origin_text(latency_from: &str) -> &'static str {
    match latency_from {
        "sent" => {
            "measured by the load generator from the actual send (k6 http_req_duration: blocked, \
             connecting and TLS excluded)"
        }
        "started" => {
            "measured by the load generator from k6's start of the request (http_req_duration \
             plus blocked, connecting and TLS handshaking included)"
        }
        "worker" => {
            "measured by the worker itself: its whole measurement on its own clock (kept answers: \
             probes or a /test?run=; no client and no client network in it)"
        }
        _ => {
            "measured by the load generator from the intended start (queueing and pacer lag count)"
        }
    }
}

/// What the end-to-end latency includes, in words (each definition once when runs differ).
pub fn latency_origin(report: &Report) -> String {
    let mut seen: Vec<&'static str> = Vec::new();
    for r in &report.runs {
        let text = origin_text(&r.latency_from);
        if !seen.contains(&text) {
            seen.push(text);
        }
    }
    match seen.as_slice() {
        [] => origin_text("intended").to_string(),
        [one] => one.to_string(),
        several => format!("mixed: {}", several.join("; ")),
    }
}

/// A share as every printer shows it: `0.17%`.
pub fn percent(share: f64) -> String {
    format!("{:.2}%", share * 100.0)
}
