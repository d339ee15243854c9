//! The stores' clients and what they share: the traits (`store`); clients over HTTP (`upstash`,
//! `denokv`, `durable`, `cache`), SQL (`sql`) or a `socket` (`redis`, `postgres`, `scram`);
//! `http`, `secret` redaction, R2's `sweep`, reported `meta`, and `value`s.

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
