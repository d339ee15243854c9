//! The kvbench report, platform-free: the schema ([`report`]), HDR histograms ([`hist`]), the
//! parser of `/test` answers ([`answer`]), kept answers of a deployed worker ([`kept`]), the
//! collector that folds samples into a report
//! ([`collect`], [`sample`]), the answer first with its intervals ([`comparison`] over
//! [`interval`], widened by the spread across the run's windows in [`block`], with each store's
//! range across the run in [`stability`]) and what went wrong, explained ([`trouble`]), the cost model with its dated prices ([`cost`]) and the
//! printers ([`print`]: text, SVG charts, the self-contained `report.html`). The kvbench CLI and
//! the report worker (`crates/report-worker`, `GET /report`) both call this one renderer, so the
//! report never exists twice. A report.json may come from anyone: reading one checks it
//! ([`report::Report::from_json`], [`v2`]) before anything is sized from it.

// This crate runs as wasm in the report worker, where a panic ends the instance and every request
// in flight in it, and it reads files users share: a panic is a bug here, outside tests (the
// few that cannot happen are listed, with why, in tests/tests/panics.rs).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

pub mod answer;
pub mod bill;
pub mod block;
pub mod check;
pub mod collect;
pub mod comparison;
pub mod cost;
pub mod daily;
pub mod hist;
pub mod history;
pub mod interval;
pub mod kept;
pub mod print;
pub mod report;
pub mod sample;
pub mod stability;
#[cfg(test)]
mod testing;
pub mod trouble;
pub mod v2;

use crate::cost::{Deployment, PriceTable};
use crate::report::{Report, Summary};

/// What every printed report carries besides its measurements: the cost projection (at the
/// measured rate, or `project_rps`) and the summary the printers read.
pub fn derive(
    mut r: Report,
    table: &PriceTable,
    project_rps: Option<f64>,
    deployment: &Deployment,
) -> Report {
    // The keys a store holds: as given, else the measuring worker's own setting.
    let mut deployment = *deployment;
    if deployment.keys.is_none() {
        deployment.keys = r
            .provenance
            .as_ref()
            .and_then(|p| p.settings.get("keys")?.parse().ok());
    }
    r.cost = Some(cost::estimate(&r.total, table, project_rps, &deployment));
    r.summary = Some(Summary::of(&r));
    r
}
