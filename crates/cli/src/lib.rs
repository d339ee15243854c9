//! kvbench: an open-loop load generator for the KV benchmark worker's `/test` route, with HDR
//! percentiles, timelines, mergeable reports, comparative charts, an HTML report, a cost
//! projection, and an importer for k6's JSON output (k6 as the distributed engine).
//!
//! Shape (after vegeta and oha): [`pacer`] decides when, [`attack`] sends and returns a
//! [`sample::Sample`], [`collect`] folds samples into the [`report`] schema, [`print`] renders it,
//! [`run`] orchestrates a run; [`import`] turns k6 output into the same samples.
//! The binary (`src/main.rs`) is thin glue over these modules so tests can drive each piece.

pub mod answer;
pub mod args;
pub mod attack;
pub mod collect;
pub mod cost;
pub mod hist;
pub mod import;
pub mod pacer;
pub mod print;
pub mod progress;
pub mod report;
pub mod run;
pub mod sample;
pub mod signal;
