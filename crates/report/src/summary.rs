//! The numbers every printer shows, derived from the measured histograms: quantiles in
//! milliseconds, the latency rows, per label and per colo, with the answer first
//! ([`crate::comparison`]) and what went wrong ([`crate::trouble`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cost::Estimate;
use crate::hist::Hist;
use crate::report::{ColoStats, Report, Section};

/// Percentiles of one histogram in milliseconds, as every printer shows them: `null` when it is
/// empty, and a percentile `null` when its count cannot support it at 95%
/// ([`crate::interval::supports`]: p50 needs 6 values, p90 36, p95 72, p99 368).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Quantiles {
    pub count: u64,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub mean_ms: Option<f64>,
}

impl Quantiles {
    pub fn of(h: &Hist) -> Quantiles {
        if h.is_empty() {
            return Quantiles::default();
        }
        let ms = |us: u64| Some(us as f64 / 1000.0);
        let h = h.for_reading();
        let n = h.len();
        // A percentile its sample cannot bound at the report's level is no figure (the answer's
        // rule): printed as `few`.
        let at = |p: f64| {
            crate::interval::supports(n, p, crate::interval::LEVEL)
                .then(|| h.quantile(p) as f64 / 1000.0)
        };
        Quantiles {
            count: n,
            p50_ms: at(0.50),
            p90_ms: at(0.90),
            p95_ms: at(0.95),
            p99_ms: at(0.99),
            max_ms: ms(h.max()),
            // Rounded to the microsecond like the rest, so printed and stored values agree.
            mean_ms: Some((h.mean()).round() / 1000.0),
        }
    }
}

/// One row of the latency table: end to end, or one store's reads/writes/connects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyRow {
    /// `end-to-end`, or `<store> read all|read hit|read miss|write|connect` (warm answers), then
    /// `<store> read cold|write cold|connect cold` (cold answers, when there are any).
    pub name: String,
    /// The store, when the row is one store's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// Failed operations of this kind (requests for end-to-end); `null` for rows that do not
    /// count errors (hit/miss/connect).
    pub errors: Option<u64>,
    #[serde(flatten)]
    pub quantiles: Quantiles,
}

/// Per label: the vantage point's counts and end-to-end percentiles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelSummary {
    pub sent: u64,
    pub answered: u64,
    pub failed: u64,
    /// Of `failed`: the client's and the worker's ([`Section::client_failed`]).
    #[serde(default)]
    pub client_failed: u64,
    #[serde(default)]
    pub worker_failed: u64,
    /// [`Section::retried`].
    #[serde(default)]
    pub retried: u64,
    pub achieved_rate: f64,
    pub latency: Quantiles,
    /// Successful reads of warm answers per store.
    pub read: BTreeMap<String, Quantiles>,
    /// Successful reads of cold answers per store (stores with any).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cold_read: BTreeMap<String, Quantiles>,
}

/// Per colo: answers, end-to-end and per-store read percentiles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColoSummary {
    pub answered: u64,
    pub latency: Quantiles,
    pub read: BTreeMap<String, Quantiles>,
}

/// The numbers every printer shows, derived from the histograms.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Summary {
    /// All runs' failed requests, the client's and the worker's ([`Section::client_failed`]),
    /// and the requests retried on a new connection ([`Section::retried`]).
    #[serde(default)]
    pub client_failed: u64,
    #[serde(default)]
    pub worker_failed: u64,
    #[serde(default)]
    pub retried: u64,
    /// All runs: end-to-end, then per store (in name order) its read/hit/miss/write/connect rows
    /// of warm answers and its cold rows. A store's hit/miss rows are left out when it reports
    /// no hit/miss, write when it made no write, connect when it made no connect, a cold row
    /// when no cold answer has one.
    pub latency: Vec<LatencyRow>,
    pub labels: BTreeMap<String, LabelSummary>,
    pub colos: BTreeMap<String, ColoSummary>,
    /// The answer first: each store ranked by its read p50, every percentile with its 95%
    /// interval ([`crate::comparison`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<crate::comparison::Comparison>,
    /// What went wrong, explained: the failure and error kinds over 1% of their requests or
    /// operations, the most common first ([`crate::trouble`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trouble: Vec<crate::trouble::Trouble>,
}

impl Summary {
    /// The summary of `report`; the comparison prices each store at `cost` (when given).
    pub fn of(report: &Report, cost: Option<&Estimate>) -> Summary {
        let t = &report.total;
        Summary {
            client_failed: t.client_failed(),
            worker_failed: t.worker_failed(),
            retried: t.retried,
            latency: latency_rows(t),
            labels: report
                .labels
                .iter()
                .map(|(label, s)| (label.clone(), LabelSummary::of(s)))
                .collect(),
            colos: report
                .colos
                .iter()
                .map(|(colo, c)| (colo.clone(), ColoSummary::of(c)))
                .collect(),
            comparison: crate::comparison::of(report, cost),
            trouble: crate::trouble::of(report),
        }
    }
}

/// The rows of [`Summary::latency`]: end-to-end, then each store's shown rows.
pub(crate) fn latency_rows(t: &Section) -> Vec<LatencyRow> {
    let mut latency = vec![LatencyRow {
        name: "end-to-end".into(),
        store: None,
        errors: Some(t.failed()),
        quantiles: Quantiles::of(&t.latency_us),
    }];
    for (name, s) in &t.stores {
        let has_hit_miss = !(s.read_hit_us.is_empty() && s.read_miss_us.is_empty());
        let rows = [
            ("read all", &s.read_us, Some(s.errors_for(false)), true),
            ("read hit", &s.read_hit_us, None, has_hit_miss),
            ("read miss", &s.read_miss_us, None, has_hit_miss),
            ("write", &s.write_us, Some(s.errors_for(true)), s.writes > 0),
        ];
        // The rest are shown when they have any value.
        let when_any = [
            ("connect", &s.connect_us),
            ("read sql", &s.read_sql_us),
            ("write sql", &s.write_sql_us),
            ("read cold", &s.cold_read_us),
            ("write cold", &s.cold_write_us),
            ("connect cold", &s.cold_connect_us),
        ]
        .map(|(set, h)| (set, h, None, !h.is_empty()));
        for (set, h, errors, shown) in rows.into_iter().chain(when_any) {
            if shown {
                latency.push(LatencyRow {
                    name: format!("{name} {set}"),
                    store: Some(name.clone()),
                    errors,
                    quantiles: Quantiles::of(h),
                });
            }
        }
    }
    latency
}

impl LabelSummary {
    fn of(s: &Section) -> LabelSummary {
        LabelSummary {
            sent: s.sent,
            answered: s.answered,
            failed: s.failed(),
            client_failed: s.client_failed(),
            worker_failed: s.worker_failed(),
            retried: s.retried,
            achieved_rate: s.achieved_rate,
            latency: Quantiles::of(&s.latency_us),
            read: s
                .stores
                .iter()
                .map(|(k, s)| (k.clone(), Quantiles::of(&s.read_us)))
                .collect(),
            cold_read: s
                .stores
                .iter()
                .filter(|(_, s)| !s.cold_read_us.is_empty())
                .map(|(k, s)| (k.clone(), Quantiles::of(&s.cold_read_us)))
                .collect(),
        }
    }
}

impl ColoSummary {
    fn of(c: &ColoStats) -> ColoSummary {
        ColoSummary {
            answered: c.answered,
            latency: Quantiles::of(&c.latency_us),
            read: c
                .read_us
                .iter()
                .map(|(k, h)| (k.clone(), Quantiles::of(h)))
                .collect(),
        }
    }
}
