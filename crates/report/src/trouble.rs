//! What went wrong, explained: the request failures, store errors and fleet members out of place
//! common enough to change what the figures mean — more than [`THRESHOLD`] of the requests, of
//! the store's reads or writes, or of a member's answers — each with one sentence on its likely
//! cause, for the printers to show right after the answer. The errors table keeps every count;
//! this says which ones matter and why.

use serde::{Deserialize, Serialize};

use crate::report::Report;

/// The share above which a kind is shown.
pub const THRESHOLD: f64 = 0.01;

/// One kind of failure that matters in this report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trouble {
    /// `request` (a request that got no `/test` answer), `kept` (answers measured but not kept),
    /// the store's name, or a fleet member's label (its answers' place: [`PLACE_KINDS`]).
    pub source: String,
    /// The failure kind (`timeout`, `http_503`), or a store error as `kind/op`.
    pub kind: String,
    pub count: u64,
    /// Of the requests scheduled (those and the unkept ones for `kept`), of the store's reads
    /// (writes for `…/write`), or of the member's kept lines.
    pub of: u64,
    pub share: f64,
    /// Its likely cause, in one sentence.
    pub cause: String,
}

/// The kinds above [`THRESHOLD`], the most common first.
pub fn of(report: &Report) -> Vec<Trouble> {
    let t = &report.total;
    let mut out = Vec::new();
    for (kind, n) in &t.failures {
        push(&mut out, "request", kind, *n, t.scheduled);
    }
    if let Some(n) = report.keep_failed() {
        // Fits: Report::check sums them when a report is read.
        push(
            &mut out,
            "kept",
            "keep_failed",
            n,
            t.scheduled.saturating_add(n),
        );
    }
    for (store, s) in &t.stores {
        for (key, n) in &s.errors {
            let of = match key.rsplit_once('/').map(|(_, op)| op) {
                Some("write") => s.writes,
                Some("read") => s.reads,
                _ => s.answers,
            };
            push(&mut out, store, key, *n, of);
        }
    }
    for (label, v) in &report.vantages {
        let lines = [
            v.cold,
            v.warm,
            v.failed,
            v.unplaced,
            v.elsewhere,
            v.trace_elsewhere,
        ]
        .into_iter()
        .fold(0u64, u64::saturating_add);
        let [elsewhere, disagrees] = PLACE_KINDS;
        push(&mut out, label, elsewhere, v.trace_elsewhere, lines);
        push(&mut out, label, disagrees, v.trace_disagrees, lines);
    }
    // Most common first; ties in source and kind order (the maps' order, kept by a stable sort).
    out.sort_by(|a, b| b.share.total_cmp(&a.share));
    out
}

fn push(out: &mut Vec<Trouble>, source: &str, kind: &str, count: u64, of: u64) {
    if of == 0 || count == 0 {
        return;
    }
    let share = count as f64 / of as f64;
    if share > THRESHOLD {
        out.push(Trouble {
            source: source.into(),
            kind: kind.into(),
            count,
            of,
            share,
            cause: cause(source, kind).into(),
        });
    }
}

/// What a member's answers' place can go wrong by: its trace outside its region, and its two
/// witnesses (`cf-placement`, the trace) disagreeing.
pub const PLACE_KINDS: [&str; 2] = ["trace_elsewhere", "trace_disagrees"];

/// The likely cause of `kind` at `source`.
pub fn cause(source: &str, kind: &str) -> &'static str {
    match kind {
        "trace_elsewhere" => return "Cloudflare's trace, asked by the member's isolate, named a colo outside its region's metro: it did not run where its label says (placement did not apply, or Cloudflare served the region from another metro — add that colo to the region's colos if it is near), so these answers are kept but not counted in its row",
        "trace_disagrees" => return "the member's cf-placement header named one colo and its isolate's Cloudflare trace another: one witness of where it ran is wrong (the trace, asked at most an hour before, decides where it is known)",
        _ => {}
    }
    if source == "request" {
        return request_cause(kind);
    }
    if source == "kept" {
        return "answers the worker measured but could not keep (its Durable Object refused or timed out the append, or the isolate ended before it): in no other count, so every figure here is of the rest";
    }
    let error = kind.split('/').next().unwrap_or(kind);
    match (error, source) {
        ("rate_limited", "postgres") => {
            "the server's connection limit: the postgres store opens a connection per request, so at a high rate they run out (hyperdrive pools them)"
        }
        ("rate_limited", _) => "the store throttled the request rate (its plan's limit)",
        ("timeout", _) => {
            "the store did not answer within timeout_ms; the call was abandoned (a slow or overloaded store, or a network path that drops packets)"
        }
        ("auth", _) => "the store refused the credentials (its token or password)",
        ("connect", _) => {
            "the store's connection could not be opened or upgraded to TLS, or was lost (its URL, the network, its certificate, or the server is down)"
        }
        ("protocol", _) => {
            "the server broke the store's protocol (it is not that store, or a message passed the size limit)"
        }
        ("http", _) => {
            "the store answered an unexpected HTTP status or a command error (the errors table's example says which)"
        }
        ("decode", _) => "the store answered with a body of the wrong shape",
        ("runtime", _) => "the platform failed the call (a network error or a binding exception)",
        ("not_configured", _) => {
            "the store is not configured here: a missing binding, URL or token (the worker's GET / says which)"
        }
        _ => "a kind this version does not explain (the errors table's example has its message)",
    }
}

fn request_cause(kind: &str) -> &'static str {
    match kind {
        "not_sent" => {
            "kvbench's --max-in-flight was reached: answers came slower than the rate needs, so this load was not offered"
        }
        "timeout" => {
            "no complete answer within kvbench's --timeout (a slow worker or store, or requests queued behind others)"
        }
        "connect" => "the worker's address could not be reached (its URL, DNS, TLS, or the server is not running)",
        "transport" => "the connection broke before any byte of an answer (a reset or a restart of the server)",
        "truncated" => "the answer stopped part way (the connection broke, or it passed 4 MiB)",
        "malformed" => "a 200 whose body is not a /test answer (another service at that URL, or another version)",
        "cancelled" => "still in flight when the run ended and its grace period ran out",
        "http_400" => "the worker refused a parameter (its answer names it)",
        "http_401" | "http_403" => {
            "the worker refused the call: BENCH_TOKEN missing or wrong (--token), or /test closed without one"
        }
        "http_404" => "nothing answers /test at this URL",
        "http_429" => "rate limited in front of the worker (Cloudflare's limits or a rule of the zone)",
        "http_503" => {
            "the worker shed load: its isolate's memory budget for values in flight was full (it says Retry-After: 1)"
        }
        k if k.starts_with("http_5") => "the worker or the platform failed (an exception, or a limit such as CPU time)",
        _ => "a kind this version does not explain (the errors table's example has its message)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::StoreStats;

    fn report() -> Report {
        Report::empty()
    }

    #[test]
    fn only_what_passes_one_percent_most_common_first() {
        let mut r = report();
        r.total.scheduled = 1_000;
        r.total.failures.insert("timeout".into(), 30);
        r.total.failures.insert("http_503".into(), 10); // exactly 1%: not shown
        let mut pg = StoreStats {
            reads: 2_937,
            writes: 900,
            answers: 2_937,
            ..StoreStats::default()
        };
        pg.errors.insert("rate_limited/read".into(), 2_021);
        pg.errors.insert("timeout/write".into(), 5); // 0.6% of writes
        r.total.stores.insert("postgres".into(), pg);
        let t = of(&r);
        let shown: Vec<(&str, &str, u64, u64)> = t
            .iter()
            .map(|t| (t.source.as_str(), t.kind.as_str(), t.count, t.of))
            .collect();
        assert_eq!(
            shown,
            [
                ("postgres", "rate_limited/read", 2_021, 2_937),
                ("request", "timeout", 30, 1_000)
            ]
        );
        assert!(t[0].cause.contains("connection limit"), "{}", t[0].cause);
        assert!((t[1].share - 0.03).abs() < 1e-12);
    }

    #[test]
    fn every_kind_has_a_cause_and_unknown_ones_say_so() {
        for kind in [
            "timeout/read",
            "auth/read",
            "http/write",
            "decode/read",
            "rate_limited/read",
            "not_configured/read",
            "runtime/write",
            "connect/read",
            "protocol/read",
        ] {
            assert!(
                !cause("kv", kind).starts_with("a kind this version"),
                "{kind}"
            );
        }
        for kind in [
            "not_sent",
            "timeout",
            "connect",
            "transport",
            "truncated",
            "malformed",
            "cancelled",
            "http_400",
            "http_401",
            "http_403",
            "http_404",
            "http_429",
            "http_503",
            "http_500",
        ] {
            assert!(
                !cause("request", kind).starts_with("a kind this version"),
                "{kind}"
            );
        }
        assert!(cause("kv", "brand_new/read").starts_with("a kind this version"));
        assert!(cause("request", "http_302").starts_with("a kind this version"));
        // The store matters where the cause differs.
        assert_ne!(
            cause("postgres", "rate_limited/read"),
            cause("upstash", "rate_limited/read")
        );
    }

    #[test]
    fn answers_not_kept_are_trouble_over_one_percent() {
        let mut r = report();
        r.total.scheduled = 90;
        let run = |keep_failed| crate::report::RunInfo {
            import: Some(crate::report::ImportInfo {
                keep_failed,
                ..Default::default()
            }),
            ..crate::report::RunInfo::empty()
        };
        r.runs = vec![run(Some(6)), run(None), run(Some(4))];
        assert_eq!(r.keep_failed(), Some(10));
        let t = of(&r);
        assert_eq!(
            (
                t[0].source.as_str(),
                t[0].kind.as_str(),
                t[0].count,
                t[0].of
            ),
            ("kept", "keep_failed", 10, 100)
        );
        assert!(t[0].cause.contains("could not keep"));
        r.runs = vec![run(None)];
        assert_eq!(r.keep_failed(), None);
        assert!(of(&r).is_empty());
    }

    #[test]
    fn a_member_whose_trace_is_outside_its_region_is_named() {
        use crate::report::VantagePoint;
        let mut r = report();
        let member = |warm, trace_elsewhere, trace_disagrees| VantagePoint {
            vantage: "member".into(),
            warm,
            trace_elsewhere,
            trace_disagrees,
            ..VantagePoint::default()
        };
        r.vantages
            .insert("aws:eu-central-1".into(), member(0, 12, 0));
        r.vantages.insert("aws:us-east-1".into(), member(40, 0, 10));
        // 1 in 200: under the threshold, not shown.
        r.vantages
            .insert("aws:ap-northeast-1".into(), member(199, 1, 0));
        let t = of(&r);
        let shown: Vec<(&str, &str, u64, u64)> = t
            .iter()
            .map(|t| (t.source.as_str(), t.kind.as_str(), t.count, t.of))
            .collect();
        assert_eq!(
            shown,
            [
                ("aws:eu-central-1", "trace_elsewhere", 12, 12),
                ("aws:us-east-1", "trace_disagrees", 10, 40)
            ]
        );
        assert!(t[0].cause.contains("outside its region"), "{}", t[0].cause);
        assert!(t[1].cause.contains("cf-placement"), "{}", t[1].cause);
    }

    #[test]
    fn nothing_sent_or_nothing_failed_is_no_trouble() {
        let mut r = report();
        r.total.failures.insert("timeout".into(), 3); // scheduled 0: no share
        r.total.stores.insert("kv".into(), StoreStats::default());
        assert!(of(&r).is_empty());
    }
}
