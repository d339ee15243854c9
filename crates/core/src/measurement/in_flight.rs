//! Requests in flight in one isolate: a deployed clock moves only at I/O, so one request's CPU
//! lands in the others' open spans. Each answer says how many overlapped it (`concurrent`).

use std::cell::Cell;

/// The isolate's count of requests in flight, and of requests started so far.
#[derive(Debug, Default)]
pub struct InFlight {
    running: Cell<u32>,
    started: Cell<u64>,
    /// The most requests seen in flight at once.
    peak: Cell<u32>,
}

impl InFlight {
    /// A request begins; it ends when the returned guard is dropped.
    pub fn enter(&self) -> Visit<'_> {
        let others_at_start = self.running.get();
        self.running.set(others_at_start + 1);
        self.peak.set(self.peak.get().max(others_at_start + 1));
        self.started.set(self.started.get() + 1);
        Visit {
            owner: self,
            others_at_start,
            started_at: self.started.get(),
        }
    }

    /// Requests in flight now.
    pub fn running(&self) -> u32 {
        self.running.get()
    }

    /// The most requests this isolate has had in flight at once.
    pub fn peak(&self) -> u32 {
        self.peak.get()
    }
}

/// One request in flight.
#[derive(Debug)]
pub struct Visit<'a> {
    owner: &'a InFlight,
    others_at_start: u32,
    started_at: u64,
}

impl Visit<'_> {
    /// Other requests that were in flight at some moment of this one: those running when it began
    /// plus those that began since.
    pub fn others(&self) -> u32 {
        let since = self.owner.started.get() - self.started_at;
        self.others_at_start
            .saturating_add(u32::try_from(since).unwrap_or(u32::MAX))
    }

    /// No other request is in flight right now.
    pub fn alone(&self) -> bool {
        self.owner.running.get() == 1
    }
}

impl Drop for Visit<'_> {
    fn drop(&mut self) {
        self.owner.running.set(self.owner.running.get() - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlaps_are_counted_from_both_sides() {
        let f = InFlight::default();
        let a = f.enter();
        assert!(a.alone());
        let b = f.enter();
        assert_eq!(b.others(), 1, "a was running when b began");
        assert!(!a.alone());
        let c = f.enter();
        drop(b);
        assert_eq!(a.others(), 2, "b and c began while a ran");
        assert_eq!(c.others(), 2, "a and b were running when c began");
        drop(c);
        assert!(a.alone());
        assert_eq!(a.others(), 2, "a past overlap stays counted");
        drop(a);
        let d = f.enter();
        assert_eq!(d.others(), 0);
        assert_eq!(f.running(), 1);
    }
}
