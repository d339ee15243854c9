//! Each vantage point's warm reads per store over a few consecutive stretches of the report's
//! time: what the comparison reads to count the run-to-run spread in a vantage point's row. The
//! timeline pools every vantage point (one fleet member's slow hour hides among 40 others), so
//! it cannot; the days ([`crate::daily`]) can do so only from 8 days on, and the default page
//! is one. Measured only — one histogram per stretch × label × store, mergeable by addition; a stretch
//! is [`STRETCH_WINDOWS`] timeline windows, so a kept report (at most
//! [`crate::kept::TIMELINE_POINTS`] windows) has at most 20 of them and memory grows with the
//! reads, as the days' does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::check::{plus_hist, AddError};
use crate::hist::Hist;
use crate::report::{AddOrMismatch, Interval};

/// Timeline windows in one stretch: 6 (a 24-hour page's 15-minute windows make 90-minute
/// stretches, 16 of them; a week's 2-hour ones, 12-hour stretches, 14 of them).
pub const STRETCH_WINDOWS: f64 = 6.0;

/// Warm successful reads, µs, by stretch: stretch `i` covers `[i·stretch_s, (i+1)·stretch_s)`
/// since the report's start; stretch → label → store → histogram, a stretch with no read absent.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Stretches {
    /// One stretch's length, seconds: [`STRETCH_WINDOWS`] of the timeline's `interval_s`.
    pub stretch_s: f64,
    pub reads: BTreeMap<u32, BTreeMap<String, BTreeMap<String, Hist>>>,
}

impl Stretches {
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty()
    }

    /// No reads yet, in stretches of `stretch_s` seconds.
    pub fn new(stretch_s: f64) -> Stretches {
        Stretches {
            stretch_s,
            reads: BTreeMap::new(),
        }
    }

    /// One label's stretches from its own timeline (a kept report's label is one run): what
    /// the aggregate builds window by window, at once, for the tests.
    #[cfg(test)]
    pub fn of_timeline(label: &str, timeline: &crate::report::Timeline) -> Stretches {
        let mut out = Stretches::new(timeline.interval_s * STRETCH_WINDOWS);
        for iv in &timeline.intervals {
            out.add_window(label, iv);
        }
        out.freeze();
        out
    }

    /// One timeline window of `label`'s: its warm reads, in the stretch its start falls in.
    pub fn add_window(&mut self, label: &str, iv: &Interval) {
        if iv.read_us.is_empty() || !(self.stretch_s.is_finite() && self.stretch_s > 0.0) {
            return;
        }
        let index = (iv.start_s / self.stretch_s + 1e-9)
            .floor()
            .clamp(0.0, u32::MAX as f64) as u32;
        let stores = self
            .reads
            .entry(index)
            .or_default()
            .entry(label.to_string())
            .or_default();
        for (store, p) in &iv.read_us {
            stores.entry(store.clone()).or_default().add(&p.unpack());
        }
    }

    /// `label`'s histograms at rest, when its answers end (only one label's are changing).
    pub fn freeze_label(&mut self, label: &str) {
        for stores in self.reads.values_mut().filter_map(|l| l.get_mut(label)) {
            stores.values_mut().for_each(Hist::freeze);
        }
    }

    /// Every histogram at rest ([`Hist::freeze`]).
    pub fn freeze(&mut self) {
        for h in self.reads.values_mut().flat_map(|l| l.values_mut()) {
            h.values_mut().for_each(Hist::freeze);
        }
    }

    /// The sum of several reports' stretches, aligned on the time since each one's start, at the
    /// longest stretch when it is a whole multiple of every other (as [`Timeline::sum`](crate::report::Timeline::sum) does
    /// with their windows); otherwise they cannot be added.
    pub fn sum(all: Vec<Stretches>) -> Result<Stretches, AddOrMismatch> {
        let used = || all.iter().filter(|s| !s.is_empty());
        let Some(stretch_s) = used().map(|s| s.stretch_s).reduce(f64::max) else {
            return Ok(Stretches::default());
        };
        for s in used() {
            let ratio = stretch_s / s.stretch_s;
            if !(ratio.is_finite() && ratio >= 1.0 && (ratio - ratio.round()).abs() < 1e-6) {
                return Err(AddOrMismatch::Mismatch(s.stretch_s, stretch_s));
            }
        }
        let mut out = Stretches {
            stretch_s,
            reads: BTreeMap::new(),
        };
        for s in all.into_iter().filter(|s| !s.is_empty()) {
            let ratio = (stretch_s / s.stretch_s).round() as u32;
            for (index, labels) in s.reads {
                out.add_stretch(index / ratio.max(1), labels)?;
            }
        }
        out.freeze();
        Ok(out)
    }

    /// Adds one stretch's labels into stretch `index` (a histogram new here is moved in).
    fn add_stretch(
        &mut self,
        index: u32,
        labels: BTreeMap<String, BTreeMap<String, Hist>>,
    ) -> Result<(), AddError> {
        let mine = self.reads.entry(index).or_default();
        for (label, stores) in labels {
            let mine = mine.entry(label.clone()).or_default();
            for (store, h) in stores {
                match mine.get_mut(&store) {
                    Some(m) => {
                        plus_hist(m, &h, &format!("stretches.reads.{index}.{label}.{store}"))?
                    }
                    None => {
                        mine.insert(store, h);
                    }
                }
            }
        }
        Ok(())
    }

    /// `label`'s reads of `store`, stretch by stretch in time order (those with none left out).
    pub fn of<'a>(&'a self, label: &'a str, store: &'a str) -> impl Iterator<Item = &'a Hist> + 'a {
        self.reads
            .values()
            .filter_map(move |labels| labels.get(label)?.get(store))
            .filter(|h| !h.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::Packed;
    use crate::report::Timeline;

    fn hist(values: impl IntoIterator<Item = u64>) -> Hist {
        let mut h = Hist::default();
        values.into_iter().for_each(|v| h.record(v));
        h
    }

    /// A timeline of `n` windows of `interval_s`, window `i` with one kv read of `1000 + i` µs.
    fn timeline(n: u64, interval_s: f64) -> Timeline {
        Timeline {
            interval_s,
            intervals: (0..n)
                .map(|i| Interval {
                    start_s: i as f64 * interval_s,
                    read_us: [("kv".to_string(), Packed::pack(&hist([1000 + i])))].into(),
                    ..Interval::default()
                })
                .collect(),
        }
    }

    fn lens(s: &Stretches, label: &str) -> Vec<u64> {
        s.of(label, "kv").map(Hist::len).collect()
    }

    #[test]
    fn a_label_s_windows_fall_in_stretches_of_six() {
        let s = Stretches::of_timeline("FRA", &timeline(20, 900.0));
        assert_eq!(s.stretch_s, 5400.0);
        assert_eq!(lens(&s, "FRA"), [6, 6, 6, 2]);
        assert_eq!(s.of("FRA", "kv").next().unwrap().max(), 1005);
        assert_eq!(lens(&s, "LHR"), Vec::<u64>::new());
        // A window with no read makes no stretch.
        let mut t = timeline(13, 900.0);
        for iv in &mut t.intervals[6..12] {
            iv.read_us.clear();
        }
        assert_eq!(lens(&Stretches::of_timeline("FRA", &t), "FRA"), [6, 1]);
    }

    #[test]
    fn sums_align_on_the_start_and_coarsen_to_the_longest_stretch() {
        let fra = Stretches::of_timeline("FRA", &timeline(24, 900.0));
        let lhr = Stretches::of_timeline("LHR", &timeline(12, 1800.0));
        let sum = Stretches::sum(vec![fra.clone(), lhr, Stretches::default()]).unwrap();
        assert_eq!(sum.stretch_s, 10_800.0);
        assert_eq!(lens(&sum, "FRA"), [12, 12]);
        assert_eq!(lens(&sum, "LHR"), [6, 6]);
        // The same label twice adds up.
        let twice = Stretches::sum(vec![fra.clone(), fra]).unwrap();
        assert_eq!(lens(&twice, "FRA"), [12, 12, 12, 12]);
        // 900 s windows beside 1,300 s ones: no stretch holds whole ones of both.
        let odd = Stretches::of_timeline("LHR", &timeline(12, 1300.0));
        let fra = Stretches::of_timeline("FRA", &timeline(24, 900.0));
        assert!(matches!(
            Stretches::sum(vec![fra, odd]),
            Err(AddOrMismatch::Mismatch(a, b)) if a == 5400.0 && b == 7800.0
        ));
    }
}
