//! kvbench: an open-loop load generator for the KV benchmark worker's `/test` route, with HDR
//! percentiles, timelines, mergeable reports, comparative charts, an HTML report, a cost
//! projection, and an importer for k6's JSON output (k6 as the distributed engine).
//!
//! Shape (after vegeta, oha and wrk2): [`pacer`] decides when (inside the runtime, on a precise
//! [`timer`]), [`pool`] holds the fixed set of connections the requests queue for, [`attack`]
//! sends one request on one of them, [`batch`] carries raw results to the collector in bulk,
//! [`collect`] folds them into the [`report`] schema, [`print`] renders it; [`shard`] runs pacer
//! and pool on a thread of their own, [`run`] orchestrates a run; [`import`] turns k6 output into
//! [`sample::Sample`]s for the same collector, [`import_worker`] does the same for the answers a
//! deployed worker kept (its probes', or a load run's).
//! The binary (`src/main.rs`) is thin glue over these modules so tests can drive each piece.

// The report, its aggregation, cost and printers live in `kvbench-report` (shared with the report
// worker); re-exported so `kvbench::report` and friends keep their paths.
pub use kvbench_report::{answer, collect, cost, hist, print, report, sample};

pub mod args;
pub mod attack;
pub mod batch;
pub mod import;
pub mod import_worker;
pub mod pacer;
pub mod pool;
pub mod progress;
pub mod run;
pub mod shard;
pub mod signal;
pub mod timer;
