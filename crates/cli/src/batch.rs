//! Results in bulk: each request appends its raw result to a shared buffer the collector swaps
//! out every few milliseconds (no message or wake-up per request; JSON parsed once, borrowed).

use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use kvbench_report::answer::{AnswerError, AnswerRef};
use kvbench_report::collect::Collector;
use kvbench_report::sample::FailureKind;

/// How one request ended, before the collector reads its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestEnd {
    /// The server answered with this status; the text is the body.
    Answered(u16),
    /// No HTTP answer; the text is the reason.
    Failed(FailureKind),
}

/// One request's raw result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// Intended start, µs after the run start.
    pub intended_us: u64,
    /// From the intended start to the end of the body (or the failure), µs.
    pub latency_us: u64,
    pub ending: RequestEnd,
    /// Sent a second time, on a new connection, after the connection it was first sent on
    /// (one that had waited idle) failed before any byte of an answer (see [`crate::attack`]).
    pub retried: bool,
    /// Where the body or reason is in [`Batch::text`].
    pub text: Range<usize>,
}

/// Results in arrival order, their bodies back to back in one buffer.
#[derive(Debug, Default)]
pub struct Batch {
    pub hits: Vec<Hit>,
    pub text: Vec<u8>,
}

impl Batch {
    pub fn push(&mut self, intended_us: u64, latency_us: u64, ending: RequestEnd, text: &[u8]) {
        let start = self.text.len();
        self.text.extend_from_slice(text);
        self.hits.push(Hit {
            intended_us,
            latency_us,
            ending,
            retried: false,
            text: start..self.text.len(),
        });
    }

    /// Marks the result pushed last as [`Hit::retried`].
    pub fn mark_retried(&mut self) {
        if let Some(hit) = self.hits.last_mut() {
            hit.retried = true;
        }
    }

    pub fn text(&self, hit: &Hit) -> &[u8] {
        &self.text[hit.text.clone()]
    }

    pub fn is_empty(&self) -> bool {
        self.hits.is_empty()
    }

    /// Empties it, keeping the capacity.
    pub fn clear(&mut self) {
        self.hits.clear();
        self.text.clear();
    }
}

/// What a raw result means: an answer, or a failure whose description is only built when the
/// collector still wants an example of its kind.
#[derive(Debug)]
pub enum Read<'t> {
    Answer(AnswerRef<'t>),
    Failure(FailureKind, Detail<'t>),
}

/// The makings of a failure's description.
#[derive(Debug)]
pub enum Detail<'t> {
    /// The reason, as the connection wrote it.
    Reason(&'t [u8]),
    /// The body of a non-200 answer.
    ErrorBody(&'t [u8]),
    /// Why a 200 body is not a `/test` answer.
    Malformed(AnswerError),
}

impl Detail<'_> {
    pub fn describe(&self) -> String {
        match self {
            Detail::Reason(text) => String::from_utf8_lossy(text).into_owned(),
            Detail::ErrorBody(body) => kvbench_report::answer::describe_error_body(body),
            Detail::Malformed(e) => kvbench_report::answer::shorten(&e.to_string()),
        }
    }
}

/// Reads one raw result: a 200 must be a conforming `/test` answer (else `malformed`), any other
/// status is a failure of that status.
pub fn read(ending: RequestEnd, text: &[u8]) -> Read<'_> {
    match ending {
        RequestEnd::Answered(200) => match kvbench_report::answer::parse_ref(text) {
            Ok(a) => Read::Answer(a),
            Err(e) => Read::Failure(FailureKind::Malformed, Detail::Malformed(e)),
        },
        RequestEnd::Answered(status) => {
            Read::Failure(FailureKind::Status(status), Detail::ErrorBody(text))
        }
        RequestEnd::Failed(kind) => Read::Failure(kind, Detail::Reason(text)),
    }
}

/// Records one result, as `read` reads it, in `collector`.
pub fn record(collector: &mut Collector, intended_us: u64, latency_us: u64, read: &Read<'_>) {
    match read {
        Read::Answer(a) => collector.record_answer_ref(intended_us, latency_us, a),
        Read::Failure(kind, detail) => {
            collector.record_failure(intended_us, latency_us, *kind, || detail.describe())
        }
    }
}

/// The buffer the connections append to.
#[derive(Debug, Default)]
pub struct Shared(Mutex<Batch>);

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Batch> {
        // A panicking writer cannot leave a half-written hit: `push` extends before it records.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Swaps the filled buffer with `empty` (an emptied one, so both keep their capacity).
    pub fn take(&self, empty: &mut Batch) {
        debug_assert!(empty.is_empty());
        std::mem::swap(&mut *self.lock(), empty);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_table() {
        let answer = br#"{"colo":"FRA","stores":{"kv":{"read_ms":1}}}"#;
        let cases: &[(RequestEnd, &[u8], Option<FailureKind>, &str)] = &[
            (RequestEnd::Answered(200), answer, None, ""),
            (
                RequestEnd::Answered(200),
                b"<html>",
                Some(FailureKind::Malformed),
                "JSON",
            ),
            (
                RequestEnd::Answered(400),
                br#"{"error":{"parameter":"size","message":"too big"}}"#,
                Some(FailureKind::Status(400)),
                "size: too big",
            ),
            (
                RequestEnd::Failed(FailureKind::Timeout),
                b"no answer within 2s",
                Some(FailureKind::Timeout),
                "no answer within 2s",
            ),
        ];
        for (ending, text, want_kind, want_detail) in cases {
            match read(*ending, text) {
                Read::Answer(a) => {
                    assert_eq!(*want_kind, None);
                    assert_eq!(a.colo, "FRA");
                }
                Read::Failure(kind, detail) => {
                    assert_eq!(Some(kind), *want_kind);
                    assert!(detail.describe().contains(want_detail), "{detail:?}");
                }
            }
        }
    }

    #[test]
    fn hits_keep_their_own_text_across_swaps() {
        let shared = Shared::default();
        shared
            .lock()
            .push(1, 10, RequestEnd::Answered(200), b"{\"a\":1}");
        shared
            .lock()
            .push(2, 0, RequestEnd::Failed(FailureKind::NotSent), b"");
        {
            let mut b = shared.lock();
            b.push(3, 30, RequestEnd::Answered(503), b"busy");
            b.mark_retried();
        }
        let mut mine = Batch::default();
        shared.take(&mut mine);
        let retried: Vec<bool> = mine.hits.iter().map(|h| h.retried).collect();
        assert_eq!(retried, [false, false, true]);
        let texts: Vec<&[u8]> = mine.hits.iter().map(|h| mine.text(h)).collect();
        assert_eq!(texts, [&b"{\"a\":1}"[..], b"", b"busy"]);
        assert_eq!(
            mine.hits[1].ending,
            RequestEnd::Failed(FailureKind::NotSent)
        );
        assert!(shared.lock().is_empty());
        mine.clear();
        shared.take(&mut mine);
        assert!(mine.is_empty());
    }
}
