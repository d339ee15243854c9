//! kvbench: an open-loop load generator for the KV benchmark worker's `/test` route, with HDR
//! percentiles, timelines, mergeable reports, comparative charts, an HTML report, a cost
//! projection, and an importer for k6's JSON output (k6 as the distributed engine).
//!
//! Shape (after vegeta, oha and wrk2): [`pacer`] decides when (inside the runtime, on a precise
//! [`timer`]), [`pool`] holds the fixed set of connections the requests queue for, [`attack`]
//! sends one request on one of them, [`batch`] carries raw results to the collector in bulk;
//! [`shard`] runs pacer and pool on a thread of their own, [`run`] orchestrates a run; [`import`]
//! turns k6 output into samples for the same collector, [`import_worker`] does the same for the
//! answers a deployed worker kept (its probes', or a load run's). The collector, the report
//! schema and the printers are `kvbench_report`'s (shared with the report worker).
//! The binary (`src/main.rs`) is thin glue over these modules so tests can drive each piece.

pub mod args;
pub mod attack;
pub mod batch;
pub mod describe;
pub mod fresh;
pub mod import;
pub mod import_worker;
pub mod pacer;
pub mod pool;
pub mod progress;
pub mod run;
pub mod shard;
pub mod signal;
pub mod timer;
