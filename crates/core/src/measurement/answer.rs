//! The JSON answer of `/test`, as the worker writes it: the wire's one answer type
//! ([`kvbench_wire::answer`]), its stores named by [`StoreId`] (whose legacy fields the store
//! descriptions give: `kvbench_spec`'s `StoreName` impl).

use crate::error::StoreError;
use crate::stores::store::StoreId;

pub use kvbench_wire::answer::{round_ms, Abandoned, Legacy, Op, StoreName};

/// The answer of one `/test` request.
pub type Answer = kvbench_wire::answer::Answer<'static, StoreId>;
/// What one store did in one request.
pub type StoreResult = kvbench_wire::answer::StoreResult<'static>;
/// A store call that failed.
pub type ErrorBody = kvbench_wire::answer::ErrorBody<'static>;

/// A store's failure of `op`, as the answer carries it.
pub fn failed(error: StoreError, op: Op) -> ErrorBody {
    ErrorBody::new(error.kind.as_str(), error.message, op)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn serializes_the_documented_shape() {
        let mut a = Answer::new("417".into(), "FRA".into(), 12);
        a.push(
            StoreId::Upstash,
            StoreResult {
                read_ms: Some(3.0),
                hit: Some(false),
                value_bytes: Some(40_000),
                write_ms: Some(2.0),
                ..Default::default()
            },
        );
        a.push(
            StoreId::Kv,
            StoreResult {
                read_ms: Some(12.0),
                hit: Some(true),
                value_bytes: Some(23_456),
                ..Default::default()
            },
        );
        a.push(
            StoreId::DenoKv,
            StoreResult {
                read_ms: Some(4.0),
                hit: Some(true),
                value_bytes: Some(10),
                connect_ms: Some(7.5),
                ..Default::default()
            },
        );
        // Stores in the order of `STORES`, whatever the measurement order.
        assert_eq!(
            a.to_json(),
            r#"{"key":"417","colo":"FRA","order":["upstash","kv","denokv"],"isolate_requests":12,"concurrent":0,"stores":{"kv":{"read_ms":12.0,"hit":true,"value_bytes":23456,"write_ms":null,"error":null},"upstash":{"read_ms":3.0,"hit":false,"value_bytes":40000,"write_ms":2.0,"error":null},"denokv":{"read_ms":4.0,"hit":true,"value_bytes":10,"write_ms":null,"connect_ms":7.5,"error":null}},"kvLatency":12.0,"redisLatency":3.0}"#
        );
    }

    #[test]
    fn failed_reads_have_no_legacy_latency() {
        let mut a = Answer::new("1".into(), "local".into(), 1);
        a.push(
            StoreId::Kv,
            StoreResult {
                read_ms: Some(10_000.0),
                error: Some(failed(StoreError::new(ErrorKind::Timeout, "t"), Op::Read)),
                ..Default::default()
            },
        );
        assert_eq!(a.kv_latency, None);
    }
}
