//! The measured model: what runs and imports measured, as `report.json` holds it (see REPORT.md),
//! with adding reports up in [`merge`]. It knows nothing of what is derived from it (the summary,
//! the comparison, the cost: [`crate::derived`]) nor of printing; reading and writing the file are
//! [`crate::file`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::check::{plus, plus_hist, AddError};
use crate::daily::Daily;
use crate::failure::Side;
use crate::hist::{Hist, Packed};
use crate::stretch::Stretches;

mod merge;
pub use merge::{AddOrMismatch, IntervalSum, MergeError, EXAMPLES_PER_KIND};

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
    /// Each label's warm reads per store over stretches of a few timeline windows
    /// ([`crate::stretch`]): a vantage point's row counts the run-to-run spread from them. Kept
    /// answers' reports only (`kvbench run`'s rows read the timeline).
    #[serde(default, skip_serializing_if = "Stretches::is_empty")]
    pub stretches: Stretches,
    /// Where the figures come from: the stack, the builds, the settings, the raw data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// Freshness rounds as measured (`kvbench fresh`): the freshness table derives from them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub freshness: Vec<crate::freshness::Round>,
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
    /// TTL, order, …); a run's URL query overrides them for its requests.
    #[serde(default, skip_serializing_if = "Settings::is_empty")]
    pub settings: Settings,
    /// Why the worker's build or settings are missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_error: Option<String>,
    /// Where the raw data is: what, and its address (relative to the page, or absolute).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raw: Vec<RawData>,
}

/// The measuring worker's settings, each as text as the page shows it, with the one the cost
/// reads typed: written to report.json as one object of texts, as the worker gave them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(from = "BTreeMap<String, String>", into = "BTreeMap<String, String>")]
pub struct Settings {
    text: BTreeMap<String, String>,
    /// `keys`, the most keys a store holds: `None` when absent or not one count (merged
    /// reports of workers set apart show `1000 | 250`).
    keys: Option<u64>,
}

impl Settings {
    /// `keys` as a count, read once when the settings were made (or changed).
    pub fn keys(&self) -> Option<u64> {
        self.keys
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Sets `name` to `value` (as text), keeping the typed ones in step.
    pub fn insert(&mut self, name: String, value: String) {
        self.text.insert(name, value);
        *self = Settings::from(std::mem::take(&mut self.text));
    }
}

impl std::ops::Deref for Settings {
    type Target = BTreeMap<String, String>;

    fn deref(&self) -> &Self::Target {
        &self.text
    }
}

impl From<BTreeMap<String, String>> for Settings {
    fn from(text: BTreeMap<String, String>) -> Settings {
        let keys = text.get("keys").and_then(|k| k.parse().ok());
        Settings { text, keys }
    }
}

impl<const N: usize> From<[(String, String); N]> for Settings {
    fn from(pairs: [(String, String); N]) -> Settings {
        Settings::from(BTreeMap::from(pairs))
    }
}

impl From<Settings> for BTreeMap<String, String> {
    fn from(s: Settings) -> Self {
        s.text
    }
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
        self.settings = fields("defaults").into();
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
        let mut settings = std::mem::take(&mut self.settings).into();
        for (mine, theirs) in [
            (&mut self.build, other.build),
            (&mut settings, other.settings.into()),
        ] {
            for (k, v) in theirs {
                if mine.len() < PROVENANCE_FIELDS_MAX || mine.contains_key(&k) {
                    both(mine.entry(k).or_default(), &v);
                }
            }
        }
        self.settings = settings.into();
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
    /// This run's warm successful reads per store, µs: a merge of runs keeps each one's, so the
    /// answer shows how far the runs' percentiles lie apart. Empty for kept answers' runs (each
    /// is a vantage point, with rows of its own).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub read_us: BTreeMap<String, Hist>,
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
            read_us: Default::default(),
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
    /// each kind is the client's or the worker's ([`crate::failure::Side::of_name`]).
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
    /// A report of nothing: what `kvbench fresh` adds its rounds to when there is no report yet,
    /// and the unit tests of what derives from one.
    pub fn empty() -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            tool: tool_name(),
            runs: Vec::new(),
            total: Section::default(),
            labels: BTreeMap::new(),
            colos: BTreeMap::new(),
            vantages: BTreeMap::new(),
            timeline: Timeline::default(),
            days: Daily::default(),
            stretches: Stretches::default(),
            provenance: None,
            freshness: Vec::new(),
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
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// `kvbench <version>`, as written into `tool`.
pub fn tool_name() -> String {
    format!("kvbench {}", env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settings are written as the worker gave them, `keys` typed beside its text: a merge of
    /// workers set apart (`250 | 1000`) has no one count, and a change keeps the two in step.
    #[test]
    fn settings_keep_their_text_and_type_the_keys() {
        let json = r#"{"keys":"250","stores":"kv"}"#;
        let s: Settings = serde_json::from_str(json).unwrap();
        assert_eq!(s.keys(), Some(250));
        assert_eq!(serde_json::to_string(&s).unwrap(), json);
        let mut p = Provenance {
            settings: s,
            ..Provenance::default()
        };
        p.add(Provenance {
            settings: [("keys".to_string(), "1000".to_string())].into(),
            ..Provenance::default()
        });
        assert_eq!(p.settings["keys"], "250 | 1000");
        assert_eq!(p.settings.keys(), None);
        p.settings.insert("keys".into(), "7".into());
        assert_eq!(p.settings.keys(), Some(7));
    }
}
