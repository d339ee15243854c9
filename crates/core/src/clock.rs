//! Time, behind traits: the worker reads `Date.now()` and sleeps with a JS timer, tests use fakes.
//! Deployed Workers advance the clock only across I/O, so only awaited store calls are timed.

use async_trait::async_trait;

/// A monotonic-enough millisecond clock.
pub trait Clock {
    fn now_ms(&self) -> f64;
}

/// Sleeps; used to bound every store call by the per-store timeout.
#[async_trait(?Send)]
pub trait Timer {
    async fn sleep_ms(&self, ms: u64);
}
