//! One request's result as the report reads it — what `kvbench import` builds for the collector
//! (a run's connections hand over raw results instead, `kvbench::batch`) — and its optional raw
//! rows in `samples.csv`.

use std::io::{self, Write};

use crate::answer::{Answer, StoreResult};
pub use crate::failure::{FailureKind, Side};

/// One scheduled request.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Intended start, microseconds after the run start (from the pacer).
    pub intended_us: u64,
    /// From the intended start to the end of the body (or the failure), microseconds.
    pub latency_us: u64,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A 200 whose body is a conforming `/test` answer.
    Answer(Answer),
    /// Everything else, by kind.
    Failure(Failure),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub kind: FailureKind,
    /// Human-readable reason (error body, parse error), shortened.
    pub detail: String,
}

impl Sample {
    pub fn failure(
        intended_us: u64,
        latency_us: u64,
        kind: FailureKind,
        detail: impl Into<String>,
    ) -> Sample {
        Sample {
            intended_us,
            latency_us,
            outcome: Outcome::Failure(Failure {
                kind,
                detail: detail.into(),
            }),
        }
    }
}

/// Header of `samples.csv`: one row per (request, store) — "long" format, so any number of stores
/// fits; a failed request has one row with an empty store. `retried`: the request was sent a
/// second time on a new connection (its first, kept-alive one was closed under it; the latency
/// covers both).
pub const CSV_HEADER: &str =
    "intended_us,latency_us,outcome,colo,key,store,read_us,hit,value_bytes,write_us,connect_us,store_error,retried\n";

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(ToString::to_string).unwrap_or_default()
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// Writes the rows of one sample (`retried`: see [`CSV_HEADER`]).
pub fn write_csv(out: &mut impl Write, s: &Sample, retried: bool) -> io::Result<()> {
    match &s.outcome {
        Outcome::Failure(f) => write_failure_csv(out, s.intended_us, s.latency_us, f.kind, retried),
        Outcome::Answer(a) => write_answer_csv(
            out,
            (s.intended_us, s.latency_us, retried),
            &a.colo,
            a.key.as_deref(),
            a.stores.iter().map(|(name, r)| (name.as_str(), r)),
        ),
    }
}

/// The one row of a failed request.
pub fn write_failure_csv(
    out: &mut impl Write,
    intended_us: u64,
    latency_us: u64,
    kind: FailureKind,
    retried: bool,
) -> io::Result<()> {
    writeln!(
        out,
        "{intended_us},{latency_us},{},,,,,,,,,,{retried}",
        kind.name()
    )
}

/// One row per store of an answer; `request`: its intended start, latency and whether it was
/// retried.
pub fn write_answer_csv<'s>(
    out: &mut impl Write,
    (intended_us, latency_us, retried): (u64, u64, bool),
    colo: &str,
    key: Option<&str>,
    stores: impl Iterator<Item = (&'s str, &'s StoreResult)>,
) -> io::Result<()> {
    for (store, r) in stores {
        writeln!(
            out,
            "{},{},ok,{},{},{},{},{},{},{},{},{},{}",
            intended_us,
            latency_us,
            csv_field(colo),
            csv_field(key.unwrap_or("")),
            csv_field(store),
            opt(&r.read_us),
            opt(&r.hit),
            opt(&r.value_bytes),
            opt(&r.write_us),
            opt(&r.connect_us),
            csv_field(&r.error.as_ref().map(|e| e.key()).unwrap_or_default()),
            retried,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_table() {
        use Side::{Client, Worker};
        let cases = [
            (FailureKind::NotSent, "not_sent", false, Client),
            (FailureKind::Status(401), "http_401", true, Worker),
            (FailureKind::Status(503), "http_503", true, Worker),
            (FailureKind::Timeout, "timeout", false, Client),
            (FailureKind::Connect, "connect", false, Client),
            (FailureKind::Transport, "transport", false, Client),
            (FailureKind::Truncated, "truncated", false, Worker),
            (FailureKind::Malformed, "malformed", true, Worker),
            (FailureKind::Cancelled, "cancelled", false, Client),
        ];
        for (kind, name, answered, side) in cases {
            assert_eq!(kind.name(), name);
            assert_eq!(kind.answered(), answered, "{name}");
            assert_eq!(kind.side(), side, "{name}");
            assert_eq!(FailureKind::from_name(name), Some(kind), "{name}");
            assert_eq!(Side::of_name(name), side, "{name}");
        }
        for unknown in ["http_", "http_x", "bogus", ""] {
            assert_eq!(FailureKind::from_name(unknown), None, "{unknown}");
            assert_eq!(Side::of_name(unknown), Client, "{unknown}");
        }
    }

    #[test]
    fn csv_rows() {
        let a = crate::answer::parse(
            br#"{"key":"k,1","colo":"FRA","stores":{"kv":{"read_ms":1.5,"hit":true,"value_bytes":10},
               "up":{"error":{"kind":"timeout","op":"read"}}}}"#,
        )
        .unwrap();
        let mut out = Vec::new();
        write_csv(
            &mut out,
            &Sample {
                intended_us: 5,
                latency_us: 7,
                outcome: Outcome::Answer(a),
            },
            true,
        )
        .unwrap();
        write_csv(
            &mut out,
            &Sample::failure(9, 0, FailureKind::NotSent, ""),
            false,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "5,7,ok,FRA,\"k,1\",kv,1500,true,10,,,,true\n5,7,ok,FRA,\"k,1\",up,,,,,,timeout/read,true\n9,0,not_sent,,,,,,,,,,false\n"
        );
        let columns = CSV_HEADER.trim_end().split(',').count();
        for row in text.lines() {
            assert_eq!(
                row.split(',').count(),
                columns + usize::from(row.contains("\"k,1\"")),
                "{row}"
            );
        }
    }
}
