//! Freshness: how long after a write is acknowledged at one vantage point a read at another returns
//! it. A report keeps each round's outcome as measured ([`Round`]); the rows are derived from them.
//!
//! Every time comes from one clock, the round runner's: the write was acknowledged somewhere in
//! its call `[write sent, answer received]`, the new version became visible after the start of
//! the last read that missed it and before the end of the first read that saw it. So each round's
//! time to visible is an interval `[low, high]`, never a difference of two machines' clocks.

use serde::{Deserialize, Serialize};

use crate::interval::{ranks, LEVEL};

/// Whether the reader had read the key's previous version just before the write (the case KV's
/// cache keeps serving) or never read the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Case {
    Primed,
    Cold,
}

impl Case {
    pub fn as_str(self) -> &'static str {
        match self {
            Case::Primed => "primed",
            Case::Cold => "cold",
        }
    }
}

/// One round of one store (and consistency option) from the writer to one reader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// The store and its option as a row names it: `kv`, `kv cache_ttl=30`, `denokv eventual`.
    pub store: String,
    pub writer: String,
    pub reader: String,
    pub case: Case,
    /// How often the reader read, and for how long at most, in ms.
    pub interval_ms: u32,
    pub limit_ms: u32,
    /// Bounds of the time from the acknowledgement to the new version's visibility, in ms;
    /// `None`: not seen within the limit.
    pub visible_ms: Option<(f64, f64)>,
    /// Reads started after the acknowledgement, and those of them that returned an older
    /// version (or nothing).
    pub reads: u32,
    pub stale: u32,
    /// Reads that returned an older version after one had returned the new one.
    pub went_back: u32,
    /// Reads that failed (a store error): neither fresh nor stale.
    pub errors: u32,
    /// A store whose copies never leave where they were written (the Cache API): read a few
    /// times elsewhere to show it, never waited for until the limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_location: bool,
}

/// One row of the freshness table: a store from a writer to a reader in one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub store: String,
    pub writer: String,
    pub reader: String,
    pub case: Case,
    pub rounds: usize,
    /// Rounds whose version never appeared within the limit.
    pub never: usize,
    /// p50, p90 and p99 of the time to visible: the order statistics' interval widened by
    /// each round's own bounds (`None` where too few rounds saw the version).
    pub visible_ms: [Option<Visible>; 3],
    pub stale_share: Option<f64>,
    pub went_back: u32,
    pub errors: u32,
    pub per_location: bool,
    pub limit_ms: u32,
}

/// A percentile of the time to visible with its interval, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Visible {
    pub ms: f64,
    pub low_ms: f64,
    pub high_ms: f64,
    /// Too few rounds for an interval: the median with the range of every round's bounds.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ranged: bool,
}

/// The percentiles a row gives.
pub const PERCENTILES: [f64; 3] = [0.5, 0.9, 0.99];

/// The rows of `rounds`, by store, writer, reader and case.
pub fn rows(rounds: &[Round]) -> Vec<Row> {
    let mut keys: Vec<(&str, &str, &str, Case)> = rounds
        .iter()
        .map(|r| (&*r.store, &*r.writer, &*r.reader, r.case))
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|(store, writer, reader, case)| {
            let of: Vec<&Round> = rounds
                .iter()
                .filter(|r| {
                    (&*r.store, &*r.writer, &*r.reader, r.case) == (store, writer, reader, case)
                })
                .collect();
            row(store, writer, reader, case, &of)
        })
        .collect()
}

fn row(store: &str, writer: &str, reader: &str, case: Case, of: &[&Round]) -> Row {
    let seen: Vec<(f64, f64)> = of.iter().filter_map(|r| r.visible_ms).collect();
    let (reads, stale) = of
        .iter()
        .fold((0u32, 0u32), |(n, s), r| (n + r.reads, s + r.stale));
    Row {
        store: store.into(),
        writer: writer.into(),
        reader: reader.into(),
        case,
        rounds: of.len(),
        never: of.len() - seen.len(),
        visible_ms: PERCENTILES.map(|p| visible(&seen, p)),
        stale_share: (reads > 0).then(|| f64::from(stale) / f64::from(reads)),
        went_back: of.iter().map(|r| r.went_back).sum(),
        errors: of.iter().map(|r| r.errors).sum(),
        per_location: of.iter().any(|r| r.per_location),
        limit_ms: of.iter().map(|r| r.limit_ms).max().unwrap_or(0),
    }
}

/// The `p`-quantile of the rounds' times to visible (each round's midpoint), its interval from
/// the order statistics' ranks over the rounds' lower and upper bounds.
fn visible(seen: &[(f64, f64)], p: f64) -> Option<Visible> {
    let n = seen.len() as u64;
    let ((l, u), ranged) = match ranks(n, p, LEVEL) {
        Ok(ranks) => (ranks, false),
        Err(_) if p == 0.5 && n > 0 => ((1, n), true),
        Err(_) => return None,
    };
    let sorted = |f: fn(&(f64, f64)) -> f64| {
        let mut v: Vec<f64> = seen.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (mids, lows, highs) = (
        sorted(|b| (b.0 + b.1) / 2.0),
        sorted(|b| b.0),
        sorted(|b| b.1),
    );
    let at = |v: &[f64], rank: u64| v.get(rank.saturating_sub(1) as usize).copied();
    let rank = ((p * seen.len() as f64).ceil() as u64).max(1);
    Some(Visible {
        ms: at(&mids, rank)?,
        low_ms: at(&lows, l)?,
        high_ms: at(&highs, u)?,
        ranged,
    })
}

/// The table's heading, its note, its columns and a row's cells, drawn alike in text and HTML.
pub const TITLE: &str = "Fresh or fast: time from a write's acknowledgement to a read returning it";
pub const NOTE: &str = "ms from the acknowledgement of a write at the writer until a read at the reader returns the \
     new version: each percentile over the rounds with its 95% interval (order statistics, widened by \
     each round's own bounds). One clock: the round runner's, so no two machines' clocks are compared \
     — a round's bounds run from the start of the last read that missed the version to the end of \
     the first that saw it. primed: the reader read the previous version just before the write (what \
     KV's cache keeps serving); cold: it never read the key; writer → itself: read-your-write. stale: \
     reads started after the acknowledgement that returned an older version or none; went back: \
     reads older than one already seen. †: too few rounds for an interval — the median round \
     with [the lowest and highest of every round's bounds]. Locally (npm run bench) kv, d1, do and r2 are Miniflare's \
     single-copy emulations — their rows check the pipeline, not the cloud's propagation — while \
     upstash reads a real Redis replica and postgres/hyperdrive a hot standby behind the lag the \
     stack sets (KVBENCH_REPLICA_LAG_MS).";
pub const COLUMNS: [&str; 10] = [
    "store",
    "writer → reader",
    "case",
    "rounds",
    "never seen",
    "p50",
    "p90",
    "p99",
    "stale",
    "went back",
];

/// A row's cells, in [`COLUMNS`]' order.
pub fn cells(row: &Row) -> [String; 10] {
    [
        row.store.clone(),
        format!("{} → {}", row.writer, row.reader),
        row.case.as_str().into(),
        row.rounds.to_string(),
        row.never.to_string(),
        cell(row, 0),
        cell(row, 1),
        cell(row, 2),
        stale_cell(row),
        row.went_back.to_string(),
    ]
}

/// A row's time-to-visible cell: `p50 (low–high)`, or why there is none.
pub fn cell(row: &Row, i: usize) -> String {
    match (row.visible_ms.get(i).copied().flatten(), row.per_location) {
        (_, true) if row.writer != row.reader => "only where written".into(),
        (Some(v), _) if v.ranged => format!("{:.0} [{:.0}–{:.0}]†", v.ms, v.low_ms, v.high_ms),
        (Some(v), _) => format!("{:.0} ({:.0}–{:.0})", v.ms, v.low_ms, v.high_ms),
        (None, _) if row.never == row.rounds => format!("not within {} s", row.limit_ms / 1000),
        (None, _) => "too few rounds".into(),
    }
}

/// A row's stale share as a percentage cell.
pub fn stale_cell(row: &Row) -> String {
    row.stale_share
        .map_or("-".into(), |s| format!("{:.0}%", s * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(reader: &str, visible_ms: Option<(f64, f64)>) -> Round {
        Round {
            store: "upstash".into(),
            writer: "w".into(),
            reader: reader.into(),
            case: Case::Primed,
            interval_ms: 100,
            limit_ms: 10_000,
            visible_ms,
            reads: 10,
            stale: 4,
            went_back: 0,
            errors: 0,
            per_location: false,
        }
    }

    #[test]
    fn rows_group_by_reader_and_count_rounds_never_seen() {
        let mut rounds: Vec<Round> = (0..20)
            .map(|i| round("r", Some((1_000.0 + f64::from(i), 1_100.0 + f64::from(i)))))
            .collect();
        rounds.push(round("r", None));
        rounds.push(round("w", Some((0.0, 3.0))));
        let rows = rows(&rounds);
        assert_eq!(rows.len(), 2);
        let r = &rows[0];
        assert_eq!((r.reader.as_str(), r.rounds, r.never), ("r", 21, 1));
        let p50 = r.visible_ms[0].unwrap();
        // 20 seen: the 10th midpoint, its interval from the rounds' own bounds.
        assert_eq!(p50.ms, 1_059.0);
        assert!(p50.low_ms >= 1_000.0 && p50.low_ms <= 1_009.0, "{p50:?}");
        assert!(p50.high_ms >= 1_110.0 && p50.high_ms <= 1_119.0, "{p50:?}");
        assert_eq!(r.visible_ms[2], None, "20 rounds do not support a p99");
        assert_eq!(r.stale_share, Some(0.4));
        assert_eq!(cell(r, 2), "too few rounds");
        assert_eq!(rows[1].reader, "w");
        // One round: its own bounds, marked.
        assert_eq!(cell(&rows[1], 0), "2 [0–3]†");
        assert_eq!(cell(&rows[1], 1), "too few rounds");
    }

    #[test]
    fn a_store_never_seen_says_its_limit_and_a_per_location_store_says_so() {
        let mut never = round("r", None);
        assert_eq!(cell(&rows(&[never.clone()])[0], 0), "not within 10 s");
        never.per_location = true;
        assert_eq!(cell(&rows(&[never])[0], 0), "only where written");
    }
}
