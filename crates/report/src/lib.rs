//! The kvbench report, platform-free, in layers whose arrows point one way. The measured model
//! ([`report`], with HDR histograms in [`hist`], the days in [`daily`], each vantage point's
//! stretches of time in [`stretch`] and the failure kinds in [`failure`]) knows nothing of what derives from it. Ingest builds it: the parser of `/test`
//! answers ([`answer`]), samples ([`sample`]) folded by the collector ([`collect`]), kept answers
//! of a deployed worker ([`kept`]). Analysis derives from it, once per render ([`derived`]): the
//! summary ([`summary`]), the answer first with its intervals ([`comparison`] over [`interval`],
//! widened in [`block`], each store's range in [`stability`]), what went wrong ([`trouble`]), the
//! cost estimate ([`cost`]) over the dated price table ([`prices`]), the history ([`history`])
//! and the probes' bill ([`bill`]). The printers ([`print`]: text, SVG charts, the self-contained
//! `report.html`) print both: the summary, intervals, cost and history they show are computed
//! before them. The kvbench CLI and the report worker (`crates/report-worker`, `GET /report`)
//! both call this one renderer, so the report never exists twice. A report.json may come from
//! anyone: reading one checks it ([`file`], [`v2`]) before anything is sized from it; writing
//! one puts what derives beside what was measured.

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

// The measured model: what was measured, and adding it up. Knows nothing of what derives from it.
pub mod check;
pub mod daily;
pub mod failure;
pub mod freshness;
pub mod hist;
pub mod report;
pub mod stretch;
pub mod v2;
// Ingest: answers, samples and kept lines, collected into the model.
pub mod answer;
pub mod collect;
pub mod kept;
pub mod sample;
// The file: report.json read from anyone, and written with what derives beside what was measured.
pub mod file;
// Analysis: what derives from the model, computed once per render.
pub mod bill;
pub mod block;
pub mod comparison;
pub mod cost;
pub mod derived;
pub mod history;
pub mod interval;
pub mod prices;
pub mod stability;
pub mod summary;
pub mod trouble;
// Printers: print the model and what derives from it; they compute nothing.
pub mod print;
#[cfg(test)]
mod testing;

pub use crate::derived::{derive, Analysed, Derived};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::Deployment;
    use crate::prices::PriceTable;
    use crate::report::Report;
    use crate::testing::COMPUTED;

    /// What `kvbench` does with a report (derive, report.html with its charts, the terminal
    /// report) computes the comparison's intervals and the history's once.
    #[test]
    fn a_render_computes_the_comparison_and_the_history_once() {
        let table = PriceTable::default_table().unwrap();
        COMPUTED.with(|c| c.set((0, 0)));
        let a = derive(Report::empty(), &table, Some(1.0), &Deployment::default());
        print::page(&a).unwrap();
        print::text::render(&a.report, &a.derived, &mut Vec::new()).unwrap();
        assert_eq!(COMPUTED.with(|c| c.get()), (1, 1));
    }
}
