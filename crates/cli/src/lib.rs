//! kvbench: an open-loop load generator for the KV benchmark worker's `/test` route, with HDR
//! percentiles, timelines, mergeable reports, charts and a cost projection.
//!
//! The binary (`src/main.rs`) is thin glue over these modules so tests can drive each piece.

pub mod answer;
pub mod args;
pub mod chart;
pub mod collect;
pub mod cost;
pub mod hist;
pub mod merge;
pub mod pacer;
pub mod progress;
pub mod report;
pub mod run;
pub mod sample;
