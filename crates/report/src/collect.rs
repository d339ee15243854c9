//! The one collector: every result is folded into histograms and counters as it arrives —
//! nothing per request is kept, so memory stays flat however long the run. Store and colo names
//! are interned to small indices, so an answer costs one pass over its stores and no string
//! allocation; the report's name-keyed maps are built when an interval closes and at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::answer::{AnswerRef, StoreResult};
use crate::daily::{Daily, DayReads};
use crate::hist::{Hist, Packed};
use crate::report::{
    tool_name, ColoStats, Interval, Report, RunInfo, Section, StoreStats, Timeline,
    EXAMPLES_PER_KIND,
};
use crate::sample::{FailureKind, Outcome, Sample};

/// Names seen so far, each with its index; the last one found is tried first (one colo answers
/// almost every request of a run, and a handful of stores appear in every answer in order).
#[derive(Default)]
struct Names {
    names: Vec<String>,
    last: usize,
}

impl Names {
    fn id(&mut self, name: &str) -> usize {
        if self.names.get(self.last).is_some_and(|n| n == name) {
            return self.last;
        }
        let id = match self.names.iter().position(|n| n == name) {
            Some(id) => id,
            None => {
                self.names.push(name.to_owned());
                self.names.len() - 1
            }
        };
        self.last = id;
        id
    }

    fn name(&self, id: usize) -> &str {
        self.names.get(id).map_or("", String::as_str)
    }
}

/// The `id`th entry of `v`, made (with every one before it) when `v` is shorter.
fn slot<T: Default>(v: &mut Vec<T>, id: usize) -> &mut T {
    if v.len() <= id {
        v.resize_with(id + 1, T::default);
    }
    #[allow(clippy::indexing_slicing)] // On the allowed list of tests/tests/panics.rs.
    &mut v[id]
}

/// Per-store histograms of a timeline interval still receiving samples.
#[derive(Default, Clone)]
struct StoreLive {
    read_us: Hist,
    read_hit_us: Hist,
    write_us: Hist,
    cold_read_us: Hist,
}

/// A timeline interval still receiving samples.
#[derive(Default)]
struct LiveInterval {
    scheduled: u64,
    failed: u64,
    cold: u64,
    latency_us: Hist,
    /// By store index.
    stores: Vec<StoreLive>,
}

impl LiveInterval {
    /// Adds another interval's figures (two halves of a coarser interval).
    fn absorb(&mut self, other: &LiveInterval) {
        self.scheduled += other.scheduled;
        self.failed += other.failed;
        self.cold += other.cold;
        self.latency_us.add(&other.latency_us);
        for (id, s) in other.stores.iter().enumerate() {
            let mine = self.store(id);
            mine.read_us.add(&s.read_us);
            mine.read_hit_us.add(&s.read_hit_us);
            mine.write_us.add(&s.write_us);
            mine.cold_read_us.add(&s.cold_read_us);
        }
    }

    fn store(&mut self, id: usize) -> &mut StoreLive {
        slot(&mut self.stores, id)
    }

    fn pack(&self, index: u64, interval_s: f64, names: &Names) -> Interval {
        // Only stores with a value recorded get an entry, as if the maps were filled directly.
        let pack_map = |pick: fn(&StoreLive) -> &Hist| {
            self.stores
                .iter()
                .enumerate()
                .filter(|(_, s)| !pick(s).is_empty())
                .map(|(id, s)| (names.name(id).to_owned(), Packed::pack(pick(s))))
                .collect()
        };
        Interval {
            start_s: index as f64 * interval_s,
            scheduled: self.scheduled,
            failed: self.failed,
            cold: self.cold,
            latency_us: Packed::pack(&self.latency_us),
            read_us: pack_map(|s| &s.read_us),
            read_hit_us: pack_map(|s| &s.read_hit_us),
            write_us: pack_map(|s| &s.write_us),
            cold_read_us: pack_map(|s| &s.cold_read_us),
        }
    }

    fn unpack(iv: &Interval, names: &mut Names) -> LiveInterval {
        let mut live = LiveInterval {
            scheduled: iv.scheduled,
            failed: iv.failed,
            cold: iv.cold,
            latency_us: iv.latency_us.unpack(),
            stores: Vec::new(),
        };
        type Pick = fn(&mut StoreLive) -> &mut Hist;
        let maps: [(&BTreeMap<String, Packed>, Pick); 4] = [
            (&iv.read_us, |s| &mut s.read_us),
            (&iv.read_hit_us, |s| &mut s.read_hit_us),
            (&iv.write_us, |s| &mut s.write_us),
            (&iv.cold_read_us, |s| &mut s.cold_read_us),
        ];
        for (map, pick) in maps {
            for (name, p) in map {
                *pick(live.store(names.id(name))) = p.unpack();
            }
        }
        live
    }
}

/// Per colo, stores by index.
#[derive(Default)]
struct ColoLive {
    answered: u64,
    cold: u64,
    latency_us: Hist,
    read_us: Vec<Hist>,
}

/// Live figures for the progress display.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub scheduled: u64,
    pub sent: u64,
    pub answered: u64,
    pub failed: u64,
    /// (store, read p50 µs, read p99 µs) over the recent (still open) intervals, for stores with
    /// successful reads in them.
    pub stores: Vec<(String, u64, u64)>,
}

/// Folds samples into a [`Report`].
pub struct Collector {
    /// `--max-concurrent`: answers with more other requests in flight are left out.
    max_concurrent: Option<u32>,
    concurrent: BTreeMap<u32, u64>,
    excluded_concurrent: u64,
    interval_us: u64,
    timeout_us: u64,
    /// Intervals kept live behind the newest one seen: answers arrive up to a timeout late.
    keep_open: u64,
    scheduled: u64,
    sent: u64,
    answered: u64,
    cold: u64,
    retried: u64,
    failures: BTreeMap<FailureKind, u64>,
    failure_examples: BTreeMap<FailureKind, Vec<String>>,
    latency_us: Hist,
    store_names: Names,
    /// By store index.
    stores: Vec<StoreStats>,
    colo_names: Names,
    /// By colo index.
    colos: Vec<ColoLive>,
    live: BTreeMap<u64, LiveInterval>,
    closed: BTreeMap<u64, Interval>,
    /// Warm reads by UTC day, when the wall-clock time of `intended_us` 0 is known
    /// ([`Collector::with_days`]); else the days are read off the timeline at the end.
    days: Option<DayReads>,
    /// The run keeps its own reads per store (`RunInfo::read_us`), for a merge to compare runs.
    run_reads: bool,
}

/// The timeline interval for a run of this length: 60 points across it, between 5 s and 60 s
/// (a 30-minute run gets 30 s intervals, enough to see KV move data closer; short runs get 5 s so
/// each point still holds enough samples for its p99).
pub fn auto_interval(duration: Duration) -> Duration {
    let s = (duration.as_secs_f64() / 60.0).round().clamp(5.0, 60.0);
    Duration::from_secs(s as u64)
}

/// Most intervals a timeline holds. A run (or an imported file) that would need more gets
/// coarser intervals, doubled as often as needed while it is recorded, so memory and the report
/// stay bounded however far apart its samples are (an hour-long run at 5 s needs 720).
pub const MAX_INTERVALS: u64 = 10_000;

/// Longest failure example kept, in bytes: an error body or a tag can be megabytes long.
pub const EXAMPLE_MAX_BYTES: usize = 240;

/// `text` cut to [`EXAMPLE_MAX_BYTES`] on a character boundary, `...` marking the cut.
fn clip_example(mut text: String) -> String {
    if text.len() > EXAMPLE_MAX_BYTES {
        let mut cut = EXAMPLE_MAX_BYTES - 3;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

/// One answer's figures of one store, into the run's: operations, billing units, bytes,
/// abandoned calls, failures by kind and the latencies of what succeeded (`ok_read_us`,
/// `ok_write_us`), a cold answer's into the cold histograms.
fn count_store(
    s: &mut StoreStats,
    r: &StoreResult,
    ok_read_us: Option<u64>,
    ok_write_us: Option<u64>,
    cold: bool,
) {
    s.answers += 1;
    let bytes = r.value_bytes.unwrap_or(0);
    // An operation is billed when it reached the store (it has a time); a store that is
    // not configured has none, so it is never billed.
    if r.read_us.is_some() {
        // On a miss `value_bytes` is what was then *written*; the read itself returned
        // nothing, which Deno KV bills as one (minimum) read unit.
        let read = if r.hit == Some(true) { bytes } else { 0 };
        s.reads += 1;
        s.read_units_4k += units(read, 4096);
        if ok_read_us.is_some() {
            s.read_bytes.record(read);
        }
        // Setup came first and succeeded, or the read would not have been tried.
        if r.connect_us.is_some() {
            s.connected += 1;
        }
    }
    if r.write_us.is_some() {
        s.writes += 1;
        s.write_units_1k += units(bytes, 1024);
        if ok_write_us.is_some() {
            s.write_bytes.record(bytes);
        }
    }
    match r.abandoned {
        Some(true) => s.abandoned_finished += 1,
        Some(false) => s.abandoned_running += 1,
        None => {}
    }
    // Failed operations are counted apart, so the cost leaves them out.
    if r.read_us.is_some() && ok_read_us.is_none() {
        s.failed_reads += 1;
    }
    if r.write_us.is_some() && ok_write_us.is_none() {
        s.failed_writes += 1;
        s.failed_write_units_1k += units(bytes, 1024);
    }
    record_times(s, r, ok_read_us, ok_write_us, cold);
    if let Some(e) = &r.error {
        *s.errors.entry(e.key()).or_default() += 1;
    }
}

/// The latencies of one answer's successful calls of a store (and the store's own SQL time of
/// the same calls), into the cold histograms for a cold answer, else the warm ones.
fn record_times(
    s: &mut StoreStats,
    r: &StoreResult,
    ok_read_us: Option<u64>,
    ok_write_us: Option<u64>,
    cold: bool,
) {
    if cold {
        let times = [
            (ok_read_us, &mut s.cold_read_us),
            (ok_write_us, &mut s.cold_write_us),
            (r.connect_us, &mut s.cold_connect_us),
        ];
        for (us, h) in times {
            if let Some(us) = us {
                h.record(us);
            }
        }
    } else {
        if let Some(us) = ok_read_us {
            s.read_us.record(us);
            match r.hit {
                Some(true) => s.read_hit_us.record(us),
                Some(false) => s.read_miss_us.record(us),
                None => {}
            }
        }
        if let Some(us) = ok_write_us {
            s.write_us.record(us);
        }
        if let Some(us) = r.connect_us {
            s.connect_us.record(us);
        }
        // The store's own share of the same successful calls.
        let sql = [
            (ok_read_us.and(r.read_sql_us), &mut s.read_sql_us),
            (ok_write_us.and(r.write_sql_us), &mut s.write_sql_us),
        ];
        for (us, h) in sql {
            if let Some(us) = us {
                h.record(us);
            }
        }
    }
}

fn units(bytes: u64, unit: u64) -> u64 {
    bytes.div_ceil(unit).max(1)
}

impl Collector {
    /// `interval`: timeline resolution; `timeout`: how late an answer may arrive.
    pub fn new(interval: Duration, timeout: Duration) -> Collector {
        let interval_us = (interval.as_micros() as u64).max(1);
        let timeout_us = timeout.as_micros() as u64;
        Collector {
            interval_us,
            timeout_us,
            keep_open: timeout_us.div_ceil(interval_us) + 1,
            scheduled: 0,
            sent: 0,
            answered: 0,
            cold: 0,
            retried: 0,
            failures: BTreeMap::new(),
            failure_examples: BTreeMap::new(),
            latency_us: Hist::default(),
            store_names: Names::default(),
            stores: Vec::new(),
            colo_names: Names::default(),
            colos: Vec::new(),
            live: BTreeMap::new(),
            closed: BTreeMap::new(),
            max_concurrent: None,
            concurrent: BTreeMap::new(),
            excluded_concurrent: 0,
            days: None,
            run_reads: true,
        }
    }

    /// A vantage point's collector (kept answers): its run keeps no reads of its own, its rows
    /// are apart already.
    pub fn without_run_reads(mut self) -> Collector {
        self.run_reads = false;
        self
    }

    /// Dates each warm read by its own time, `origin_ms` (epoch ms) being `intended_us` 0:
    /// kept answers, whose timeline windows may be hours long.
    pub fn with_days(mut self, origin_ms: i64) -> Collector {
        self.days = Some(DayReads::new(origin_ms));
        self
    }

    /// Leaves out answers whose isolate had more than `max` other requests in flight during
    /// them (counted in `excluded_concurrent`, in nothing else).
    pub fn with_max_concurrent(mut self, max: Option<u32>) -> Collector {
        self.max_concurrent = max;
        self
    }

    /// Whether an answer with this `concurrent` is left out; counts it.
    fn excluded(&mut self, concurrent: Option<u32>) -> bool {
        if let Some(c) = concurrent {
            if self.max_concurrent.is_some_and(|max| c > max) {
                self.excluded_concurrent += 1;
                return true;
            }
            *self.concurrent.entry(c).or_insert(0) += 1;
        }
        false
    }

    /// The figures so far, as the report's section (built on demand: for tests and checks).
    pub fn section(&self) -> Section {
        Section {
            scheduled: self.scheduled,
            sent: self.sent,
            answered: self.answered,
            cold: self.cold,
            failures: self.failures.iter().map(|(k, n)| (k.name(), *n)).collect(),
            failure_examples: self
                .failure_examples
                .iter()
                .map(|(k, e)| (k.name(), e.clone()))
                .collect(),
            achieved_rate: 0.0,
            send_window_s: 0.0,
            latency_us: self.latency_us.clone(),
            stores: self
                .stores
                .iter()
                .enumerate()
                .map(|(id, s)| (self.store_names.name(id).to_owned(), s.clone()))
                .collect(),
            concurrent: self.concurrent.clone(),
            excluded_concurrent: self.excluded_concurrent,
            retried: self.retried,
        }
    }

    /// Live-interval count, for the memory-flatness test.
    pub fn live_intervals(&self) -> usize {
        self.live.len()
    }

    /// Intervals held, live and closed (at most [`MAX_INTERVALS`]).
    pub fn held_intervals(&self) -> usize {
        self.live.len() + self.closed.len()
    }

    /// The timeline index of a sample, coarsening the timeline first if it would pass
    /// [`MAX_INTERVALS`].
    fn index(&mut self, intended_us: u64) -> u64 {
        while intended_us / self.interval_us >= MAX_INTERVALS {
            self.coarsen();
        }
        intended_us / self.interval_us
    }

    /// Doubles the interval: each pair of intervals becomes one.
    fn coarsen(&mut self) {
        self.interval_us *= 2;
        self.keep_open = self.timeout_us.div_ceil(self.interval_us) + 1;
        let interval_s = self.interval_us as f64 / 1e6;
        for (index, iv) in std::mem::take(&mut self.live) {
            match self.live.entry(index / 2) {
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(iv);
                }
                std::collections::btree_map::Entry::Occupied(mut e) => e.get_mut().absorb(&iv),
            }
        }
        for (index, mut iv) in std::mem::take(&mut self.closed) {
            match self.closed.entry(index / 2) {
                std::collections::btree_map::Entry::Vacant(e) => {
                    iv.start_s = (index / 2) as f64 * interval_s;
                    e.insert(iv);
                }
                std::collections::btree_map::Entry::Occupied(mut e) => e.get_mut().add(&iv),
            }
        }
        // A closed half and a live half of the same interval: it stays live.
        let both: Vec<u64> = self
            .live
            .keys()
            .filter(|i| self.closed.contains_key(i))
            .copied()
            .collect();
        for index in both {
            if let (Some(closed), Some(live)) =
                (self.closed.remove(&index), self.live.get_mut(&index))
            {
                live.absorb(&LiveInterval::unpack(&closed, &mut self.store_names));
            }
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        // "Current" percentiles: the intervals still open (the latest `interval` + `timeout`),
        // so a late degradation shows up live instead of drowning in the whole run's history.
        let mut recent: BTreeMap<&str, Hist> = BTreeMap::new();
        for iv in self.live.values() {
            for (id, s) in iv.stores.iter().enumerate() {
                if !s.read_us.is_empty() {
                    recent
                        .entry(self.store_names.name(id))
                        .or_default()
                        .add(&s.read_us);
                }
            }
        }
        Snapshot {
            scheduled: self.scheduled,
            sent: self.sent,
            answered: self.answered,
            failed: self.failures.values().sum(),
            stores: recent
                .into_iter()
                .map(|(name, h)| (name.to_owned(), h.quantile(0.5), h.quantile(0.99)))
                .collect(),
        }
    }

    fn interval(&mut self, index: u64) -> &mut LiveInterval {
        let (closed, names) = (&mut self.closed, &mut self.store_names);
        self.live
            .entry(index)
            .or_insert_with(|| match closed.remove(&index) {
                // Rare: an answer later than the keep-open window. Reopen rather than drop it.
                Some(late) => LiveInterval::unpack(&late, names),
                None => LiveInterval::default(),
            })
    }

    fn close_before(&mut self, newest: u64) {
        let interval_s = self.interval_us as f64 / 1e6;
        while let Some(first) = self.live.first_entry() {
            if *first.key() + self.keep_open >= newest {
                break;
            }
            let (index, live) = first.remove_entry();
            self.closed
                .insert(index, live.pack(index, interval_s, &self.store_names));
        }
    }

    /// Records one sample (as `kvbench import` builds them).
    pub fn record(&mut self, sample: &Sample) {
        match &sample.outcome {
            Outcome::Failure(f) => {
                self.record_failure(sample.intended_us, sample.latency_us, f.kind, || {
                    f.detail.clone()
                })
            }
            Outcome::Answer(a) => {
                if self.excluded(a.concurrent) {
                    return;
                }
                self.record_answer(
                    sample.intended_us,
                    sample.latency_us,
                    &a.colo,
                    a.cold,
                    a.stores.iter().map(|(name, r)| (name.as_str(), r)),
                )
            }
        }
    }

    /// Records `count` requests k6 (or a pacer) never sent, in one step: a file may claim any
    /// number of them.
    pub fn record_not_sent(&mut self, intended_us: u64, count: u64, detail: &str) {
        if count == 0 {
            return;
        }
        let index = self.index(intended_us);
        self.scheduled += count;
        *self.failures.entry(FailureKind::NotSent).or_default() += count;
        self.add_example(FailureKind::NotSent, || detail.to_owned());
        let iv = self.interval(index);
        iv.scheduled += count;
        iv.failed += count;
        self.close_before(index);
    }

    /// Keeps `detail` (shortened) as an example of `kind` while the kind has room; `detail` is
    /// only built then.
    fn add_example(&mut self, kind: FailureKind, detail: impl FnOnce() -> String) {
        let full = self
            .failure_examples
            .get(&kind)
            .is_some_and(|e| e.len() >= EXAMPLES_PER_KIND);
        if !full {
            let detail = clip_example(detail());
            if !detail.is_empty() {
                let examples = self.failure_examples.entry(kind).or_default();
                if !examples.contains(&detail) {
                    examples.push(detail);
                }
            }
        }
    }

    /// Counts a request that was sent again on a new connection ([`Section::retried`]); its
    /// result is recorded as any other.
    pub fn record_retried(&mut self) {
        self.retried += 1;
    }

    /// Records one answer as the CLI's connections read it (borrowing from their buffer).
    pub fn record_answer_ref(&mut self, intended_us: u64, latency_us: u64, a: &AnswerRef<'_>) {
        if self.excluded(a.concurrent) {
            return;
        }
        self.record_answer(
            intended_us,
            latency_us,
            &a.colo,
            a.cold,
            a.stores.iter().map(|(name, r)| (name.as_ref(), r)),
        );
    }

    /// Records one failure; `detail` is only built while the kind still has room for examples.
    pub fn record_failure(
        &mut self,
        intended_us: u64,
        latency_us: u64,
        kind: FailureKind,
        detail: impl FnOnce() -> String,
    ) {
        let index = self.index(intended_us);
        self.scheduled += 1;
        if kind != FailureKind::NotSent {
            self.sent += 1;
        }
        *self.failures.entry(kind).or_default() += 1;
        self.add_example(kind, detail);
        let answered = kind.answered();
        if answered {
            self.latency_us.record(latency_us);
        }
        let iv = self.interval(index);
        iv.scheduled += 1;
        iv.failed += 1;
        if answered {
            iv.latency_us.record(latency_us);
        }
        self.close_before(index);
    }

    /// One pass over the answer's stores updates the run's, the colo's and the interval's
    /// figures. A cold answer's store latencies go to the cold histograms only.
    fn record_answer<'s>(
        &mut self,
        intended_us: u64,
        latency_us: u64,
        colo: &str,
        cold: bool,
        stores: impl Iterator<Item = (&'s str, &'s StoreResult)>,
    ) {
        let index = self.index(intended_us);
        self.scheduled += 1;
        self.sent += 1;
        self.answered += 1;
        self.cold += u64::from(cold);
        self.latency_us.record(latency_us);

        let colo_id = self.colo_names.id(colo);
        let colo_live = slot(&mut self.colos, colo_id);
        colo_live.answered += 1;
        colo_live.cold += u64::from(cold);
        colo_live.latency_us.record(latency_us);
        {
            let iv = self.interval(index);
            iv.scheduled += 1;
            iv.cold += u64::from(cold);
            iv.latency_us.record(latency_us);
        }
        for (name, r) in stores {
            let id = self.store_names.id(name);
            // Latency percentiles are over successful operations only; failures are counted by
            // kind.
            let read_failed = r.error.as_ref().is_some_and(|e| !e.is_write());
            let write_failed = r.error.as_ref().is_some_and(|e| e.is_write());
            let ok_read_us = r.read_us.filter(|_| !read_failed);
            let ok_write_us = r.write_us.filter(|_| !write_failed);

            if let Some(us) = ok_read_us.filter(|_| !cold) {
                slot(&mut slot(&mut self.colos, colo_id).read_us, id).record(us);
            }

            if let (Some(us), false, Some(days)) = (ok_read_us, cold, &mut self.days) {
                days.record(intended_us, id, us);
            }
            let live = self.interval(index).store(id);
            match ok_read_us {
                Some(us) if cold => live.cold_read_us.record(us),
                Some(us) => {
                    live.read_us.record(us);
                    if r.hit == Some(true) {
                        live.read_hit_us.record(us);
                    }
                }
                None => {}
            }
            if let Some(us) = ok_write_us.filter(|_| !cold) {
                live.write_us.record(us);
            }

            count_store(slot(&mut self.stores, id), r, ok_read_us, ok_write_us, cold);
        }
        self.close_before(index);
    }

    /// Closes every interval and builds the report of this run.
    /// Puts what is recorded so far at rest while no sample arrives (a kept report's vantage
    /// point whose answers have all been read): the open intervals close and every large
    /// histogram is compressed ([`Hist::freeze`]). A later sample reopens what it touches, so
    /// nothing changes but the memory.
    pub fn freeze(&mut self) {
        let interval_s = self.interval_us as f64 / 1e6;
        for (index, live) in std::mem::take(&mut self.live) {
            let packed = live.pack(index, interval_s, &self.store_names);
            self.closed.insert(index, packed);
        }
        self.latency_us.freeze();
        self.stores.iter_mut().for_each(StoreStats::freeze);
        for c in &mut self.colos {
            c.latency_us.freeze();
            c.read_us.iter_mut().for_each(Hist::freeze);
        }
        if let Some(days) = &mut self.days {
            days.freeze();
        }
    }

    /// Hands over the closed timeline intervals (after [`Collector::freeze`], all of them), each
    /// with its start in seconds; the report this collector finishes has only the intervals
    /// recorded after. A kept report sums its vantage points' timelines this way as it goes,
    /// instead of holding one per vantage point.
    pub fn take_closed(&mut self) -> Vec<Interval> {
        std::mem::take(&mut self.closed).into_values().collect()
    }

    pub fn finish(mut self, mut run: RunInfo) -> Report {
        let interval_s = self.interval_us as f64 / 1e6;
        for (index, live) in std::mem::take(&mut self.live) {
            self.closed
                .insert(index, live.pack(index, interval_s, &self.store_names));
        }
        let last = self.closed.keys().next_back().copied();
        let intervals = match last {
            None => Vec::new(),
            Some(last) => (0..=last)
                .map(|i| {
                    self.closed.remove(&i).unwrap_or_else(|| {
                        LiveInterval::default().pack(i, interval_s, &self.store_names)
                    })
                })
                .collect(),
        };
        let mut section = self.section();
        // The run's own reads, kept apart through a merge.
        if self.run_reads {
            run.read_us = section
                .stores
                .iter()
                .filter(|(_, s)| !s.read_us.is_empty())
                .map(|(name, s)| (name.clone(), s.read_us.clone()))
                .collect();
        }
        section.send_window_s = run.send_window_s;
        section.achieved_rate = if run.send_window_s > 0.0 {
            section.sent as f64 / run.send_window_s
        } else {
            0.0
        };
        let colos = self
            .colos
            .into_iter()
            .enumerate()
            .map(|(id, c)| {
                let read_us = c
                    .read_us
                    .into_iter()
                    .enumerate()
                    .filter(|(_, h)| !h.is_empty())
                    .map(|(store, h)| (self.store_names.name(store).to_owned(), h))
                    .collect();
                let stats = ColoStats {
                    answered: c.answered,
                    cold: c.cold,
                    latency_us: c.latency_us,
                    read_us,
                };
                (self.colo_names.name(id).to_owned(), stats)
            })
            .collect();
        let days = match self.days.take() {
            Some(days) => days.finish(&run.label, |id| self.store_names.name(id).to_owned()),
            None => run_origin_ms(&run).map_or_else(Daily::default, |origin| {
                let windows = intervals.iter().map(|iv| (iv.start_s, &iv.read_us));
                Daily::of_timeline(origin, &run.label, windows)
            }),
        };
        Report {
            schema_version: crate::report::SCHEMA_VERSION,
            tool: tool_name(),
            labels: BTreeMap::from([(run.label.clone(), section.clone())]),
            total: section,
            runs: vec![run],
            colos,
            vantages: BTreeMap::new(),
            timeline: Timeline {
                interval_s,
                intervals,
            },
            days,
            stretches: crate::stretch::Stretches::default(),
            provenance: None,
            freshness: Vec::new(),
        }
    }
}

/// Epoch milliseconds of a run's `started_at` (RFC 3339), when it reads as one.
fn run_origin_ms(run: &RunInfo) -> Option<i64> {
    let at = humantime::parse_rfc3339_weak(&run.started_at).ok()?;
    let ms = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
    i64::try_from(ms).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_split_by_concurrency_and_filtered_by_max_concurrent() {
        use crate::answer::Answer;
        let answer = |c: Option<u32>| Sample {
            intended_us: 0,
            latency_us: 1_000,
            outcome: Outcome::Answer(Answer {
                key: None,
                colo: "LHR".into(),
                stores: BTreeMap::new(),
                concurrent: c,
                cold: false,
            }),
        };
        let mut c = Collector::new(Duration::from_secs(1), Duration::from_secs(1))
            .with_max_concurrent(Some(1));
        for n in [Some(0), Some(0), Some(1), Some(3), None] {
            c.record(&answer(n));
        }
        let s = c.section();
        assert_eq!(s.answered, 4, "the one with 3 others in flight is left out");
        assert_eq!(s.excluded_concurrent, 1);
        assert_eq!(s.concurrent, BTreeMap::from([(0, 2), (1, 1)]));
        let mut all = Collector::new(Duration::from_secs(1), Duration::from_secs(1));
        all.record(&answer(Some(3)));
        assert_eq!(all.section().answered, 1, "no filter: kept");
    }
    use crate::answer::parse;
    use crate::sample::Failure;

    /// Failures are the client's or the worker's by kind; retries are counted apart from both,
    /// add under merge, and a file written before they existed reads as none.
    #[test]
    fn failures_split_by_side_and_retries_are_counted_apart() {
        let mut c = Collector::new(Duration::from_secs(1), Duration::from_secs(1));
        let kinds = [
            (FailureKind::NotSent, 1),
            (FailureKind::Connect, 2),
            (FailureKind::Transport, 3),
            (FailureKind::Timeout, 4),
            (FailureKind::Cancelled, 5),
            (FailureKind::Status(503), 10),
            (FailureKind::Malformed, 20),
            (FailureKind::Truncated, 40),
        ];
        for (kind, n) in kinds {
            for _ in 0..n {
                c.record(&Sample::failure(0, 5, kind, "x"));
            }
        }
        c.record(&answer(0, r#"{"stores":{"kv":{"read_ms":1}}}"#));
        c.record_retried();
        c.record_retried();
        let s = c.section();
        assert_eq!((s.client_failed(), s.worker_failed()), (15, 70));
        assert_eq!(s.client_failed() + s.worker_failed(), s.failed());
        assert_eq!(
            (s.retried, s.answered),
            (2, 1),
            "a retry is no extra request"
        );

        let mut merged = s.clone();
        merged.add(&s).unwrap();
        assert_eq!(
            (
                merged.retried,
                merged.client_failed(),
                merged.worker_failed()
            ),
            (4, 30, 140)
        );

        let mut old = serde_json::to_value(&s).unwrap();
        old.as_object_mut().unwrap().remove("retried");
        let read: Section = serde_json::from_value(old).unwrap();
        assert_eq!((read.retried, read.worker_failed()), (0, 70));
    }

    /// A cold answer (`isolate_requests` 1) is counted among the answers, billed like any, and
    /// its latencies go to the cold histograms only: every other latency is a warm answer's.
    #[test]
    fn cold_answers_are_kept_apart_from_warm_ones() {
        let body = |requests: u32, read_ms: f64, hit: bool| {
            format!(
                r#"{{"key":"1","colo":"FRA","order":["kv"],"isolate_requests":{requests},"stores":{{"kv":{{"read_ms":{read_ms},"hit":{hit},"value_bytes":4096,"write_ms":{write},"connect_ms":3,"error":null}}}}}}"#,
                write = if hit { "null" } else { "7" },
            )
        };
        let mut c = Collector::new(Duration::from_secs(1), Duration::from_secs(1));
        c.record(&answer(0, &body(1, 90.0, false)));
        c.record(&answer(10, &body(2, 2.0, true)));
        c.record(&answer(20, &body(3, 4.0, false)));
        let report = c.finish(run_info());
        let s = &report.total;
        assert_eq!((s.answered, s.cold), (3, 1));
        let kv = &s.stores["kv"];
        assert_eq!(
            (kv.reads, kv.writes, kv.read_units_4k),
            (3, 2, 3),
            "billed alike"
        );
        assert_eq!(kv.read_us.len(), 2, "warm reads only");
        assert!(close(kv.read_us.max(), 4_000));
        assert_eq!((kv.read_hit_us.len(), kv.read_miss_us.len()), (1, 1));
        assert_eq!((kv.write_us.len(), kv.connect_us.len()), (1, 2));
        assert_eq!(kv.cold_read_us.len(), 1);
        assert!(close(kv.cold_read_us.max(), 90_000));
        assert_eq!((kv.cold_write_us.len(), kv.cold_connect_us.len()), (1, 1));
        let fra = &report.colos["FRA"];
        assert_eq!((fra.answered, fra.cold, fra.read_us["kv"].len()), (3, 1, 2));
        let iv = &report.timeline.intervals[0];
        assert_eq!((iv.cold, iv.read_us["kv"].unpack().len()), (1, 2));
        assert_eq!(iv.cold_read_us["kv"].unpack().len(), 1);
        // Merged with itself, everything doubles and stays apart.
        let merged = Report::merge(vec![report.clone(), report]).unwrap();
        assert_eq!(merged.total.cold, 2);
        assert_eq!(merged.total.stores["kv"].cold_read_us.len(), 2);
        assert_eq!(merged.timeline.intervals[0].cold, 2);
        // The summary's rows: warm, then cold apart.
        let rows = crate::summary::Summary::of(&merged, None).latency;
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "end-to-end",
                "kv read all",
                "kv read hit",
                "kv read miss",
                "kv write",
                "kv connect",
                "kv read cold",
                "kv write cold",
                "kv connect cold"
            ]
        );
    }

    /// Equal within HDR precision (3 significant digits).
    fn close(got: u64, want: u64) -> bool {
        got.abs_diff(want) <= want / 500 + 1
    }

    fn answer(intended_us: u64, body: &str) -> Sample {
        Sample {
            intended_us,
            latency_us: 1000,
            outcome: Outcome::Answer(parse(body.as_bytes()).unwrap()),
        }
    }

    #[test]
    fn auto_interval_table() {
        for (run_s, want_s) in [
            (10, 5),
            (60, 5),
            (300, 5),
            (600, 10),
            (1800, 30),
            (36_000, 60),
        ] {
            assert_eq!(
                auto_interval(Duration::from_secs(run_s)),
                Duration::from_secs(want_s),
                "{run_s}"
            );
        }
    }

    #[test]
    fn store_accounting_table() {
        // (store fragment, reads, writes, read_us n, hit n, miss n, write_us n, errors)
        type Case<'a> = (&'a str, u64, u64, u64, u64, u64, u64, &'a [(&'a str, u64)]);
        let cases: &[Case] = &[
            (
                r#"{"read_ms":1,"hit":true,"value_bytes":4097}"#,
                1,
                0,
                1,
                1,
                0,
                0,
                &[],
            ),
            (r#"{"read_ms":1,"hit":false}"#, 1, 0, 1, 0, 1, 0, &[]),
            (r#"{"read_ms":1,"hit":null}"#, 1, 0, 1, 0, 0, 0, &[]),
            (
                r#"{"read_ms":1,"hit":false,"write_ms":2,"value_bytes":10}"#,
                1,
                1,
                1,
                0,
                1,
                1,
                &[],
            ),
            (
                r#"{"read_ms":10000,"hit":null,"error":{"kind":"timeout","message":"x","op":"read"}}"#,
                1,
                0,
                0,
                0,
                0,
                0,
                &[("timeout/read", 1)],
            ),
            (
                r#"{"read_ms":1,"hit":false,"write_ms":2,"error":{"kind":"http","message":"x","op":"write"}}"#,
                1,
                1,
                1,
                0,
                1,
                0,
                &[("http/write", 1)],
            ),
            (
                // Not configured: no time, so not billed.
                r#"{"error":{"kind":"not_configured","message":"x"}}"#,
                0,
                0,
                0,
                0,
                0,
                0,
                &[("not_configured", 1)],
            ),
            (r#"{}"#, 0, 0, 0, 0, 0, 0, &[]),
        ];
        for (store, reads, writes, read_n, hit_n, miss_n, write_n, errors) in cases {
            let mut c = Collector::new(Duration::from_secs(1), Duration::from_secs(1));
            c.record(&answer(
                0,
                &format!(r#"{{"colo":"X","stores":{{"s":{store}}}}}"#),
            ));
            let section = c.section();
            let s = &section.stores["s"];
            let got = (
                s.reads,
                s.writes,
                s.read_us.len(),
                s.read_hit_us.len(),
                s.read_miss_us.len(),
                s.write_us.len(),
            );
            assert_eq!(
                got,
                (*reads, *writes, *read_n, *hit_n, *miss_n, *write_n),
                "{store}"
            );
            let want: BTreeMap<String, u64> =
                errors.iter().map(|(k, n)| (k.to_string(), *n)).collect();
            assert_eq!(s.errors, want, "{store}");
        }
    }

    #[test]
    fn progress_percentiles_are_recent_not_cumulative() {
        let mut c = Collector::new(Duration::from_secs(1), Duration::from_secs(1));
        for i in 0..100u64 {
            c.record(&answer(
                i * 1_000,
                r#"{"stores":{"kv":{"read_ms":100,"hit":true}}}"#,
            ));
        }
        for i in 0..10u64 {
            c.record(&answer(
                10_000_000 + i * 1_000,
                r#"{"stores":{"kv":{"read_ms":1,"hit":true}}}"#,
            ));
        }
        let snap = c.snapshot();
        assert_eq!(snap.stores.len(), 1);
        let (_, p50, p99) = &snap.stores[0];
        assert!(close(*p50, 1_000) && close(*p99, 1_000), "{p50} {p99}");
        // The run as a whole still has the slow reads.
        assert!(close(
            c.section().stores["kv"].read_us.quantile(0.5),
            100_000
        ));
    }

    /// What a failed operation sent or returned is not bandwidth: the size histograms, which the
    /// cost reads for bytes moved, hold successful operations only.
    #[test]
    fn failed_operations_move_no_bytes() {
        let mut c = Collector::new(Duration::from_secs(1), Duration::from_secs(1));
        for store in [
            r#"{"read_ms":1,"hit":false,"write_ms":2,"value_bytes":1000000,"error":{"kind":"http","message":"x","op":"write"}}"#,
            r#"{"read_ms":9,"hit":null,"value_bytes":1000000,"error":{"kind":"timeout","message":"x","op":"read"}}"#,
        ] {
            c.record(&answer(
                0,
                &format!(r#"{{"colo":"X","stores":{{"s":{store}}}}}"#),
            ));
        }
        let section = c.section();
        let s = &section.stores["s"];
        assert_eq!(
            (s.writes, s.failed_writes, s.reads, s.failed_reads),
            (1, 1, 2, 1)
        );
        assert_eq!(s.write_bytes.len(), 0, "a failed write moved no bytes");
        // The failed write's read succeeded (a miss: 0 bytes); the timed-out read is not counted.
        assert_eq!(s.read_bytes.len(), 1);
    }

    /// A connection counts when its setup succeeded (the read that follows reached the store):
    /// not when the store was not configured or the setup failed.
    #[test]
    fn connections_count_setups_that_succeeded() {
        let mut c = Collector::new(Duration::from_secs(1), Duration::from_secs(1));
        for store in [
            r#"{"read_ms":1,"hit":false,"write_ms":1,"value_bytes":3,"connect_ms":2}"#,
            r#"{"read_ms":9,"hit":null,"connect_ms":2,"error":{"kind":"timeout","message":"x","op":"read"}}"#,
            r#"{"read_ms":null,"connect_ms":2,"error":{"kind":"auth","message":"x","op":"read"}}"#,
            r#"{"read_ms":null,"error":{"kind":"not_configured","message":"x","op":"read"}}"#,
            r#"{"read_ms":1,"hit":true,"value_bytes":3}"#,
        ] {
            c.record(&answer(
                0,
                &format!(r#"{{"colo":"X","stores":{{"redis":{store}}}}}"#),
            ));
        }
        let s = &c.section().stores["redis"];
        assert_eq!((s.answers, s.connected), (5, 2));
    }

    /// The store's own time (D1's `sql_ms`) is kept beside the measured time of the same
    /// successful warm calls: not for a failed call, not for a store that reports none.
    #[test]
    fn a_stores_own_time_is_kept_for_its_successful_calls() {
        let mut c = Collector::new(Duration::from_secs(1), Duration::from_secs(1));
        for store in [
            r#"{"read_ms":4,"hit":false,"write_ms":9,"value_bytes":3,"read_meta":{"sql_ms":0.25,"attempts":1},"write_meta":{"sql_ms":1.5}}"#,
            r#"{"read_ms":5,"hit":true,"value_bytes":3,"read_meta":{"sql_ms":0.5,"attempts":2},"read_retried":true}"#,
            r#"{"read_ms":6,"hit":false,"write_ms":7,"value_bytes":3,"read_meta":{"sql_ms":0.75},"write_meta":{"sql_ms":2},"error":{"kind":"http","message":"x","op":"write"}}"#,
            r#"{"read_ms":3,"hit":true,"value_bytes":3,"read_meta":{"served_by_primary":true}}"#,
        ] {
            c.record(&answer(
                0,
                &format!(r#"{{"colo":"X","stores":{{"d1":{store}}}}}"#),
            ));
        }
        let s = &c.section().stores["d1"];
        assert_eq!((s.read_us.len(), s.read_sql_us.len()), (4, 3));
        assert!(close(s.read_sql_us.max(), 750), "{}", s.read_sql_us.max());
        assert_eq!(
            s.write_sql_us.len(),
            1,
            "the failed write's SQL time is left out"
        );
        assert!(close(s.write_sql_us.max(), 1_500));
        let rows = crate::summary::latency_rows(&c.section());
        assert!(rows.iter().any(|r| r.name == "d1 read sql"), "{rows:?}");
    }

    #[test]
    fn billing_units_from_value_sizes() {
        let mut c = Collector::new(Duration::from_secs(1), Duration::from_secs(1));
        for bytes in [0, 1, 4096, 4097, 10_000] {
            // A hit reads `bytes`; a miss reads nothing and then writes `bytes`.
            c.record(&answer(
                0,
                &format!(
                    r#"{{"stores":{{"d":{{"read_ms":1,"hit":true,"value_bytes":{bytes}}}}}}}"#
                ),
            ));
            c.record(&answer(
                0,
                &format!(
                    r#"{{"stores":{{"d":{{"read_ms":1,"hit":false,"write_ms":1,"value_bytes":{bytes}}}}}}}"#
                ),
            ));
        }
        let section = c.section();
        let d = &section.stores["d"];
        assert_eq!(d.reads, 10);
        // Hits: max(1, ceil(bytes / 4 KiB)); each miss read is the minimum of one unit.
        assert_eq!(d.read_units_4k, (1 + 1 + 1 + 2 + 3) + 5);
        assert_eq!(d.writes, 5);
        assert_eq!(d.write_units_1k, 1 + 1 + 4 + 5 + 10);
    }

    #[test]
    fn memory_stays_flat_over_an_hour() {
        // One hour at 10 req/s, 10 s intervals, 10 s timeout: only a few intervals stay live.
        let mut c = Collector::new(Duration::from_secs(10), Duration::from_secs(10));
        for i in 0..36_000u64 {
            c.record(&answer(
                i * 100_000,
                r#"{"stores":{"kv":{"read_ms":12.5,"hit":true}}}"#,
            ));
            assert!(
                c.live_intervals() <= 3,
                "live intervals grew to {}",
                c.live_intervals()
            );
        }
        let r = c.finish(RunInfo {
            label: "x".into(),
            url: String::new(),
            started_at: String::new(),
            ..RunInfo::empty()
        });
        assert_eq!(r.timeline.intervals.len(), 360);
        let packed = serde_json::to_string(&r.timeline).unwrap().len();
        assert!(packed < 360 * 1024, "closed intervals take {packed} bytes");
        assert!(r.timeline.intervals.iter().all(|iv| iv.scheduled == 100));
    }

    fn run_info() -> RunInfo {
        RunInfo {
            label: "x".into(),
            url: String::new(),
            started_at: String::new(),
            requested_rate: 1.0,
            planned_duration_s: 1.0,
            send_window_s: 1.0,
            elapsed_s: 1.0,
            timeout_s: 1.0,
            max_in_flight: 1,
            ..RunInfo::empty()
        }
    }

    /// Samples years apart at a 1 s interval would need ~10^8 intervals: the timeline coarsens
    /// instead, keeping every count, and what is held never passes the cap.
    #[test]
    fn far_apart_samples_coarsen_the_timeline_instead_of_filling_it() {
        let mut c = Collector::new(Duration::from_secs(1), Duration::from_secs(10));
        let year_us = 365 * 86_400 * 1_000_000u64;
        for (i, at) in [0, 1_500_000, year_us / 2, 3 * year_us, 3 * year_us + 1]
            .into_iter()
            .enumerate()
        {
            c.record(&answer(at, r#"{"stores":{"kv":{"read_ms":1,"hit":true}}}"#));
            if i == 1 {
                c.record(&Sample::failure(at, 5, FailureKind::Status(500), "x"));
            }
            assert!(c.held_intervals() as u64 <= MAX_INTERVALS);
        }
        c.record_not_sent(2 * year_us, 1_000_000_000_000, "dropped");
        let r = c.finish(run_info());
        let n = r.timeline.intervals.len() as u64;
        assert!(n <= MAX_INTERVALS, "{n}");
        let interval_s = r.timeline.interval_s;
        assert!((interval_s.log2().fract()).abs() < 1e-9, "{interval_s}");
        assert!(interval_s * n as f64 >= 3.0 * 365.0 * 86_400.0);
        let sum = |f: fn(&Interval) -> u64| r.timeline.intervals.iter().map(f).sum::<u64>();
        assert_eq!(sum(|iv| iv.scheduled), 6 + 1_000_000_000_000);
        assert_eq!(sum(|iv| iv.failed), 1 + 1_000_000_000_000);
        assert_eq!(r.total.not_sent(), 1_000_000_000_000);
        assert_eq!(
            r.timeline.intervals[0].scheduled, 3,
            "0 s and 1.5 s share the first"
        );
        let reads: u64 = r
            .timeline
            .intervals
            .iter()
            .map(|iv| iv.read_us.get("kv").map_or(0, |p| p.unpack().len()))
            .sum();
        assert_eq!(reads, 5);
        for (i, iv) in r.timeline.intervals.iter().enumerate() {
            assert_eq!(iv.start_s, i as f64 * interval_s);
        }
    }

    #[test]
    fn failure_examples_are_clipped() {
        let mut c = Collector::new(Duration::from_secs(1), Duration::from_secs(1));
        let long = "é".repeat(10_000);
        c.record(&Sample::failure(0, 5, FailureKind::Status(500), long));
        let e = &c.section().failure_examples["http_500"][0];
        assert!(
            e.len() <= EXAMPLE_MAX_BYTES && e.ends_with("..."),
            "{}",
            e.len()
        );
    }

    #[test]
    fn late_samples_reopen_their_interval_instead_of_being_dropped() {
        let mut c = Collector::new(Duration::from_secs(1), Duration::from_secs(1));
        c.record(&answer(0, r#"{"stores":{"kv":{"read_ms":1}}}"#));
        c.record(&answer(10_000_000, r#"{"stores":{"kv":{"read_ms":1}}}"#));
        assert_eq!(c.live_intervals(), 1, "interval 0 closed");
        let late = Sample::failure(500_000, 9_000_000, FailureKind::Status(500), "boom");
        c.record(&late);
        c.record(&Sample {
            outcome: Outcome::Failure(Failure {
                kind: FailureKind::NotSent,
                detail: String::new(),
            }),
            ..late
        });
        let run = crate::report::RunInfo {
            label: "x".into(),
            url: String::new(),
            started_at: String::new(),
            requested_rate: 1.0,
            planned_duration_s: 11.0,
            send_window_s: 11.0,
            elapsed_s: 11.0,
            timeout_s: 1.0,
            max_in_flight: 1,
            interrupted: false,
            pacer_lag_us: Hist::default(),
            engine: "kvbench".into(),
            latency_from: "intended".into(),
            import: None,
            read_us: Default::default(),
        };
        let r = c.finish(run);
        assert_eq!(r.timeline.intervals.len(), 11);
        assert_eq!(
            (
                r.timeline.intervals[0].scheduled,
                r.timeline.intervals[0].failed
            ),
            (3, 2)
        );
        assert_eq!(r.timeline.intervals[0].latency_us.unpack().len(), 2);
        assert_eq!(r.total.scheduled, 4);
        assert_eq!(r.total.sent, 3);
        assert!(!r.total.failure_examples.contains_key("not_sent"));
    }
}
