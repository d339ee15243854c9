//! The failure kinds a report counts (`not_sent`, `http_401`, `timeout`, …) and whose they are,
//! the client's or the worker's: the measured model's vocabulary for requests that yielded no
//! answer, named here once for the collector that counts them and the report that adds them up.

/// Why a request did not yield an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FailureKind {
    /// `--max-in-flight` was reached at its intended start: not sent, not delayed.
    NotSent,
    /// The server answered with this non-200 status.
    Status(u16),
    /// No complete answer within `--timeout`.
    Timeout,
    /// The TCP/TLS connection could not be made.
    Connect,
    /// The connection broke before any byte of an answer arrived (reset, end of stream).
    Transport,
    /// The answer began (some of it arrived) but did not complete: the connection broke in the
    /// middle of it, it was not HTTP, or it passed the 4 MiB a `/test` answer may take.
    Truncated,
    /// 200, but the body is not a `/test` answer.
    Malformed,
    /// Still in flight when the run was stopped and the grace period ran out.
    Cancelled,
}

impl FailureKind {
    /// Stable name used in reports: `not_sent`, `http_401`, `timeout`, ...
    pub fn name(self) -> String {
        match self {
            FailureKind::NotSent => "not_sent".into(),
            FailureKind::Status(code) => format!("http_{code}"),
            FailureKind::Timeout => "timeout".into(),
            FailureKind::Connect => "connect".into(),
            FailureKind::Transport => "transport".into(),
            FailureKind::Truncated => "truncated".into(),
            FailureKind::Malformed => "malformed".into(),
            FailureKind::Cancelled => "cancelled".into(),
        }
    }

    /// The kind a report names `name` (the inverse of [`FailureKind::name`]); `None` for a
    /// name this version does not know.
    pub fn from_name(name: &str) -> Option<FailureKind> {
        Some(match name {
            "not_sent" => FailureKind::NotSent,
            "timeout" => FailureKind::Timeout,
            "connect" => FailureKind::Connect,
            "transport" => FailureKind::Transport,
            "truncated" => FailureKind::Truncated,
            "malformed" => FailureKind::Malformed,
            "cancelled" => FailureKind::Cancelled,
            other => FailureKind::Status(other.strip_prefix("http_")?.parse().ok()?),
        })
    }

    /// Whether the server produced an HTTP answer (so the latency is a real response time).
    pub fn answered(self) -> bool {
        matches!(self, FailureKind::Status(_) | FailureKind::Malformed)
    }

    /// Whose failure it is: the worker's when it answered (a status, a body that is not a
    /// `/test` answer, an answer cut off), the client's when no byte of an answer reached
    /// kvbench (refused by `--max-in-flight`, no connection, a reset before any answer byte,
    /// kvbench's own `--timeout`, stopped by Ctrl-C).
    pub fn side(self) -> Side {
        match self {
            FailureKind::Status(_) | FailureKind::Malformed | FailureKind::Truncated => {
                Side::Worker
            }
            FailureKind::NotSent
            | FailureKind::Timeout
            | FailureKind::Connect
            | FailureKind::Transport
            | FailureKind::Cancelled => Side::Client,
        }
    }
}

/// Whose failure a request's is (see [`FailureKind::side`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    /// kvbench's side of the connection: no byte of an answer reached it.
    Client,
    /// The worker answered, but not with a `/test` answer.
    Worker,
}

impl Side {
    /// Of a failure kind as a report names it; a name this version does not know is the
    /// client's (it is not one of the worker's answers this version could read).
    pub fn of_name(name: &str) -> Side {
        FailureKind::from_name(name).map_or(Side::Client, FailureKind::side)
    }

    /// `client` or `worker`, as the printers show it.
    pub fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Worker => "worker",
        }
    }
}
