//! The kvbench report, platform-free: the schema ([`report`]), HDR histograms ([`hist`]), the
//! parser of `/test` answers ([`answer`]), the collector that folds samples into a report
//! ([`collect`], [`sample`], [`batch`]), the cost model with its dated prices ([`cost`]) and the
//! printers ([`print`]: text, SVG charts, the self-contained `report.html`). The kvbench CLI and
//! the report worker (`crates/report-worker`, `GET /report`) both call this one renderer, so the
//! report never exists twice.

pub mod answer;
pub mod batch;
pub mod collect;
pub mod cost;
pub mod hist;
pub mod print;
pub mod report;
pub mod sample;
