//! Adding reports up: the sum of several runs' or vantage points' measurements equals one run
//! over the union of their samples (histograms add exactly, counts are checked against
//! [`MAX_COUNT`](crate::hist::MAX_COUNT)), and every histogram is held at rest between additions.

use std::collections::BTreeMap;

use super::{tool_name, ColoStats, Interval, Report, Section, StoreStats, Timeline};
use crate::check::{plus, plus_hist, AddError};
use crate::hist::{Hist, Packed};
use crate::stretch::Stretches;

/// Why reports cannot be merged.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MergeError {
    #[error("nothing to merge: give at least one report.json")]
    Empty,
    /// A timeline's interval, and the coarsest one, which is not a whole multiple of it.
    #[error(
        "timeline intervals do not divide ({0} s into {1} s): rerun with the same --interval, or \
         intervals that are whole multiples of one another"
    )]
    IntervalMismatch(f64, f64),
    /// Adding the `report`th report (from 1, in the order given) would pass a limit.
    #[error("report {report}: {error}")]
    Add { report: usize, error: AddError },
    /// A report's stretch of time, and the longest one, which is not a whole multiple of it.
    #[error(
        "the vantage points' stretches do not divide ({0} s into {1} s): reports whose timeline \
         intervals divide have stretches that do; this file's were not written by kvbench"
    )]
    StretchMismatch(f64, f64),
    /// Summing the timelines would pass a limit.
    #[error("the timelines: {0}")]
    Timeline(AddError),
    /// Summing the vantage points' stretches would pass a limit.
    #[error("the stretches: {0}")]
    Stretches(AddError),
}

fn add_counts(
    into: &mut BTreeMap<String, u64>,
    from: &BTreeMap<String, u64>,
    field: &str,
) -> Result<(), AddError> {
    for (k, n) in from {
        plus(into.entry(k.clone()).or_default(), *n, k).map_err(|e| e.under(field))?;
    }
    Ok(())
}

fn add_hists(
    into: &mut BTreeMap<String, Hist>,
    from: &BTreeMap<String, Hist>,
    field: &str,
) -> Result<(), AddError> {
    for (k, h) in from {
        let mine = into.entry(k.clone()).or_default();
        plus_hist(mine, h, k).map_err(|e| e.under(field))?;
        mine.freeze();
    }
    Ok(())
}

/// Distinct example messages kept per failure kind.
pub const EXAMPLES_PER_KIND: usize = 3;

impl StoreStats {
    /// Adds another set of answers' figures (histograms add exactly); an error names the count
    /// that would pass [`MAX_COUNT`](crate::hist::MAX_COUNT).
    pub fn add(&mut self, from: &StoreStats) -> Result<(), AddError> {
        for (mine, theirs, name) in [
            (&mut self.answers, from.answers, "answers"),
            (&mut self.reads, from.reads, "reads"),
            (&mut self.writes, from.writes, "writes"),
            (&mut self.read_units_4k, from.read_units_4k, "read_units_4k"),
            (
                &mut self.write_units_1k,
                from.write_units_1k,
                "write_units_1k",
            ),
            (&mut self.failed_reads, from.failed_reads, "failed_reads"),
            (&mut self.failed_writes, from.failed_writes, "failed_writes"),
            (
                &mut self.failed_write_units_1k,
                from.failed_write_units_1k,
                "failed_write_units_1k",
            ),
            (&mut self.connected, from.connected, "connected"),
            (
                &mut self.abandoned_finished,
                from.abandoned_finished,
                "abandoned_finished",
            ),
            (
                &mut self.abandoned_running,
                from.abandoned_running,
                "abandoned_running",
            ),
        ] {
            plus(mine, theirs, name)?;
        }
        for (mine, theirs, name) in [
            (&mut self.read_us, &from.read_us, "read_us"),
            (&mut self.read_hit_us, &from.read_hit_us, "read_hit_us"),
            (&mut self.read_miss_us, &from.read_miss_us, "read_miss_us"),
            (&mut self.write_us, &from.write_us, "write_us"),
            (&mut self.connect_us, &from.connect_us, "connect_us"),
            (&mut self.cold_read_us, &from.cold_read_us, "cold_read_us"),
            (
                &mut self.cold_write_us,
                &from.cold_write_us,
                "cold_write_us",
            ),
            (
                &mut self.cold_connect_us,
                &from.cold_connect_us,
                "cold_connect_us",
            ),
            (&mut self.read_sql_us, &from.read_sql_us, "read_sql_us"),
            (&mut self.write_sql_us, &from.write_sql_us, "write_sql_us"),
            (&mut self.read_bytes, &from.read_bytes, "read_bytes"),
            (&mut self.write_bytes, &from.write_bytes, "write_bytes"),
        ] {
            plus_hist(mine, theirs, name)?;
        }
        add_counts(&mut self.errors, &from.errors, "errors")
    }
}

impl Section {
    /// Adds a section of requests sent concurrently (another vantage point): counts and
    /// histograms add, rates add, the send window is the longest.
    pub fn add(&mut self, from: &Section) -> Result<(), AddError> {
        for (n, count) in &from.concurrent {
            plus(
                self.concurrent.entry(*n).or_insert(0),
                *count,
                &n.to_string(),
            )
            .map_err(|e| e.under("concurrent"))?;
        }
        for (mine, theirs, name) in [
            (
                &mut self.excluded_concurrent,
                from.excluded_concurrent,
                "excluded_concurrent",
            ),
            (&mut self.retried, from.retried, "retried"),
            (&mut self.scheduled, from.scheduled, "scheduled"),
            (&mut self.sent, from.sent, "sent"),
            (&mut self.answered, from.answered, "answered"),
            (&mut self.cold, from.cold, "cold"),
        ] {
            plus(mine, theirs, name)?;
        }
        add_counts(&mut self.failures, &from.failures, "failures")?;
        for (kind, examples) in &from.failure_examples {
            let mine = self.failure_examples.entry(kind.clone()).or_default();
            for e in examples {
                if mine.len() < EXAMPLES_PER_KIND && !mine.contains(e) {
                    mine.push(e.clone());
                }
            }
        }
        self.achieved_rate += from.achieved_rate;
        self.send_window_s = self.send_window_s.max(from.send_window_s);
        plus_hist(&mut self.latency_us, &from.latency_us, "latency_us")?;
        self.latency_us.freeze();
        // Each store's sum goes back to rest before the next is added: a file may name any
        // number of stores, and only one store's histograms are dense at a time.
        for (name, s) in &from.stores {
            let mine = self.stores.entry(name.clone()).or_default();
            mine.add(s)
                .map_err(|e| e.under(&format!("stores.{name}")))?;
            mine.freeze();
        }
        Ok(())
    }
}

impl StoreStats {
    /// Every histogram at rest ([`Hist::freeze`]).
    pub fn freeze(&mut self) {
        for h in [
            &mut self.read_us,
            &mut self.read_hit_us,
            &mut self.read_miss_us,
            &mut self.write_us,
            &mut self.connect_us,
            &mut self.cold_read_us,
            &mut self.cold_write_us,
            &mut self.cold_connect_us,
            &mut self.read_sql_us,
            &mut self.write_sql_us,
            &mut self.read_bytes,
            &mut self.write_bytes,
        ] {
            h.freeze();
        }
    }
}

impl Section {
    /// Every histogram at rest ([`Hist::freeze`]).
    pub fn freeze(&mut self) {
        self.latency_us.freeze();
        self.stores.values_mut().for_each(StoreStats::freeze);
    }
}

impl ColoStats {
    /// Every histogram at rest ([`Hist::freeze`]).
    pub fn freeze(&mut self) {
        self.latency_us.freeze();
        self.read_us.values_mut().for_each(Hist::freeze);
    }

    pub fn add(&mut self, from: &ColoStats) -> Result<(), AddError> {
        plus(&mut self.answered, from.answered, "answered")?;
        plus(&mut self.cold, from.cold, "cold")?;
        plus_hist(&mut self.latency_us, &from.latency_us, "latency_us")?;
        add_hists(&mut self.read_us, &from.read_us, "read_us")?;
        self.freeze();
        Ok(())
    }
}

impl Interval {
    /// Adds the other half of a coarser interval of the same run (the collector's own counts,
    /// one per sample: they saturate rather than overflow; [`IntervalSum`] adds other runs').
    pub fn add(&mut self, from: &Interval) {
        self.scheduled = self.scheduled.saturating_add(from.scheduled);
        self.failed = self.failed.saturating_add(from.failed);
        self.cold = self.cold.saturating_add(from.cold);
        let mut h = self.latency_us.unpack();
        h.add(&from.latency_us.unpack());
        self.latency_us = Packed::pack(&h);
        for (into, from) in [
            (&mut self.read_us, &from.read_us),
            (&mut self.read_hit_us, &from.read_hit_us),
            (&mut self.write_us, &from.write_us),
            (&mut self.cold_read_us, &from.cold_read_us),
        ] {
            for (k, p) in from {
                let mut h = into.get(k).map(Packed::unpack).unwrap_or_default();
                h.add(&p.unpack());
                into.insert(k.clone(), Packed::pack(&h));
            }
        }
    }
}

/// Timeline intervals being added up: each part is unpacked once, and the sum packed once.
#[derive(Default)]
pub struct IntervalSum {
    scheduled: u64,
    failed: u64,
    cold: u64,
    latency_us: Hist,
    /// `read_us`, `read_hit_us`, `write_us`, `cold_read_us`.
    stores: [BTreeMap<String, Hist>; 4],
}

impl IntervalSum {
    pub fn add(&mut self, iv: &Interval) -> Result<(), AddError> {
        plus(&mut self.scheduled, iv.scheduled, "scheduled")?;
        plus(&mut self.failed, iv.failed, "failed")?;
        plus(&mut self.cold, iv.cold, "cold")?;
        plus_hist(&mut self.latency_us, &iv.latency_us.unpack(), "latency_us")?;
        for ((mine, theirs), field) in self
            .stores
            .iter_mut()
            .zip([&iv.read_us, &iv.read_hit_us, &iv.write_us, &iv.cold_read_us])
            .zip(["read_us", "read_hit_us", "write_us", "cold_read_us"])
        {
            for (k, p) in theirs {
                plus_hist(mine.entry(k.clone()).or_default(), &p.unpack(), k)
                    .map_err(|e| e.under(field))?;
            }
        }
        Ok(())
    }

    pub fn pack(self, start_s: f64) -> Interval {
        let [read_us, read_hit_us, write_us, cold_read_us] = self
            .stores
            .map(|m| m.into_iter().map(|(k, h)| (k, Packed::pack(&h))).collect());
        Interval {
            start_s,
            scheduled: self.scheduled,
            failed: self.failed,
            cold: self.cold,
            latency_us: Packed::pack(&self.latency_us),
            read_us,
            read_hit_us,
            write_us,
            cold_read_us,
        }
    }
}

impl Report {
    /// Every histogram at rest ([`Hist::freeze`]): its figures are the same.
    pub fn freeze(&mut self) {
        self.total.freeze();
        self.labels.values_mut().for_each(Section::freeze);
        self.colos.values_mut().for_each(ColoStats::freeze);
        self.days.freeze();
        self.stretches.freeze();
        for run in &mut self.runs {
            run.read_us.values_mut().for_each(Hist::freeze);
        }
    }
}

impl Timeline {
    /// The sum of several runs' timelines, aligned on the time since each run's start: each
    /// interval is unpacked and packed once, however many runs add to it. Timelines of different
    /// intervals (a long run's coarsened one beside a short run's) are summed at the coarsest,
    /// when it is a whole multiple of every other; otherwise they cannot be added.
    pub fn sum(timelines: Vec<Timeline>) -> Result<Timeline, AddOrMismatch> {
        let used = || timelines.iter().filter(|t| !t.intervals.is_empty());
        let Some(interval_s) = used().map(|t| t.interval_s).reduce(f64::max) else {
            return Ok(timelines.into_iter().next().unwrap_or_default());
        };
        for t in used() {
            let ratio = interval_s / t.interval_s;
            if !(ratio.is_finite() && ratio >= 1.0 && (ratio - ratio.round()).abs() < 1e-6) {
                return Err(AddOrMismatch::Mismatch(t.interval_s, interval_s));
            }
        }
        let mut sums: BTreeMap<u64, IntervalSum> = BTreeMap::new();
        for t in used() {
            for iv in &t.intervals {
                // Where it starts, not its position: an interval starts at a whole multiple of
                // its own length, so it lies inside exactly one of the coarsest.
                let index = (iv.start_s / interval_s + 1e-9).floor().max(0.0) as u64;
                sums.entry(index)
                    .or_default()
                    .add(iv)
                    .map_err(|e| e.under(&format!("timeline.intervals[{index}]")))?;
            }
        }
        let len = sums.keys().next_back().map_or(0, |last| last + 1);
        let intervals = (0..len)
            .map(|i| {
                sums.remove(&i)
                    .unwrap_or_default()
                    .pack(i as f64 * interval_s)
            })
            .collect();
        Ok(Timeline {
            interval_s,
            intervals,
        })
    }
}

/// Why timelines cannot be summed.
#[derive(Debug)]
pub enum AddOrMismatch {
    Add(AddError),
    /// A timeline's interval, and the coarsest one.
    Mismatch(f64, f64),
}

impl From<AddError> for AddOrMismatch {
    fn from(e: AddError) -> Self {
        AddOrMismatch::Add(e)
    }
}

impl Report {
    /// Adds reports up (runs from several vantage points): the result equals one run over the
    /// union of their samples. What derives from reports is not on them
    /// ([`crate::derived`]): nothing to drop, the caller derives from the sum. A count that would pass [`MAX_COUNT`](crate::hist::MAX_COUNT) is an error naming
    /// the report and the field, never a wrap. Memory: the sum is held at rest between
    /// additions, so at most one group's histograms are dense at a time (docs/report.md).
    pub fn merge(reports: Vec<Report>) -> Result<Report, MergeError> {
        let mut iter = reports.into_iter();
        let mut out = iter.next().ok_or(MergeError::Empty)?;
        out.tool = tool_name();
        let mut timelines = vec![std::mem::take(&mut out.timeline)];
        let mut stretches = vec![std::mem::take(&mut out.stretches)];
        for (i, r) in iter.enumerate() {
            let at = |error: AddError| MergeError::Add {
                report: i + 2,
                error,
            };
            let (timeline, stretch) = out.add(r).map_err(at)?;
            timelines.push(timeline);
            stretches.push(stretch);
        }
        out.timeline = Timeline::sum(timelines).map_err(|e| match e {
            AddOrMismatch::Add(error) => MergeError::Timeline(error),
            AddOrMismatch::Mismatch(a, b) => MergeError::IntervalMismatch(a, b),
        })?;
        out.stretches = Stretches::sum(stretches).map_err(|e| match e {
            AddOrMismatch::Add(error) => MergeError::Stretches(error),
            AddOrMismatch::Mismatch(a, b) => MergeError::StretchMismatch(a, b),
        })?;
        Ok(out)
    }

    /// Adds everything of `r` but its timeline and stretches, which it hands back. What many runs add up to
    /// stays at rest between additions (the add methods freeze each sum as they go): a fleet's
    /// vantage points share colos, and a file may name any number of stores.
    fn add(&mut self, r: Report) -> Result<(Timeline, Stretches), AddError> {
        self.runs.extend(r.runs);
        self.total.add(&r.total).map_err(|e| e.under("total"))?;
        for (label, s) in &r.labels {
            let mine = self.labels.entry(label.clone()).or_default();
            mine.add(s)
                .map_err(|e| e.under(&format!("labels.{label}")))?;
        }
        for (colo, c) in &r.colos {
            let mine = self.colos.entry(colo.clone()).or_default();
            mine.add(c).map_err(|e| e.under(&format!("colos.{colo}")))?;
        }
        for (label, v) in &r.vantages {
            let mine = self.vantages.entry(label.clone()).or_default();
            mine.add(v)
                .map_err(|e| e.under(&format!("vantages.{label}")))?;
        }
        match (&mut self.provenance, r.provenance) {
            (Some(mine), Some(theirs)) => mine.add(theirs),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
        self.days.add(r.days).map_err(|e| e.under("days"))?;
        self.freshness.extend(r.freshness);
        Ok((r.timeline, r.stretches))
    }
}
