//! Kept answers into a report: the NDJSON lines a deployed worker keeps (its probes', or a load
//! run's — `kvbench_core::probes::Kept`) folded into one collector per label, the same report
//! `kvbench run` writes. Used by `kvbench import worker` and by the report worker behind
//! `GET /report`, so a page and an import of the same answers agree.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Deserialize;

use crate::collect::Collector;
use crate::report::{ImportInfo, Report, RunInfo};
use crate::sample::{Failure, FailureKind, Outcome, Sample};

/// One line of a kept-answers stream: an answer, the `end` line, or an `error` line.
#[derive(Deserialize)]
pub struct Line<'a> {
    pub seq: Option<i64>,
    pub t_ms: Option<i64>,
    #[serde(borrow)]
    pub label: Option<std::borrow::Cow<'a, str>>,
    pub duration_ms: Option<f64>,
    /// `hint`, `member` or `run` (absent in lines kept before the fleet: a hint or a run).
    pub vantage: Option<String>,
    /// A fleet member's `cf-placement` (`remote-IAD`).
    pub placement: Option<String>,
    /// Other requests the measuring object served meanwhile.
    pub concurrent: Option<u32>,
    #[serde(borrow)]
    pub answer: Option<&'a serde_json::value::RawValue>,
    /// In place of an answer: why a vantage point produced none (`kvbench_core::probes::KeptFailure`).
    pub failure: Option<LineFailure>,
    pub end: Option<bool>,
    /// The `end` line's count of the lines the worker sent before it.
    pub lines: Option<u64>,
    pub error: Option<String>,
}

/// A kept failure: its kind (`status`, `timeout`, `connect`, `transport`, `malformed`), the
/// status of a non-200 answer, and what happened.
#[derive(Deserialize)]
pub struct LineFailure {
    pub kind: String,
    pub status: Option<u16>,
    #[serde(default)]
    pub detail: String,
}

impl LineFailure {
    fn kind(&self) -> FailureKind {
        match (self.kind.as_str(), self.status) {
            ("status", Some(code)) => FailureKind::Status(code),
            ("timeout", _) => FailureKind::Timeout,
            ("connect", _) => FailureKind::Connect,
            ("transport", _) => FailureKind::Transport,
            _ => FailureKind::Malformed,
        }
    }
}

impl<'a> Line<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Line<'a>, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
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
}

impl Aggregate {
    /// `origin_ms`: the time the report's clock starts at (the first answer's); `interval`: the
    /// timeline's resolution.
    pub fn new(origin_ms: i64, interval: Duration) -> Aggregate {
        Aggregate {
            origin_ms,
            interval,
            runs: BTreeMap::new(),
            lines: 0,
            malformed: 0,
            max_concurrent: None,
        }
    }

    /// One kept answer; a line that is not one is counted as malformed, never dropped silently.
    pub fn push(&mut self, line: &Line<'_>) {
        self.lines += 1;
        let (Some(t), Some(label)) = (line.t_ms, line.label.as_deref()) else {
            self.malformed += 1;
            return;
        };
        let outcome = match (line.answer, &line.failure) {
            (Some(answer), _) => match crate::answer::parse(answer.get().as_bytes()) {
                Ok(answer) => Outcome::Answer(answer),
                Err(_) => {
                    self.malformed += 1;
                    return;
                }
            },
            // A vantage point that did not answer: a failed request of its label, not a gap.
            (None, Some(failure)) => Outcome::Failure(Failure {
                kind: failure.kind(),
                detail: failure.detail.chars().take(200).collect(),
            }),
            (None, None) => {
                self.malformed += 1;
                return;
            }
        };
        let intended_us = ((t - self.origin_ms).max(0) as u64) * 1000;
        let latency_us = (line.duration_ms.unwrap_or(0.0).max(0.0) * 1000.0) as u64;
        let interval = self.interval;
        let max_concurrent = self.max_concurrent;
        let run = self
            .runs
            .entry(label.to_string())
            .or_insert_with(|| LabelRun {
                collector: Collector::new(interval, Duration::from_secs(600))
                    .with_max_concurrent(max_concurrent),
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

    /// Leaves out answers with more than `max` other requests in flight (`--max-concurrent`).
    pub fn with_max_concurrent(mut self, max: Option<u32>) -> Aggregate {
        self.max_concurrent = max;
        self
    }

    /// Answers pushed so far (malformed ones included).
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// The report: one run per label, merged. `None` when no answer was usable.
    pub fn finish(self, source: &Source) -> anyhow::Result<Option<Report>> {
        let origin = SystemTime::UNIX_EPOCH + Duration::from_millis(self.origin_ms.max(0) as u64);
        let started_at = humantime::format_rfc3339_seconds(origin).to_string();
        let mut info = Some(ImportInfo {
            files: vec![source.read_from.clone()],
            lines: self.lines,
            malformed_lines: self.malformed,
            truncated: false,
            incomplete_requests: 0,
            ..ImportInfo::default()
        });
        let reports: Vec<Report> = self
            .runs
            .into_iter()
            .map(|(label, run)| {
                let window_s = (run.last_us as f64 / 1e6).max(1e-3);
                run.collector.finish(RunInfo {
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
                })
            })
            .collect();
        if reports.is_empty() {
            return Ok(None);
        }
        Ok(Some(Report::merge(reports)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: i64, t_ms: i64, label: &str, read_ms: f64) -> String {
        format!(
            r#"{{"seq":{seq},"t_ms":{t_ms},"label":"{label}","hint":"{label}","colo":"LHR","cold":false,"colo_changed":false,"concurrent":0,"duration_ms":12.5,"answer":{{"key":"7","colo":"LHR","order":["kv"],"isolate_requests":1,"stores":{{"kv":{{"read_ms":{read_ms},"hit":true,"value_bytes":4096,"write_ms":null,"error":null}}}},"kvLatency":{read_ms},"redisLatency":null}}}}"#
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
            r#"{"seq":1,"t_ms":1000900,"label":"aws:us-east-1","vantage":"member","hint":null,"colo":"unknown","placement":null,"cold":false,"colo_changed":false,"concurrent":0,"duration_ms":150000,"failure":{"kind":"timeout","status":null,"detail":"no answer within 150 s"}}"#.to_string(),
            r#"{"seq":2,"t_ms":1000950,"label":"aws:us-east-1","vantage":"member","failure":{"kind":"status","status":503,"detail":"busy"}}"#.to_string(),
        ];
        for l in &lines {
            a.push(&Line::parse(l.as_bytes()).unwrap());
        }
        assert_eq!(a.lines(), 6);
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
        assert_eq!((import.lines, import.malformed_lines), (6, 1));
        assert!(Aggregate::new(0, Duration::from_secs(5))
            .finish(&source)
            .unwrap()
            .is_none());
    }
}
