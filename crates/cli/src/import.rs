//! `kvbench import k6`: k6's `--out json` (plain or gzip, streamed line by line) back into the
//! samples `kvbench run` produces, through the same collector, so the report is the same shape.
//!
//! The contract with `k6/kvbench.js` (one iteration = one `/test` request): every point of an
//! iteration carries the metadata `kvbench_req` (unique per VU and iteration); per store in the
//! answer the script emits `kvbench_store_value_bytes` (always: it marks the store as present),
//! `kvbench_store_read_ms` (tag `result` = hit|miss|unknown|error), `kvbench_store_write_ms`
//! (tag `result` = ok|error), `kvbench_store_connect_ms` and `kvbench_store_errors` (tags `kind`,
//! `op`); then, last, `kvbench_request_ms` (value: k6's `http_req_duration`, or with the
//! script's `KVBENCH_E2E=total` that plus blocked, connecting and TLS time; tags `outcome` =
//! ok|http_<status>|malformed|timeout|connect|transport, `colo`, `detail`). k6's own
//! `dropped_iterations` become `not_sent`. A `kvbench_config` point from `setup()` gives the run's
//! URL, rate, duration, request timeout and end-to-end definition. k6 writes one iteration's points in order, so a request is complete
//! when its `kvbench_request_ms` arrives; whatever is pending at the end of a file was cut short.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use serde::Deserialize;

use crate::answer::{Answer, StoreError, StoreResult};
use crate::collect::{auto_interval, Collector};
use crate::hist::ms_to_us;
use crate::report::{ImportInfo, Report, RunInfo};
use crate::sample::{FailureKind, Outcome, Sample};

/// k6's default request timeout, which scripts before the recorded `timeout` tag ran with:
/// answers arrive at most this late after their start.
const K6_TIMEOUT: Duration = Duration::from_secs(60);

/// What `kvbench import k6` needs.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// One label for every file (default: each file's name without `.json`/`.gz`); k6's
    /// `load_zone` tag, when present, wins.
    pub label: Option<String>,
    /// Timeline resolution; `None`: chosen from the run's duration
    /// ([`crate::collect::auto_interval`]).
    pub interval: Option<Duration>,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type")]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    metric: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    data: Option<Data<'a>>,
}

#[derive(Deserialize)]
struct Data<'a> {
    #[serde(default, borrow)]
    time: Option<Cow<'a, str>>,
    #[serde(default)]
    value: Option<f64>,
    #[serde(default, borrow)]
    tags: Option<Tags<'a>>,
    #[serde(default, borrow)]
    metadata: Option<Metadata<'a>>,
}

#[derive(Deserialize, Default)]
struct Tags<'a> {
    #[serde(default, borrow)]
    store: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    result: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    op: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    outcome: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    colo: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    detail: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    load_zone: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    url: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    duration: Option<Cow<'a, str>>,
    /// The script's request timeout (`kvbench_config`).
    #[serde(default, borrow)]
    timeout: Option<Cow<'a, str>>,
    /// What the script wrote as the end-to-end time: `duration` or `total`.
    #[serde(default, borrow)]
    e2e: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct Metadata<'a> {
    #[serde(default, borrow)]
    kvbench_req: Option<Cow<'a, str>>,
}

/// The metrics the importer reads; every other point is skipped before it is parsed.
const METRICS: [&str; 8] = [
    "kvbench_request_ms",
    "kvbench_store_value_bytes",
    "kvbench_store_read_ms",
    "kvbench_store_write_ms",
    "kvbench_store_connect_ms",
    "kvbench_store_errors",
    "kvbench_config",
    "dropped_iterations",
];

/// The metric name of a k6 point line in its usual shape (`{"metric":"NAME","type":"Point",...`),
/// without parsing the rest; `None` when the line is not in that shape.
fn quick_metric(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(br#"{"metric":""#)?;
    let end = rest.iter().position(|&b| b == b'"')?;
    rest[end..]
        .starts_with(br#"","type":"Point""#)
        .then_some(&rest[..end])
}

/// RFC 3339 with any fraction and offset (k6 writes local time, e.g. `...+02:00`, or `Z`).
pub fn parse_time(text: &str) -> Option<SystemTime> {
    let (base, offset_s) = if let Some(b) = text.strip_suffix('Z') {
        (b, 0i64)
    } else {
        let at = text.len().checked_sub(6)?;
        let (b, off) = text.split_at(at);
        let sign = match off.as_bytes().first()? {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        let h: i64 = off.get(1..3)?.parse().ok()?;
        let m: i64 = off.get(4..6)?.parse().ok()?;
        (b, sign * (h * 3600 + m * 60))
    };
    let utc_wall = humantime::parse_rfc3339(&format!("{base}Z")).ok()?;
    let shift = Duration::from_secs(offset_s.unsigned_abs());
    if offset_s >= 0 {
        utc_wall.checked_sub(shift)
    } else {
        utc_wall.checked_add(shift)
    }
}

/// One request's per-store points, waiting for its closing `kvbench_request_ms`.
#[derive(Default)]
struct Pending {
    stores: BTreeMap<String, StoreResult>,
}

/// The run one label of one file makes up.
struct LabelRun {
    collector: Collector,
    scheduled: u64,
    last_start_us: u64,
    last_end_us: u64,
}

/// The `kvbench_config` point from the script's `setup()`.
#[derive(Default, Clone)]
struct Config {
    url: Option<String>,
    rate: Option<f64>,
    duration: Option<Duration>,
    /// The script's request timeout; `None`: k6's default (older scripts set none).
    timeout: Option<Duration>,
    /// Whether `kvbench_request_ms` includes blocked, connecting and TLS time
    /// (`KVBENCH_E2E=total`) or is k6's http_req_duration.
    e2e_total: bool,
}

impl Config {
    fn timeout(&self) -> Duration {
        self.timeout.unwrap_or(K6_TIMEOUT)
    }

    /// `RunInfo::latency_from`: `sent` for http_req_duration, `started` when the script added
    /// blocked, connecting and TLS handshaking.
    fn latency_from(&self) -> &'static str {
        if self.e2e_total {
            "started"
        } else {
            "sent"
        }
    }
}

/// Reads one file into a report per label.
struct FileImport<'o> {
    options: &'o ImportOptions,
    file_label: String,
    file_name: String,
    origin: Option<SystemTime>,
    config: Config,
    pending: HashMap<String, Pending>,
    runs: BTreeMap<String, LabelRun>,
    info: ImportInfo,
}

fn us_since(t: SystemTime, origin: SystemTime) -> u64 {
    t.duration_since(origin).map_or(0, |d| d.as_micros() as u64)
}

fn failure_kind(outcome: &str) -> Option<FailureKind> {
    Some(match outcome {
        "malformed" => FailureKind::Malformed,
        "timeout" => FailureKind::Timeout,
        "connect" => FailureKind::Connect,
        "transport" => FailureKind::Transport,
        other => FailureKind::Status(other.strip_prefix("http_")?.parse().ok()?),
    })
}

impl<'o> FileImport<'o> {
    fn new(path: &Path, options: &'o ImportOptions) -> FileImport<'o> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = name
            .trim_end_matches(".gz")
            .trim_end_matches(".json")
            .to_string();
        FileImport {
            options,
            file_label: options.label.clone().unwrap_or(stem),
            file_name: path.display().to_string(),
            origin: None,
            config: Config::default(),
            pending: HashMap::new(),
            runs: BTreeMap::new(),
            info: ImportInfo {
                files: vec![path.display().to_string()],
                ..ImportInfo::default()
            },
        }
    }

    fn interval(&self) -> Duration {
        self.options
            .interval
            .or_else(|| self.config.duration.map(auto_interval))
            .unwrap_or(Duration::from_secs(10))
    }

    fn record(&mut self, label: &str, start: SystemTime, end: SystemTime, sample: Sample) {
        let origin = *self.origin.get_or_insert(start);
        let intended_us = us_since(start, origin);
        let end_us = us_since(end, origin);
        let interval = self.interval();
        let run = self
            .runs
            .entry(label.to_string())
            .or_insert_with(|| LabelRun {
                collector: Collector::new(interval, self.config.timeout()),
                scheduled: 0,
                last_start_us: 0,
                last_end_us: 0,
            });
        run.scheduled += 1;
        run.last_start_us = run.last_start_us.max(intended_us);
        run.last_end_us = run.last_end_us.max(end_us);
        run.collector.record(&Sample {
            intended_us,
            ..sample
        });
    }

    /// Handles one parsed point; `false` when it does not follow the contract.
    fn point(&mut self, metric: &str, data: Data<'_>) -> bool {
        let (Some(time), Some(value)) = (data.time.as_deref().and_then(parse_time), data.value)
        else {
            return false;
        };
        let tags = data.tags.unwrap_or_default();
        let label = tags
            .load_zone
            .as_deref()
            .unwrap_or(&self.file_label)
            .to_string();
        match metric {
            "kvbench_config" => {
                // The run's clock starts at its first request, not at setup(): k6 spends a
                // moment between the two, which would leave a sliver of the run in a last
                // timeline interval of its own.
                self.config = Config {
                    url: tags.url.map(Cow::into_owned),
                    rate: Some(value),
                    duration: tags
                        .duration
                        .as_deref()
                        .and_then(|d| humantime::parse_duration(d).ok()),
                    timeout: tags
                        .timeout
                        .as_deref()
                        .and_then(|d| humantime::parse_duration(d).ok()),
                    e2e_total: tags.e2e.as_deref() == Some("total"),
                };
                true
            }
            "dropped_iterations" => {
                for _ in 0..(value.max(0.0).round() as u64) {
                    let s =
                        Sample::failure(0, 0, FailureKind::NotSent, "dropped by k6 (no free VU)");
                    self.record(&label, time, time, s);
                }
                true
            }
            "kvbench_request_ms" => {
                let Some(latency_us) = ms_to_us(value) else {
                    return false;
                };
                let Some(outcome) = tags.outcome.as_deref() else {
                    return false;
                };
                let pending = data
                    .metadata
                    .and_then(|m| m.kvbench_req)
                    .and_then(|id| self.pending.remove(id.as_ref()))
                    .unwrap_or_default();
                let outcome = if outcome == "ok" {
                    Outcome::Answer(Answer {
                        key: None,
                        colo: tags.colo.as_deref().unwrap_or("unknown").to_string(),
                        stores: pending.stores,
                    })
                } else {
                    let Some(kind) = failure_kind(outcome) else {
                        return false;
                    };
                    let detail = tags.detail.as_deref().unwrap_or("").to_string();
                    Sample::failure(0, 0, kind, detail).outcome
                };
                let start = time
                    .checked_sub(Duration::from_micros(latency_us))
                    .unwrap_or(time);
                let sample = Sample {
                    intended_us: 0,
                    latency_us,
                    outcome,
                };
                self.record(&label, start, time, sample);
                true
            }
            store_metric => {
                let (Some(store), Some(id)) = (
                    tags.store.as_deref(),
                    data.metadata.and_then(|m| m.kvbench_req),
                ) else {
                    return false;
                };
                let r = self
                    .pending
                    .entry(id.into_owned())
                    .or_default()
                    .stores
                    .entry(store.to_string())
                    .or_default();
                let us = ms_to_us(value);
                match store_metric {
                    "kvbench_store_value_bytes" => {
                        r.value_bytes = Some(value.max(0.0).round() as u64);
                    }
                    "kvbench_store_read_ms" => {
                        r.read_us = us;
                        r.hit = match tags.result.as_deref() {
                            Some("hit") => Some(true),
                            Some("miss") => Some(false),
                            _ => None,
                        };
                    }
                    "kvbench_store_write_ms" => r.write_us = us,
                    "kvbench_store_connect_ms" => r.connect_us = us,
                    "kvbench_store_errors" => {
                        r.error = Some(StoreError {
                            kind: tags.kind.as_deref().unwrap_or("unknown").to_string(),
                            message: String::new(),
                            op: tags
                                .op
                                .filter(|op| op == "read" || op == "write")
                                .map(Cow::into_owned),
                        });
                    }
                    _ => return false,
                }
                true
            }
        }
    }

    /// One line of the file; `last` when it was not terminated by a newline (cut short).
    fn line(&mut self, line: &[u8], last: bool) {
        self.info.lines += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        // The fast path: most lines are k6's own metrics, skipped by name without parsing. A
        // line cut short is always parsed in full, so it is counted if it is broken.
        if !last {
            if let Some(name) = quick_metric(line) {
                if !METRICS.iter().any(|m| m.as_bytes() == name) {
                    return;
                }
            } else if line.starts_with(br#"{"type":"Metric""#) {
                return;
            }
        }
        let ok = match serde_json::from_slice::<Line<'_>>(line) {
            Ok(l) if l.kind == "Metric" => true,
            Ok(Line {
                kind,
                metric: Some(metric),
                data: Some(data),
            }) if kind == "Point" => {
                !METRICS.contains(&metric.as_ref()) || self.point(&metric, data)
            }
            _ => false,
        };
        if !ok {
            self.info.malformed_lines += 1;
        }
    }

    fn read(&mut self, reader: impl Read) -> anyhow::Result<()> {
        let mut reader = BufReader::with_capacity(1 << 20, reader);
        let mut buf = Vec::with_capacity(4096);
        loop {
            buf.clear();
            let n = reader
                .read_until(b'\n', &mut buf)
                .with_context(|| format!("reading {}", self.file_name))?;
            if n == 0 {
                return Ok(());
            }
            let last = buf.last() != Some(&b'\n');
            if last {
                self.info.truncated = true;
            }
            let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            self.line(line, last);
        }
    }

    /// One report per label of this file.
    fn finish(mut self) -> Vec<Report> {
        self.info.incomplete_requests = self.pending.len() as u64;
        let origin = self.origin.unwrap_or(SystemTime::UNIX_EPOCH);
        let started_at = humantime::format_rfc3339_seconds(origin).to_string();
        let labels = self.runs.len();
        let config = self.config.clone();
        let mut info = Some(self.info);
        self.runs
            .into_iter()
            .map(|(label, run)| {
                // The window the arrivals were spread over: the last start plus one mean gap.
                let gap_us = run.last_start_us / run.scheduled.saturating_sub(1).max(1);
                let observed = Duration::from_micros(run.last_start_us + gap_us);
                let window = match config.duration {
                    Some(d) if observed.as_secs_f64() >= 0.95 * d.as_secs_f64() => d,
                    _ => observed,
                };
                let measured_rate = run.scheduled as f64 / window.as_secs_f64().max(1e-6);
                let info = info.take();
                let interrupted = info.as_ref().is_some_and(|i| i.truncated);
                run.collector.finish(RunInfo {
                    label,
                    url: config
                        .url
                        .clone()
                        .unwrap_or_else(|| "(not recorded)".into()),
                    started_at: started_at.clone(),
                    // With several load zones k6 splits the rate between them: use what arrived.
                    requested_rate: match config.rate {
                        Some(r) if labels == 1 => r,
                        _ => measured_rate,
                    },
                    planned_duration_s: config.duration.unwrap_or(window).as_secs_f64(),
                    send_window_s: window.as_secs_f64(),
                    elapsed_s: run.last_end_us as f64 / 1e6,
                    timeout_s: config.timeout().as_secs_f64(),
                    max_in_flight: 0,
                    interrupted,
                    pacer_lag_us: Default::default(),
                    engine: "k6".into(),
                    latency_from: config.latency_from().into(),
                    // The file's reading figures go with its first label only, so they add up.
                    import: info,
                })
            })
            .collect()
    }
}

/// Opens a file, gunzipping when it starts with gzip's magic bytes.
fn open(path: &Path) -> anyhow::Result<Box<dyn Read>> {
    let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic)?;
    let head = std::io::Cursor::new(magic[..n].to_vec());
    let chained = head.chain(file);
    Ok(if n == 2 && magic == [0x1f, 0x8b] {
        Box::new(flate2::read::MultiGzDecoder::new(chained))
    } else {
        Box::new(chained)
    })
}

/// Imports k6 JSON files into one report (labels per file or load zone, merged).
pub fn import_k6(files: &[PathBuf], options: &ImportOptions) -> anyhow::Result<Report> {
    let mut reports = Vec::new();
    for path in files {
        let mut f = FileImport::new(path, options);
        f.read(open(path)?)?;
        let per_label = f.finish();
        if per_label.is_empty() {
            anyhow::bail!(
                "{}: no kvbench requests in this file (was it written by `k6 run --out json=FILE k6/kvbench.js`?)",
                path.display()
            );
        }
        reports.extend(per_label);
    }
    Ok(Report::merge(reports)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_with_offsets() {
        let z = parse_time("2026-11-30T02:38:52.084229447Z").unwrap();
        let plus = parse_time("2026-11-30T04:38:52.084229447+02:00").unwrap();
        let minus = parse_time("2026-11-29T21:38:52.084229447-05:00").unwrap();
        assert_eq!(z, plus);
        assert_eq!(z, minus);
        for bad in [
            "",
            "yesterday",
            "2026-11-30T02:38:52",
            "2026-11-30T02:38:52+0200",
        ] {
            assert!(parse_time(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn quick_metric_shapes() {
        assert_eq!(
            quick_metric(br#"{"metric":"http_reqs","type":"Point","data":{}}"#),
            Some(&b"http_reqs"[..])
        );
        assert_eq!(quick_metric(br#"{"type":"Metric","data":{}}"#), None);
        assert_eq!(
            quick_metric(br#"{"metric":"x","data":{},"type":"Point"}"#),
            None
        );
        assert_eq!(quick_metric(br#"{"metric":"trunc"#), None);
    }

    #[test]
    fn outcomes_table() {
        assert_eq!(failure_kind("http_503"), Some(FailureKind::Status(503)));
        assert_eq!(failure_kind("timeout"), Some(FailureKind::Timeout));
        assert_eq!(failure_kind("malformed"), Some(FailureKind::Malformed));
        assert_eq!(failure_kind("http_x"), None);
        assert_eq!(failure_kind("bogus"), None);
    }
}
