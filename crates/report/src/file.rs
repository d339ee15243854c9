//! The report.json file: reading one from anyone, so that whatever it holds ends in an error
//! naming the field — never a panic, a wrapped count or an allocation sized by the file's say-so —
//! and writing one, the measured model with what derives from it beside it. Every integer is at
//! most [`MAX_COUNT`] (so any two add without overflow), every sum a printer takes of a map of
//! counts fits, rates are finite and not negative, the timeline's intervals follow one another as
//! kvbench writes them (so a merge allocates no more intervals than its inputs hold), and each
//! histogram's header is checked before it is decoded ([`crate::v2`]). What derives is not read
//! back: it is derived again from what was measured.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::cost::Estimate;
use crate::daily::Daily;
use crate::derived::Analysed;
use crate::hist::MAX_COUNT;
use crate::report::{
    ColoStats, Provenance, Report, RunInfo, Section, Timeline, VantagePoint, SCHEMA_VERSION,
};
use crate::stretch::Stretches;
use crate::summary::Summary;

impl Report {
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
}

impl Analysed {
    /// report.json: the measured model, then what derives from it, as [`Serialize`] lays it out.
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

/// report.json's layout: the measured fields in [`Report`]'s order, the derived `cost` and
/// `summary` beside them, before `provenance` (where they have always been in the file).
#[derive(Serialize)]
struct Layout<'a> {
    schema_version: u32,
    tool: &'a str,
    runs: &'a [RunInfo],
    total: &'a Section,
    labels: &'a BTreeMap<String, Section>,
    colos: &'a BTreeMap<String, ColoStats>,
    #[serde(skip_serializing_if = "no_vantages")]
    vantages: &'a BTreeMap<String, VantagePoint>,
    timeline: &'a Timeline,
    #[serde(skip_serializing_if = "no_days")]
    days: &'a Daily,
    #[serde(skip_serializing_if = "no_stretches")]
    stretches: &'a Stretches,
    #[serde(skip_serializing_if = "Option::is_none")]
    cost: Option<&'a Estimate>,
    summary: &'a Summary,
    #[serde(skip_serializing_if = "Option::is_none")]
    provenance: Option<&'a Provenance>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    freshness: &'a [crate::freshness::Round],
}

fn no_vantages(v: &&BTreeMap<String, VantagePoint>) -> bool {
    v.is_empty()
}

fn no_days(d: &&Daily) -> bool {
    d.is_empty()
}

fn no_stretches(s: &&Stretches) -> bool {
    s.is_empty()
}

impl Serialize for Analysed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Destructured without `..`: a field added to the model must be laid out here too.
        let Report {
            schema_version,
            tool,
            runs,
            total,
            labels,
            colos,
            vantages,
            timeline,
            days,
            stretches,
            provenance,
            freshness,
        } = &self.report;
        Layout {
            schema_version: *schema_version,
            tool,
            runs,
            total,
            labels,
            colos,
            vantages,
            timeline,
            days,
            stretches,
            cost: self.derived.cost.as_ref(),
            summary: &self.derived.summary,
            provenance: provenance.as_ref(),
            freshness,
        }
        .serialize(s)
    }
}

/// Why a report.json cannot be read: where (a path into it) and what.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{at}: {what}")]
pub struct Invalid {
    pub at: String,
    pub what: String,
}

fn invalid(at: impl Into<String>, what: impl Into<String>) -> Invalid {
    Invalid {
        at: at.into(),
        what: what.into(),
    }
}

impl Report {
    /// Reads a report from JSON written by anyone: every integer checked first, then the
    /// typed fields (an error names the field's path), then [`Report::check`]. Memory: the JSON
    /// tree (a few times the text), then the report, whose histograms are held at rest.
    pub fn from_json(text: &str) -> Result<Report, Invalid> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| invalid("(the file)", e.to_string()))?;
        let mut path = Vec::new();
        integers(&value, &mut path)?;
        let report: Report = serde_path_to_error::deserialize(value)
            .map_err(|e| invalid(e.path().to_string(), e.into_inner().to_string()))?;
        report.check()?;
        Ok(report)
    }

    /// What the types cannot say: rates finite and not negative, sums of count maps within
    /// `u64`, the timeline's intervals in kvbench's order.
    pub fn check(&self) -> Result<(), Invalid> {
        section(&self.total, "total")?;
        for (label, s) in &self.labels {
            section(s, &format!("labels.{label}"))?;
        }
        let mut keep_failed: u64 = self.total.scheduled;
        for (i, run) in self.runs.iter().enumerate() {
            rate(run.requested_rate, &format!("runs[{i}].requested_rate"))?;
            let n = run
                .import
                .as_ref()
                .and_then(|im| im.keep_failed)
                .unwrap_or(0);
            keep_failed = keep_failed.checked_add(n).ok_or_else(|| {
                invalid(
                    format!("runs[{i}].import.keep_failed"),
                    "with total.scheduled and the other runs', more than 2^64",
                )
            })?;
        }
        timeline(&self.timeline)?;
        stretches(&self.stretches)
    }
}

/// Every integer in the tree at most [`MAX_COUNT`], or where the first one is not.
fn integers(v: &Value, path: &mut Vec<String>) -> Result<(), Invalid> {
    match v {
        Value::Number(n) if n.as_u64().is_some_and(|n| n > MAX_COUNT) => Err(invalid(
            path.join("."),
            format!("{n} is more than {MAX_COUNT} (2^53), beyond any count kvbench writes"),
        )),
        Value::Array(items) => items.iter().enumerate().try_for_each(|(i, item)| {
            path.push(format!("[{i}]"));
            let r = integers(item, path);
            path.pop();
            r
        }),
        Value::Object(map) => map.iter().try_for_each(|(k, item)| {
            path.push(k.clone());
            let r = integers(item, path);
            path.pop();
            r
        }),
        _ => Ok(()),
    }
}

fn rate(value: f64, at: &str) -> Result<(), Invalid> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(invalid(
            at,
            format!("{value} is not a rate (finite, 0 or more)"),
        ))
    }
}

/// The sum of a map's counts fits a u64 (the printers take it).
fn sum(mut counts: impl Iterator<Item = u64>, at: &str) -> Result<(), Invalid> {
    counts
        .try_fold(0u64, |a, n| a.checked_add(n))
        .map(|_| ())
        .ok_or_else(|| invalid(at, "its counts add up to more than 2^64"))
}

fn section(s: &Section, at: &str) -> Result<(), Invalid> {
    rate(s.achieved_rate, &format!("{at}.achieved_rate"))?;
    rate(s.send_window_s, &format!("{at}.send_window_s"))?;
    sum(s.failures.values().copied(), &format!("{at}.failures"))?;
    for (name, store) in &s.stores {
        sum(
            store.errors.values().copied(),
            &format!("{at}.stores.{name}.errors"),
        )?;
    }
    Ok(())
}

/// Stretches have a length when there are any.
fn stretches(s: &Stretches) -> Result<(), Invalid> {
    if s.is_empty() || (s.stretch_s.is_finite() && s.stretch_s > 0.0) {
        return Ok(());
    }
    Err(invalid(
        "stretches.stretch_s",
        format!(
            "{} is not a length of time (finite, more than 0)",
            s.stretch_s
        ),
    ))
}

/// Interval `i` starts at `i × interval_s`, as the collector writes them.
fn timeline(t: &Timeline) -> Result<(), Invalid> {
    if t.intervals.is_empty() {
        return Ok(());
    }
    if !(t.interval_s.is_finite() && t.interval_s > 0.0) {
        return Err(invalid(
            "timeline.interval_s",
            format!(
                "{} is not a length of time (finite, more than 0)",
                t.interval_s
            ),
        ));
    }
    for (i, iv) in t.intervals.iter().enumerate() {
        let want = i as f64 * t.interval_s;
        if (iv.start_s - want).abs() > 1e-6 * want.max(1.0) {
            return Err(invalid(
                format!("timeline.intervals[{i}].start_s"),
                format!(
                    "{} is not {want} (interval {i} of {} s): kvbench writes the intervals one after another",
                    iv.start_s, t.interval_s
                ),
            ));
        }
    }
    Ok(())
}
