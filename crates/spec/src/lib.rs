//! What kvbench knows about each store and the probes' keep policy, apart from any store
//! client: the descriptions (`store`: names, key and value limits, billing units and charges,
//! bindings), how long a probe's answer is kept and when it is deleted (`keep`), and how long a
//! probe's trace may take (`trace`). The core re-exports this crate as `kvbench_core::spec`; the
//! report and the report worker depend on it alone, so they link no Postgres, protobuf or crypto
//! code.

// The report worker runs this as wasm, where a panic ends the instance (as in the core).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

pub mod keep;
mod store;
pub mod trace;

pub use store::*;
