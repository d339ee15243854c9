//! The per-label and per-colo tables as plain data: one row per label or colo with its answers,
//! its end-to-end p50/p99 and each store's read p50/p99, the fastest store of the row and each
//! cell's bar (its p99 against the row's slowest) — built once and laid out by the text and the
//! HTML printers.

use std::collections::BTreeMap;

use crate::print::view::cell::quantile_cell;
use crate::summary::Quantiles;

/// One label or colo.
#[derive(Debug, Clone, PartialEq)]
pub struct Row<'a> {
    pub name: &'a str,
    pub answered: u64,
    pub e2e: Pair,
    /// One cell per store of the report, in its order.
    pub stores: Vec<Cell<'a>>,
}

/// A p50 and a p99 as shown ([`quantile_cell`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub p50: String,
    pub p99: String,
}

/// A store's successful reads in one row.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell<'a> {
    pub store: &'a str,
    pub reads: Pair,
    /// The exact p50, for `data-value`.
    pub p50_ms: Option<f64>,
    /// The p99 against the row's slowest store's, in percent (0 when there is none).
    pub bar_percent: f64,
    /// The row's lowest p50, when the row has more than one store.
    pub best: bool,
}

impl Pair {
    pub fn of(q: &Quantiles) -> Pair {
        Pair {
            p50: quantile_cell(q.count, q.p50_ms),
            p99: quantile_cell(q.count, q.p99_ms),
        }
    }
}

/// The rows of `(name, answered, end to end, reads by store)`, one cell per `stores`.
pub fn of<'a>(
    stores: &[&'a str],
    rows: impl Iterator<
        Item = (
            &'a String,
            u64,
            &'a Quantiles,
            &'a BTreeMap<String, Quantiles>,
        ),
    >,
) -> Vec<Row<'a>> {
    rows.map(|(name, answered, e2e, reads)| Row {
        name,
        answered,
        e2e: Pair::of(e2e),
        stores: cells(stores, reads),
    })
    .collect()
}

fn cells<'a>(stores: &[&'a str], reads: &BTreeMap<String, Quantiles>) -> Vec<Cell<'a>> {
    let row_max = reads.values().filter_map(|q| q.p99_ms).fold(0.0, f64::max);
    let best = reads
        .iter()
        .filter_map(|(s, q)| q.p50_ms.map(|p| (s, p)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(s, _)| s.as_str());
    let none = Quantiles::default();
    stores
        .iter()
        .map(|s| {
            let q = reads.get(*s).unwrap_or(&none);
            Cell {
                store: s,
                reads: Pair::of(q),
                p50_ms: q.p50_ms,
                bar_percent: bar_percent(q.p99_ms, row_max),
                best: best == Some(*s) && reads.len() > 1,
            }
        })
        .collect()
}

/// A p99 against the row's slowest, in percent: at least 2 so a fast store still shows a bar.
pub fn bar_percent(p99_ms: Option<f64>, row_max: f64) -> f64 {
    match (p99_ms, row_max > 0.0) {
        (Some(p), true) => (p / row_max * 100.0).clamp(2.0, 100.0),
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(p50: f64, p99: f64) -> Quantiles {
        Quantiles {
            count: 400,
            p50_ms: Some(p50),
            p99_ms: Some(p99),
            ..Quantiles::default()
        }
    }

    #[test]
    fn each_store_has_a_cell_the_fastest_is_marked_and_bars_scale_to_the_slowest() {
        let reads = BTreeMap::from([
            ("kv".to_string(), q(9.0, 40.0)),
            ("redis".to_string(), q(2.0, 0.4)),
        ]);
        let cells = cells(&["d1", "kv", "redis"], &reads);
        let shown: Vec<(&str, &str, f64, bool)> = cells
            .iter()
            .map(|c| (c.store, c.reads.p50.as_str(), c.bar_percent, c.best))
            .collect();
        assert_eq!(
            shown,
            [
                ("d1", "-", 0.0, false),
                ("kv", "9.00", 100.0, false),
                // 1% of the slowest, drawn at 2% so it still shows.
                ("redis", "2.00", 2.0, true),
            ]
        );
    }

    #[test]
    fn a_row_of_one_store_marks_none_fastest() {
        let reads = BTreeMap::from([("kv".to_string(), q(9.0, 40.0))]);
        assert!(cells(&["kv"], &reads).iter().all(|c| !c.best));
    }
}
