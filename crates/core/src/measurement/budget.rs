//! The isolate's memory budget for value bytes in flight: wasm memory never shrinks, so a burst
//! of 1 MiB requests would ratchet it towards the 128 MB limit. A request reserves its worst
//! case before touching a store; one that does not fit is a 503 at once, never queued.

use std::cell::Cell;

/// Bytes of values one isolate may hold in flight: with what it holds idle (docs/measured.md),
/// under the 128 MB limit with room.
pub const ISOLATE_BUDGET_BYTES: u64 = 96 << 20;

/// What a request holds per store measured, in quarters of `max_bytes`, besides the value (its
/// JS copy, the write bodies, the hits waiting to be sized, the read in flight): measured with
/// `bench/memory.mjs` under this count (docs/measured.md).
const QUARTERS_PER_STORE: u64 = 3;

/// What a request with these parameters may hold at its peak, bytes.
pub fn request_cost(max_bytes: u32, stores: usize) -> u64 {
    u64::from(max_bytes) * (4 + QUARTERS_PER_STORE * stores as u64) / 4
}

/// The isolate's counter of reserved bytes.
#[derive(Debug, Default)]
pub struct Budget {
    reserved: Cell<u64>,
    limit: Cell<u64>,
}

/// A reservation, released when dropped (also when a request is cancelled mid-flight).
#[derive(Debug)]
pub struct Reservation<'a> {
    budget: &'a Budget,
    bytes: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let b = self.budget;
        b.reserved.set(b.reserved.get().saturating_sub(self.bytes));
    }
}

impl Budget {
    /// A budget of `limit` bytes (the worker uses [`ISOLATE_BUDGET_BYTES`]).
    pub fn new(limit: u64) -> Budget {
        Budget {
            reserved: Cell::new(0),
            limit: Cell::new(limit),
        }
    }

    pub fn limit(&self) -> u64 {
        self.limit.get()
    }

    pub fn reserved(&self) -> u64 {
        self.reserved.get()
    }

    /// Reserves `bytes`, or `None` when they do not fit next to what is already in flight. A
    /// request larger than the whole budget can never fit; params bound `max_bytes` so it does.
    pub fn reserve(&self, bytes: u64) -> Option<Reservation<'_>> {
        let now = self.reserved.get();
        if now.saturating_add(bytes) > self.limit.get() {
            return None;
        }
        self.reserved.set(now + bytes);
        Some(Reservation {
            budget: self,
            bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_fit_and_are_released() {
        let b = Budget::new(100);
        let a = b.reserve(60).unwrap();
        assert!(b.reserve(41).is_none());
        let c = b.reserve(40).unwrap();
        assert_eq!(b.reserved(), 100);
        drop(a);
        assert_eq!(b.reserved(), 40);
        drop(c);
        assert_eq!(b.reserved(), 0);
    }

    #[test]
    fn the_largest_request_fits_an_idle_isolate() {
        // 1 MiB values across every default store but Deno KV (64 KiB values): 6.25 MiB, so
        // an idle isolate runs fifteen such requests at once; with the two Postgres stores as
        // well, 7.75 MiB: twelve.
        let stores = crate::StoreId::DEFAULT.len() - 1;
        let cost = request_cost(1 << 20, stores);
        assert_eq!(cost, (25 << 20) / 4);
        assert_eq!(ISOLATE_BUDGET_BYTES / cost, 15);
        let cost = request_cost(1 << 20, crate::StoreId::ALL.len() - 1);
        assert_eq!(ISOLATE_BUDGET_BYTES / cost, 12);
    }

    #[test]
    fn two_hundred_default_requests_fit_one_isolate() {
        // The published single-region run is 400 requests/s: an isolate must admit 200 default
        // requests (the eight default stores, values up to 64 KiB) in flight at once.
        let d = crate::Defaults::default();
        let cost = request_cost(d.max_bytes, d.stores.len());
        assert_eq!(cost, 7 * 64 * 1024);
        assert!(ISOLATE_BUDGET_BYTES / cost >= 200);
    }
}
