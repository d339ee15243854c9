//! How steady a store was across its run: each percentile's range over the run's spans of
//! consecutive windows ([`crate::block`]), and a plain flag when the spans disagree beyond their
//! own intervals — a figure with a tight interval can still have moved by half over the run, and
//! the reader should see that, not only the interval.

use serde::{Deserialize, Serialize};

use crate::block::{self, Spans};
use crate::hist::Hist;

/// One percentile across the spans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub p: f64,
    /// Spans whose reads support this percentile (the others are left out of the range).
    pub spans: u32,
    pub min_ms: f64,
    pub max_ms: f64,
    /// No value lies inside every span's own interval: the spans measured different things.
    pub unstable: bool,
}

/// A store's percentiles across its run (or across merged runs: [`Stability::of_runs`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stability {
    pub windows: u64,
    pub spans: u32,
    /// Each span is a whole run of a merge, not consecutive windows of one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub runs: bool,
    /// The percentiles at least two spans support, in the row's order.
    pub spread: Vec<Spread>,
}

impl Stability {
    /// `None` when the windows were too few to make spans.
    pub fn of<const N: usize>(spans: &Spans<N>, ps: [f64; N]) -> Option<Stability> {
        if spans.spans.is_empty() {
            return None;
        }
        let spread = ps
            .iter()
            .enumerate()
            .filter_map(|(i, &p)| {
                let own: Vec<_> = spans
                    .spans
                    .iter()
                    .filter_map(|s| s.own.get(i).copied().flatten())
                    .collect();
                if own.len() < 2 {
                    return None;
                }
                let ms = |us: u64| us as f64 / 1000.0;
                let fold = |f: fn(u64, u64) -> u64, of: fn(&crate::interval::Percentile) -> u64| {
                    own.iter().map(of).reduce(f).unwrap_or(0)
                };
                Some(Spread {
                    p,
                    spans: own.len() as u32,
                    min_ms: ms(fold(u64::min, |o| o.estimate)),
                    max_ms: ms(fold(u64::max, |o| o.estimate)),
                    unstable: fold(u64::max, |o| o.low) > fold(u64::min, |o| o.high),
                })
            })
            .collect();
        Some(Stability {
            windows: spans.windows as u64,
            spans: spans.spans.len() as u32,
            runs: false,
            spread,
        })
    }

    /// A store across the runs of a merge: each run's reads (`runs`, two or more) one span,
    /// measured against `pooled`'s percentiles; `None` with fewer than two runs.
    pub fn of_runs<const N: usize>(
        runs: &[&Hist],
        pooled: &Hist,
        ps: [f64; N],
    ) -> Option<Stability> {
        if runs.len() < 2 {
            return None;
        }
        let estimates = pooled.for_reading().quantiles(&ps);
        let spans = block::of_runs(runs, ps, estimates);
        let mut s = Stability::of(&spans, ps)?;
        s.runs = true;
        Some(s)
    }

    /// `p50 4.10–6.02 · p99 19.1–31.4 ms across 6 spans of 48 windows`.
    pub fn text(&self) -> String {
        let ranges: Vec<String> = self
            .spread
            .iter()
            .map(|s| format!("p{} {}", pct(s.p), range(s)))
            .collect();
        let what = if ranges.is_empty() {
            "no span has reads enough for a percentile".to_string()
        } else {
            format!("{} ms", ranges.join(" · "))
        };
        if self.runs {
            return format!("{what} across {} merged runs", self.spans);
        }
        format!(
            "{what} across {} spans of {} windows",
            self.spans, self.windows
        )
    }

    /// `unstable: p99 ranged 31.0–140.0 ms across 6 spans`, when a percentile's spans disagree.
    pub fn flag(&self) -> Option<String> {
        let unstable: Vec<String> = self
            .spread
            .iter()
            .filter(|s| s.unstable)
            .map(|s| format!("p{} ranged {} ms", pct(s.p), range(s)))
            .collect();
        (!unstable.is_empty()).then(|| {
            format!(
                "unstable: {} across {} {}",
                unstable.join(", "),
                self.spans,
                if self.runs { "merged runs" } else { "spans" }
            )
        })
    }
}

fn range(s: &Spread) -> String {
    format!("{:.2}–{:.2}", s.min_ms, s.max_ms)
}

pub(crate) fn pct(p: f64) -> f64 {
    (p * 100.0 * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block;
    use crate::hist::Hist;

    const PS: [f64; 2] = [0.5, 0.99];

    /// `windows` windows of 400 reads each, at the levels `level(w)` µs (spread ±10%).
    fn spans_of(windows: usize, level: impl Fn(usize) -> u64) -> Spans<2> {
        let hists: Vec<Hist> = (0..windows)
            .map(|w| {
                let mut h = Hist::default();
                (0..400).for_each(|i| h.record(level(w) * (900 + i / 2) / 1000));
                h
            })
            .collect();
        let mut pooled = Hist::default();
        hists.iter().for_each(|h| pooled.add(h));
        let (_, spans) = block::percentiles(&pooled, windows, hists.into_iter(), &[], PS);
        spans
    }

    #[test]
    fn a_steady_store_is_not_flagged_and_a_shifting_one_is() {
        let steady = Stability::of(&spans_of(25, |_| 10_000), PS).unwrap();
        assert_eq!((steady.windows, steady.spans), (25, 5));
        assert_eq!(steady.flag(), None);
        assert!(steady.spread.iter().all(|s| !s.unstable && s.spans == 5));
        // Twice as slow in the second half of the run.
        let shift = Stability::of(&spans_of(25, |w| 10_000 * (1 + (w >= 13) as u64)), PS);
        let shift = shift.unwrap();
        assert!(shift.spread.iter().all(|s| s.unstable), "{shift:?}");
        let flag = shift.flag().unwrap();
        assert!(flag.starts_with("unstable: p50 ranged 9."), "{flag}");
        assert!(flag.ends_with("across 5 spans"), "{flag}");
        assert!(shift.text().ends_with("ms across 5 spans of 25 windows"));
    }

    #[test]
    fn too_few_windows_no_spans_and_unsupported_percentiles_left_out() {
        assert_eq!(Stability::of(&spans_of(7, |_| 10_000), PS), None);
        // 8 windows of 400 reads make 5 spans of 1–2 windows; p99 at the spans' level (99%
        // for 5) needs 528 reads: only the three spans of two windows support it.
        let s = Stability::of(&spans_of(8, |_| 10_000), PS).unwrap();
        let counts: Vec<u32> = s.spread.iter().map(|s| s.spans).collect();
        assert_eq!(counts, [5, 3]);
        let few = Spans::<2> {
            windows: 8,
            spans: vec![
                block::Span {
                    reads: 10,
                    below: [5, 10],
                    own: [None, None],
                };
                5
            ],
            per_window: Vec::new(),
        };
        let s = Stability::of(&few, PS).unwrap();
        assert!(s.spread.is_empty());
        assert_eq!(
            s.text(),
            "no span has reads enough for a percentile across 5 spans of 8 windows"
        );
    }
}
