//! kvbench: an open-loop load generator for the worker's `/test` route (after vegeta, oha, wrk2).
//! - [`pacer`] decides when (on a precise [`timer`]), [`pool`] holds the connections, [`attack`]
//!   sends one request, [`batch`] carries results to the collector, [`shard`] runs pacer and
//!   pool on a thread, [`run`] orchestrates;
//! - [`import`] and [`import_worker`] turn k6 output and a worker's kept answers into samples;
//! - the collector, schema and printers are `kvbench_report`'s; `src/main.rs` is thin glue.

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
