//! Kept answers into a report: the NDJSON lines a deployed worker keeps (its probes', or a load
//! run's — `kvbench_wire::kept::Kept`) folded into one collector per label, the same report
//! `kvbench run` writes. Used by `kvbench import worker` and by the report worker behind
//! `GET /report`, so a page and an import of the same answers agree.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::collect::Collector;
use crate::report::{ImportInfo, Interval, IntervalSum, Report, RunInfo, Timeline, VantagePoint};
use crate::sample::{Failure, FailureKind, Outcome, Sample};
use crate::stretch::{Stretches, STRETCH_WINDOWS};

pub use kvbench_wire::kept::{Kept, MAX_T_MS};

/// Most points a kept report's timeline has across its window: a chart is a few hundred pixels
/// wide, and memory and time grow with points × vantage points × stores.
pub const TIMELINE_POINTS: u64 = 120;

/// Timeline steps a kept report picks from, in seconds.
const STEPS_S: [u64; 11] = [
    60, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400,
];

/// The timeline resolution of a kept report over `span`: what a run of that length gets
/// ([`crate::collect::auto_interval`]) while that is at most [`TIMELINE_POINTS`] points, else the
/// finest step that is (24 h: 15 min; 7 days: 2 h).
pub fn timeline_interval(span: Duration) -> Duration {
    let auto = crate::collect::auto_interval(span).as_secs();
    let s = span.as_secs();
    if s.div_ceil(auto) <= TIMELINE_POINTS {
        return Duration::from_secs(auto);
    }
    let step = STEPS_S
        .iter()
        .copied()
        .find(|step| *step >= auto && s.div_ceil(*step) <= TIMELINE_POINTS)
        .unwrap_or_else(|| s.div_ceil(TIMELINE_POINTS).max(86_400));
    Duration::from_secs(step)
}

/// A kept failure's kind as the report counts it.
fn failure_kind(f: &kvbench_wire::kept::Failure<'_>) -> FailureKind {
    use kvbench_wire::kept::FailureKind as Wire;
    match (f.kind, f.status) {
        (Wire::Status, Some(code)) => FailureKind::Status(code),
        (Wire::Timeout, _) => FailureKind::Timeout,
        (Wire::Connect, _) => FailureKind::Connect,
        (Wire::Transport, _) => FailureKind::Transport,
        _ => FailureKind::Malformed,
    }
}

/// Where `line` ran, as its witnesses say: its colo, a member's `cf-placement` and trace colo, and
/// whether those two disagree.
fn count_place(v: &mut VantagePoint, line: &Kept<'_>) {
    VantagePoint::count(&mut v.colos, &line.colo, 1);
    if let Some(p) = &line.placement {
        VantagePoint::count(&mut v.placements, p, 1);
    }
    if let Some(t) = &line.trace_colo {
        VantagePoint::count(&mut v.traces, t, 1);
    }
    v.trace_disagrees += u64::from(line.trace_disagrees);
}

/// The vantage point of `line`'s label, made on its first line.
fn vantage_of<'m>(
    vantages: &'m mut BTreeMap<String, VantagePoint>,
    line: &Kept<'_>,
) -> &'m mut VantagePoint {
    // The label's copy is one small allocation a line, beside parsing its answer.
    vantages
        .entry(line.label.to_string())
        .or_insert_with(|| Aggregate::new_vantage(line))
}

struct LabelRun {
    collector: Collector,
    n: u64,
    last_us: u64,
    last_end_us: u64,
}

/// Where the answers came from, for the report's `runs[]`.
pub struct Source {
    /// The worker's URL (never a token).
    pub url: String,
    /// `probes` or `worker` (a load run's answers).
    pub engine: String,
    /// What was read (the route), for `runs[].import.files`.
    pub read_from: String,
}

/// Folds kept answers, in any order across labels, into one run per label.
pub struct Aggregate {
    origin_ms: i64,
    interval: Duration,
    runs: BTreeMap<String, LabelRun>,
    lines: u64,
    malformed: u64,
    max_concurrent: Option<u32>,
    /// The label of the last answer pushed: a stream holds each vantage point's answers in a
    /// row, so the previous one's collector is put at rest when the next begins.
    last_label: Option<String>,
    /// The timeline, summed over vantage points as each one's answers end (by interval index).
    timeline: BTreeMap<u64, IntervalSum>,
    /// Each vantage point's own reads in stretches of the timeline's windows.
    stretches: Stretches,
    /// Who measured, per label.
    vantages: BTreeMap<String, VantagePoint>,
    /// What the stream's end line says the worker measured but could not keep.
    keep_failed: Option<u64>,
    /// The first timeline interval that could not be added (a count past 2^53): the report is
    /// refused when it finishes.
    overflow: Option<crate::report::AddError>,
}

/// What a kept line says happened: its answer (cold as the vantage point counts it) or why its
/// vantage point did not answer; `None` for a line with neither or an answer that does not parse.
fn outcome_of(line: &Kept<'_>) -> Option<Outcome> {
    match (line.answer, &line.failure) {
        (Some(answer), _) => {
            let mut answer = crate::answer::parse(answer.get().as_bytes()).ok()?;
            // Cold as the vantage point counts it: a probe's new object, a member's or a run's
            // new isolate (the line's, not the answer's `isolate_requests`: a hint probe's
            // object can be new in an isolate that answered before).
            answer.cold = line.cold;
            Some(Outcome::Answer(answer))
        }
        // A vantage point that did not answer: a failed request of its label, not a gap.
        (None, Some(failure)) => Some(Outcome::Failure(Failure {
            kind: failure_kind(failure),
            detail: failure.detail.chars().take(200).collect(),
        })),
        (None, None) => None,
    }
}

impl Aggregate {
    /// `origin_ms`: the time the report's clock starts at (the first answer's); `interval`: the
    /// timeline's resolution ([`timeline_interval`] of the window, unless asked for).
    pub fn new(origin_ms: i64, interval: Duration) -> Aggregate {
        Aggregate {
            origin_ms,
            interval,
            runs: BTreeMap::new(),
            lines: 0,
            malformed: 0,
            max_concurrent: None,
            last_label: None,
            timeline: BTreeMap::new(),
            stretches: Stretches::new(interval.as_secs_f64() * STRETCH_WINDOWS),
            vantages: BTreeMap::new(),
            keep_failed: None,
            overflow: None,
        }
    }

    /// A line of the stream that is no kept answer: counted, never dropped silently.
    pub fn push_malformed(&mut self) {
        self.lines += 1;
        self.malformed += 1;
    }

    /// One kept answer; one that is not usable is counted as malformed.
    pub fn push(&mut self, line: &Kept<'_>) {
        self.lines += 1;
        let (t, label) = (line.t_ms, line.label.as_str());
        // A time no worker keeps (before 1970 or after 9999): malformed, not a wrapped clock.
        if !line.time_ok() {
            self.malformed += 1;
            return;
        }
        let Some(outcome) = outcome_of(line) else {
            self.malformed += 1;
            return;
        };
        // A member's answer that did not run where its label says is counted apart and kept
        // out of the label's numbers (its latency is another place's).
        if let Some(check) = line.placement_check {
            if check != kvbench_wire::kept::PlacementCheck::Placed {
                self.count_unplaced(line, check);
                return;
            }
        }
        self.count_vantage(line, &outcome);
        let intended_us = (t.saturating_sub(self.origin_ms).max(0) as u64) * 1000;
        // The handler's time, the same quantity for every vantage; where no handler answered
        // (a member out of reach), the wait.
        let latency_ms = line.handler_ms.or(line.call_ms).unwrap_or(0.0);
        let latency_us = (latency_ms.max(0.0) * 1000.0) as u64;
        if self.last_label.as_deref() != Some(label) {
            if let Some(previous) = self.last_label.take() {
                if let Some(run) = self.runs.get_mut(&previous) {
                    run.collector.freeze();
                    let closed = run.collector.take_closed();
                    self.add_to_timeline(&previous, closed);
                    self.stretches.freeze_label(&previous);
                }
            }
            self.last_label = Some(label.to_string());
        }
        let interval = self.interval;
        let max_concurrent = self.max_concurrent;
        let origin_ms = self.origin_ms;
        let run = self
            .runs
            .entry(label.to_string())
            .or_insert_with(|| LabelRun {
                // A label's answers arrive in the order they were kept, so an interval closes
                // when the next one starts (one that arrives late reopens it: nothing is lost).
                collector: Collector::new(interval, Duration::ZERO)
                    .with_max_concurrent(max_concurrent)
                    .with_days(origin_ms)
                    .without_run_reads(),
                n: 0,
                last_us: 0,
                last_end_us: 0,
            });
        run.collector.record(&Sample {
            intended_us,
            latency_us,
            outcome,
        });
        run.n += 1;
        run.last_us = run.last_us.max(intended_us);
        run.last_end_us = run.last_end_us.max(intended_us + latency_us);
    }

    fn count_unplaced(&mut self, line: &Kept<'_>, check: kvbench_wire::kept::PlacementCheck) {
        let v = vantage_of(&mut self.vantages, line);
        count_place(v, line);
        match check {
            kvbench_wire::kept::PlacementCheck::Elsewhere => v.elsewhere += 1,
            kvbench_wire::kept::PlacementCheck::TraceElsewhere => v.trace_elsewhere += 1,
            _ => v.unplaced += 1,
        }
    }

    /// A new vantage point for `line`'s label.
    fn new_vantage(line: &Kept<'_>) -> VantagePoint {
        VantagePoint {
            vantage: line.vantage.as_str().to_string(),
            hint: line.hint.as_ref().map(ToString::to_string),
            ..VantagePoint::default()
        }
    }

    fn count_vantage(&mut self, line: &Kept<'_>, outcome: &Outcome) {
        let v = vantage_of(&mut self.vantages, line);
        count_place(v, line);
        // Its answers' reads are the label's, split cold from warm by the collector.
        match outcome {
            Outcome::Failure(_) => v.failed += 1,
            Outcome::Answer(_) if line.cold => v.cold += 1,
            Outcome::Answer(_) => v.warm += 1,
        }
    }

    /// `label`'s closed windows into the pooled timeline, and into its own stretches.
    fn add_to_timeline(&mut self, label: &str, intervals: Vec<Interval>) {
        let interval_s = self.interval.as_secs_f64().max(1e-6);
        for iv in intervals {
            self.stretches.add_window(label, &iv);
            // By start, not by the collector's index: a collector that had to coarsen (samples
            // 10,000 intervals past the origin) still adds every sample, at its interval's start.
            let index = (iv.start_s / interval_s).round() as u64;
            if let Err(e) = self.timeline.entry(index).or_default().add(&iv) {
                self.overflow
                    .get_or_insert(e.under(&format!("timeline.intervals[{index}]")));
            }
        }
    }

    /// Leaves out answers with more than `max` other requests in flight (`--max-concurrent`).
    pub fn with_max_concurrent(mut self, max: Option<u32>) -> Aggregate {
        self.max_concurrent = max;
        self
    }

    /// The stream's end line's count of answers the worker measured but could not keep (`None`:
    /// a worker that does not count them): the report shows it, in no other count.
    pub fn set_keep_failed(&mut self, keep_failed: Option<u64>) {
        self.keep_failed = keep_failed;
    }

    /// Answers pushed so far (malformed ones included).
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// The report: one run per label, merged. `None` when no answer was usable.
    pub fn finish(mut self, source: &Source) -> anyhow::Result<Option<Report>> {
        let origin = SystemTime::UNIX_EPOCH + Duration::from_millis(self.origin_ms.max(0) as u64);
        let started_at = humantime::format_rfc3339_seconds(origin).to_string();
        let mut info = Some(ImportInfo {
            files: vec![source.read_from.clone()],
            lines: self.lines,
            malformed_lines: self.malformed,
            truncated: false,
            incomplete_requests: 0,
            keep_failed: self.keep_failed,
            ..ImportInfo::default()
        });
        let runs = std::mem::take(&mut self.runs);
        let mut reports = Vec::with_capacity(runs.len());
        for (label, run) in runs {
            let name = label.clone();
            let window_s = (run.last_us as f64 / 1e6).max(1e-3);
            let mut report = run.collector.finish(RunInfo {
                label,
                url: source.url.clone(),
                started_at: started_at.clone(),
                requested_rate: run.n as f64 / window_s,
                planned_duration_s: window_s,
                send_window_s: window_s,
                elapsed_s: run.last_end_us as f64 / 1e6,
                timeout_s: 0.0,
                max_in_flight: 0,
                interrupted: false,
                pacer_lag_us: Default::default(),
                engine: source.engine.clone(),
                // End-to-end is the worker's own measurement of the whole request (its
                // clock), not a client's.
                latency_from: "worker".into(),
                import: info.take(),
                read_us: Default::default(),
            });
            report.freeze();
            let timeline = std::mem::take(&mut report.timeline);
            self.add_to_timeline(&name, timeline.intervals);
            self.stretches.freeze_label(&name);
            reports.push(report);
        }
        if let Some(e) = self.overflow.take() {
            anyhow::bail!("the kept answers' timeline: {e}");
        }
        if reports.is_empty() {
            return Ok(None);
        }
        let mut report = Report::merge(reports)?;
        report.vantages = std::mem::take(&mut self.vantages);
        report.stretches = std::mem::take(&mut self.stretches);
        let interval_s = self.interval.as_secs_f64();
        let last = self.timeline.keys().next_back().copied().unwrap_or(0);
        let mut sums = std::mem::take(&mut self.timeline);
        report.timeline = Timeline {
            interval_s,
            intervals: (0..=last)
                .map(|i| {
                    sums.remove(&i)
                        .unwrap_or_default()
                        .pack(i as f64 * interval_s)
                })
                .collect(),
        };
        Ok(Some(report))
    }
}

/// Epoch milliseconds as RFC 3339 UTC (a time no clock keeps reads as the epoch).
fn rfc3339_ms(ms: i64) -> String {
    let at =
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms.clamp(0, 253_402_300_799_999) as u64);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// Whether `url`'s host is this machine (a loopback address or `localhost`).
fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The provenance of a page over the kept answers of `worker_url` (`GET /report`): the stack
/// (the worker's word in `describe`, its `GET /`'s `provenance` and `defaults`; else by its
/// address), the window, when it was made, and where its raw data is: the kept answers as NDJSON
/// and this page's report.json.
pub fn page_provenance(
    worker_url: &str,
    describe: Option<&serde_json::Value>,
    (since_ms, until_ms): (i64, i64),
    now_ms: i64,
    window_s: Option<u64>,
) -> crate::report::Provenance {
    use crate::report::{Provenance, RawData};
    let mut p = Provenance {
        stack: if is_loopback(worker_url) {
            "local"
        } else {
            "deployed"
        }
        .into(),
        updated_at: rfc3339_ms(now_ms),
        window: Some((rfc3339_ms(since_ms), rfc3339_ms(until_ms))),
        ..Provenance::default()
    };
    match describe {
        Some(d) => p.describe(d),
        None => p.worker_error = Some("the worker sent no description".into()),
    }
    if let Some(stack) = p.build.remove("stack") {
        p.stack = stack;
    }
    let base = worker_url.trim_end_matches('/');
    p.raw.push(RawData {
        what: "the kept answers (NDJSON; BENCH_TOKEN when set)".into(),
        href: format!("{base}/probes/answers?since={since_ms}&until={until_ms}"),
    });
    if let Some(w) = window_s {
        p.raw.push(RawData {
            what: "report.json (every histogram)".into(),
            href: format!("{base}/report?window={w}s&format=json"),
        });
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(a: &mut Aggregate, line: &str) {
        match Kept::parse(line.as_bytes()) {
            Ok(kept) => a.push(&kept),
            Err(_) => a.push_malformed(),
        }
    }

    fn line(seq: i64, t_ms: i64, label: &str, read_ms: f64) -> String {
        format!(
            r#"{{"seq":{seq},"t_ms":{t_ms},"label":"{label}","vantage":"hint","hint":"{label}","colo":"LHR","cold":false,"colo_changed":false,"handler_ms":12.5,"answer":{{"key":"7","colo":"LHR","order":["kv"],"isolate_requests":1,"stores":{{"kv":{{"read_ms":{read_ms},"hit":true,"value_bytes":4096,"write_ms":null,"error":null}}}},"kvLatency":{read_ms},"redisLatency":null}}}}"#
        )
    }

    #[test]
    fn labels_become_runs_and_every_answer_counts() {
        let mut a = Aggregate::new(1_000_000, Duration::from_secs(5));
        let lines = [
            line(1, 1_000_000, "weur", 2.0),
            line(1, 1_000_500, "apac", 9.0),
            line(2, 1_300_000, "weur", 3.0),
            "{\"seq\":3,\"label\":\"weur\"}".to_string(),
            line(4, i64::MIN, "weur", 1.0),
            line(5, i64::MAX, "weur", 1.0),
            r#"{"seq":1,"t_ms":1000900,"label":"aws:us-east-1","vantage":"member","hint":null,"colo":"unknown","placement":null,"cold":false,"colo_changed":false,"handler_ms":150000,"failure":{"kind":"timeout","status":null,"detail":"no answer within 150 s"}}"#.to_string(),
            r#"{"seq":2,"t_ms":1000950,"label":"aws:us-east-1","vantage":"member","failure":{"kind":"status","status":503,"detail":"busy"}}"#.to_string(),
        ];
        for l in &lines {
            push(&mut a, l);
        }
        assert_eq!(a.lines(), 8);
        let source = Source {
            url: "https://w".into(),
            engine: "probes".into(),
            read_from: "https://w/probes/answers".into(),
        };
        let r = a.finish(&source).unwrap().unwrap();
        assert_eq!(r.total.answered, 3);
        // A member that did not answer is counted as a failed request of its label, by kind.
        assert_eq!(
            r.total.failures.get("timeout"),
            Some(&1),
            "{:?}",
            r.total.failures
        );
        assert_eq!(
            r.total.failures.get("http_503"),
            Some(&1),
            "{:?}",
            r.total.failures
        );
        let labels: Vec<_> = r.runs.iter().map(|x| x.label.as_str()).collect();
        assert_eq!(labels, ["apac", "aws:us-east-1", "weur"]);
        assert_eq!(r.total.stores["kv"].reads, 3);
        let import = r.runs.iter().find_map(|x| x.import.as_ref()).unwrap();
        assert_eq!((import.lines, import.malformed_lines), (8, 3));
        assert!(Aggregate::new(0, Duration::from_secs(5))
            .finish(&source)
            .unwrap()
            .is_none());
    }

    #[test]
    fn the_timeline_summed_as_labels_end_is_the_merge_of_their_runs() {
        // Three vantage points, each one's answers in a row (as the worker streams them), one
        // label coming back at the end: the report equals the merge of one run per label.
        let mut lines = Vec::new();
        for (label, n) in [("a", 40), ("b", 25), ("c", 60)] {
            for i in 0..n {
                let t = 1_000_000 + i * 61_000;
                lines.push(line(i, t, label, 1.0 + (i % 17) as f64));
            }
        }
        lines.push(line(99, 1_000_000 + 5 * 61_000, "a", 250.0));
        let interval = Duration::from_secs(300);
        let source = Source {
            url: "https://w".into(),
            engine: "probes".into(),
            read_from: "x".into(),
        };
        let mut a = Aggregate::new(1_000_000, interval);
        for l in &lines {
            push(&mut a, l);
        }
        let got = a.finish(&source).unwrap().unwrap();
        // The same answers, one aggregate per label, merged.
        let mut per_label = Vec::new();
        for label in ["a", "b", "c"] {
            let mut one = Aggregate::new(1_000_000, interval);
            for l in lines
                .iter()
                .filter(|l| l.contains(&format!("\"label\":\"{label}\"")))
            {
                push(&mut one, l);
            }
            per_label.push(one.finish(&source).unwrap().unwrap());
        }
        let want = Report::merge(per_label).unwrap();
        assert_eq!(got.timeline, want.timeline);
        // Each label's own stretches (6 windows of 300 s), kept apart from the pooled timeline.
        assert_eq!(got.stretches, want.stretches);
        assert_eq!(got.stretches.stretch_s, 1800.0);
        // A label is a vantage point with rows of its own: its run keeps no reads apart.
        assert!(
            got.runs.iter().all(|r| r.read_us.is_empty()),
            "{:?}",
            got.runs
        );
        let reads = |label| -> Vec<u64> {
            got.stretches
                .of(label, "kv")
                .map(crate::hist::Hist::len)
                .collect()
        };
        assert_eq!(
            (reads("a"), reads("b"), reads("c")),
            (vec![31, 10], vec![25], vec![30, 30])
        );
        assert_eq!(got.total, want.total);
        assert_eq!(got.labels, want.labels);
        assert_eq!(got.colos, want.colos);
        assert_eq!(got.timeline.intervals.len(), 12);
        assert_eq!(got.timeline.intervals[1].scheduled, 3 * 5 + 1);
    }

    #[test]
    fn the_golden_kept_lines_make_a_report() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../wire/tests/golden/kept.jsonl");
        let text = std::fs::read_to_string(path).unwrap();
        let mut a = Aggregate::new(1_764_547_200_000, Duration::from_secs(60));
        for l in text.lines() {
            push(&mut a, l);
        }
        let source = Source {
            url: "https://w".into(),
            engine: "probes".into(),
            read_from: "x".into(),
        };
        let r = a.finish(&source).unwrap().unwrap();
        assert_eq!((r.total.answered, r.total.failed()), (3, 2));
        assert_eq!(r.total.failures.get("timeout"), Some(&1));
        assert_eq!(r.total.failures.get("http_503"), Some(&1));
        let labels: Vec<_> = r.labels.keys().map(String::as_str).collect();
        assert_eq!(labels, ["FRA", "aws:us-east-1", "weur"]);
        // `concurrent` is the answer's own: each of the three answers says 1.
        assert_eq!(r.total.concurrent, BTreeMap::from([(1, 3)]));
        let member = &r.vantages["aws:us-east-1"];
        assert_eq!(
            (
                member.vantage.as_str(),
                member.warm,
                member.cold,
                member.failed
            ),
            ("member", 1, 0, 2)
        );
        // The unplaced answer (local-EWR) and the one whose trace ran outside its region (NRT)
        // are counted apart, never in the member's numbers: 3 answers in all, the member's one
        // warm answer its placed one.
        assert_eq!(
            (member.unplaced, member.elsewhere, member.trace_elsewhere),
            (1, 0, 1)
        );
        assert_eq!(member.trace_disagrees, 1, "remote-IAD and a trace of NRT");
        assert_eq!(
            member.placements,
            BTreeMap::from([("local-EWR".into(), 1), ("remote-IAD".into(), 2)])
        );
        assert_eq!(
            member.traces,
            BTreeMap::from([("IAD".into(), 1), ("NRT".into(), 1), ("unknown".into(), 1)])
        );
        assert_eq!(
            member.colos,
            BTreeMap::from([("IAD".into(), 3), ("unknown".into(), 2)])
        );
        let hint = &r.vantages["weur"];
        assert_eq!(
            (hint.vantage.as_str(), hint.hint.as_deref(), hint.cold),
            ("hint", Some("weur"), 1)
        );
        assert_eq!(r.vantages["FRA"].vantage, "run");
    }

    #[test]
    fn the_vantage_table_reads_the_warm_answers_and_merges_them() {
        // weur: a cold answer of 90 ms and warm ones of 2, 3 and 4 ms; apac: only a cold one.
        let cold = |seq, t, label: &str, ms| {
            line(seq, t, label, ms).replace(r#""cold":false"#, r#""cold":true"#)
        };
        let lines = [
            cold(1, 1_000_000, "weur", 90.0),
            line(2, 1_000_100, "weur", 2.0),
            line(3, 1_300_000, "weur", 3.0),
            line(4, 1_600_000, "weur", 4.0),
            cold(1, 1_000_000, "apac", 70.0),
        ];
        let source = Source {
            url: "https://w".into(),
            engine: "probes".into(),
            read_from: "x".into(),
        };
        let report = |lines: &[String]| {
            let mut a = Aggregate::new(1_000_000, Duration::from_secs(300));
            for l in lines {
                push(&mut a, l);
            }
            a.finish(&source).unwrap().unwrap()
        };
        let r = report(&lines);
        let weur = &r.vantages["weur"];
        assert_eq!((weur.cold, weur.warm), (1, 3));
        let kv = &r.labels["weur"].stores["kv"];
        assert_eq!((kv.read_us.len(), kv.cold_read_us.len()), (3, 1));
        // 3 significant digits: 4 ms reads back as 4.001.
        assert_eq!(kv.read_us.max() / 10, 400);
        assert!(r.labels["apac"].stores["kv"].read_us.is_empty());
        let summary = crate::summary::Summary::of(&r, None);
        // The cold answer's 90 ms is not among the warm reads; 3 reads support no p99.
        let warm = &summary.labels["weur"].read["kv"];
        let max = warm.max_ms.unwrap();
        assert!((4.0..4.01).contains(&max), "{max}");
        assert_eq!(warm.p99_ms, None);
        assert_eq!(summary.labels["apac"].read["kv"].count, 0);
        let rows = crate::print::view::vantage::rows(&r, &summary);
        let by_label: BTreeMap<&str, (bool, Option<f64>)> = rows
            .iter()
            .map(|row| {
                (
                    row.label,
                    (row.warm, row.reads["kv"].max_ms.map(f64::round)),
                )
            })
            .collect();
        // weur's row leaves its cold 90 ms out; apac, with no warm answer, shows its cold one.
        assert_eq!(by_label["weur"], (true, Some(4.0)));
        assert_eq!(by_label["apac"], (false, Some(70.0)));
        // Two halves merged are the whole, and the split survives report.json.
        let merged = Report::merge(vec![report(&lines[..2]), report(&lines[2..])]).unwrap();
        assert_eq!(merged.labels["weur"].stores["kv"].read_us, kv.read_us);
        assert_eq!(
            merged.labels["weur"].stores["kv"].cold_read_us,
            kv.cold_read_us
        );
        let back: Report = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.labels["weur"].stores["kv"], *kv);
    }

    #[test]
    fn a_page_names_its_stack_window_build_and_raw_data() {
        let describe = serde_json::json!({
            "provenance": {"stack": "deployed", "commit": "0123abc", "wrangler": "4.1.0"},
            "defaults": {"keys": 1000, "stores": ["kv", "upstash"]},
        });
        let p = page_provenance(
            "https://kvbench.example.workers.dev",
            Some(&describe),
            (1_700_000_000_000, 1_700_086_400_000),
            1_700_086_400_000,
            Some(86_400),
        );
        assert_eq!(p.stack, "deployed");
        assert_eq!(p.build["commit"], "0123abc");
        assert_eq!(p.settings["stores"], "kv,upstash");
        assert_eq!(
            p.window,
            Some(("2023-11-14T22:13:20Z".into(), "2023-11-15T22:13:20Z".into()))
        );
        assert_eq!(p.updated_at, "2023-11-15T22:13:20Z");
        let hrefs: Vec<&str> = p.raw.iter().map(|r| r.href.as_str()).collect();
        assert_eq!(
            hrefs,
            [
                "https://kvbench.example.workers.dev/probes/answers?since=1700000000000&until=1700086400000",
                "https://kvbench.example.workers.dev/report?window=86400s&format=json"
            ]
        );
        // Without the worker's word, its address says; what is missing is said.
        for (url, stack) in [
            ("http://127.0.0.1:8787", "local"),
            ("http://localhost:8787/", "local"),
            ("http://[::1]:8787", "local"),
            ("https://kvbench.example.workers.dev", "deployed"),
        ] {
            let p = page_provenance(url, None, (0, 1), 1, None);
            assert_eq!(p.stack, stack, "{url}");
            assert!(p.worker_error.is_some());
            assert_eq!(p.raw.len(), 1);
        }
    }

    #[test]
    fn timeline_points_stay_bounded() {
        let points = |s: u64| s.div_ceil(timeline_interval(Duration::from_secs(s)).as_secs());
        assert_eq!(timeline_interval(Duration::from_secs(1800)).as_secs(), 30);
        assert_eq!(
            timeline_interval(Duration::from_secs(86_400)).as_secs(),
            900
        );
        assert_eq!(
            timeline_interval(Duration::from_secs(7 * 86_400)).as_secs(),
            7200
        );
        for s in [
            60,
            3600,
            6 * 3600,
            86_400,
            7 * 86_400,
            30 * 86_400,
            400 * 86_400,
        ] {
            assert!(points(s) <= TIMELINE_POINTS, "{s} s: {} points", points(s));
        }
    }
}
