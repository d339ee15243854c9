//! The answer first: one row per store (per vantage point when the report has several) with its
//! read p50, p90 and p99, each with a 95% interval that counts the run-to-run spread
//! ([`crate::block`] over [`crate::interval`]), how steady it was across the run
//! ([`crate::stability`]), the share of its reads that failed and its monthly cost at the
//! measured rate — ranked by p50. Each row is compared with the row above as the pair they
//! are: every `/test` answer times all its stores, so the ratio of their percentiles span by
//! span (run by run in a merge) cancels what moved both, and its interval (t over the spans)
//! decides the order; where the pairing is absent, whether their intervals overlap does. A
//! percentile its sample cannot support is said to be so, never printed as a number.

use serde::{Deserialize, Serialize};

use crate::block::{self, Basis, Widened};
use crate::cost::Estimate;
use crate::hist::Hist;
use crate::interval::{self, IntervalError, LEVEL};
use crate::report::{Report, RunInfo, Section, StoreStats, Timeline};
use crate::stability::Stability;
use crate::stretch::Stretches;

/// The percentiles of a row, in its columns' order.
pub const PERCENTILES: [f64; 3] = [0.50, 0.90, 0.99];

/// The comparison the printers put first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Which reads the rows are of: `warm` (answers of an instance that had answered before;
    /// cold answers are in the report's cold rows).
    pub reads: String,
    /// Answers of a new instance, left out of the rows (their reads are the cold rows of the
    /// latency table), and what a new instance is for each kind of vantage point in the report.
    #[serde(default)]
    pub cold_answers: u64,
    #[serde(default)]
    pub cold_means: Vec<String>,
    /// The intervals' confidence level.
    pub level: f64,
    /// Grouped by vantage point (in label order) when there are any, ranked within each group.
    pub rows: Vec<Row>,
}

/// One store (at one vantage point).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vantage: Option<String>,
    pub store: String,
    /// The row's place in its group by p50, 1 for the lowest.
    pub rank: u32,
    /// The sample does not tell this row from the one ranked just above it: the paired p50
    /// ratio's interval holds 1, or (unpaired) the two p50 intervals overlap.
    pub tie: bool,
    /// This row against the one ranked just above it; absent for the first row of a group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versus: Option<Versus>,
    /// Successful reads the percentiles are of.
    pub reads: u64,
    /// Where the intervals come from: `windows` (they count the spread across the run's
    /// timeline windows, or a vantage point's stretches of them) or `within_run` (the
    /// order-statistic interval alone: fewer than [`block::MIN_WINDOWS`] of them).
    #[serde(default)]
    pub basis: Basis,
    /// The store's timeline windows with reads; for a vantage point's row, its stretches with
    /// reads ([`crate::stretch`]: the timeline pools every vantage point).
    #[serde(default)]
    pub windows: u64,
    /// The percentiles' range across the run's spans of windows; absent with too few windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stability: Option<Stability>,
    /// The percentiles' range across the runs of a merge (each run's reads against the pooled
    /// percentiles); absent for one run, and for a vantage point's row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub across_runs: Option<Stability>,
    pub p50: Cell,
    pub p90: Cell,
    pub p99: Cell,
    /// Failed reads over all reads of this store (cold answers' included); `null` when it made
    /// none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_rate: Option<f64>,
    /// The store's cheapest current plan that the month fits (its limits) at the report's
    /// projected rate (its cost table), USD a month, and that plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monthly_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
}

/// One percentile of a row: the figure with its interval, in ms, or why there is none.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Cell {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<f64>,
    /// The interval printed: the row's `basis` says where it comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_ms: Option<f64>,
    /// The order-statistic interval alone (every answer an independent draw), for comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_low_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_high_ms: Option<f64>,
    /// The interval is the within-run one alone ([`Basis::WithinRun`]): marked `†` in print.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub within_run_only: bool,
    /// `n = 40: too few for p99 (needs n ≥ 368)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub too_few: Option<String>,
}

/// The mark of a cell whose interval is the within-run one alone.
pub const WITHIN_RUN_MARK: &str = "†";

impl Cell {
    fn of(p: &Result<Widened, IntervalError>) -> Cell {
        let ms = |us: u64| Some(us as f64 / 1000.0);
        match p {
            Ok(p) => Cell {
                ms: ms(p.within.estimate),
                low_ms: ms(p.low),
                high_ms: ms(p.high),
                within_low_ms: ms(p.within.low),
                within_high_ms: ms(p.within.high),
                within_run_only: p.basis == Basis::WithinRun,
                too_few: None,
            },
            Err(e) => Cell {
                too_few: Some(e.to_string()),
                ..Cell::default()
            },
        }
    }

    /// `12.34 (11.90–12.80)` (`†` after it when the interval is the within-run one alone), or
    /// the reason there is no figure.
    pub fn text(&self) -> String {
        match (self.ms, self.low_ms, self.high_ms, &self.too_few) {
            (Some(ms), Some(low), Some(high), _) => {
                let mark = if self.within_run_only {
                    WITHIN_RUN_MARK
                } else {
                    ""
                };
                format!("{ms:.2} ({low:.2}–{high:.2}){mark}")
            }
            (_, _, _, Some(why)) => why.clone(),
            _ => "-".into(),
        }
    }
}

/// A row against the row ranked above it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Versus {
    /// The store of the row above.
    pub store: String,
    /// What the ratios are over: `spans` (of the windows both stores have reads in), `runs` (each
    /// of three or more merged runs one unit), or `unpaired` (then `ratios` is empty).
    pub paired: Pairing,
    /// Why unpaired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// This row's percentile over the row above's, where at least 3 units support both.
    pub ratios: Vec<Ratio>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pairing {
    Spans,
    Runs,
    Unpaired,
}

/// The geometric mean over `units` of the ratio of two stores' percentile `p`, with its
/// interval: exp(mean ± t·s/√units) of the log-ratios, t with `units − 1` degrees of freedom.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub p: f64,
    pub units: u32,
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
}

impl Versus {
    /// `vs upstash, paired over 7 spans: p50 ×1.31 (1.24–1.38) · p90 ×1.20 (1.10–1.31): upstash
    /// faster than kv by 31% (24–38%)`, or `… : no difference beyond ±4%: no leader`.
    pub fn text(&self, store: &str) -> String {
        let Some(p50) = self
            .ratios
            .first()
            .filter(|_| self.paired != Pairing::Unpaired)
        else {
            let why = self.why.as_deref().unwrap_or("");
            return format!(
                "vs {}: unpaired ({why}): compared by whether the p50 intervals overlap",
                self.store
            );
        };
        let what = if self.paired == Pairing::Runs {
            "merged runs"
        } else {
            "spans"
        };
        let ratios: Vec<String> = (self.ratios.iter())
            .map(|r| {
                format!(
                    "p{} ×{:.2} ({:.2}–{:.2})",
                    crate::stability::pct(r.p),
                    r.ratio,
                    r.low,
                    r.high
                )
            })
            .collect();
        // The faster store first, by how much longer the slower takes.
        let (fast, slow, r) = match p50.high < 1.0 {
            true => (
                store,
                self.store.as_str(),
                [1.0 / p50.ratio, 1.0 / p50.high, 1.0 / p50.low],
            ),
            false => (self.store.as_str(), store, [p50.ratio, p50.low, p50.high]),
        };
        let [by, low, high] = r.map(|x| (x - 1.0) * 100.0);
        let verdict = if p50.low > 1.0 || p50.high < 1.0 {
            format!("{fast} faster than {slow} by {by:.0}% ({low:.0}–{high:.0}%)")
        } else {
            let half = ((p50.high / p50.low).sqrt() - 1.0) * 100.0;
            format!("no difference beyond ±{half:.0}%: no leader")
        };
        format!(
            "vs {}, paired over {} {what}: {}: {verdict}",
            self.store,
            p50.units,
            ratios.join(" · ")
        )
    }

    /// The sample cannot order the two: the p50 ratio's interval holds 1.
    fn tie(&self) -> Option<bool> {
        let p50 = self
            .ratios
            .first()
            .filter(|_| self.paired != Pairing::Unpaired)?;
        Some(p50.low <= 1.0 && 1.0 <= p50.high)
    }
}

/// The ratio of `b`'s percentile `p` over `a`'s across `units` (each a pair of the two stores'
/// reads from the same answers), over those units whose reads support `p` in both; `None` with
/// fewer than 3 of them.
fn ratio(units: &[(Hist, Hist)], p: f64) -> Option<Ratio> {
    let logs: Vec<f64> = (units.iter())
        .filter(|(a, b)| [a, b].iter().all(|h| interval::supports(h.len(), p, LEVEL)))
        .map(|(a, b)| (b.quantile(p).max(1) as f64 / a.quantile(p).max(1) as f64).ln())
        .collect();
    let k = logs.len() as f64;
    if logs.len() < 3 {
        return None;
    }
    let mean = logs.iter().sum::<f64>() / k;
    let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt();
    let reach = block::t_quantile(1.0 - (1.0 - LEVEL) / 2.0, k - 1.0) * sd / k.sqrt();
    Some(Ratio {
        p,
        units: logs.len() as u32,
        ratio: mean.exp(),
        low: (mean - reach).exp(),
        high: (mean + reach).exp(),
    })
}

impl Row {
    /// What the row's intervals rest on and how steady the store was, in words — the line the
    /// printers put under the row: its percentiles' range across the run's spans, or why its
    /// intervals are the within-run ones alone (`†`).
    pub fn note(&self) -> String {
        let note = self.windows_note();
        match &self.across_runs {
            Some(runs) => format!("{note} · {}", runs.text()),
            None => note,
        }
    }

    fn windows_note(&self) -> String {
        match (&self.stability, self.vantage.is_some()) {
            (Some(s), _) => format!("across the run: {}", s.text()),
            (None, true) => format!(
                "{WITHIN_RUN_MARK} within-run intervals only: {} stretch(es) of the window with reads, {} needed to measure the spread across it",
                self.windows,
                block::MIN_WINDOWS
            ),
            (None, false) => format!(
                "{WITHIN_RUN_MARK} within-run intervals only: {} timeline window(s) with reads, {} needed to measure the spread across the run",
                self.windows,
                block::MIN_WINDOWS
            ),
        }
    }

    /// `unstable: p99 ranged 31.00–140.00 ms across 6 spans` when the spans disagree.
    pub fn flag(&self) -> Option<String> {
        let flags: Vec<String> = [&self.stability, &self.across_runs]
            .into_iter()
            .filter_map(|s| s.as_ref()?.flag())
            .collect();
        (!flags.is_empty()).then(|| flags.join(" · "))
    }
}

/// The comparison of `report`: each vantage point's warm reads when it has vantage points, else
/// the whole report's, each store priced at its cheapest plan of `cost`; `None` when no store
/// was read.
pub fn of(report: &Report, cost: Option<&Estimate>) -> Option<Comparison> {
    #[cfg(test)]
    crate::testing::computed(true);
    let mut rows = Vec::new();
    if report.vantages.is_empty() {
        let stores = stores_of(report, Some(&report.total));
        rows.extend(group(
            None,
            stores,
            Windows::Timeline(&report.timeline, &report.runs),
            cost,
        ));
    } else {
        // The timeline is of all vantage points together: each one's rows read its stretches.
        for label in report.vantages.keys() {
            let stores = stores_of(report, report.labels.get(label));
            let windows = Windows::Stretches(&report.stretches, label);
            rows.extend(group(Some(label), stores, windows, cost));
        }
    }
    (!rows.is_empty()).then(|| Comparison {
        reads: "warm".into(),
        cold_answers: report.total.cold,
        cold_means: cold_means(report),
        level: LEVEL,
        rows,
    })
}

/// What "cold" means for each kind of vantage point in `report` (a run's when it has none).
pub fn cold_means(report: &Report) -> Vec<String> {
    let mut kinds: Vec<&str> = report
        .vantages
        .values()
        .map(|v| v.vantage.as_str())
        .collect();
    if kinds.is_empty() {
        kinds.push("run");
    }
    kinds.sort_unstable();
    kinds.dedup();
    kinds
        .into_iter()
        .map(|kind| {
            let what = match kind {
                "hint" => "a hint probe's first answer in a new probe object",
                "member" => "a fleet member's first answer in a new isolate",
                "run" => "the first answer of a worker isolate (isolate_requests 1)",
                other => return format!("{other}: the first answer of a new instance"),
            };
            format!("{kind}: {what}")
        })
        .collect()
}

static NO_STORE: std::sync::LazyLock<StoreStats> = std::sync::LazyLock::new(StoreStats::default);

/// Every store of the report as `section` saw it: its warm reads and its error rate.
fn stores_of<'a>(
    report: &'a Report,
    section: Option<&'a Section>,
) -> impl Iterator<Item = (&'a str, &'a Hist, Option<f64>)> {
    report.total.stores.keys().map(move |store| {
        let s = section
            .and_then(|s| s.stores.get(store))
            .unwrap_or(&NO_STORE);
        let rate = (s.reads > 0).then(|| s.failed_reads as f64 / s.reads as f64);
        (store.as_str(), &s.read_us, rate)
    })
}

/// Where a group's rows find their windows: the report's timeline, or a vantage point's
/// stretches of it.
#[derive(Clone, Copy)]
enum Windows<'a> {
    /// The report's timeline, and its runs (a merge's, each with its own reads).
    Timeline(&'a Timeline, &'a [RunInfo]),
    Stretches(&'a Stretches, &'a str),
}

impl<'a> Windows<'a> {
    /// The windows that list `store`'s reads, in time order, and how many there are: each is
    /// decoded when it is read, one at a time.
    fn of(self, store: &'a str) -> (usize, Box<dyn Iterator<Item = Hist> + 'a>) {
        match self {
            Windows::Timeline(t, _) => {
                let packed = move || {
                    t.intervals
                        .iter()
                        .filter_map(move |iv| iv.read_us.get(store))
                };
                (packed().count(), Box::new(packed().map(|p| p.unpack())))
            }
            Windows::Stretches(s, label) => (
                s.of(label, store).count(),
                Box::new(s.of(label, store).map(|h| h.for_reading().into_owned())),
            ),
        }
    }

    /// Two stores' reads from the same answers, unit by unit: each of three or more merged runs,
    /// else the windows (stretches) both have reads in pooled into [`block::span_count`] spans;
    /// or why they are not paired.
    fn pair(self, a: &str, b: &str) -> Result<(Pairing, Vec<(Hist, Hist)>), String> {
        let both: Vec<(Hist, Hist)> = match self {
            Windows::Timeline(_, runs) if runs.len() >= 2 => {
                let runs = runs
                    .iter()
                    .filter_map(|r| Some((r.read_us.get(a)?.clone(), r.read_us.get(b)?.clone())));
                let runs: Vec<_> = runs
                    .filter(|(a, b)| !a.is_empty() && !b.is_empty())
                    .collect();
                return match runs.len() {
                    3.. => Ok((Pairing::Runs, runs)),
                    n => Err(format!("{n} merged runs with reads of both, 3 needed")),
                };
            }
            Windows::Timeline(t, _) => (t.intervals.iter())
                .filter_map(|iv| Some((iv.read_us.get(a)?.unpack(), iv.read_us.get(b)?.unpack())))
                .collect(),
            Windows::Stretches(s, label) => (s.reads.values())
                .filter_map(|l| Some((l.get(label)?.get(a)?, l.get(label)?.get(b)?)))
                .filter(|(a, b)| !a.is_empty() && !b.is_empty())
                .map(|(a, b)| (a.for_reading().into_owned(), b.for_reading().into_owned()))
                .collect(),
        };
        let count = both.len();
        if count < block::MIN_WINDOWS {
            return Err(format!(
                "{count} window(s) with reads of both, {} needed",
                block::MIN_WINDOWS
            ));
        }
        let k = block::span_count(count);
        let mut spans = vec![(Hist::default(), Hist::default()); k];
        for (i, (x, y)) in both.iter().enumerate() {
            if let Some(span) = spans.get_mut(i * k / count) {
                span.0.add(x);
                span.1.add(y);
            }
        }
        Ok((Pairing::Spans, spans))
    }

    /// `store`'s reads in each run of a merge that has some (none for a vantage point's rows).
    fn runs(self, store: &str) -> Vec<&'a Hist> {
        let Windows::Timeline(_, runs) = self else {
            return Vec::new();
        };
        let reads = runs.iter().filter_map(|r| r.read_us.get(store));
        reads.filter(|h| !h.is_empty()).collect()
    }
}

/// A row's p50 and its printed interval, µs: what it is ranked and tied by.
type P50 = Option<(u64, u64, u64)>;

/// One store's row, unranked, and its p50 to rank and tie it by.
fn row_of(
    vantage: Option<&String>,
    (store, h, error_rate): (&str, &Hist, Option<f64>),
    windows: Windows<'_>,
    cost: Option<&Estimate>,
) -> (Row, P50) {
    let runs = windows.runs(store);
    let across_runs = Stability::of_runs(&runs, h, PERCENTILES);
    let (count, windows) = windows.of(store);
    let (cells, spans) = block::percentiles(h, count, windows, &runs, PERCENTILES);
    let [p50, p90, p99] = &cells;
    let (monthly_usd, plan) = cheapest(cost, store).unzip();
    let basis = match p50 {
        Ok(w) => w.basis,
        Err(_) if spans.spans.is_empty() => Basis::WithinRun,
        Err(_) => Basis::Windows,
    };
    let row = Row {
        vantage: vantage.cloned(),
        store: store.into(),
        rank: 0,
        tie: false,
        versus: None,
        reads: h.len(),
        basis,
        windows: count as u64,
        stability: Stability::of(&spans, PERCENTILES),
        across_runs,
        p50: Cell::of(p50),
        p90: Cell::of(p90),
        p99: Cell::of(p99),
        error_rate,
        monthly_usd,
        plan,
    };
    let key = p50
        .as_ref()
        .ok()
        .map(|w| (w.within.estimate, w.low, w.high));
    (row, key)
}

/// One group's rows, ranked.
fn group<'a>(
    vantage: Option<&String>,
    stores: impl Iterator<Item = (&'a str, &'a Hist, Option<f64>)>,
    windows: Windows<'_>,
    cost: Option<&Estimate>,
) -> Vec<Row> {
    let mut rows: Vec<(Row, P50)> = stores
        .map(|store| row_of(vantage, store, windows, cost))
        .collect();
    // By p50, those without one last (in store order: the sort is stable).
    rows.sort_by(|(_, a), (_, b)| match (a, b) {
        (Some(a), Some(b)) => a.0.cmp(&b.0),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    // A tie is with the row above only (the first and the third of three may well be told
    // apart), so the rank stays the position.
    let mut above: Option<(String, P50)> = None;
    let mut out = Vec::with_capacity(rows.len());
    for (rank, (mut row, p50)) in (1u32..).zip(rows) {
        if let Some((store, Some((_, al, ah)))) = &above {
            if let Some((_, bl, bh)) = p50 {
                let versus = versus(windows, store, &row.store);
                row.tie = versus.tie().unwrap_or(*al <= bh && bl <= *ah);
                row.versus = Some(versus);
            }
        }
        row.rank = rank;
        above = Some((row.store.clone(), p50));
        out.push(row);
    }
    out
}

/// `b`'s row against `a`'s, the one ranked above it.
fn versus(windows: Windows<'_>, a: &str, b: &str) -> Versus {
    let (paired, why, ratios) = match windows.pair(a, b) {
        Ok((paired, units)) => {
            let ratios: Vec<Ratio> = PERCENTILES
                .iter()
                .filter_map(|&p| ratio(&units, p))
                .collect();
            match ratios
                .first()
                .is_some_and(|r| Some(&r.p) == PERCENTILES.first())
            {
                true => (paired, None, ratios),
                false => (
                    Pairing::Unpaired,
                    Some("too few reads for a p50 in 3 of them".into()),
                    Vec::new(),
                ),
            }
        }
        Err(why) => (Pairing::Unpaired, Some(why), Vec::new()),
    };
    Versus {
        store: a.into(),
        paired,
        why,
        ratios,
    }
}

/// The cheapest plan of `store` that is still offered, at the projection's rate.
fn cheapest(cost: Option<&Estimate>, store: &str) -> Option<(f64, String)> {
    crate::cost::cheapest_line(cost?, store).map(|l| (l.monthly_usd, l.plan.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{StoreStats, VantagePoint};

    fn hist(values_us: impl IntoIterator<Item = u64>) -> Hist {
        let mut h = Hist::default();
        for v in values_us {
            h.record(v);
        }
        h
    }

    fn report_with(stores: &[(&str, Hist, u64)]) -> Report {
        let mut r = Report::empty();
        for (name, h, failed) in stores {
            let reads = h.len() + failed;
            r.total.stores.insert(
                name.to_string(),
                StoreStats {
                    reads,
                    failed_reads: *failed,
                    read_us: h.clone(),
                    ..StoreStats::default()
                },
            );
        }
        r
    }

    #[test]
    fn ranked_by_p50_with_ties_where_the_intervals_overlap() {
        // fast and also-fast overlap (same distribution); slow is far above both.
        let r = report_with(&[
            ("slow", hist((0..500).map(|i| 50_000 + i * 10)), 0),
            ("fast", hist((0..500).map(|i| 1_000 + i)), 5),
            ("also-fast", hist((0..500).map(|i| 1_001 + i)), 0),
        ]);
        let c = of(&r, None).unwrap();
        assert_eq!(c.reads, "warm");
        let order: Vec<(&str, u32, bool)> = c
            .rows
            .iter()
            .map(|r| (r.store.as_str(), r.rank, r.tie))
            .collect();
        assert_eq!(
            order,
            [
                ("fast", 1, false),
                ("also-fast", 2, true),
                ("slow", 3, false)
            ]
        );
        let fast = &c.rows[0];
        assert_eq!(fast.reads, 500);
        assert_eq!(fast.error_rate, Some(5.0 / 505.0));
        let p50 = &fast.p50;
        assert!(p50.low_ms.unwrap() <= p50.ms.unwrap() && p50.ms.unwrap() <= p50.high_ms.unwrap());
        // 500 reads support p99 at 95% (368 do).
        assert!(fast.p99.ms.is_some(), "{:?}", fast.p99);
    }

    #[test]
    fn a_tie_is_with_the_row_above_only() {
        // a overlaps b, b overlaps c, a and c apart: c is not a tie with a.
        let r = report_with(&[
            ("a", hist((0..400).map(|i| 1_000 + i * 2)), 0),
            ("b", hist((0..400).map(|i| 1_050 + i * 2)), 0),
            ("c", hist((0..400).map(|i| 1_100 + i * 2)), 0),
        ]);
        let c = of(&r, None).unwrap();
        let p50 = |i: usize| &c.rows[i].p50;
        assert!(p50(0).high_ms >= p50(1).low_ms && p50(1).high_ms >= p50(2).low_ms);
        assert!(p50(0).high_ms < p50(2).low_ms);
        let ties: Vec<(u32, bool)> = c.rows.iter().map(|r| (r.rank, r.tie)).collect();
        assert_eq!(ties, [(1, false), (2, true), (3, true)]);
    }

    #[test]
    fn a_percentile_too_few_reads_support_is_said_so_never_a_number() {
        let r = report_with(&[("kv", hist((1..=40).map(|i| i * 100)), 0)]);
        let row = &of(&r, None).unwrap().rows[0];
        assert!(row.p50.ms.is_some());
        assert!(row.p90.ms.is_some(), "40 reads support p90 (36 do)");
        assert_eq!(row.p99.ms, None);
        assert_eq!(row.p99.text(), "n = 40: too few for p99 (needs n ≥ 368)");
        // A store with no successful read: every cell says so, and it ranks last.
        let r = report_with(&[("none", Hist::default(), 3), ("kv", hist([1_000; 10]), 0)]);
        let c = of(&r, None).unwrap();
        assert_eq!(c.rows[0].store, "kv");
        assert_eq!(c.rows[1].store, "none");
        assert_eq!(c.rows[1].p50.text(), "n = 0: too few for p50 (needs n ≥ 6)");
        assert_eq!(c.rows[1].error_rate, Some(1.0));
        assert!(!c.rows[1].tie);
    }

    #[test]
    fn vantage_points_are_ranked_apart_over_their_warm_reads() {
        let mut r = report_with(&[("kv", hist([1; 10]), 0), ("d1", hist([1; 10]), 0)]);
        for (label, kv, d1) in [("a", 1_000, 9_000), ("b", 9_000, 1_000)] {
            let p = VantagePoint {
                vantage: "hint".into(),
                warm: 100,
                ..VantagePoint::default()
            };
            r.vantages.insert(label.into(), p);
            let mut section = Section::default();
            for (store, base, failed) in [("kv", kv, 0), ("d1", d1, 25)] {
                let stats = StoreStats {
                    reads: 100 + failed,
                    failed_reads: failed,
                    read_us: hist((0..100).map(|i| base + i)),
                    // A cold answer's slow read is not among the ranked ones.
                    cold_read_us: hist([900_000]),
                    ..StoreStats::default()
                };
                section.stores.insert(store.into(), stats);
            }
            r.labels.insert(label.into(), section);
        }
        let c = of(&r, None).unwrap();
        assert_eq!(c.reads, "warm");
        let order: Vec<(Option<&str>, &str, u32)> = c
            .rows
            .iter()
            .map(|r| (r.vantage.as_deref(), r.store.as_str(), r.rank))
            .collect();
        assert_eq!(
            order,
            [
                (Some("a"), "kv", 1),
                (Some("a"), "d1", 2),
                (Some("b"), "d1", 1),
                (Some("b"), "kv", 2)
            ]
        );
        assert!(c.rows.iter().all(|r| r.reads == 100));
        let rates: Vec<Option<f64>> = c.rows.iter().map(|r| r.error_rate).collect();
        assert_eq!(rates, [Some(0.0), Some(0.2), Some(0.2), Some(0.0)]);
        assert!(c.rows.iter().all(|r| r.p99.ms.is_none_or(|ms| ms < 900.0)));
    }

    #[test]
    fn the_cost_is_the_cheapest_current_plan_the_month_fits() {
        let r = report_with(&[("kv", hist([1_000; 10]), 0)]);
        let line = |plan: &str, usd: f64, historical: bool| crate::cost::CostLine {
            store: "kv".into(),
            plan: plan.into(),
            as_of: "2026-12-03".into(),
            source: "test".into(),
            historical,
            reads_per_request: 1.0,
            writes_per_request: 0.0,
            read_units_per_request: 1.0,
            write_units_per_request: 0.0,
            failed_reads_per_request: 0.0,
            failed_writes_per_request: 0.0,
            bytes_per_request: 0.0,
            read_per_million: 0.0,
            write_per_million: 0.0,
            bandwidth_per_gb: 0.0,
            included_gb_per_month: 0.0,
            monthly_read_units: 0.0,
            monthly_write_units: 0.0,
            monthly_gb: 0.0,
            bandwidth_usd: 0.0,
            monthly_usd: usd,
            units: Vec::new(),
            fixed_usd: 0.0,
            stored_gb: 0.0,
            storage_usd: 0.0,
            over_limit: None,
        };
        let cost = Estimate {
            project_rps: 1.0,
            rps_source: "measured".into(),
            redis_db: 0,
            keys: 1000,
            seconds_per_month: 2_592_000.0,
            lines: vec![
                line("paid", 5.0, false),
                line("old", 1.0, true),
                line("big", 9.0, false),
                crate::cost::CostLine {
                    over_limit: Some(
                        "operations a month: needs 2.59M, the plan allows 500.0K".into(),
                    ),
                    ..line("free", 0.0, false)
                },
            ],
            worker: None,
        };
        let row = &of(&r, Some(&cost)).unwrap().rows[0];
        assert_eq!(
            (row.monthly_usd, row.plan.as_deref()),
            (Some(5.0), Some("paid"))
        );
    }

    /// `stores` read in `windows` timeline windows of 400 reads each, at `level(store, w)` µs
    /// (±10% within a window).
    fn report_with_windows(
        stores: &[&str],
        windows: u64,
        level: impl Fn(&str, u64) -> u64,
    ) -> Report {
        let mut r = report_with(&[]);
        r.timeline.interval_s = 10.0;
        for w in 0..windows {
            let mut iv = crate::report::Interval {
                start_s: w as f64 * 10.0,
                ..Default::default()
            };
            for store in stores {
                let h = hist((0..400).map(|i| level(store, w) * (900 + i / 2) / 1000));
                let total = r.total.stores.entry(store.to_string()).or_default();
                total.reads += h.len();
                total.read_us.add(&h);
                iv.read_us
                    .insert(store.to_string(), crate::hist::Packed::pack(&h));
            }
            r.timeline.intervals.push(iv);
        }
        r
    }

    #[test]
    fn intervals_count_the_spread_across_windows_and_ties_follow_them() {
        // Within the run, a and b are told apart at p50 (thousands of reads each); but b moves
        // between two levels every five windows, so its printed interval reaches a's.
        let r = report_with_windows(&["a", "b"], 30, |store, w| match store {
            "a" => 10_000,
            _ => [9_400, 10_200][(w / 5 % 2) as usize],
        });
        let c = of(&r, None).unwrap();
        let (b, a) = (&c.rows[0], &c.rows[1]);
        assert_eq!((b.store.as_str(), a.store.as_str()), ("b", "a"), "{c:?}");
        for row in [a, b] {
            assert_eq!((row.basis, row.windows), (Basis::Windows, 30));
            for cell in [&row.p50, &row.p90, &row.p99] {
                assert!(cell.low_ms <= cell.within_low_ms && cell.within_high_ms <= cell.high_ms);
                assert!(!cell.within_run_only && !cell.text().contains(WITHIN_RUN_MARK));
            }
        }
        assert!(b.p50.within_high_ms < a.p50.within_low_ms, "{b:?} {a:?}");
        assert!(a.tie, "the widened intervals overlap: {b:?} {a:?}");
        assert!(
            b.flag().unwrap().starts_with("unstable: p50 ranged"),
            "{:?}",
            b.flag()
        );
        assert_eq!(a.flag(), None, "{:?}", a.stability);
        assert!(a.note().starts_with("across the run: p50 "), "{}", a.note());
        assert!(
            a.note().ends_with(" ms across 5 spans of 30 windows"),
            "{}",
            a.note()
        );
    }

    #[test]
    fn too_few_windows_or_a_vantage_point_say_their_intervals_are_within_run() {
        let r = report_with_windows(&["kv"], 7, |_, _| 10_000);
        let row = &of(&r, None).unwrap().rows[0];
        assert_eq!(
            (row.basis, row.windows, row.stability.as_ref()),
            (Basis::WithinRun, 7, None)
        );
        assert_eq!(
            (row.p50.low_ms, row.p50.high_ms),
            (row.p50.within_low_ms, row.p50.within_high_ms)
        );
        assert!(
            row.p50.text().ends_with(WITHIN_RUN_MARK),
            "{}",
            row.p50.text()
        );
        assert_eq!(
            row.note(),
            "† within-run intervals only: 7 timeline window(s) with reads, 8 needed to measure the spread across the run"
        );
        // A vantage point with 7 stretches (42 windows of its own, 6 to a stretch).
        let r = with_vantages(&[("a", 42, &|_| 10_000)]);
        let row = &of(&r, None).unwrap().rows[0];
        assert_eq!((row.basis, row.windows), (Basis::WithinRun, 7));
        assert_eq!(
            row.note(),
            "† within-run intervals only: 7 stretch(es) of the window with reads, 8 needed to measure the spread across it"
        );
    }

    /// A report of vantage points, each `(label, windows, level by window)` read by `kv` in its
    /// own windows (the report's timeline pools them; each one's stretches are its own).
    type Level<'a> = &'a dyn Fn(u64) -> u64;

    fn with_vantages(points: &[(&str, u64, Level<'_>)]) -> Report {
        let mut parts = Vec::new();
        for (label, windows, level) in points {
            let mut r = report_with_windows(&["kv"], *windows, |_, w| level(w));
            r.labels.insert(label.to_string(), r.total.clone());
            r.vantages
                .insert(label.to_string(), VantagePoint::default());
            r.stretches = Stretches::of_timeline(label, &r.timeline);
            parts.push(r);
        }
        Report::merge(parts).unwrap()
    }

    #[test]
    fn a_vantage_point_s_intervals_count_the_spread_across_its_own_stretches() {
        // FRA is steady; LHR moves between two levels every 12 windows (two stretches). Pooled,
        // the timeline would give both rows the same spread: each row reads its own.
        let r = with_vantages(&[
            ("FRA", 60, &|_| 10_000),
            ("LHR", 60, &|w| [9_000, 11_000][(w / 12 % 2) as usize]),
        ]);
        assert_eq!(r.stretches.stretch_s, 60.0);
        let c = of(&r, None).unwrap();
        let row = |label: &str| {
            c.rows
                .iter()
                .find(|r| r.vantage.as_deref() == Some(label))
                .unwrap()
        };
        let (fra, lhr) = (row("FRA"), row("LHR"));
        for r in [fra, lhr] {
            assert_eq!((r.basis, r.windows), (Basis::Windows, 10), "{r:?}");
            assert!(!r.p50.text().contains(WITHIN_RUN_MARK), "{:?}", r.p50);
            assert!(
                r.note().ends_with("across 5 spans of 10 windows"),
                "{}",
                r.note()
            );
        }
        assert_eq!(fra.flag(), None, "{:?}", fra.stability);
        assert!(
            lhr.flag()
                .is_some_and(|f| f.starts_with("unstable: p50 ranged")),
            "{:?}",
            lhr.stability
        );
        let width = |r: &Row| r.p50.high_ms.unwrap() - r.p50.low_ms.unwrap();
        assert!(width(lhr) > 3.0 * width(fra), "{fra:?} {lhr:?}");
        // The within-run interval of LHR alone misses its levels' spread.
        let within = lhr.p50.within_high_ms.unwrap() - lhr.p50.within_low_ms.unwrap();
        assert!(width(lhr) > 3.0 * within, "{lhr:?}");
    }

    #[test]
    fn merged_runs_show_their_spread_and_a_run_apart_is_flagged() {
        let run = |level: u64| {
            let mut r = report_with_windows(&["kv"], 10, |_, _| level);
            let mut info = RunInfo::empty();
            let reads = r.total.stores["kv"].read_us.clone();
            info.read_us.insert("kv".into(), reads);
            r.runs.push(info);
            r
        };
        // Three runs of the same store: their range, no flag.
        let steady = Report::merge(vec![run(10_000), run(10_000), run(10_000)]).unwrap();
        let row = &of(&steady, None).unwrap().rows[0];
        let runs = row.across_runs.as_ref().unwrap();
        assert_eq!((runs.spans, runs.runs), (3, true));
        assert_eq!(row.flag(), None, "{row:?}");
        assert!(
            row.note().ends_with(" ms across 3 merged runs"),
            "{}",
            row.note()
        );
        // One run 40% slower: flagged, whatever the windows of each run said.
        let apart = Report::merge(vec![run(10_000), run(10_000), run(14_000)]).unwrap();
        let row = &of(&apart, None).unwrap().rows[0];
        let flag = row.flag().unwrap();
        assert!(
            flag.starts_with("unstable: p50 ranged 9.") && flag.ends_with("across 3 merged runs"),
            "{flag}"
        );
        // One run has nothing to compare with.
        assert_eq!(of(&run(10_000), None).unwrap().rows[0].across_runs, None);
    }

    #[test]
    fn nothing_read_no_comparison() {
        assert_eq!(of(&report_with(&[]), None), None);
    }

    /// `kv` 10% slower than `upstash` in every window (±3%, by window), both under a drift that
    /// moves each window's level up to ×2.
    fn drifting(ratio: f64) -> Report {
        report_with_windows(&["kv", "upstash"], 30, move |store, w| {
            let drift = 1.0 + ((w as f64) * 0.7).sin().abs();
            let own = if store == "kv" {
                ratio * (1.0 + 0.03 * ((w * 7 % 5) as f64 - 2.0) / 2.0)
            } else {
                1.0
            };
            (10_000.0 * drift * own) as u64
        })
    }

    #[test]
    fn a_pair_is_told_apart_by_its_ratio_where_the_intervals_overlap() {
        let c = of(&drifting(1.10), None).unwrap();
        let (up, kv) = (&c.rows[0], &c.rows[1]);
        assert_eq!((up.store.as_str(), kv.store.as_str()), ("upstash", "kv"));
        assert_eq!(up.versus, None);
        let v = kv.versus.as_ref().unwrap();
        assert_eq!((v.store.as_str(), v.paired), ("upstash", Pairing::Spans));
        // The drift widens both intervals past each other: the overlap rule would call a tie.
        assert!(kv.p50.low_ms <= up.p50.high_ms, "{up:?} {kv:?}");
        let p50 = &v.ratios[0];
        assert_eq!((p50.p, p50.units), (0.5, 5));
        assert!(
            1.0 < p50.low && p50.low < 1.10 && 1.10 < p50.high && p50.high < 1.15,
            "{p50:?}"
        );
        assert!(!kv.tie);
        let text = v.text(&kv.store);
        assert!(
            text.starts_with("vs upstash, paired over 5 spans: p50 ×1.09 ("),
            "{text}"
        );
        assert!(
            text.contains(": upstash faster than kv by 9% (8–11%)"),
            "{text}"
        );
        // Equal stores: no leader, and the smallest difference the run could have seen.
        let c = of(&drifting(1.0), None).unwrap();
        let v = c.rows[1].versus.as_ref().unwrap();
        assert!(c.rows[1].tie);
        let text = v.text(&c.rows[1].store);
        assert!(text.contains(": no difference beyond ±"), "{text}");
        assert!(text.ends_with("%: no leader"), "{text}");
    }

    #[test]
    fn merged_runs_pair_run_by_run_from_three_and_are_unpaired_below() {
        let run = |ratio: f64| {
            let mut r = drifting(ratio);
            let mut info = RunInfo::empty();
            for store in ["kv", "upstash"] {
                info.read_us
                    .insert(store.into(), r.total.stores[store].read_us.clone());
            }
            r.runs.push(info);
            r
        };
        let two = Report::merge(vec![run(1.10), run(1.12)]).unwrap();
        let c = of(&two, None).unwrap();
        let kv = &c.rows[1];
        let v = kv.versus.as_ref().unwrap();
        assert_eq!(
            (v.paired, v.why.as_deref()),
            (
                Pairing::Unpaired,
                Some("2 merged runs with reads of both, 3 needed")
            )
        );
        assert!(v.ratios.is_empty());
        assert_eq!(v.text(&kv.store), "vs upstash: unpaired (2 merged runs with reads of both, 3 needed): compared by whether the p50 intervals overlap");
        let overlap = kv.p50.low_ms <= c.rows[0].p50.high_ms;
        assert_eq!(kv.tie, overlap);
        assert_eq!(kv.basis, Basis::Windows);
        let three = Report::merge(vec![run(1.09), run(1.10), run(1.11)]).unwrap();
        let c = of(&three, None).unwrap();
        let kv = &c.rows[1];
        assert_eq!(kv.basis, Basis::Runs);
        let v = kv.versus.as_ref().unwrap();
        assert_eq!((v.paired, v.ratios[0].units), (Pairing::Runs, 3));
        assert!(v.ratios[0].low > 1.0 && !kv.tie, "{v:?}");
        assert!(
            v.text(&kv.store)
                .starts_with("vs upstash, paired over 3 merged runs: p50 ×1.10"),
            "{v:?}"
        );
    }
}
