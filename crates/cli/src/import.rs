//! `kvbench import k6`: k6's `--out json` (plain or gzip, streamed) back into `kvbench run`'s
//! samples through the same collector. The contract with `k6/kvbench.js`, one iteration one
//! `/test` request, every point tagged `kvbench_req`:
//! - per store: `kvbench_store_value_bytes` (marks it present), `_read_ms` (`result`
//!   hit|miss|unknown|error), `_write_ms` (ok|error), `_connect_ms`, `_errors` (`kind`, `op`);
//! - last, `kvbench_request_ms` (`outcome`, `colo`, `detail`), which completes the request;
//! - `dropped_iterations` become `not_sent`; `kvbench_config` from `setup()` gives the run's URL,
//!   rate, duration, timeout and end-to-end definition.
//!
//! A file is untrusted: every line, span, count, value and name is bounded and what is refused
//! is counted as malformed by reason, so memory stays flat whatever the file.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use serde::Deserialize;

use kvbench_core::measurement::parameter::BYTES_MAX;
use kvbench_report::answer::{Answer, StoreError, StoreResult};
use kvbench_report::collect::{auto_interval, Collector};
use kvbench_report::hist::ms_to_us;
use kvbench_report::report::{ImportInfo, Report, RunInfo};
use kvbench_report::sample::{FailureKind, Outcome, Sample};
use kvbench_wire::answer::Op;

/// k6's default request timeout, which scripts before the recorded `timeout` tag ran with:
/// answers arrive at most this late after their start.
const K6_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest line read, bytes (k6 writes a point in well under a few KB); the rest of a longer line
/// is skipped without being held.
pub const LINE_MAX_BYTES: usize = 1 << 20;
/// How far beyond its declared duration and request timeout a file's points may lie.
const SPAN_GRACE: Duration = Duration::from_secs(86_400);
/// The longest span a file may cover, declared or not.
const SPAN_MAX: Duration = Duration::from_secs(31 * 86_400);
/// How long a request or store operation can plausibly take, ms (the worker's worst case is
/// minutes).
const TIME_MAX_MS: f64 = 86_400_000.0;
/// Most dropped iterations one point may report (k6 writes one per drop).
const DROPPED_MAX: f64 = 1e6;
/// Highest rate a run may declare, requests/s.
const RATE_MAX: f64 = 1e7;
/// Longest store, colo, load zone or error kind name, bytes.
const NAME_MAX_BYTES: usize = 128;
/// Longest URL a run may declare, bytes.
const URL_MAX_BYTES: usize = 4096;
/// Distinct names a file may bring, per kind: the stores (a handful exist), Cloudflare's
/// colos (~330), load zones, error kinds.
const STORES_MAX: usize = 64;
const COLOS_MAX: usize = 1024;
const LABELS_MAX: usize = 256;
const ERROR_KINDS_MAX: usize = 64;
/// Requests open at once (k6 interleaves its VUs' points; each VU has at most one open).
const PENDING_MAX: usize = 100_000;

/// Why a line was refused: the key it is counted under in [`ImportInfo::refused`].
type Refusal = &'static str;
const NOT_K6_JSON: Refusal = "not_k6_json";
const NOT_CONTRACT: Refusal = "not_kvbench_contract";
const LINE_TOO_LONG: Refusal = "line_too_long";
const TIME_OUTSIDE_RUN: Refusal = "time_outside_run";
const OUT_OF_RANGE: Refusal = "value_out_of_range";
const NAME_TOO_LONG: Refusal = "name_too_long";
const TOO_MANY_NAMES: Refusal = "too_many_names";
const TOO_MANY_OPEN: Refusal = "too_many_open_requests";

/// What `kvbench import k6` needs.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// One label for every file (default: each file's name without `.json`/`.gz`); k6's
    /// `load_zone` tag, when present, wins.
    pub label: Option<String>,
    /// Timeline resolution; `None`: chosen from the run's duration
    /// ([`kvbench_report::collect::auto_interval`]).
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
    /// `true` on the closing point of a cold isolate's answer.
    #[serde(default, borrow)]
    cold: Option<Cow<'a, str>>,
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

/// A duration in ms that a request or an operation can take (finite, 0 to a day), in µs.
fn plausible_ms(ms: f64) -> Result<u64, Refusal> {
    if (0.0..=TIME_MAX_MS).contains(&ms) {
        ms_to_us(ms).ok_or(OUT_OF_RANGE)
    } else {
        Err(OUT_OF_RANGE)
    }
}

/// A whole number from 0 to `max`.
fn count(value: f64, max: f64) -> Result<u64, Refusal> {
    if (0.0..=max).contains(&value) && value.fract() == 0.0 {
        Ok(value as u64)
    } else {
        Err(OUT_OF_RANGE)
    }
}

/// Admits `name` into `seen` (at most `max` distinct names of [`NAME_MAX_BYTES`]).
fn admit(seen: &mut BTreeSet<String>, name: &str, max: usize) -> Result<(), Refusal> {
    if name.len() > NAME_MAX_BYTES {
        return Err(NAME_TOO_LONG);
    }
    if !seen.contains(name) {
        if seen.len() >= max {
            return Err(TOO_MANY_NAMES);
        }
        seen.insert(name.to_owned());
    }
    Ok(())
}

/// The names a file brought so far, each kind bounded.
#[derive(Default)]
struct Seen {
    stores: BTreeSet<String>,
    colos: BTreeSet<String>,
    labels: BTreeSet<String>,
    error_kinds: BTreeSet<String>,
}

/// How [`read_line`] found a line.
#[derive(Debug, PartialEq)]
enum Got {
    Eof,
    /// In `buf`; `cut`: the file ended before its newline.
    Line {
        cut: bool,
    },
    /// Longer than the cap: skipped to its end, not kept.
    TooLong {
        cut: bool,
    },
}

/// Reads one line into `buf` (without its newline) if it is at most `max` bytes; a longer one is
/// read to its end chunk by chunk and dropped, so memory never holds more than `max`.
fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<Got> {
    buf.clear();
    let mut any = false;
    let mut too_long = false;
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(match (any, too_long) {
                (false, _) => Got::Eof,
                (true, false) => Got::Line { cut: true },
                (true, true) => Got::TooLong { cut: true },
            });
        }
        any = true;
        let newline = chunk.iter().position(|&b| b == b'\n');
        let text = &chunk[..newline.unwrap_or(chunk.len())];
        if !too_long {
            if buf.len() + text.len() > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(text);
            }
        }
        let used = newline.map_or(chunk.len(), |i| i + 1);
        reader.consume(used);
        if newline.is_some() {
            return Ok(if too_long {
                Got::TooLong { cut: false }
            } else {
                Got::Line { cut: false }
            });
        }
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
    /// The first time read; every point must lie within the run's span of it.
    anchor: Option<SystemTime>,
    config: Config,
    pending: HashMap<String, Pending>,
    runs: BTreeMap<String, LabelRun>,
    seen: Seen,
    info: ImportInfo,
}

fn us_since(t: SystemTime, origin: SystemTime) -> u64 {
    t.duration_since(origin).map_or(0, |d| d.as_micros() as u64)
}

/// The failure an `outcome` tag names; an HTTP status must be one (100 to 599).
fn failure_kind(outcome: &str) -> Result<FailureKind, Refusal> {
    Ok(match outcome {
        "malformed" => FailureKind::Malformed,
        "timeout" => FailureKind::Timeout,
        "connect" => FailureKind::Connect,
        "transport" => FailureKind::Transport,
        other => {
            let digits = other.strip_prefix("http_").ok_or(NOT_CONTRACT)?;
            let status: u64 = digits.parse().map_err(|_| NOT_CONTRACT)?;
            if !(100..=599).contains(&status) {
                return Err(OUT_OF_RANGE);
            }
            FailureKind::Status(status as u16)
        }
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
            anchor: None,
            config: Config::default(),
            pending: HashMap::new(),
            runs: BTreeMap::new(),
            seen: Seen::default(),
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

    /// The span of time the file's points may cover around its first: the declared duration and
    /// request timeout plus a grace, or (undeclared) the cap.
    fn span(&self) -> Duration {
        match self.config.duration {
            Some(d) => (d + self.config.timeout() + SPAN_GRACE).min(SPAN_MAX),
            None => SPAN_MAX,
        }
    }

    /// Refuses a time outside the run: after the first time read by more than the span, or
    /// before it by more than a request can take (k6 writes a point when its request ends).
    fn in_run(&mut self, time: SystemTime) -> Result<(), Refusal> {
        let anchor = *self.anchor.get_or_insert(time);
        let ok = match time.duration_since(anchor) {
            Ok(after) => after <= self.span(),
            Err(before) => before.duration() <= self.config.timeout() + Duration::from_secs(60),
        };
        if ok {
            Ok(())
        } else {
            Err(TIME_OUTSIDE_RUN)
        }
    }

    /// The run of `label` (admitted first: labels are bounded) with `count` more requests
    /// scheduled, and the intended start of those requests on its clock.
    fn label_run(
        &mut self,
        label: &str,
        start: SystemTime,
        end: SystemTime,
        count: u64,
    ) -> Result<(&mut LabelRun, u64), Refusal> {
        admit(&mut self.seen.labels, label, LABELS_MAX)?;
        let origin = *self.origin.get_or_insert(start);
        let intended_us = us_since(start, origin);
        let end_us = us_since(end, origin);
        let interval = self.interval();
        let timeout = self.config.timeout();
        let run = self
            .runs
            .entry(label.to_string())
            .or_insert_with(|| LabelRun {
                collector: Collector::new(interval, timeout),
                scheduled: 0,
                last_start_us: 0,
                last_end_us: 0,
            });
        run.scheduled += count;
        run.last_start_us = run.last_start_us.max(intended_us);
        run.last_end_us = run.last_end_us.max(end_us);
        Ok((run, intended_us))
    }

    fn record(
        &mut self,
        label: &str,
        start: SystemTime,
        end: SystemTime,
        sample: Sample,
    ) -> Result<(), Refusal> {
        let (run, intended_us) = self.label_run(label, start, end, 1)?;
        run.collector.record(&Sample {
            intended_us,
            ..sample
        });
        Ok(())
    }

    /// Handles one parsed point; `Err` names why it is refused.
    fn point(&mut self, metric: &str, data: Data<'_>) -> Result<(), Refusal> {
        let (Some(time), Some(value)) = (data.time.as_deref().and_then(parse_time), data.value)
        else {
            return Err(NOT_CONTRACT);
        };
        if !value.is_finite() {
            return Err(OUT_OF_RANGE);
        }
        let tags = data.tags.unwrap_or_default();
        let label = tags
            .load_zone
            .as_deref()
            .unwrap_or(&self.file_label)
            .to_string();
        if metric == "kvbench_config" {
            return self.configure(time, value, &tags);
        }
        self.in_run(time)?;
        match metric {
            "dropped_iterations" => {
                let n = count(value, DROPPED_MAX)?;
                let (run, intended_us) = self.label_run(&label, time, time, n)?;
                run.collector
                    .record_not_sent(intended_us, n, "dropped by k6 (no free VU)");
                Ok(())
            }
            "kvbench_request_ms" => {
                let id = data.metadata.and_then(|m| m.kvbench_req);
                // A refused closing point closes its request too: it is counted here, not as
                // incomplete.
                let pending = id.and_then(|id| self.pending.remove(id.as_ref()));
                let latency_us = plausible_ms(value)?;
                let outcome = tags.outcome.as_deref().ok_or(NOT_CONTRACT)?;
                let outcome = if outcome == "ok" {
                    let colo = tags.colo.as_deref().unwrap_or("unknown");
                    admit(&mut self.seen.colos, colo, COLOS_MAX)?;
                    Outcome::Answer(Answer {
                        key: None,
                        colo: colo.to_string(),
                        stores: pending.unwrap_or_default().stores,
                        // k6's points do not carry it.
                        concurrent: None,
                        cold: tags.cold.as_deref() == Some("true"),
                    })
                } else {
                    let kind = failure_kind(outcome)?;
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
                self.record(&label, start, time, sample)
            }
            store_metric => self.store_point(store_metric, value, &tags, data.metadata),
        }
    }

    /// The `kvbench_config` point: refused whole when a figure is implausible.
    fn configure(&mut self, time: SystemTime, rate: f64, tags: &Tags<'_>) -> Result<(), Refusal> {
        let duration = |text: &Option<Cow<'_, str>>, max: Duration| match text.as_deref() {
            None => Ok(None),
            Some(d) => match humantime::parse_duration(d) {
                Ok(d) if d <= max => Ok(Some(d)),
                Ok(_) => Err(OUT_OF_RANGE),
                // An unreadable figure is left out, as before.
                Err(_) => Ok(None),
            },
        };
        if !(rate > 0.0 && rate <= RATE_MAX) {
            return Err(OUT_OF_RANGE);
        }
        if tags.url.as_deref().is_some_and(|u| u.len() > URL_MAX_BYTES) {
            return Err(NAME_TOO_LONG);
        }
        let config = Config {
            url: tags.url.clone().map(Cow::into_owned),
            rate: Some(rate),
            duration: duration(&tags.duration, SPAN_MAX)?,
            timeout: duration(&tags.timeout, Duration::from_millis(TIME_MAX_MS as u64))?,
            e2e_total: tags.e2e.as_deref() == Some("total"),
        };
        // The run's clock starts at its first request, not at setup() (which would leave a
        // sliver of a last timeline interval); setup's time anchors the span.
        let previous = std::mem::replace(&mut self.config, config);
        if let Err(e) = self.in_run(time) {
            self.config = previous;
            return Err(e);
        }
        Ok(())
    }

    /// A per-store point, kept with its request until the request's closing point.
    fn store_point(
        &mut self,
        metric: &str,
        value: f64,
        tags: &Tags<'_>,
        metadata: Option<Metadata<'_>>,
    ) -> Result<(), Refusal> {
        let (Some(store), Some(id)) = (tags.store.as_deref(), metadata.and_then(|m| m.kvbench_req))
        else {
            return Err(NOT_CONTRACT);
        };
        admit(&mut self.seen.stores, store, STORES_MAX)?;
        if id.len() > NAME_MAX_BYTES {
            return Err(NAME_TOO_LONG);
        }
        // Checked before anything is kept.
        enum Field {
            Bytes(u64),
            Read(u64),
            Write(u64),
            Connect(u64),
            Error(StoreError),
        }
        let field = match metric {
            "kvbench_store_value_bytes" => Field::Bytes(count(value, f64::from(BYTES_MAX))?),
            "kvbench_store_read_ms" => Field::Read(plausible_ms(value)?),
            "kvbench_store_write_ms" => Field::Write(plausible_ms(value)?),
            "kvbench_store_connect_ms" => Field::Connect(plausible_ms(value)?),
            "kvbench_store_errors" => {
                let kind = tags.kind.as_deref().unwrap_or("unknown");
                admit(&mut self.seen.error_kinds, kind, ERROR_KINDS_MAX)?;
                Field::Error(StoreError {
                    kind: kind.to_string().into(),
                    message: Default::default(),
                    op: match tags.op.as_deref() {
                        Some("read") => Some(Op::Read),
                        Some("write") => Some(Op::Write),
                        _ => None,
                    },
                })
            }
            _ => return Err(NOT_CONTRACT),
        };
        if !self.pending.contains_key(id.as_ref()) && self.pending.len() >= PENDING_MAX {
            return Err(TOO_MANY_OPEN);
        }
        let r = self
            .pending
            .entry(id.into_owned())
            .or_default()
            .stores
            .entry(store.to_string())
            .or_default();
        match field {
            Field::Bytes(n) => r.value_bytes = Some(n),
            Field::Read(us) => {
                r.read_us = Some(us);
                r.hit = match tags.result.as_deref() {
                    Some("hit") => Some(true),
                    Some("miss") => Some(false),
                    _ => None,
                };
            }
            Field::Write(us) => r.write_us = Some(us),
            Field::Connect(us) => r.connect_us = Some(us),
            Field::Error(e) => r.error = Some(e),
        }
        Ok(())
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
        let verdict = match serde_json::from_slice::<Line<'_>>(line) {
            Ok(l) if l.kind == "Metric" => Ok(()),
            Ok(Line {
                kind,
                metric: Some(metric),
                data: Some(data),
            }) if kind == "Point" => {
                if METRICS.contains(&metric.as_ref()) {
                    self.point(&metric, data)
                } else {
                    Ok(())
                }
            }
            _ => Err(NOT_K6_JSON),
        };
        if let Err(reason) = verdict {
            self.refuse(reason);
        }
    }

    fn refuse(&mut self, reason: Refusal) {
        self.info.malformed_lines += 1;
        *self.info.refused.entry(reason.to_owned()).or_default() += 1;
    }

    fn read(&mut self, reader: impl Read) -> anyhow::Result<()> {
        let mut reader = BufReader::with_capacity(1 << 20, reader);
        let mut buf = Vec::with_capacity(4096);
        loop {
            let got = read_line(&mut reader, &mut buf, LINE_MAX_BYTES)
                .with_context(|| format!("reading {}", self.file_name))?;
            let cut = match got {
                Got::Eof => return Ok(()),
                Got::Line { cut } | Got::TooLong { cut } => cut,
            };
            if cut {
                self.info.truncated = true;
            }
            if got == (Got::TooLong { cut }) {
                self.info.lines += 1;
                self.refuse(LINE_TOO_LONG);
                continue;
            }
            let line = buf.strip_suffix(b"\r").unwrap_or(&buf);
            self.line(line, cut);
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
                    read_us: Default::default(),
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

    /// Lines up to the cap are read whole; a longer one is skipped to its newline (also when the
    /// file ends inside it) and the next line is read; the buffer never grows past the cap.
    #[test]
    fn lines_over_the_cap_are_skipped() {
        let text =
            b"short\nexactly8\nnine byte\n\nlong line over the cap\nend\ntoolong-unterminated";
        // A small buffer, so lines span several reads.
        let mut reader = BufReader::with_capacity(4, &text[..]);
        let mut buf = Vec::new();
        let mut got = Vec::new();
        loop {
            let g = read_line(&mut reader, &mut buf, 8).unwrap();
            assert!(buf.len() <= 8);
            if g == Got::Eof {
                break;
            }
            got.push((g, String::from_utf8(buf.clone()).unwrap()));
        }
        let line = |t: &str| (Got::Line { cut: false }, t.to_string());
        assert_eq!(
            got,
            [
                line("short"),
                line("exactly8"),
                (Got::TooLong { cut: false }, String::new()),
                line(""),
                (Got::TooLong { cut: false }, String::new()),
                line("end"),
                (Got::TooLong { cut: true }, String::new()),
            ]
        );
        let mut reader = BufReader::new(&b"cut"[..]);
        assert_eq!(
            read_line(&mut reader, &mut buf, 8).unwrap(),
            Got::Line { cut: true }
        );
        assert_eq!(buf, b"cut");
    }

    #[test]
    fn plausible_figures() {
        assert_eq!(plausible_ms(1.5), Ok(1500));
        assert_eq!(plausible_ms(0.0), Ok(0));
        for bad in [-1.0, 1e308, f64::NAN, f64::INFINITY, TIME_MAX_MS + 1.0] {
            assert_eq!(plausible_ms(bad), Err(OUT_OF_RANGE), "{bad}");
        }
        assert_eq!(count(3.0, 10.0), Ok(3));
        for bad in [-1.0, 2.5, 11.0, 1e15, f64::NAN] {
            assert_eq!(count(bad, 10.0), Err(OUT_OF_RANGE), "{bad}");
        }
    }

    #[test]
    fn outcomes_table() {
        assert_eq!(failure_kind("http_503"), Ok(FailureKind::Status(503)));
        assert_eq!(failure_kind("timeout"), Ok(FailureKind::Timeout));
        assert_eq!(failure_kind("malformed"), Ok(FailureKind::Malformed));
        assert_eq!(failure_kind("http_x"), Err(NOT_CONTRACT));
        assert_eq!(failure_kind("bogus"), Err(NOT_CONTRACT));
        assert_eq!(failure_kind("http_99"), Err(OUT_OF_RANGE));
        assert_eq!(failure_kind("http_600"), Err(OUT_OF_RANGE));
        assert_eq!(failure_kind("http_99999999999999999999"), Err(NOT_CONTRACT));
    }
}
