//! The report's schema: the `report.json` model (see REPORT.md) that runs and imports produce,
//! merging as methods on its types, and the derived summary every printer shows. No printing here:
//! the terminal, HTML and chart printers in [`crate::print`] read this model.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

pub use crate::check::{plus, plus_hist, AddError};
use crate::daily::Daily;
use crate::hist::{Hist, Packed};
use crate::sample::Side;

/// Bumped whenever a field changes meaning or is removed; readers refuse other versions.
pub const SCHEMA_VERSION: u32 = 2;

/// Everything one or more runs measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    /// `kvbench <version>` that wrote the file.
    pub tool: String,
    /// One entry per `kvbench run` that went into this report (several after `merge`).
    pub runs: Vec<RunInfo>,
    /// All runs together.
    pub total: Section,
    /// Per `--label`.
    pub labels: BTreeMap<String, Section>,
    /// Per colo the worker reported.
    pub colos: BTreeMap<String, ColoStats>,
    /// Per label of kept answers (`kvbench import worker`, `GET /report`): who measured and
    /// where it ran. Absent for `kvbench run`'s reports.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vantages: BTreeMap<String, VantagePoint>,
    pub timeline: Timeline,
    /// Each UTC day's warm reads per label and store ([`crate::daily`]): the History section.
    #[serde(default, skip_serializing_if = "Daily::is_empty")]
    pub days: Daily,
    /// Derived from `total` and a price table when the file was written; recomputed on re-render.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Estimate>,
    /// Derived from the histograms when the file was written (the numbers every printer shows,
    /// in milliseconds, for readers without an HdrHistogram decoder); recomputed on re-render.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// Where the figures come from: the stack, the builds, the settings, the raw data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

/// Where a report's figures come from, as its page shows them: enough to reproduce them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Provenance {
    /// `local` (a worker on this machine: the local stack) or `deployed`.
    pub stack: String,
    /// When these figures were made, RFC 3339 UTC.
    pub updated_at: String,
    /// The window of kept answers a page covers (`GET /report`): from and to, RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<(String, String)>,
    /// The measuring worker's build as its `GET /` gives it (`KVBENCH_PROVENANCE`, written by
    /// the scripts that serve or deploy it): the kvbench commit, and the versions of wrangler,
    /// workerd, workers-rs, the store clients and the local stack's servers. Empty when the
    /// worker says nothing (`worker_error` says why).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub build: BTreeMap<String, String>,
    /// The worker's settings as its `GET /` gives them (`defaults`: stores, keys, value sizes,
    /// TTL, order, …), each as text; a run's URL query overrides them for its requests.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
    /// Why the worker's build or settings are missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_error: Option<String>,
    /// Where the raw data is: what, and its address (relative to the page, or absolute).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raw: Vec<RawData>,
}

/// One download of a report's raw data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawData {
    pub what: String,
    pub href: String,
}

impl Provenance {
    /// The build and settings out of a worker's `GET /` body (its `provenance` and `defaults`
    /// objects); `worker_error` says what is missing.
    pub fn describe(&mut self, index: &serde_json::Value) {
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(","),
            other => other.to_string(),
        };
        let fields = |key: &str| -> BTreeMap<String, String> {
            index
                .get(key)
                .and_then(serde_json::Value::as_object)
                .map(|o| {
                    o.iter()
                        .filter(|(k, v)| !v.is_null() && k.as_str() != "error")
                        .take(PROVENANCE_FIELDS_MAX)
                        .map(|(k, v)| (clip(k), clip(&text(v))))
                        .collect()
                })
                .unwrap_or_default()
        };
        self.build = fields("provenance");
        self.settings = fields("defaults");
        if self.build.is_empty() {
            self.worker_error = Some(
                "the worker's GET / names no build (KVBENCH_PROVENANCE is not set: it was not served or deployed by kvbench's scripts)"
                    .into(),
            );
        }
    }
}

impl Provenance {
    /// Another report's provenance, merged: what differs is kept side by side (`a | b`), the
    /// newest update wins, the downloads add.
    pub fn add(&mut self, other: Provenance) {
        fn both(mine: &mut String, theirs: &str) {
            if mine.is_empty() {
                *mine = theirs.to_string();
            } else if !theirs.is_empty() && !mine.split(" | ").any(|m| m == theirs) {
                *mine = clip(&format!("{mine} | {theirs}"));
            }
        }
        both(&mut self.stack, &other.stack);
        if other.updated_at > self.updated_at {
            self.updated_at = other.updated_at;
        }
        if self.window.is_none() {
            self.window = other.window;
        }
        for (mine, theirs) in [
            (&mut self.build, other.build),
            (&mut self.settings, other.settings),
        ] {
            for (k, v) in theirs {
                if mine.len() < PROVENANCE_FIELDS_MAX || mine.contains_key(&k) {
                    both(mine.entry(k).or_default(), &v);
                }
            }
        }
        if self.worker_error.is_none() {
            self.worker_error = other.worker_error;
        }
        for raw in other.raw {
            if !self.raw.contains(&raw) && self.raw.len() < PROVENANCE_FIELDS_MAX {
                self.raw.push(raw);
            }
        }
    }
}

/// Most build or setting fields a report keeps, and the longest text of one.
const PROVENANCE_FIELDS_MAX: usize = 40;
const PROVENANCE_TEXT_MAX: usize = 200;

fn clip(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control())
        .take(PROVENANCE_TEXT_MAX)
        .collect()
}

/// Most colos or placements a vantage point lists; the rest are counted under `other`.
pub const VANTAGE_NAMES_MAX: usize = 16;

/// One vantage point of kept answers: what it is, where its answers ran, how many were warm.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct VantagePoint {
    /// `hint` (a probe object placed by a location hint), `member` (a placed fleet member's
    /// `/test` over HTTP) or `run` (a load run's answers, one label per colo).
    pub vantage: String,
    /// The location hint of a hint probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Answers (and failures) per colo they ran in.
    #[serde(default)]
    pub colos: BTreeMap<String, u64>,
    /// Answers per `cf-placement` (`remote-IAD`): where a member's placed fetch handler ran.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub placements: BTreeMap<String, u64>,
    /// Answers of a new instance (connections, Deno KV's metadata exchange started afresh).
    pub cold: u64,
    /// Answers of an instance that had answered before: what a steady state looks like.
    pub warm: u64,
    /// Lines kept in place of an answer: the vantage point failed (by kind in `labels`).
    pub failed: u64,
    /// A member's answers that ran outside its region: `local-…` or no `cf-placement`
    /// (placement did not apply). Counted here only, never in the label's numbers.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub unplaced: u64,
    /// A member's answers placed in a colo outside its region's metro: counted here only.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub elsewhere: u64,
    /// A member's answers by the colo its isolate's Cloudflare trace named (`unknown` included):
    /// the second witness of where it ran, beside `placements`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub traces: BTreeMap<String, u64>,
    /// A member's answers whose trace named a colo outside its region's metro, whatever
    /// `cf-placement` said: counted here only.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub trace_elsewhere: u64,
    /// A member's answers whose `cf-placement` and trace named different colos (counted in or
    /// out of its row by the trace).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub trace_disagrees: u64,
}

impl VantagePoint {
    /// Counts `name` in `map`, listing at most [`VANTAGE_NAMES_MAX`] names.
    /// (A kept report's own answers, one at a time: far from overflowing, saturating anyway.)
    pub fn count(map: &mut BTreeMap<String, u64>, name: &str, n: u64) {
        let c = VantagePoint::slot(map, name);
        *c = c.saturating_add(n);
    }

    fn slot<'a>(map: &'a mut BTreeMap<String, u64>, name: &str) -> &'a mut u64 {
        if map.contains_key(name) || map.len() < VANTAGE_NAMES_MAX {
            map.entry(name.to_string()).or_insert(0)
        } else {
            map.entry("other".into()).or_insert(0)
        }
    }

    pub fn add(&mut self, from: &VantagePoint) -> Result<(), AddError> {
        if self.vantage.is_empty() {
            self.vantage.clone_from(&from.vantage);
        }
        if self.hint.is_none() {
            self.hint.clone_from(&from.hint);
        }
        for (c, n) in &from.colos {
            plus(VantagePoint::slot(&mut self.colos, c), *n, c).map_err(|e| e.under("colos"))?;
        }
        for (p, n) in &from.placements {
            plus(VantagePoint::slot(&mut self.placements, p), *n, p)
                .map_err(|e| e.under("placements"))?;
        }
        for (t, n) in &from.traces {
            plus(VantagePoint::slot(&mut self.traces, t), *n, t).map_err(|e| e.under("traces"))?;
        }
        plus(&mut self.cold, from.cold, "cold")?;
        plus(&mut self.warm, from.warm, "warm")?;
        plus(&mut self.failed, from.failed, "failed")?;
        plus(&mut self.unplaced, from.unplaced, "unplaced")?;
        plus(&mut self.elsewhere, from.elsewhere, "elsewhere")?;
        plus(
            &mut self.trace_elsewhere,
            from.trace_elsewhere,
            "trace_elsewhere",
        )?;
        plus(
            &mut self.trace_disagrees,
            from.trace_disagrees,
            "trace_disagrees",
        )
    }
}

/// How one run was configured and how it went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub label: String,
    /// The URL requests went to; several separated by spaces when `kvbench run` was given more
    /// than one `--url`.
    pub url: String,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub requested_rate: f64,
    pub planned_duration_s: f64,
    /// Time the pacer was sending (shorter than planned when interrupted).
    pub send_window_s: f64,
    /// Until the last answer arrived.
    pub elapsed_s: f64,
    pub timeout_s: f64,
    pub max_in_flight: u64,
    pub interrupted: bool,
    /// How late the pacer woke for each request, µs (empty for imported runs).
    pub pacer_lag_us: Hist,
    /// What sent the load: `kvbench` (`kvbench run`) or `k6` (`kvbench import k6`).
    #[serde(default = "default_engine")]
    pub engine: String,
    /// Where end-to-end latency starts: `intended` (the pacer's schedule, so queueing and pacer
    /// lag count: kvbench) or `sent` (the moment the request was sent: k6's `http_req_duration`).
    #[serde(default = "default_latency_from")]
    pub latency_from: String,
    /// For imported runs: what was read and what could not be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportInfo>,
}

impl RunInfo {
    /// A run of nothing, for the unit tests of what reads runs.
    #[cfg(test)]
    pub(crate) fn empty() -> RunInfo {
        RunInfo {
            label: "test".into(),
            url: "http://127.0.0.1/test".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            requested_rate: 0.0,
            planned_duration_s: 0.0,
            send_window_s: 0.0,
            elapsed_s: 0.0,
            timeout_s: 0.0,
            max_in_flight: 0,
            interrupted: false,
            pacer_lag_us: Hist::default(),
            engine: default_engine(),
            latency_from: default_latency_from(),
            import: None,
        }
    }
}

fn default_engine() -> String {
    "kvbench".into()
}

fn default_latency_from() -> String {
    "intended".into()
}

/// The input of an imported run and what was skipped, so nothing is lost silently.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ImportInfo {
    /// The files read (several when a label spans runner files).
    pub files: Vec<String>,
    /// Lines read.
    pub lines: u64,
    /// Lines that are not JSON (or not k6's shape), including a truncated last line.
    pub malformed_lines: u64,
    /// Whether the file ended in the middle of a line (a run cut short).
    pub truncated: bool,
    /// Requests whose per-store points were read but whose closing point never came (cut short);
    /// not in any count.
    pub incomplete_requests: u64,
    /// The malformed lines by reason (`not_k6_json`, `line_too_long`, `time_outside_run`,
    /// `value_out_of_range`, ...); they add up to `malformed_lines`. Absent in older reports.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused: BTreeMap<String, u64>,
    /// Kept answers only (`kvbench import worker`): answers the worker measured but could not
    /// keep, as the stream's end line counts them (in no other count). Absent when the worker
    /// does not count them (older ones) and for k6 imports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_failed: Option<u64>,
}

/// Counters and histograms for a set of requests (all, or one label).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Section {
    /// Requests the pacer scheduled.
    pub scheduled: u64,
    /// Scheduled minus `not_sent`.
    pub sent: u64,
    /// 200 with a conforming `/test` body.
    pub answered: u64,
    /// Of `answered`: answers of a new instance (a cold isolate, a new probe object). Their
    /// store latencies are in the stores' `cold_*` histograms only; every other latency of a
    /// store is a warm answer's. Counts, bytes and billing units are of every answer.
    #[serde(default)]
    pub cold: u64,
    /// Requests that did not yield an answer, by kind (`not_sent`, `http_401`, `timeout`, ...);
    /// each kind is the client's or the worker's ([`crate::sample::Side::of_name`]).
    pub failures: BTreeMap<String, u64>,
    /// Up to three distinct messages per failure kind.
    pub failure_examples: BTreeMap<String, Vec<String>>,
    /// Sent requests per second of send window; adds up under merge (concurrent vantage points).
    pub achieved_rate: f64,
    /// Longest send window among the runs, s.
    pub send_window_s: f64,
    /// End-to-end latency from the intended start, µs, of every request that got an HTTP answer.
    pub latency_us: Hist,
    pub stores: BTreeMap<String, StoreStats>,
    /// Answers by how many other requests their isolate had in flight during them (from the
    /// answers' `concurrent`; absent for answers that do not report it, k6's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub concurrent: BTreeMap<u32, u64>,
    /// Answers left out because more other requests than `--max-concurrent` overlapped them.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub excluded_concurrent: u64,
    /// Requests sent a second time, on a new connection, because the connection they were first
    /// sent on (one that had waited idle) failed before any byte of an answer — the server's idle
    /// close crossing the request. Each is counted once more by how it then ended (answered or a
    /// failure); its latency runs from its intended start, the failed attempt included. 0 in
    /// older files and for imports (k6 reports no such thing).
    #[serde(default)]
    pub retried: u64,
}

/// What one store did across the answers of a section.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StoreStats {
    /// Answers that mentioned this store.
    pub answers: u64,
    /// Reads attempted (successful + failed).
    pub reads: u64,
    /// Writes attempted (successful + failed).
    pub writes: u64,
    /// Successful reads of warm answers, µs as timed by the worker.
    pub read_us: Hist,
    pub read_hit_us: Hist,
    pub read_miss_us: Hist,
    /// Successful writes of warm answers, µs.
    pub write_us: Hist,
    /// Metadata exchanges (e.g. Deno KV's) of warm answers, µs; empty for stores that have none.
    pub connect_us: Hist,
    /// The same of cold answers (the section's `cold`): reads, writes and metadata exchanges of
    /// an instance's first answer, which opened its connections afresh.
    #[serde(default)]
    pub cold_read_us: Hist,
    #[serde(default)]
    pub cold_write_us: Hist,
    #[serde(default)]
    pub cold_connect_us: Hist,
    /// The store's own time of the successful reads and writes of warm answers, where it
    /// reports one (D1's SQL time, no network), µs: beside `read_us`/`write_us`, what of them
    /// was the store's. Empty (and left out of report.json) for stores that report none.
    #[serde(default, skip_serializing_if = "Hist::is_empty")]
    pub read_sql_us: Hist,
    #[serde(default, skip_serializing_if = "Hist::is_empty")]
    pub write_sql_us: Hist,
    /// Value sizes of successful reads and writes, bytes (a failed operation moved none that
    /// anyone bills).
    pub read_bytes: Hist,
    pub write_bytes: Hist,
    /// Billing units counted per operation from the real value size:
    /// max(1, ceil(bytes / 4096)) per read, max(1, ceil(bytes / 1024)) per write.
    pub read_units_4k: u64,
    pub write_units_1k: u64,
    /// Store errors by `kind/op`.
    pub errors: BTreeMap<String, u64>,
    /// Of `reads` / `writes`: the ones that failed (they reached the store, so they have a time,
    /// but are not billed as successful operations).
    #[serde(default)]
    pub failed_reads: u64,
    #[serde(default)]
    pub failed_writes: u64,
    /// Σ max(1, ceil(bytes / 1024)) over the failed writes (part of `write_units_1k`).
    #[serde(default)]
    pub failed_write_units_1k: u64,
    /// Answers whose store setup (`connect_ms`) succeeded, so its read reached the store: the
    /// connections a per-connection charge (Redis `SELECT`) counts.
    #[serde(default)]
    pub connected: u64,
    /// Calls that timed out and were waited for afterwards (outside any span) before the next
    /// store: those that then finished, and those still running when the wait ended.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub abandoned_finished: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub abandoned_running: u64,
}

impl StoreStats {
    pub fn errors_for(&self, write: bool) -> u64 {
        self.errors
            .iter()
            .filter(|(k, _)| k.ends_with("/write") == write)
            .fold(0, |a, (_, n)| a.saturating_add(*n))
    }
}

/// Per colo.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ColoStats {
    pub answered: u64,
    /// Of `answered`: cold answers (their reads are not in `read_us`).
    #[serde(default)]
    pub cold: u64,
    pub latency_us: Hist,
    /// Successful read latency of warm answers per store, µs.
    pub read_us: BTreeMap<String, Hist>,
}

/// Per-interval histograms, aligned on the time since each run's start.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Timeline {
    pub interval_s: f64,
    pub intervals: Vec<Interval>,
}

/// One interval (by intended start time).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Interval {
    pub start_s: f64,
    pub scheduled: u64,
    pub failed: u64,
    /// Cold answers (their reads are in `cold_read_us` only).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub cold: u64,
    pub latency_us: Packed,
    /// Successful read latency of warm answers per store, µs.
    pub read_us: BTreeMap<String, Packed>,
    /// Successful reads of warm answers that found the key (`hit: true`), per store, µs.
    #[serde(default)]
    pub read_hit_us: BTreeMap<String, Packed>,
    /// Successful write latency of warm answers per store, µs.
    #[serde(default)]
    pub write_us: BTreeMap<String, Packed>,
    /// Successful read latency of cold answers per store, µs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cold_read_us: BTreeMap<String, Packed>,
}

impl Section {
    /// Every failure counted (a sum [`Report::check`] found to fit when the report was read).
    pub fn failed(&self) -> u64 {
        self.failures.values().fold(0, |a, n| a.saturating_add(*n))
    }

    pub fn not_sent(&self) -> u64 {
        self.failures.get("not_sent").copied().unwrap_or(0)
    }

    /// Failed requests on kvbench's side: no byte of an answer reached it (`not_sent`,
    /// `connect`, `transport`, `timeout`, `cancelled`).
    pub fn client_failed(&self) -> u64 {
        self.failed_on(Side::Client)
    }

    /// Failed requests the worker answered, but not with a `/test` answer (`http_<status>`,
    /// `malformed`, `truncated`).
    pub fn worker_failed(&self) -> u64 {
        self.failed_on(Side::Worker)
    }

    fn failed_on(&self, side: Side) -> u64 {
        self.failures
            .iter()
            .filter(|(kind, _)| Side::of_name(kind) == side)
            .fold(0, |a, (_, n)| a.saturating_add(*n))
    }
}

impl Report {
    /// A report of nothing, for the unit tests of what derives from one.
    #[cfg(test)]
    pub(crate) fn empty() -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            tool: "test".into(),
            runs: Vec::new(),
            total: Section::default(),
            labels: BTreeMap::new(),
            colos: BTreeMap::new(),
            vantages: BTreeMap::new(),
            timeline: Timeline::default(),
            days: Daily::default(),
            cost: None,
            summary: None,
            provenance: None,
        }
    }

    /// Answers the worker measured but could not keep, over the runs that count them (`None`:
    /// no run's source counts them — a load run's answers are never kept).
    pub fn keep_failed(&self) -> Option<u64> {
        self.runs
            .iter()
            .filter_map(|r| r.import.as_ref()?.keep_failed)
            .reduce(|a, b| a.saturating_add(b))
    }

    /// Reads a report.json from anyone ([`Report::from_json`]): an error names the file, then
    /// the field (`report.json: total.stores.kv.read_hit_us: histogram declares ...`).
    pub fn read(path: &Path) -> anyhow::Result<Report> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        #[derive(Deserialize)]
        struct Version {
            schema_version: u32,
        }
        let v: Version = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a kvbench report.json", path.display()))?;
        if v.schema_version != SCHEMA_VERSION {
            bail!(
                "{} has schema_version {}, this kvbench reads {}",
                path.display(),
                v.schema_version,
                SCHEMA_VERSION
            );
        }
        Report::from_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

/// The cost projection and everything it was computed from (see [`crate::cost`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Requests per second the month is projected at.
    pub project_rps: f64,
    /// `measured` (the run's achieved rate) or `--project-rps`.
    pub rps_source: String,
    /// `--redis-db`: the database number `REDIS_URL` names (non-zero: a `SELECT` per connection).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redis_db: u32,
    /// Keys a store holds at most: with each store's mean value size, its data at rest.
    #[serde(default)]
    pub keys: u64,
    pub seconds_per_month: f64,
    pub lines: Vec<CostLine>,
    /// The worker itself on its Workers plan (absent with a price table that has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerLine>,
}

/// The Workers plan's month: its price, the requests and CPU time beyond what it includes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerLine {
    pub plan: String,
    pub as_of: String,
    pub source: String,
    pub minimum_usd: f64,
    pub requests_per_month: f64,
    pub included_requests: f64,
    pub requests_usd: f64,
    pub cpu_ms_per_request: f64,
    /// Whether `cpu_ms_per_request` was given (`--worker-cpu-ms`) or is the default assumption.
    pub cpu_given: bool,
    pub cpu_ms_per_month: f64,
    pub included_cpu_ms: f64,
    pub cpu_usd: f64,
    pub monthly_usd: f64,
}

/// One store × plan of the projection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostLine {
    pub store: String,
    pub plan: String,
    pub as_of: String,
    pub source: String,
    /// The plan is no longer offered ([`crate::cost::Price::historical`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub historical: bool,
    /// Measured: successful operations and their billing units per answered request.
    pub reads_per_request: f64,
    pub writes_per_request: f64,
    pub read_units_per_request: f64,
    pub write_units_per_request: f64,
    /// Failed operations per answered request, not priced (shown apart).
    #[serde(default)]
    pub failed_reads_per_request: f64,
    #[serde(default)]
    pub failed_writes_per_request: f64,
    /// Bytes of values read and written per answered request.
    #[serde(default)]
    pub bytes_per_request: f64,
    pub read_per_million: f64,
    pub write_per_million: f64,
    #[serde(default)]
    pub bandwidth_per_gb: f64,
    #[serde(default)]
    pub included_gb_per_month: f64,
    pub monthly_read_units: f64,
    pub monthly_write_units: f64,
    /// GB of values moved per month, and what the part beyond the included amount costs.
    #[serde(default)]
    pub monthly_gb: f64,
    #[serde(default)]
    pub bandwidth_usd: f64,
    /// The plan's fixed monthly price (a fixed plan), included in `monthly_usd`.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub fixed_usd: f64,
    /// GB at rest (the deployment's keys × the mean value size written) and what it costs
    /// beyond the plan's included storage.
    #[serde(default)]
    pub stored_gb: f64,
    #[serde(default)]
    pub storage_usd: f64,
    /// Fixed price, operations, bandwidth and storage.
    pub monthly_usd: f64,
    /// Why this month does not fit the plan (a limit it passes): then it is no store's cheapest
    /// plan. Absent when it fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_limit: Option<String>,
    /// For stores priced per unit of their description: each unit's quantity and price.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<UnitLine>,
}

/// One billing unit of a store's description in a cost line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitLine {
    pub unit: String,
    pub per_request: f64,
    /// USD per million; `null` when the price table has none for this unit (priced at 0).
    pub per_million: Option<f64>,
    pub monthly_units: f64,
    /// Units the plan includes per month (taken off before pricing), and what is left to pay.
    #[serde(default)]
    pub included_per_month: f64,
    #[serde(default)]
    pub billed_units: f64,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero_f64(n: &f64) -> bool {
    *n == 0.0
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Percentiles of one histogram in milliseconds, as every printer shows them: `null` when it is
/// empty, and a percentile `null` when its count cannot support it at 95%
/// ([`crate::interval::supports`]: p50 needs 6 values, p90 36, p95 72, p99 368).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Quantiles {
    pub count: u64,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub mean_ms: Option<f64>,
}

impl Quantiles {
    pub fn of(h: &Hist) -> Quantiles {
        if h.is_empty() {
            return Quantiles::default();
        }
        let ms = |us: u64| Some(us as f64 / 1000.0);
        let h = h.for_reading();
        let n = h.len();
        // A percentile its sample cannot bound at the report's level is no figure (the answer's
        // rule): printed as `few`.
        let at = |p: f64| {
            crate::interval::supports(n, p, crate::interval::LEVEL)
                .then(|| h.quantile(p) as f64 / 1000.0)
        };
        Quantiles {
            count: n,
            p50_ms: at(0.50),
            p90_ms: at(0.90),
            p95_ms: at(0.95),
            p99_ms: at(0.99),
            max_ms: ms(h.max()),
            // Rounded to the microsecond like the rest, so printed and stored values agree.
            mean_ms: Some((h.mean()).round() / 1000.0),
        }
    }
}

/// One row of the latency table: end to end, or one store's reads/writes/connects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyRow {
    /// `end-to-end`, or `<store> read all|read hit|read miss|write|connect` (warm answers), then
    /// `<store> read cold|write cold|connect cold` (cold answers, when there are any).
    pub name: String,
    /// The store, when the row is one store's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// Failed operations of this kind (requests for end-to-end); `null` for rows that do not
    /// count errors (hit/miss/connect).
    pub errors: Option<u64>,
    #[serde(flatten)]
    pub quantiles: Quantiles,
}

/// Per label: the vantage point's counts and end-to-end percentiles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelSummary {
    pub sent: u64,
    pub answered: u64,
    pub failed: u64,
    /// Of `failed`: the client's and the worker's ([`Section::client_failed`]).
    #[serde(default)]
    pub client_failed: u64,
    #[serde(default)]
    pub worker_failed: u64,
    /// [`Section::retried`].
    #[serde(default)]
    pub retried: u64,
    pub achieved_rate: f64,
    pub latency: Quantiles,
    /// Successful reads of warm answers per store.
    pub read: BTreeMap<String, Quantiles>,
    /// Successful reads of cold answers per store (stores with any).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cold_read: BTreeMap<String, Quantiles>,
}

/// Per colo: answers, end-to-end and per-store read percentiles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColoSummary {
    pub answered: u64,
    pub latency: Quantiles,
    pub read: BTreeMap<String, Quantiles>,
}

/// The numbers every printer shows, derived from the histograms.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Summary {
    /// All runs' failed requests, the client's and the worker's ([`Section::client_failed`]),
    /// and the requests retried on a new connection ([`Section::retried`]).
    #[serde(default)]
    pub client_failed: u64,
    #[serde(default)]
    pub worker_failed: u64,
    #[serde(default)]
    pub retried: u64,
    /// All runs: end-to-end, then per store (in name order) its read/hit/miss/write/connect rows
    /// of warm answers and its cold rows. A store's hit/miss rows are left out when it reports
    /// no hit/miss, write when it made no write, connect when it made no connect, a cold row
    /// when no cold answer has one.
    pub latency: Vec<LatencyRow>,
    pub labels: BTreeMap<String, LabelSummary>,
    pub colos: BTreeMap<String, ColoSummary>,
    /// The answer first: each store ranked by its read p50, every percentile with its 95%
    /// interval ([`crate::comparison`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<crate::comparison::Comparison>,
    /// What went wrong, explained: the failure and error kinds over 1% of their requests or
    /// operations, the most common first ([`crate::trouble`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trouble: Vec<crate::trouble::Trouble>,
}

impl Summary {
    pub fn of(report: &Report) -> Summary {
        let t = &report.total;
        Summary {
            client_failed: t.client_failed(),
            worker_failed: t.worker_failed(),
            retried: t.retried,
            latency: latency_rows(t),
            labels: report
                .labels
                .iter()
                .map(|(label, s)| (label.clone(), LabelSummary::of(s)))
                .collect(),
            colos: report
                .colos
                .iter()
                .map(|(colo, c)| (colo.clone(), ColoSummary::of(c)))
                .collect(),
            comparison: crate::comparison::of(report),
            trouble: crate::trouble::of(report),
        }
    }
}

/// The rows of [`Summary::latency`]: end-to-end, then each store's shown rows.
pub(crate) fn latency_rows(t: &Section) -> Vec<LatencyRow> {
    let mut latency = vec![LatencyRow {
        name: "end-to-end".into(),
        store: None,
        errors: Some(t.failed()),
        quantiles: Quantiles::of(&t.latency_us),
    }];
    for (name, s) in &t.stores {
        let has_hit_miss = !(s.read_hit_us.is_empty() && s.read_miss_us.is_empty());
        let rows = [
            ("read all", &s.read_us, Some(s.errors_for(false)), true),
            ("read hit", &s.read_hit_us, None, has_hit_miss),
            ("read miss", &s.read_miss_us, None, has_hit_miss),
            ("write", &s.write_us, Some(s.errors_for(true)), s.writes > 0),
            ("connect", &s.connect_us, None, !s.connect_us.is_empty()),
            ("read sql", &s.read_sql_us, None, !s.read_sql_us.is_empty()),
            (
                "write sql",
                &s.write_sql_us,
                None,
                !s.write_sql_us.is_empty(),
            ),
            (
                "read cold",
                &s.cold_read_us,
                None,
                !s.cold_read_us.is_empty(),
            ),
            (
                "write cold",
                &s.cold_write_us,
                None,
                !s.cold_write_us.is_empty(),
            ),
            (
                "connect cold",
                &s.cold_connect_us,
                None,
                !s.cold_connect_us.is_empty(),
            ),
        ];
        for (set, h, errors, shown) in rows {
            if shown {
                latency.push(LatencyRow {
                    name: format!("{name} {set}"),
                    store: Some(name.clone()),
                    errors,
                    quantiles: Quantiles::of(h),
                });
            }
        }
    }
    latency
}

impl LabelSummary {
    fn of(s: &Section) -> LabelSummary {
        LabelSummary {
            sent: s.sent,
            answered: s.answered,
            failed: s.failed(),
            client_failed: s.client_failed(),
            worker_failed: s.worker_failed(),
            retried: s.retried,
            achieved_rate: s.achieved_rate,
            latency: Quantiles::of(&s.latency_us),
            read: s
                .stores
                .iter()
                .map(|(k, s)| (k.clone(), Quantiles::of(&s.read_us)))
                .collect(),
            cold_read: s
                .stores
                .iter()
                .filter(|(_, s)| !s.cold_read_us.is_empty())
                .map(|(k, s)| (k.clone(), Quantiles::of(&s.cold_read_us)))
                .collect(),
        }
    }
}

impl ColoSummary {
    fn of(c: &ColoStats) -> ColoSummary {
        ColoSummary {
            answered: c.answered,
            latency: Quantiles::of(&c.latency_us),
            read: c
                .read_us
                .iter()
                .map(|(k, h)| (k.clone(), Quantiles::of(h)))
                .collect(),
        }
    }
}

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
    /// Summing the timelines would pass a limit.
    #[error("the timelines: {0}")]
    Timeline(AddError),
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
    /// union of their samples. Derived parts (cost, summary) are dropped for the caller to
    /// recompute over the merged mix. A count that would pass [`MAX_COUNT`](crate::hist::MAX_COUNT) is an error naming
    /// the report and the field, never a wrap. Memory: the sum is held at rest between
    /// additions, so at most one group's histograms are dense at a time (docs/report.md).
    pub fn merge(reports: Vec<Report>) -> Result<Report, MergeError> {
        let mut iter = reports.into_iter();
        let mut out = iter.next().ok_or(MergeError::Empty)?;
        out.cost = None;
        out.summary = None;
        out.tool = tool_name();
        let mut timelines = vec![std::mem::take(&mut out.timeline)];
        for (i, r) in iter.enumerate() {
            let at = |error: AddError| MergeError::Add {
                report: i + 2,
                error,
            };
            timelines.push(out.add(r).map_err(at)?);
        }
        out.timeline = Timeline::sum(timelines).map_err(|e| match e {
            AddOrMismatch::Add(error) => MergeError::Timeline(error),
            AddOrMismatch::Mismatch(a, b) => MergeError::IntervalMismatch(a, b),
        })?;
        Ok(out)
    }

    /// Adds everything of `r` but its timeline, which it hands back. What many runs add up to
    /// stays at rest between additions (the add methods freeze each sum as they go): a fleet's
    /// vantage points share colos, and a file may name any number of stores.
    fn add(&mut self, r: Report) -> Result<Timeline, AddError> {
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
        Ok(r.timeline)
    }
}

/// `kvbench <version>`, as written into `tool`.
pub fn tool_name() -> String {
    format!("kvbench {}", env!("CARGO_PKG_VERSION"))
}
