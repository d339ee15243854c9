//! The errors table as plain data: the failed requests by kind (the client's side, then the
//! worker's) with an example, then each store's errors in answers and its timed-out calls —
//! built once and laid out by the text and the HTML printers.

use crate::report::Section;
use crate::sample::Side;

/// Every error of a section, in the order both printers list them.
#[derive(Debug, Clone, PartialEq)]
pub struct Errors<'a> {
    pub requests: Vec<Request<'a>>,
    pub stores: Vec<Store<'a>>,
}

/// Failed requests of one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Request<'a> {
    pub side: Side,
    pub kind: &'a str,
    pub count: u64,
    /// Its first example, empty when none was kept.
    pub example: &'a str,
}

/// One store's errors by kind, and its timed-out calls waited for.
#[derive(Debug, Clone, PartialEq)]
pub struct Store<'a> {
    pub store: &'a str,
    pub errors: Vec<(&'a str, u64)>,
    /// `(finished, still running)`, when any call timed out.
    pub abandoned: Option<(u64, u64)>,
}

impl Errors<'_> {
    /// No failed request and no store error (timed-out calls aside).
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty() && self.stores.iter().all(|s| s.errors.is_empty())
    }
}

/// The view of a section's errors.
pub fn of(t: &Section) -> Errors<'_> {
    let mut requests = Vec::new();
    for side in [Side::Client, Side::Worker] {
        for (kind, n) in t.failures.iter().filter(|(k, _)| Side::of_name(k) == side) {
            let example = t.failure_examples.get(kind).and_then(|e| e.first());
            requests.push(Request {
                side,
                kind,
                count: *n,
                example: example.map_or("", String::as_str),
            });
        }
    }
    let stores = t
        .stores
        .iter()
        .map(|(store, s)| Store {
            store,
            errors: s.errors.iter().map(|(k, n)| (k.as_str(), *n)).collect(),
            abandoned: (s.abandoned_finished + s.abandoned_running > 0)
                .then_some((s.abandoned_finished, s.abandoned_running)),
        })
        .collect();
    Errors { requests, stores }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::StoreStats;

    #[test]
    fn requests_by_side_then_each_stores_errors_and_its_timed_out_calls() {
        let mut t = Section::default();
        for (kind, n) in [("timeout", 3), ("http_500", 2), ("connect", 1)] {
            t.failures.insert(kind.into(), n);
        }
        t.failure_examples
            .insert("http_500".into(), vec!["boom".into(), "later".into()]);
        let mut kv = StoreStats::default();
        kv.errors.insert("quota".into(), 4);
        kv.abandoned_running = 1;
        t.stores.insert("kv".into(), kv);
        t.stores.insert("upstash".into(), StoreStats::default());
        let e = of(&t);
        let requests: Vec<(Side, &str, u64, &str)> = e
            .requests
            .iter()
            .map(|r| (r.side, r.kind, r.count, r.example))
            .collect();
        assert_eq!(
            requests,
            [
                (Side::Client, "connect", 1, ""),
                (Side::Client, "timeout", 3, ""),
                (Side::Worker, "http_500", 2, "boom"),
            ]
        );
        let kv = e.stores.first().map(|s| (s.store, &s.errors, s.abandoned));
        assert_eq!(kv, Some(("kv", &vec![("quota", 4)], Some((0, 1)))));
        assert_eq!(e.stores.get(1).map(|s| s.abandoned), Some(None));
        assert!(!e.is_empty());
    }

    #[test]
    fn timed_out_calls_alone_are_no_errors() {
        let mut t = Section::default();
        let kv = StoreStats {
            abandoned_finished: 2,
            ..StoreStats::default()
        };
        t.stores.insert("kv".into(), kv);
        assert!(of(&t).is_empty());
        t.failures.insert("timeout".into(), 1);
        assert!(!of(&t).is_empty());
    }
}
