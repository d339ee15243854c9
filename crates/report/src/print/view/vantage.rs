//! The vantage table as plain data: one row per vantage point of kept answers — who measured, where it ran, how
//! many answers were warm — with every store's read percentiles side by side and the fastest
//! marked, so the best store per place is seen at a glance. The percentiles are of the warm
//! answers when the vantage point has any (a cold instance's connections and metadata exchanges
//! are a start-up cost, not the steady state), else of the cold ones, marked so. The text and the HTML printers show
//! these same rows.

use std::collections::BTreeMap;

use crate::print::view::cell::quantile_cell;
use crate::print::view::grid::bar_percent;
use crate::report::{Report, VantagePoint};
use crate::summary::{Quantiles, Summary};

/// One vantage point, as printed.
#[derive(Debug, Clone, PartialEq)]
pub struct Row<'a> {
    pub label: &'a str,
    pub point: &'a VantagePoint,
    /// Where its answers ran: the colos by count (`LHR 280, AMS 8`), the rest as `+N`.
    pub ran_in: String,
    /// Its answers' `cf-placement` values by count (`remote-IAD 280, local-LHR 3`), whether
    /// they placed it or not; empty for hints and runs.
    pub placed: String,
    /// Its answers' trace colos by count (`IAD 280, unknown 3`), and how many of them
    /// disagree with `cf-placement` (`; 2 disagree with cf-placement`); empty for hints and runs.
    pub traced: String,
    /// A member's answers left out of its numbers because they ran outside its region
    /// (`3 unplaced, 1 elsewhere, 2 trace elsewhere`); empty when there are none.
    pub not_placed: String,
    /// Successful reads per store: of the warm answers when there are any, else of the cold.
    pub reads: &'a BTreeMap<String, Quantiles>,
    /// Whether `reads` are the warm answers' (else the cold answers').
    pub warm: bool,
    /// The store with the lowest read p50, when more than one store answered.
    pub fastest: Option<&'a str>,
    /// One cell per store of the report, in its order.
    pub cells: Vec<Cell<'a>>,
}

/// A store's successful reads at one vantage point, as shown ([`quantile_cell`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Cell<'a> {
    pub store: &'a str,
    pub p50: String,
    pub p90: String,
    pub p99: String,
    /// The exact p50, for `data-value`.
    pub p50_ms: Option<f64>,
    /// The p99 against the row's slowest store's ([`bar_percent`]).
    pub bar_percent: f64,
    /// The row's fastest store.
    pub fastest: bool,
}

static NO_READS: BTreeMap<String, Quantiles> = BTreeMap::new();

fn by_count(map: &BTreeMap<String, u64>, shown: usize) -> String {
    let mut names: Vec<(&String, &u64)> = map.iter().collect();
    names.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut text: Vec<String> = names
        .iter()
        .take(shown)
        .map(|(n, c)| format!("{n} {c}"))
        .collect();
    if names.len() > shown {
        text.push(format!("+{}", names.len() - shown));
    }
    text.join(", ")
}

fn not_placed(point: &VantagePoint) -> String {
    [
        (point.unplaced, "unplaced"),
        (point.elsewhere, "elsewhere"),
        (point.trace_elsewhere, "trace elsewhere"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect::<Vec<_>>()
    .join(", ")
}

fn traced(point: &VantagePoint) -> String {
    let mut text = by_count(&point.traces, 2);
    if point.trace_disagrees > 0 {
        text = format!(
            "{text}; {} disagree with cf-placement",
            point.trace_disagrees
        );
    }
    text
}

fn cells<'a>(
    stores: &[&'a str],
    reads: &BTreeMap<String, Quantiles>,
    fastest: Option<&str>,
) -> Vec<Cell<'a>> {
    let row_max = reads.values().filter_map(|q| q.p99_ms).fold(0.0, f64::max);
    let none = Quantiles::default();
    stores
        .iter()
        .map(|s| {
            let q = reads.get(*s).unwrap_or(&none);
            let cell = |ms| quantile_cell(q.count, ms);
            Cell {
                store: s,
                p50: cell(q.p50_ms),
                p90: cell(q.p90_ms),
                p99: cell(q.p99_ms),
                p50_ms: q.p50_ms,
                bar_percent: bar_percent(q.p99_ms, row_max),
                fastest: fastest == Some(*s),
            }
        })
        .collect()
}

fn rank(vantage: &str) -> u8 {
    match vantage {
        "member" => 0,
        "hint" => 1,
        "run" => 2,
        _ => 3,
    }
}

/// The rows: placed members first, then hints, then runs, each by label.
pub fn rows<'a>(report: &'a Report, summary: &'a Summary) -> Vec<Row<'a>> {
    let stores: Vec<&str> = report.total.stores.keys().map(String::as_str).collect();
    let mut rows: Vec<Row<'a>> = report
        .vantages
        .iter()
        .filter_map(|(label, point)| {
            let (reads, warm) = match summary.labels.get(label) {
                Some(l) if l.read.values().any(|q| q.count > 0) => (&l.read, true),
                Some(l) if !l.cold_read.is_empty() => (&l.cold_read, false),
                Some(l) => (&l.read, true),
                // A member none of whose answers ran in its region: a row of counts alone.
                None if point.unplaced + point.elsewhere + point.trace_elsewhere > 0 => {
                    (&NO_READS, false)
                }
                None => return None,
            };
            let answered: Vec<(&String, f64)> = reads
                .iter()
                .filter_map(|(s, q)| q.p50_ms.map(|p| (s, p)))
                .collect();
            let fastest = (answered.len() > 1)
                .then(|| answered.iter().min_by(|a, b| a.1.total_cmp(&b.1)))
                .flatten()
                .map(|(s, _)| s.as_str());
            Some(Row {
                label,
                point,
                ran_in: by_count(&point.colos, 2),
                placed: by_count(&point.placements, 2),
                traced: traced(point),
                not_placed: not_placed(point),
                reads,
                warm,
                fastest,
                cells: cells(&stores, reads, fastest),
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        rank(&a.point.vantage)
            .cmp(&rank(&b.point.vantage))
            .then(a.label.cmp(b.label))
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colos_by_count_then_name() {
        let m = BTreeMap::from([
            ("AMS".to_string(), 3),
            ("LHR".to_string(), 280),
            ("CDG".to_string(), 3),
            ("FRA".to_string(), 1),
        ]);
        assert_eq!(by_count(&m, 2), "LHR 280, AMS 3, +2");
        assert_eq!(by_count(&BTreeMap::new(), 1), "");
    }

    #[test]
    fn answers_outside_the_region_are_named() {
        let mut p = VantagePoint::default();
        assert_eq!(not_placed(&p), "");
        p.unplaced = 3;
        assert_eq!(not_placed(&p), "3 unplaced");
        p.elsewhere = 1;
        assert_eq!(not_placed(&p), "3 unplaced, 1 elsewhere");
        p.trace_elsewhere = 2;
        assert_eq!(not_placed(&p), "3 unplaced, 1 elsewhere, 2 trace elsewhere");
    }

    #[test]
    fn the_trace_is_named_beside_cf_placement_with_its_disagreements() {
        let mut p = VantagePoint::default();
        assert_eq!(traced(&p), "");
        p.traces = BTreeMap::from([("IAD".to_string(), 280), ("unknown".to_string(), 3)]);
        assert_eq!(traced(&p), "IAD 280, unknown 3");
        p.trace_disagrees = 2;
        assert_eq!(
            traced(&p),
            "IAD 280, unknown 3; 2 disagree with cf-placement"
        );
    }
}
