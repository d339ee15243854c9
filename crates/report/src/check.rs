//! A report.json from anyone: read so that whatever it holds ends in an error naming the field
//! — never a panic, a wrapped count or an allocation sized by the file's say-so. Every integer is
//! at most [`MAX_COUNT`] (so any two add without overflow), every sum a printer takes of a map of
//! counts fits, rates are finite and not negative, the timeline's intervals follow one another as
//! kvbench writes them (so a merge allocates no more intervals than its inputs hold), and each
//! histogram's header is checked before it is decoded ([`crate::v2`]). Counts added across
//! reports ([`plus`], [`plus_hist`]) refuse to pass [`MAX_COUNT`].

use serde_json::Value;

use crate::hist::{Hist, MAX_COUNT};
use crate::report::{Report, Section, Timeline};

/// A count that cannot be added: where (its path in report.json), and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{at}: {why}")]
pub struct AddError {
    pub at: String,
    pub why: String,
}

impl AddError {
    /// The same error, one level further down from `parent`.
    pub fn under(self, parent: &str) -> AddError {
        AddError {
            at: format!("{parent}.{}", self.at),
            why: self.why,
        }
    }
}

/// `*into += n`, refused past [`MAX_COUNT`].
pub fn plus(into: &mut u64, n: u64, field: &str) -> Result<(), AddError> {
    match into.checked_add(n).filter(|sum| *sum <= MAX_COUNT) {
        Some(sum) => {
            *into = sum;
            Ok(())
        }
        None => Err(AddError {
            at: field.into(),
            why: format!("{into} + {n} is more than {MAX_COUNT} (2^53), the most kvbench counts"),
        }),
    }
}

/// Histogram addition, refused past [`MAX_COUNT`] samples ([`Hist::try_add`]).
pub fn plus_hist(into: &mut Hist, h: &Hist, field: &str) -> Result<(), AddError> {
    into.try_add(h).map_err(|e| AddError {
        at: field.into(),
        why: e.to_string(),
    })
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
        timeline(&self.timeline)
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
