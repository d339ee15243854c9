//! Merging reports from several runs (vantage points): counters add, histograms add (so quantiles
//! equal those of one run over the union of samples), labels stay separate, timelines align on the
//! time since each run's start.

use std::collections::BTreeMap;

use crate::hist::Packed;
use crate::report::{ColoStats, Interval, Report, Section, StoreStats, Timeline};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MergeError {
    #[error("nothing to merge: give at least one report.json")]
    Empty,
    #[error("timeline intervals differ ({0} s vs {1} s): rerun with the same --interval")]
    IntervalMismatch(f64, f64),
}

fn add_map(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, n) in from {
        *into.entry(k.clone()).or_default() += n;
    }
}

pub fn add_store(into: &mut StoreStats, from: &StoreStats) {
    into.answers += from.answers;
    into.reads += from.reads;
    into.writes += from.writes;
    into.read_us.add(&from.read_us);
    into.read_hit_us.add(&from.read_hit_us);
    into.read_miss_us.add(&from.read_miss_us);
    into.write_us.add(&from.write_us);
    into.connect_us.add(&from.connect_us);
    into.read_bytes.add(&from.read_bytes);
    into.write_bytes.add(&from.write_bytes);
    into.read_units_4k += from.read_units_4k;
    into.write_units_1k += from.write_units_1k;
    add_map(&mut into.errors, &from.errors);
}

pub fn add_section(into: &mut Section, from: &Section) {
    into.scheduled += from.scheduled;
    into.sent += from.sent;
    into.answered += from.answered;
    add_map(&mut into.failures, &from.failures);
    for (kind, examples) in &from.failure_examples {
        let mine = into.failure_examples.entry(kind.clone()).or_default();
        for e in examples {
            if mine.len() < 3 && !mine.contains(e) {
                mine.push(e.clone());
            }
        }
    }
    // Runs from several machines send concurrently: their rates add.
    into.achieved_rate += from.achieved_rate;
    into.send_window_s = into.send_window_s.max(from.send_window_s);
    into.latency_us.add(&from.latency_us);
    for (name, s) in &from.stores {
        add_store(into.stores.entry(name.clone()).or_default(), s);
    }
}

fn add_colo(into: &mut ColoStats, from: &ColoStats) {
    into.answered += from.answered;
    into.latency_us.add(&from.latency_us);
    for (store, h) in &from.read_us {
        into.read_us.entry(store.clone()).or_default().add(h);
    }
}

fn add_packed(into: &mut BTreeMap<String, Packed>, from: &BTreeMap<String, Packed>) {
    for (k, p) in from {
        let mut h = into.get(k).map(Packed::unpack).unwrap_or_default();
        h.add(&p.unpack());
        into.insert(k.clone(), Packed::pack(&h));
    }
}

fn add_interval(into: &mut Interval, from: &Interval) {
    into.scheduled += from.scheduled;
    into.failed += from.failed;
    let mut h = into.latency_us.unpack();
    h.add(&from.latency_us.unpack());
    into.latency_us = Packed::pack(&h);
    add_packed(&mut into.read_us, &from.read_us);
    add_packed(&mut into.write_us, &from.write_us);
}

fn add_timeline(into: &mut Timeline, from: &Timeline) -> Result<(), MergeError> {
    if from.intervals.is_empty() {
        return Ok(());
    }
    if into.intervals.is_empty() {
        into.interval_s = from.interval_s;
    } else if (into.interval_s - from.interval_s).abs() > 1e-9 {
        return Err(MergeError::IntervalMismatch(
            into.interval_s,
            from.interval_s,
        ));
    }
    for (i, iv) in from.intervals.iter().enumerate() {
        if i < into.intervals.len() {
            add_interval(&mut into.intervals[i], iv);
        } else {
            into.intervals.push(iv.clone());
        }
    }
    Ok(())
}

/// Adds reports up. The cost estimate is dropped: the caller recomputes it over the merged mix.
pub fn merge(reports: Vec<Report>) -> Result<Report, MergeError> {
    let mut iter = reports.into_iter();
    let mut out = iter.next().ok_or(MergeError::Empty)?;
    out.cost = None;
    out.tool = format!("kvbench {}", env!("CARGO_PKG_VERSION"));
    for r in iter {
        out.runs.extend(r.runs);
        add_section(&mut out.total, &r.total);
        for (label, s) in &r.labels {
            add_section(out.labels.entry(label.clone()).or_default(), s);
        }
        for (colo, c) in &r.colos {
            add_colo(out.colos.entry(colo.clone()).or_default(), c);
        }
        add_timeline(&mut out.timeline, &r.timeline)?;
    }
    Ok(out)
}
