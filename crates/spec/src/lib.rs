//! What kvbench knows about each store (`store`), the keep policy (`keep`) and a trace's bound
//! (`trace`), apart from any client: re-exported as `kvbench_core::spec`, and all the report and
//! report worker depend on, so they link no Postgres, protobuf or crypto code.

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
