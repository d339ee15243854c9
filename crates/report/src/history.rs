//! The History section's view: each store × vantage point's daily p50 and p99 with their 95%
//! intervals, each day beside the week before it (the previous 7 days pooled), and a mark where
//! the two intervals do not overlap — "KV got slower in Frankfurt this week" read off the page.
//! Derived from the report's days ([`crate::daily`]) when a report is printed, never stored.
//!
//! A day's interval is the order-statistic one ([`crate::interval`]): the days are not split
//! into windows (a week's page has one stretch, [`crate::stretch`], every 12 hours). The week before's is widened by the spread between its
//! days ([`crate::block`], each day one span), so a day is marked only when it lies outside what
//! the days before it wandered over, not merely outside one pooled sample's interval.

use std::collections::{BTreeMap, BTreeSet};

use crate::block::{self, Spans, Widened};
use crate::daily::{date, day_number};
use crate::hist::Bucket;
use crate::interval::{self, IntervalError, Percentile, LEVEL};
use crate::report::Report;

/// The percentiles of a day, in the table's order.
pub const PERCENTILES: [f64; 2] = [0.50, 0.99];

/// Most days the section shows (the newest); older days kept in the report are only the week
/// before of the first ones shown.
pub const SHOWN_DAYS: usize = 31;

/// Fewest UTC dates a report's reads span for it to have a History: a 24-hour window touches
/// two, each a part of a day.
pub const MIN_DAYS: usize = 3;

/// The days before a day that its week pools.
pub const WEEK_DAYS: i64 = 7;

/// Fewest days of the week before with reads for a day to be marked: each is one span of the
/// week's interval, which needs [`block::MIN_SPANS`] to measure the spread between days.
pub const WEEK_DAYS_MIN: usize = block::MIN_SPANS;

/// Which way a day's percentile moved against the week before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Its interval lies wholly above the week before's: slower.
    Above,
    /// Wholly below: faster.
    Below,
}

impl Change {
    pub fn word(self) -> &'static str {
        match self {
            Change::Above => "above",
            Change::Below => "below",
        }
    }

    pub fn arrow(self) -> &'static str {
        match self {
            Change::Above => "▲",
            Change::Below => "▼",
        }
    }
}

/// The previous [`WEEK_DAYS`] days of a series, pooled.
#[derive(Debug, Clone, PartialEq)]
pub struct Week {
    /// Days of the week with reads (at most 7).
    pub days: usize,
    pub reads: u64,
    /// Each percentile with its interval, widened by the spread between the days when there
    /// are at least [`WEEK_DAYS_MIN`].
    pub figures: [Result<Widened, IntervalError>; 2],
}

/// One day of a series.
#[derive(Debug, Clone, PartialEq)]
pub struct Day {
    pub date: String,
    pub reads: u64,
    pub figures: [Result<Percentile, IntervalError>; 2],
    /// `None` when no day of the week before has reads.
    pub week: Option<Week>,
    /// Per percentile: whether its interval and the week before's do not overlap (only with
    /// at least [`WEEK_DAYS_MIN`] days before it).
    pub change: [Option<Change>; 2],
}

/// One store at one vantage point (a label), its shown days in date order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub store: String,
    pub label: String,
    pub days: Vec<Day>,
}

/// The section: series in store, then label order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct History {
    /// The dates shown, oldest first.
    pub dates: Vec<String>,
    pub series: Vec<Series>,
}

/// One marked percentile of one day, for the words at the top of the section.
#[derive(Debug, Clone, Copy)]
pub struct Changed<'a> {
    pub series: &'a Series,
    pub day: &'a Day,
    /// Index into [`PERCENTILES`].
    pub i: usize,
    pub change: Change,
    /// The percentile, the day's figure and the week before's interval (µs) that moved apart.
    pub p: f64,
    pub figure: Percentile,
    pub week_low: u64,
    pub week_high: u64,
}

/// `41.20 ms (38.10–45.30)` of a percentile read from µs.
fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl Changed<'_> {
    /// `kv @ FRA: p99 on 2026-12-04 was 41.20 ms (38.10–45.30), above the week before
    /// (29.00–33.00)`.
    pub fn text(&self) -> String {
        let day = &self.figure;
        format!(
            "{} @ {}: p{} on {} was {:.2} ms ({:.2}–{:.2}), {} the week before ({:.2}–{:.2})",
            self.series.store,
            self.series.label,
            (self.p * 100.0).round(),
            self.day.date,
            ms(day.estimate),
            ms(day.low),
            ms(day.high),
            self.change.word(),
            ms(self.week_low),
            ms(self.week_high),
        )
    }
}

impl History {
    /// Every marked day, newest first, then by store and vantage point.
    pub fn changes(&self) -> Vec<Changed<'_>> {
        let mut out: Vec<Changed<'_>> = self
            .series
            .iter()
            .flat_map(|series| series.days.iter().map(move |day| (series, day)))
            .flat_map(|(series, day)| {
                let week = day.week.as_ref();
                PERCENTILES.iter().enumerate().filter_map(move |(i, &p)| {
                    let change = (*day.change.get(i)?)?;
                    let figure = *day.figures.get(i)?.as_ref().ok()?;
                    let w = week?.figures.get(i)?.as_ref().ok()?;
                    Some(Changed {
                        series,
                        day,
                        i,
                        change,
                        p,
                        figure,
                        week_low: w.low,
                        week_high: w.high,
                    })
                })
            })
            .collect();
        // Stable: store and vantage point order stays within a date.
        out.sort_by(|a, b| b.day.date.cmp(&a.day.date));
        out
    }
}

/// The History of a report; empty when its reads span fewer than [`MIN_DAYS`] dates.
pub fn of(report: &Report) -> History {
    #[cfg(test)]
    crate::testing::computed(false);
    let mut numbered: Vec<(i64, &String)> = report
        .days
        .0
        .keys()
        .filter_map(|d| Some((day_number(d)?, d)))
        .collect();
    numbered.sort();
    if numbered.len() < MIN_DAYS {
        return History::default();
    }
    let shown: Vec<i64> = numbered
        .iter()
        .rev()
        .take(SHOWN_DAYS)
        .map(|(n, _)| *n)
        .rev()
        .collect();
    // One series at a time, its days' buckets read once and dropped with it: memory is one
    // series' days, not the fleet's.
    let pairs: BTreeSet<(&str, &str)> = report
        .days
        .0
        .values()
        .flat_map(|labels| {
            labels.iter().flat_map(|(label, stores)| {
                stores
                    .iter()
                    .filter(|(_, h)| !h.is_empty())
                    .map(move |(store, _)| (store.as_str(), label.as_str()))
            })
        })
        .collect();
    let series = pairs
        .into_iter()
        .filter_map(|(store, label)| series(report, &numbered, &shown, store, label))
        .collect();
    History {
        dates: shown.into_iter().map(date).collect(),
        series,
    }
}

/// One store at one vantage point over the `shown` days (`numbered`: every date of the report
/// by day number); `None` when it has no reads on any of them.
fn series(
    report: &Report,
    numbered: &[(i64, &String)],
    shown: &[i64],
    store: &str,
    label: &str,
) -> Option<Series> {
    let first = shown.first()? - WEEK_DAYS;
    let days: BTreeMap<i64, Vec<Bucket>> = numbered
        .iter()
        .filter(|(n, _)| *n >= first)
        .filter_map(|(n, d)| {
            let h = report.days.0.get(*d)?.get(label)?.get(store)?;
            (!h.is_empty()).then(|| (*n, h.buckets()))
        })
        .collect();
    let rows: Vec<Day> = shown
        .iter()
        .filter_map(|n| days.get(n).map(|buckets| day(*n, buckets, &days)))
        .collect();
    (!rows.is_empty()).then(|| Series {
        store: store.to_string(),
        label: label.to_string(),
        days: rows,
    })
}

/// Day `n` of a series (`days`: its reads' buckets by day number) beside the week before it.
fn day(n: i64, buckets: &[Bucket], days: &BTreeMap<i64, Vec<Bucket>>) -> Day {
    let figures = PERCENTILES.map(|p| interval::read(buckets, p, LEVEL));
    let before: Vec<&Vec<Bucket>> = days.range(n - WEEK_DAYS..n).map(|(_, b)| b).collect();
    let week = (!before.is_empty()).then(|| week(&before));
    let mut change = [None; 2];
    if let Some(w) = week.as_ref().filter(|w| w.days >= WEEK_DAYS_MIN) {
        for ((c, d), w) in change.iter_mut().zip(&figures).zip(&w.figures) {
            if let (Ok(d), Ok(w)) = (d, w) {
                *c = if d.low > w.high {
                    Some(Change::Above)
                } else if d.high < w.low {
                    Some(Change::Below)
                } else {
                    None
                };
            }
        }
    }
    Day {
        date: date(n),
        reads: total(buckets),
        figures,
        week,
        change,
    }
}

fn total(buckets: &[Bucket]) -> u64 {
    buckets.iter().fold(0, |n, b| n.saturating_add(b.count))
}

/// The days before, pooled, each one span of the pooled interval when there are enough.
fn week(before: &[&Vec<Bucket>]) -> Week {
    let pooled = pool(before);
    let within = PERCENTILES.map(|p| interval::read(&pooled, p, LEVEL));
    let estimates = within.map(|w| w.map_or(0, |w| w.estimate));
    let k = before.len();
    let spans = Spans {
        windows: k,
        per_window: Vec::new(),
        spans: if k >= WEEK_DAYS_MIN {
            let level = 1.0 - (1.0 - LEVEL) / k as f64;
            before
                .iter()
                .map(|b| block::span_of(b, PERCENTILES, estimates, level))
                .collect()
        } else {
            Vec::new()
        },
    };
    let mut i = 0;
    let figures = within.map(|w| {
        i += 1;
        block::widen(&pooled, w, &spans, i - 1)
    });
    Week {
        days: k,
        reads: total(&pooled),
        figures,
    }
}

/// Buckets of several histograms added: the buckets of their sum (every histogram of the report
/// has the same bucket bounds).
fn pool(parts: &[&Vec<Bucket>]) -> Vec<Bucket> {
    let mut sum: BTreeMap<u64, Bucket> = BTreeMap::new();
    for b in parts.iter().flat_map(|p| p.iter()) {
        sum.entry(b.lowest)
            .and_modify(|s| s.count = s.count.saturating_add(b.count))
            .or_insert(*b);
    }
    sum.into_values().collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::kept::{Aggregate, Kept, Source};
    use std::time::Duration;

    /// The first day of the synthetic answers: 2026-11-25.
    pub(crate) const FIRST_DAY: i64 = 20_782;

    use crate::testing::Rng;

    /// The latency at quantile `u` of a read of about `base_ms`: ±20% up to p95, then up to
    /// three times as long (its p99 about 2.7 × `base_ms`).
    fn quantile_ms(u: f64, base_ms: f64) -> f64 {
        let x = if u < 0.95 {
            0.8 + 0.4 * u / 0.95
        } else {
            1.2 + 2.4 * (u - 0.95) / 0.05
        };
        (base_ms * x * 1000.0).round() / 1000.0
    }

    /// The `i`th of `n` reads of a day: every quantile of a grid once, in a scrambled order
    /// (7919 is prime), so a day's reads are the same whatever the day and only `slow` moves
    /// them: a series that did not change is the same every day.
    fn grid(i: i64, n: i64) -> f64 {
        ((i * 7919) % n) as f64 / n as f64 + 0.5 / n as f64
    }

    /// Kept lines of `days` days from [`FIRST_DAY`]: FRA and LHR each answer `per_day(label,
    /// day)` times a day with kv (10 ms) and upstash (20 ms) reads; `slow(label, store, day)`
    /// multiplies a read. Each label's answers in a row, as the worker streams them.
    pub(crate) fn lines(
        days: i64,
        per_day: impl Fn(&str, i64) -> i64,
        slow: impl Fn(&str, &str, i64) -> f64,
    ) -> Vec<String> {
        let mut out = Vec::new();
        for label in ["FRA", "LHR"] {
            let mut seq = 0;
            for day in 0..days {
                let n = per_day(label, day);
                for i in 0..n {
                    seq += 1;
                    let t = (FIRST_DAY + day) * 86_400_000 + i * (86_400_000 / n);
                    let u = grid(i, n);
                    let kv = quantile_ms(u, 10.0 * slow(label, "kv", day));
                    let up = quantile_ms(1.0 - u, 20.0 * slow(label, "upstash", day));
                    out.push(format!(
                        r#"{{"seq":{seq},"t_ms":{t},"label":"{label}","vantage":"run","colo":"{label}","cold":false,"colo_changed":false,"handler_ms":40,"answer":{{"key":"7","colo":"{label}","order":["kv","upstash"],"isolate_requests":2,"stores":{{"kv":{{"read_ms":{kv},"hit":true,"value_bytes":100,"write_ms":null,"error":null}},"upstash":{{"read_ms":{up},"hit":true,"value_bytes":100,"write_ms":null,"error":null}}}}}}}}"#
                    ));
                }
            }
        }
        out
    }

    pub(crate) fn report(lines: &[String]) -> Report {
        let origin = lines
            .iter()
            .filter_map(|l| Kept::parse(l.as_bytes()).ok().map(|k| k.t_ms))
            .min()
            .unwrap_or(0);
        let mut a = Aggregate::new(origin, Duration::from_secs(7200));
        for l in lines {
            a.push(&Kept::parse(l.as_bytes()).unwrap());
        }
        let source = Source {
            url: "https://w".into(),
            engine: "probes".into(),
            read_from: "x".into(),
        };
        a.finish(&source).unwrap().unwrap()
    }

    /// 12 days of 1000 answers a label; kv at FRA 50% slower from day 8 (index 7) on.
    pub(crate) fn slower_on_day_8() -> Report {
        let slow = |label: &str, store: &str, day: i64| {
            if (label, store) == ("FRA", "kv") && day >= 7 {
                1.5
            } else {
                1.0
            }
        };
        report(&lines(12, |_, _| 1000, slow))
    }

    fn series<'a>(h: &'a History, store: &str, label: &str) -> &'a Series {
        h.series
            .iter()
            .find(|s| s.store == store && s.label == label)
            .unwrap()
    }

    #[test]
    fn the_day_a_store_got_slower_at_one_place_is_marked_and_no_other() {
        let h = of(&slower_on_day_8());
        assert_eq!(h.dates.len(), 12);
        assert_eq!(h.dates[7], "2026-12-02");
        assert_eq!(h.series.len(), 4);
        let kv = series(&h, "kv", "FRA");
        assert_eq!(kv.days.len(), 12);
        let day8 = &kv.days[7];
        assert_eq!((day8.reads, day8.week.as_ref().unwrap().days), (1000, 7));
        assert_eq!(day8.change, [Some(Change::Above); 2], "{day8:?}");
        for day in &kv.days[..7] {
            assert_eq!(day.change, [None, None], "{day:?}");
        }
        // Days 1 to 5 have fewer than 5 days before them: never marked, whatever they show.
        assert!(kv.days[..5]
            .iter()
            .all(|d| d.week.as_ref().is_none_or(|w| w.days < 5)));
        for (store, label) in [("upstash", "FRA"), ("kv", "LHR"), ("upstash", "LHR")] {
            let s = series(&h, store, label);
            let marked: Vec<&Day> = s.days.iter().filter(|d| d.change != [None, None]).collect();
            assert!(marked.is_empty(), "{store} @ {label}: {marked:?}");
        }
        let changes = h.changes();
        let oldest = changes.last().unwrap();
        assert_eq!(oldest.day.date, "2026-12-02");
        let text = changes
            .iter()
            .find(|c| c.day.date == "2026-12-02" && c.i == 1)
            .unwrap()
            .text();
        assert!(
            text.starts_with("kv @ FRA: p99 on 2026-12-02 was "),
            "{text}"
        );
        assert!(text.contains(", above the week before ("), "{text}");
        // Every change is kv at FRA's, the newest first.
        assert!(changes
            .iter()
            .all(|c| (c.series.store.as_str(), c.series.label.as_str()) == ("kv", "FRA")));
        assert!(changes.windows(2).all(|w| w[0].day.date >= w[1].day.date));
    }

    #[test]
    fn a_day_with_fewer_than_5_days_before_it_is_not_marked() {
        // kv at FRA twice as slow from its third day: its interval misses the two days
        // before, but two days cannot say how far days wander.
        let slow = |label: &str, store: &str, day: i64| {
            if (label, store, day >= 2) == ("FRA", "kv", true) {
                2.0
            } else {
                1.0
            }
        };
        let h = of(&report(&lines(4, |_, _| 400, slow)));
        let day3 = &series(&h, "kv", "FRA").days[2];
        let (Ok(d), Some(Ok(w))) = (&day3.figures[0], day3.week.as_ref().map(|w| &w.figures[0]))
        else {
            panic!("{day3:?}");
        };
        assert!(d.low > w.high, "{day3:?}");
        assert_eq!(
            (day3.week.as_ref().unwrap().days, day3.change),
            (2, [None, None])
        );
    }

    #[test]
    fn a_day_of_too_few_reads_has_no_p99() {
        // LHR answers 100 times on its last day: p50 needs 6 reads, p99 368.
        let per_day = |label: &str, day: i64| {
            if label == "LHR" && day == 10 {
                100
            } else {
                400
            }
        };
        let h = of(&report(&lines(11, per_day, |_, _, _| 1.0)));
        let last = series(&h, "kv", "LHR").days.last().unwrap();
        assert_eq!(last.reads, 100);
        assert!(last.figures[0].is_ok());
        assert!(matches!(
            last.figures[1],
            Err(IntervalError::TooFew { n: 100, .. })
        ));
        assert_eq!(last.change[1], None);
        assert!(series(&h, "kv", "FRA").days.last().unwrap().figures[1].is_ok());
    }

    #[test]
    fn two_halves_merged_are_the_whole() {
        let all = lines(12, |_, _| 300, |_, _, _| 1.0);
        // Split inside a day, so both halves hold part of one day of each label.
        let cut = |l: &&String| {
            Kept::parse(l.as_bytes()).unwrap().t_ms < (FIRST_DAY + 6) * 86_400_000 + 43_200_000
        };
        let (first, second): (Vec<String>, Vec<String>) =
            all.iter().cloned().partition(|l| cut(&l));
        let whole = report(&all);
        let merged = Report::merge(vec![report(&first), report(&second)]).unwrap();
        assert_eq!(merged.days, whole.days);
        assert_eq!(of(&merged), of(&whole));
        // And through report.json.
        let back: Report = serde_json::from_str(&serde_json::to_string(&merged).unwrap()).unwrap();
        assert_eq!(of(&back), of(&whole));
        assert_eq!(whole.days.0.len(), 12);
        assert_eq!(whole.days.0["2026-12-01"]["FRA"]["kv"].len(), 300);
    }

    #[test]
    fn two_dates_make_no_history_and_three_do() {
        // 24 hours from noon touch two dates: no History.
        let mut r = report(&lines(2, |_, _| 50, |_, _, _| 1.0));
        assert_eq!(r.days.0.len(), 2);
        assert_eq!(of(&r), History::default());
        r.days
            .add(report(&lines(3, |_, _| 50, |_, _, _| 1.0)).days)
            .unwrap();
        assert_eq!(of(&r).dates.len(), 3);
    }

    #[test]
    fn days_that_did_not_change_are_seldom_marked() {
        // 60 series of 14 days, 500 independent reads a day from one distribution: every mark
        // is a false one. Two 95% intervals of one quantity miss each other in about 1% of
        // comparisons (0.6% for equal widths); the week's, widened by its days' spread, a
        // little less often.
        let mut rng = Rng(46);
        let mut r = Report::empty();
        for series in 0..60 {
            for day in 0..14 {
                let mut h = crate::hist::Hist::default();
                for _ in 0..500 {
                    h.record((quantile_ms(rng.unit(), 10.0) * 1000.0) as u64);
                }
                let stores = BTreeMap::from([("kv".to_string(), h)]);
                r.days
                    .0
                    .entry(date(FIRST_DAY + day))
                    .or_default()
                    .insert(format!("v{series}"), stores);
            }
        }
        let h = of(&r);
        let compared: usize = h
            .series
            .iter()
            .flat_map(|s| &s.days)
            .filter(|d| d.week.as_ref().is_some_and(|w| w.days >= WEEK_DAYS_MIN))
            .map(|d| d.figures.iter().filter(|f| f.is_ok()).count())
            .sum();
        let marked = h.changes().len();
        let rate = marked as f64 / compared as f64;
        println!(
            "{marked} of {compared} comparisons marked ({:.2}%)",
            rate * 100.0
        );
        // 60 series × 9 days with 5+ days before × 2 percentiles.
        assert_eq!(compared, 60 * 9 * 2);
        assert!(rate < 0.02, "{marked} of {compared}");
    }
}
