//! One kept answer: what a probe or a load run keeps of a `/test` answer, as one NDJSON line.
//! The worker stores the line without `seq` and adds it when it hands the line out
//! ([`with_seq`]); the answer is embedded exactly as it was sent.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::text::Name;

/// The latest `t_ms` a kept line may have (the end of year 9999); a reader counts a line
/// outside `0..=MAX_T_MS` as malformed, never as a wrapped clock.
pub const MAX_T_MS: i64 = 253_402_300_799_999;

/// Who made a kept answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vantage {
    /// A probe object created with a location hint, measuring in its own isolate.
    Hint,
    /// A probe object calling a placed fleet member's `/test` over HTTP.
    Member,
    /// A load run's `/test` answer (`/test?run=`).
    Run,
    /// A name a newer writer may use (never written).
    #[serde(other)]
    Other,
}

impl Vantage {
    pub fn as_str(self) -> &'static str {
        match self {
            Vantage::Hint => "hint",
            Vantage::Member => "member",
            Vantage::Run => "run",
            Vantage::Other => "other",
        }
    }
}

/// Whether a member's answer ran where its label says, from its trace colo and `cf-placement`
/// (`kvbench_core::operations::fleet::classify`). Only a placed answer counts in its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlacementCheck {
    /// The trace names a colo of the region's metro; or, the trace unknown, `remote-XXX` with XXX
    /// one of them (any colo for a member whose label is not a known region).
    Placed,
    /// The trace unknown (or no region to hold it against), and `local-…` or no header:
    /// placement did not apply, the member ran wherever it was called.
    Unplaced,
    /// The trace unknown, and `remote-XXX` with XXX outside the region's metro.
    Elsewhere,
    /// The trace names a colo outside the region's metro, whatever `cf-placement` says.
    #[serde(rename = "trace_elsewhere")]
    TraceElsewhere,
    /// A name a newer writer may use (never written; a reader counts it as not placed).
    #[serde(other)]
    Other,
}

impl PlacementCheck {
    pub fn as_str(self) -> &'static str {
        match self {
            PlacementCheck::Placed => "placed",
            PlacementCheck::Unplaced => "unplaced",
            PlacementCheck::Elsewhere => "elsewhere",
            PlacementCheck::TraceElsewhere => "trace_elsewhere",
            PlacementCheck::Other => "other",
        }
    }
}

/// Why a vantage point produced no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureKind {
    /// An answer whose status is not 200 (`status` says which).
    Status,
    /// No answer within the probe's timeout.
    Timeout,
    /// No connection.
    Connect,
    /// The connection broke mid-answer.
    Transport,
    /// A 200 whose body is no `/test` answer.
    Malformed,
    /// A kind a newer writer may use (never written; a reader takes it as malformed).
    #[serde(other)]
    Other,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Status => "status",
            FailureKind::Timeout => "timeout",
            FailureKind::Connect => "connect",
            FailureKind::Transport => "transport",
            FailureKind::Malformed => "malformed",
            FailureKind::Other => "other",
        }
    }
}

/// In place of an answer: why there is none (a gap would hide it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure<'a> {
    pub kind: FailureKind,
    /// The status of a non-200 answer.
    #[serde(default)]
    pub status: Option<u16>,
    /// What happened, shortened and stripped of control characters ([`clean_detail`]).
    #[serde(default, borrow)]
    pub detail: Name<'a>,
}

/// One kept answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kept<'a> {
    /// The line's number in its object, added when it is read out ([`with_seq`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    /// When the measurement started, epoch ms.
    pub t_ms: i64,
    /// The report label: the hint for hint probes, the member's label for members, the colo
    /// for runs.
    #[serde(borrow)]
    pub label: Name<'a>,
    /// Who made the answer.
    pub vantage: Vantage,
    /// The probe's location hint (`None` for members and runs).
    #[serde(default, borrow)]
    pub hint: Option<Name<'a>>,
    /// The colo the answer ran in, or "unknown".
    #[serde(default = "Name::unknown", borrow)]
    pub colo: Name<'a>,
    /// A member's `cf-placement` header (`remote-IAD`): where its placed fetch handler ran.
    #[serde(default, borrow)]
    pub placement: Option<Name<'a>>,
    /// A member's line, when the member answered: the colo its isolate's Cloudflare trace named
    /// (its [`crate::trace::HEADER`]), or "unknown" (no header, or the member could not tell).
    /// Absent on hints' lines (their `colo` is their own trace's) and runs'.
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub trace_colo: Option<Name<'a>>,
    /// A member's line: `cf-placement` names one colo and the trace another (both known) —
    /// one of the two witnesses of its place is wrong.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trace_disagrees: bool,
    /// A member answer's [`PlacementCheck`] (absent on hints' and runs' lines, and on a
    /// member's failure lines: a failure has no placement to check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_check: Option<PlacementCheck>,
    /// Nothing was warm: the first answer with the stores' clients new (the object's first for
    /// a hint, the isolate's for a run or a member).
    #[serde(default)]
    pub cold: bool,
    /// The colo differs from the previous answer's (probes).
    #[serde(default)]
    pub colo_changed: bool,
    /// Wall ms of the `/test` handler that answered, the same quantity for every vantage (a
    /// member's from its `Server-Timing: kvbench;dur=`). `None` when no handler answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler_ms: Option<f64>,
    /// A member's line: the probe's whole HTTP call to it, ms (on a failure, how long it
    /// waited). Never mixed with `handler_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_ms: Option<f64>,
    /// The `/test` answer exactly as it was sent; `None` when there is a `failure` instead.
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Embedded<'a>>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure<'a>>,
}

impl<'a> Kept<'a> {
    /// This line with a `/test` reply in it, the one rule of every vantage that measures `/test`
    /// itself: a 200 with a JSON body is its `answer`, as sent; anything else its `failure`
    /// (`status`, or `malformed` for a 200 that is no JSON) with the body cleaned to
    /// [`DETAIL_MAX`]. Never a gap.
    pub fn with_reply(self, status: u16, body: &'a str) -> Kept<'a> {
        let answer = (status == 200).then(|| Embedded::new(body)).flatten();
        let failure = answer.is_none().then(|| Failure {
            kind: if status == 200 {
                FailureKind::Malformed
            } else {
                FailureKind::Status
            },
            status: (status != 200).then_some(status),
            detail: clean_detail(body, DETAIL_MAX).into(),
        });
        Kept {
            answer,
            failure,
            ..self
        }
    }

    /// One NDJSON line, without its newline.
    pub fn to_line(&self) -> String {
        // Plain strings, numbers and an already valid raw answer: this cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn parse(line: &'a [u8]) -> Result<Kept<'a>, serde_json::Error> {
        serde_json::from_slice(line)
    }

    /// `t_ms` is one a worker keeps (1970 to 9999).
    pub fn time_ok(&self) -> bool {
        (0..=MAX_T_MS).contains(&self.t_ms)
    }
}

/// A `/test` answer embedded in a kept line as its exact JSON text.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Embedded<'a>(#[serde(borrow)] pub &'a RawValue);

impl<'a> Embedded<'a> {
    /// `body` as an answer to embed: `None` when it is not JSON (then it is kept as a failure).
    pub fn new(body: &'a str) -> Option<Embedded<'a>> {
        serde_json::from_str(body).ok().map(Embedded)
    }

    /// The answer's JSON text, as it was sent.
    pub fn get(&self) -> &'a str {
        self.0.get()
    }
}

impl PartialEq for Embedded<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// The longest `failure.detail` a kept line carries of a reply's body, in characters.
pub const DETAIL_MAX: usize = 300;

/// `text` fit for a kept line and a report: control characters replaced, at most `max`.
pub fn clean_detail(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

/// A stored line with its sequence number first: `{"seq":N,...}`.
pub fn with_seq(seq: i64, line: &str) -> String {
    match line.strip_prefix('{') {
        Some(rest) => format!("{{\"seq\":{seq},{rest}"),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head() -> Kept<'static> {
        Kept {
            seq: None,
            t_ms: 1_700_000_000_000,
            label: "weur".into(),
            vantage: Vantage::Hint,
            hint: Some("weur".into()),
            colo: "LHR".into(),
            placement: None,
            trace_colo: None,
            trace_disagrees: false,
            placement_check: None,
            cold: true,
            colo_changed: false,
            handler_ms: Some(12.5),
            call_ms: None,
            answer: None,
            failure: None,
        }
    }

    #[test]
    fn the_answer_is_embedded_untouched_and_seq_comes_first() {
        let body = r#"{"key": "7",  "stores":{}}"#;
        let kept = Kept {
            answer: Embedded::new(body),
            ..head()
        };
        let line = with_seq(42, &kept.to_line());
        assert!(line.starts_with(r#"{"seq":42,"t_ms":"#), "{line}");
        assert!(line.ends_with(&format!(r#""answer":{body}}}"#)), "{line}");
        let back = Kept::parse(line.as_bytes()).unwrap();
        assert_eq!(back.seq, Some(42));
        assert_eq!(back.answer.unwrap().get(), body);
        assert_eq!(Kept { seq: None, ..back }, kept);
        assert!(Embedded::new("not json").is_none());
    }

    #[test]
    fn names_a_newer_writer_may_use_are_read() {
        let line = br#"{"t_ms":1,"label":"x","vantage":"satellite","failure":{"kind":"dns"}}"#;
        let k = Kept::parse(line).unwrap();
        assert_eq!(k.vantage, Vantage::Other);
        assert_eq!(k.failure.unwrap().kind, FailureKind::Other);
        assert_eq!(
            (k.colo.as_str(), k.cold, k.handler_ms),
            ("unknown", false, None)
        );
        assert!(
            Kept::parse(br#"{"label":"x","vantage":"run"}"#).is_err(),
            "t_ms is required"
        );
        assert!(
            Kept::parse(br#"{"t_ms":1,"label":"x"}"#).is_err(),
            "vantage is required"
        );
    }

    #[test]
    fn details_lose_control_characters() {
        assert_eq!(clean_detail("a\u{1b}[31mb\nc", 100), "a [31mb c");
        assert_eq!(clean_detail("abcdef", 3), "abc…");
    }

    #[test]
    fn a_reply_is_its_answer_or_its_failure_never_a_gap() {
        let base = |t_ms| Kept { t_ms, ..head() };
        let ok = base(1).with_reply(200, r#"{"key":"1"}"#);
        assert_eq!(ok.answer.map(|a| a.get()), Some(r#"{"key":"1"}"#));
        assert_eq!(ok.failure, None);
        let busy = base(2).with_reply(503, "busy\n\u{1b}[2J");
        let f = busy.failure.unwrap();
        assert_eq!((f.kind, f.status), (FailureKind::Status, Some(503)));
        assert!(!f.detail.contains('\u{1b}'), "control characters cleaned");
        assert!(busy.answer.is_none());
        let not_json = base(3).with_reply(200, "<html>");
        let f = not_json.failure.unwrap();
        assert_eq!((f.kind, f.status), (FailureKind::Malformed, None));
        let body = "x".repeat(10_000);
        let long = base(4).with_reply(500, &body);
        assert!(long.failure.unwrap().detail.chars().count() <= DETAIL_MAX + 3);
        // A 200 that is JSON but no /test answer is still kept as it came: the reader judges.
        assert!(base(5).with_reply(200, "[1]").answer.is_some());
    }
}
