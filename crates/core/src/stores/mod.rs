//! The stores' clients and what they share: the store traits (`store`), one client per store
//! over HTTP (`upstash`, `denokv`, `durable`, `cache`), SQL (`sql`) or a socket (`redis`,
//! `postgres` with `scram`), the transports they use (`http`, and `socket` for the TCP ones),
//! the forms of a secret they redact (`secret`), R2's expiry sweep (`sweep`), what a store reports about its own calls
//! (`meta`), and the values they hold and the generator of the values a measurement writes
//! (`value`).

pub mod cache;
pub mod denokv;
pub mod durable;
pub mod http;
pub mod meta;
pub mod postgres;
pub mod redis;
pub mod scram;
pub mod secret;
pub mod socket;
pub mod sql;
pub mod store;
pub mod sweep;
pub mod upstash;
pub mod value;
