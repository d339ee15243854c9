//! The report: a serializable model (the `report.json` schema, see REPORT.md) that runs produce,
//! `merge` adds up and `report` re-renders, plus the terminal rendering as a pure function over
//! `impl Write`.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

use crate::cost::Estimate;
use crate::hist::{fmt_ms, Hist, Packed};

/// Bumped whenever a field changes meaning or is removed; readers refuse other versions.
pub const SCHEMA_VERSION: u32 = 1;

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
    pub timeline: Timeline,
    /// Derived from `total` and a price table when the file was written; recomputed on re-render.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Estimate>,
}

/// How one run was configured and how it went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub label: String,
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
    /// How late the pacer woke for each request, µs.
    pub pacer_lag_us: Hist,
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
    /// Requests that did not yield an answer, by kind (`not_sent`, `http_401`, `timeout`, ...).
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
    /// Successful reads, µs as timed by the worker.
    pub read_us: Hist,
    pub read_hit_us: Hist,
    pub read_miss_us: Hist,
    /// Successful writes, µs.
    pub write_us: Hist,
    /// Metadata exchanges (e.g. Deno KV's), µs; empty for stores that have none.
    pub connect_us: Hist,
    /// Value sizes of reads and writes, bytes.
    pub read_bytes: Hist,
    pub write_bytes: Hist,
    /// Billing units counted per operation from the real value size:
    /// max(1, ceil(bytes / 4096)) per read, max(1, ceil(bytes / 1024)) per write.
    pub read_units_4k: u64,
    pub write_units_1k: u64,
    /// Store errors by `kind/op`.
    pub errors: BTreeMap<String, u64>,
}

impl StoreStats {
    pub fn errors_for(&self, write: bool) -> u64 {
        self.errors
            .iter()
            .filter(|(k, _)| k.ends_with("/write") == write)
            .map(|(_, n)| n)
            .sum()
    }
}

/// Per colo.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ColoStats {
    pub answered: u64,
    pub latency_us: Hist,
    /// Successful read latency per store, µs.
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
    pub latency_us: Packed,
    /// Successful read latency per store, µs.
    pub read_us: BTreeMap<String, Packed>,
    /// Successful write latency per store, µs.
    #[serde(default)]
    pub write_us: BTreeMap<String, Packed>,
}

impl Section {
    pub fn failed(&self) -> u64 {
        self.failures.values().sum()
    }

    pub fn not_sent(&self) -> u64 {
        self.failures.get("not_sent").copied().unwrap_or(0)
    }
}

impl Report {
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
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a valid report", path.display()))
    }

    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

/// `p50 p90 p95 p99 max mean` columns, ms.
fn quantile_cells(h: &Hist) -> String {
    if h.is_empty() {
        return format!(
            "{:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
            "-", "-", "-", "-", "-", "-"
        );
    }
    format!(
        "{:>8} {:>8} {:>8} {:>8} {:>8} {:>8.2}",
        fmt_ms(h.quantile(0.50)),
        fmt_ms(h.quantile(0.90)),
        fmt_ms(h.quantile(0.95)),
        fmt_ms(h.quantile(0.99)),
        fmt_ms(h.max()),
        h.mean() / 1000.0
    )
}

fn p50_p99(h: &Hist) -> String {
    if h.is_empty() {
        format!("{:>8} {:>8}", "-", "-")
    } else {
        format!(
            "{:>8} {:>8}",
            fmt_ms(h.quantile(0.5)),
            fmt_ms(h.quantile(0.99))
        )
    }
}

/// Renders the terminal report.
pub fn render(report: &Report, out: &mut impl Write) -> io::Result<()> {
    let t = &report.total;
    let labels: Vec<&str> = report.labels.keys().map(String::as_str).collect();
    writeln!(
        out,
        "kvbench report ({} run(s); labels: {})",
        report.runs.len(),
        labels.join(", ")
    )?;
    for r in &report.runs {
        writeln!(
            out,
            "  run {:<12} {} started {}: {:.1} req/s requested for {}, sent for {:.1} s{}",
            r.label,
            r.url,
            r.started_at,
            r.requested_rate,
            humantime::format_duration(std::time::Duration::from_secs_f64(r.planned_duration_s)),
            r.send_window_s,
            if r.interrupted {
                " (INTERRUPTED: partial report)"
            } else {
                ""
            }
        )?;
        writeln!(
            out,
            "      pacer lag ms: p50 {} p99 {} max {}",
            fmt_ms(r.pacer_lag_us.quantile(0.5)),
            fmt_ms(r.pacer_lag_us.quantile(0.99)),
            fmt_ms(r.pacer_lag_us.max())
        )?;
    }
    writeln!(
        out,
        "achieved rate {:.2} req/s over {:.1} s; scheduled {}, sent {}, answered {}, failed {} (not sent {})",
        t.achieved_rate,
        t.send_window_s,
        t.scheduled,
        t.sent,
        t.answered,
        t.failed(),
        t.not_sent()
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<22} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7}",
        "latency (ms)", "count", "p50", "p90", "p95", "p99", "max", "mean", "errors"
    )?;
    writeln!(
        out,
        "{:<22} {:>8} {} {:>7}",
        "end-to-end (intended)",
        t.latency_us.len(),
        quantile_cells(&t.latency_us),
        t.failed()
    )?;
    for (name, s) in &t.stores {
        let read_errors = s.errors_for(false);
        let rows = [
            ("read all", &s.read_us, read_errors.to_string()),
            ("read hit", &s.read_hit_us, String::new()),
            ("read miss", &s.read_miss_us, String::new()),
            ("write", &s.write_us, s.errors_for(true).to_string()),
            ("connect", &s.connect_us, String::new()),
        ];
        for (set, h, errors) in rows {
            if set == "connect" && h.is_empty() {
                continue;
            }
            // Stores that do not report hit/miss (hit = null) get no empty hit/miss rows.
            if (set == "read hit" || set == "read miss")
                && s.read_hit_us.is_empty()
                && s.read_miss_us.is_empty()
            {
                continue;
            }
            if set == "write" && s.writes == 0 {
                continue;
            }
            writeln!(
                out,
                "{:<22} {:>8} {} {:>7}",
                format!("{name} {set}"),
                h.len(),
                quantile_cells(h),
                errors
            )?;
        }
    }
    if t.failures.is_empty() && t.stores.values().all(|s| s.errors.is_empty()) {
        writeln!(out, "\nno errors")?;
    } else {
        writeln!(out, "\nerrors by kind:")?;
        for (kind, n) in &t.failures {
            let example = t.failure_examples.get(kind).and_then(|e| e.first());
            match example {
                Some(e) if !e.is_empty() => writeln!(out, "  request {kind:<16} {n:>8}  e.g. {e}")?,
                _ => writeln!(out, "  request {kind:<16} {n:>8}")?,
            }
        }
        for (store, s) in &t.stores {
            for (kind, n) in &s.errors {
                writeln!(out, "  {store:<7} {kind:<16} {n:>8}")?;
            }
        }
    }
    if report.labels.len() > 1 {
        writeln!(
            out,
            "\n{:<16} {:>8} {:>8} {:>8} {:>10} {:>8} {:>8}",
            "label", "sent", "answered", "failed", "rate/s", "e2e p50", "e2e p99"
        )?;
        for (label, s) in &report.labels {
            writeln!(
                out,
                "{:<16} {:>8} {:>8} {:>8} {:>10.2} {}",
                label,
                s.sent,
                s.answered,
                s.failed(),
                s.achieved_rate,
                p50_p99(&s.latency_us)
            )?;
        }
    }
    if !report.colos.is_empty() {
        let stores: Vec<&String> = t.stores.keys().collect();
        write!(
            out,
            "\n{:<8} {:>8} {:>17}",
            "colo", "answered", "e2e p50/p99 ms"
        )?;
        for s in &stores {
            write!(out, " {:>17}", format!("{s} p50/p99"))?;
        }
        writeln!(out)?;
        for (colo, c) in &report.colos {
            write!(
                out,
                "{:<8} {:>8} {}",
                colo,
                c.answered,
                p50_p99(&c.latency_us)
            )?;
            for s in &stores {
                let h = c.read_us.get(*s).cloned().unwrap_or_default();
                write!(out, " {}", p50_p99(&h))?;
            }
            writeln!(out)?;
        }
    }
    if let Some(cost) = &report.cost {
        writeln!(out)?;
        crate::cost::render(cost, out)?;
    }
    Ok(())
}
