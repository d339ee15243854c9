//! The runs table as plain data: one row per run with its rate, window, pacer lag and what it
//! imported, built once and laid out by the text and the HTML printers.

use crate::print::view::cell::{quantile_cell, rate_text, refused_text};
use crate::report::{ImportInfo, Report, RunInfo};
use crate::summary::Quantiles;

/// One run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run<'a> {
    /// Its label, engine, URL, start, planned duration and interruption.
    pub run: &'a RunInfo,
    /// The requested rate ([`rate_text`]).
    pub rate: String,
    /// How long it was planned for, `{:.0}` s.
    pub planned_s: String,
    /// How long it sent, `{:.1}` s.
    pub sent_s: String,
    /// Whether its pacer lag was recorded (imports have none).
    pub has_lag: bool,
    pub lag_p50: String,
    pub lag_p99: String,
    pub lag_max: String,
    pub import: Option<Import<'a>>,
}

/// What a run imported.
#[derive(Debug, Clone, PartialEq)]
pub struct Import<'a> {
    pub info: &'a ImportInfo,
    /// The files, `, `-separated.
    pub files: String,
    /// The refused lines by reason ([`refused_text`]).
    pub refused: String,
}

/// The rows, in the report's order of runs.
pub fn of(report: &Report) -> Vec<Run<'_>> {
    report.runs.iter().map(run).collect()
}

fn run(r: &RunInfo) -> Run<'_> {
    let lag = Quantiles::of(&r.pacer_lag_us);
    Run {
        run: r,
        rate: rate_text(r.requested_rate),
        planned_s: format!("{:.0}", r.planned_duration_s),
        sent_s: format!("{:.1}", r.send_window_s),
        has_lag: !r.pacer_lag_us.is_empty(),
        lag_p50: quantile_cell(lag.count, lag.p50_ms),
        lag_p99: quantile_cell(lag.count, lag.p99_ms),
        lag_max: quantile_cell(lag.count, lag.max_ms),
        import: r.import.as_ref().map(|i| Import {
            info: i,
            files: i.files.join(", "),
            refused: refused_text(&i.refused),
        }),
    }
}
