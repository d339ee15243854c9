//! The whole report's counts as plain data — requests scheduled, sent, answered, failed by side,
//! retried, cold, not kept — with the achieved rate and what the end-to-end latency includes,
//! built once and laid out by the text and the HTML printers.

use crate::print::view::cell::latency_origin;
use crate::report::Report;

/// The totals of all runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Totals {
    pub scheduled: u64,
    pub sent: u64,
    pub answered: u64,
    pub cold: u64,
    pub failed: u64,
    pub not_sent: u64,
    /// Of `failed`: no byte of an answer reached kvbench.
    pub client_failed: u64,
    /// Of `failed`: the worker answered, not with a /test answer.
    pub worker_failed: u64,
    pub retried: u64,
    /// Answers measured but not kept, when the source counts them.
    pub keep_failed: Option<u64>,
    /// Exact, and `{:.2}` as shown.
    pub achieved_rate: f64,
    pub achieved_rate_text: String,
    /// `{:.1}` s.
    pub send_window_s: String,
    /// What the end-to-end latency includes ([`latency_origin`]).
    pub latency_origin: String,
    /// Answers by other requests in flight in their isolate (`n: count`).
    pub concurrent: Vec<String>,
    /// Answers left out by `--max-concurrent`.
    pub excluded_concurrent: u64,
}

/// The view of a report's totals.
pub fn of(report: &Report) -> Totals {
    let t = &report.total;
    Totals {
        scheduled: t.scheduled,
        sent: t.sent,
        answered: t.answered,
        cold: t.cold,
        failed: t.failed(),
        not_sent: t.not_sent(),
        client_failed: t.client_failed(),
        worker_failed: t.worker_failed(),
        retried: t.retried,
        keep_failed: report.keep_failed(),
        achieved_rate: t.achieved_rate,
        achieved_rate_text: format!("{:.2}", t.achieved_rate),
        send_window_s: format!("{:.1}", t.send_window_s),
        latency_origin: latency_origin(report),
        concurrent: t
            .concurrent
            .iter()
            .map(|(n, count)| format!("{n}: {count}"))
            .collect(),
        excluded_concurrent: t.excluded_concurrent,
    }
}
