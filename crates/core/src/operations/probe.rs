//! One probe as a state machine, platform-free: what its Durable Object keeps ([`ProbeState`]),
//! and every rule of its life — an arm (a start, or the cron's tick), a stop, a wake of its alarm
//! (measure, only expire, or retire a member that left `FLEET`), the cold/warm rule of a wake's
//! answers, the one builder of a kept line from a hint's `/test` reply or a member's call (or why
//! it failed), the keep loop that counts every answer it could not keep or expire, the alarm each
//! event leaves, and the probe's status. The object (`src/operations/probes.rs`) holds the
//! storage, the clock and the calls, and does what these functions decide.

use std::cell::Cell;
use std::future::Future;

use kvbench_wire::kept::{
    clean_detail, Embedded, Failure, FailureKind, Kept, PlacementCheck, Vantage,
};
use kvbench_wire::object::{Arm, ArmMember, Armed, PlacementCounts, ProbeStatus};
use serde::{Deserialize, Serialize};

use crate::operations::fleet::{self, Called, Member};
use crate::operations::probes;
use crate::operations::spend::ProbeNow;

/// What a probe object keeps besides its answers (its Durable Object storage, key `probe`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProbeState {
    /// A hint probe's location hint.
    pub hint: Option<String>,
    /// A member probe's member (label and base URL).
    pub member: Option<ArmMember>,
    pub every_s: u32,
    pub keep_s: u32,
    /// Set by `POST /probes/stop` (or a member leaving `FLEET`); the cron does not re-arm a
    /// stopped probe.
    pub stopped: bool,
    pub last_colo: Option<String>,
    pub last_t_ms: Option<i64>,
    pub last_error: Option<String>,
    /// Answers this probe measured and could not keep (its SQLite write failed).
    pub keep_failed: u64,
    /// Deletions of expired answers that failed (they stay until a later one succeeds).
    pub expire_failed: u64,
    /// A member probe's answers by placement (only the placed ones count in its row), and the
    /// `cf-placement` of its latest answer.
    pub placement: PlacementCounts,
}

/// The answers an object keeps (its SQLite table), as the machine uses them.
pub trait Answers {
    /// Keeps one line measured at `t_ms`.
    fn keep(&self, t_ms: i64, line: &str) -> Result<(), String>;
    /// Deletes what is past `keep_s` (plus the grace) at `now_ms`.
    fn expire(&self, now_ms: f64, keep_s: u32) -> Result<(), String>;
    /// When the oldest answer kept is due, `None` when nothing is kept.
    fn next_expiry_ms(&self, keep_s: u32) -> Result<Option<f64>, String>;
}

/// What becomes of the object's alarm after an event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Alarm {
    /// As it is.
    Unchanged,
    /// Set for this epoch ms.
    At(f64),
    /// None: the object has nothing left to do.
    Delete,
}

/// What a wake of the alarm does.
#[derive(Debug, Clone, PartialEq)]
pub enum Wake {
    /// Measure this vantage point, then [`ProbeState::record`].
    Measure(Target),
    /// Nothing to measure (stopped, or never armed): what was due is deleted; save the state
    /// when `save`, then set the alarm.
    Idle { save: bool, alarm: Alarm },
    /// A member no longer in `FLEET`: stopped now; save the state, then set the alarm.
    Retired { alarm: Alarm },
}

/// The vantage point a wake measures.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Hint(String),
    Member(ArmMember),
}

/// How long after a failed read of the oldest answer's time a stopped probe tries again: its
/// answers must still expire, so the chain never ends on an error.
pub const EXPIRY_RETRY_MS: f64 = 3_600_000.0;

/// The earliest an expiry alarm is set after now (a due answer is deleted by the next wake, not
/// in a tight loop).
const EXPIRY_MIN_WAIT_MS: f64 = 1000.0;

impl ProbeState {
    /// Reads a stored state out of parsed JSON as its `Deserialize` does (absent or mistyped
    /// fields take their default), without a deserializer of its own: the object that reads it
    /// is in the bundle shipped to every colo, and a derived one costs it kilobytes
    /// (`kvbench_wire::object::ProbeStatus::read` does the same; tested against `Deserialize`).
    pub fn read(v: &serde_json::Value) -> ProbeState {
        let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
        let count = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        let seconds = |k: &str| u32::try_from(count(k)).unwrap_or(u32::MAX);
        let member = v.get("member").and_then(|m| {
            let field = |k: &str| m.get(k).and_then(|x| x.as_str()).map(str::to_string);
            Some(ArmMember {
                label: field("label")?,
                url: field("url")?,
            })
        });
        ProbeState {
            hint: text("hint"),
            member,
            every_s: seconds("every_s"),
            keep_s: seconds("keep_s"),
            stopped: v
                .get("stopped")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
            last_colo: text("last_colo"),
            last_t_ms: v.get("last_t_ms").and_then(serde_json::Value::as_i64),
            last_error: text("last_error"),
            keep_failed: count("keep_failed"),
            expire_failed: count("expire_failed"),
            placement: v
                .get("placement")
                .map(PlacementCounts::read)
                .unwrap_or_default(),
        }
    }

    /// How long it keeps its answers: its start's `keep`, the default before any start.
    pub fn keep_s(&self) -> u32 {
        if self.keep_s == 0 {
            probes::DEFAULT_KEEP_S
        } else {
            self.keep_s
        }
    }

    /// A start (`start`: arm now and clear a stop) or the cron's tick (arm only a live probe
    /// whose alarm chain died; `alarm_set`: the object has an alarm). A tick of a stopped
    /// probe is refused and changes nothing (no save); else the state is saved, then the
    /// alarm set.
    pub fn arm(&mut self, arm: Arm, start: bool, alarm_set: bool, now_ms: f64) -> (Armed, Alarm) {
        if self.stopped && !start {
            let refused = Armed {
                armed: false,
                stopped: true,
            };
            return (refused, Alarm::Unchanged);
        }
        self.stopped = false;
        self.hint = arm.hint;
        self.member = arm.member;
        // A start's interval and keep persist until the next start: the cron's tick (which
        // carries the vars') only fills them in for a probe that never had any.
        if start || self.every_s == 0 {
            self.every_s = arm.every_s;
            self.keep_s = arm.keep_s;
        }
        let armed = start || !alarm_set;
        let alarm = if armed {
            Alarm::At(now_ms)
        } else {
            Alarm::Unchanged
        };
        let answer = Armed {
            armed,
            stopped: false,
        };
        (answer, alarm)
    }

    /// Stops measuring (the state is saved, then the alarm set). The alarm stays only to
    /// delete what the probe kept: for when the oldest answer is due.
    pub fn stop(&mut self, answers: &impl Answers, now_ms: f64) -> Alarm {
        self.stopped = true;
        self.expiry_alarm(answers, now_ms)
    }

    /// The alarm of an object with nothing to measure: for when its oldest answer is due (at
    /// the earliest a second from now), none when it keeps nothing; when that cannot be read,
    /// a retry in [`EXPIRY_RETRY_MS`] (said in `last_error`) — never the end of the chain
    /// while answers may be kept.
    pub fn expiry_alarm(&mut self, answers: &impl Answers, now_ms: f64) -> Alarm {
        match answers.next_expiry_ms(self.keep_s()) {
            Ok(Some(due)) => Alarm::At(due.max(now_ms + EXPIRY_MIN_WAIT_MS)),
            Ok(None) => Alarm::Delete,
            Err(e) => {
                self.last_error = Some(format!("reading the oldest answer's time failed: {e}"));
                Alarm::At(now_ms + EXPIRY_RETRY_MS)
            }
        }
    }

    /// What this probe measures, `None` when it is stopped or was never armed.
    pub fn target(&self) -> Option<Target> {
        if self.stopped {
            return None;
        }
        match (&self.hint, &self.member) {
            (Some(hint), _) => Some(Target::Hint(hint.clone())),
            (None, Some(member)) => Some(Target::Member(member.clone())),
            (None, None) => None,
        }
    }

    /// A wake of the alarm. `fleet`: the worker's `FLEET` var, `None` when unset — a member
    /// taken out of it (or under a `FLEET` that does not parse, which `GET /probes` reports)
    /// stops with its next wake: nothing else would stop it, since the worker only calls the
    /// members it is configured with.
    pub fn wake(&mut self, fleet: Option<&str>, answers: &impl Answers, now_ms: f64) -> Wake {
        let Some(target) = self.target() else {
            return self.expire_idle(answers, now_ms);
        };
        if let Target::Member(member) = &target {
            let listed = fleet
                .and_then(|text| fleet::parse_members(fleet::FLEET_VAR, text).ok())
                .is_some_and(|members| members.iter().any(|m| m.label == member.label));
            if !listed {
                self.stopped = true;
                self.last_error = Some(format!(
                    "stopped: {} is no longer in {}",
                    member.label,
                    fleet::FLEET_VAR
                ));
                let alarm = self.expiry_alarm(answers, now_ms);
                return Wake::Retired { alarm };
            }
        }
        Wake::Measure(target)
    }

    /// An idle wake: deletes what is due and sets the alarm for when the oldest answer left
    /// is due. A deletion that fails is counted and the alarm is set all the same: a chain
    /// that ended here would keep the answers for ever.
    fn expire_idle(&mut self, answers: &impl Answers, now_ms: f64) -> Wake {
        let before = self.clone();
        if let Err(e) = answers.expire(now_ms, self.keep_s()) {
            self.expire_failed += 1;
            self.last_error = Some(format!("deleting expired answers failed: {e}"));
        }
        let alarm = self.expiry_alarm(answers, now_ms);
        Wake::Idle {
            save: *self != before,
            alarm,
        }
    }

    /// A wake's answers, recorded in the state as it is after the measurement (a stop or start
    /// may have come in meanwhile, and must not be undone): each is kept, or counted in
    /// `keep_failed`; after each kept one what is past `keep` is deleted, or counted in
    /// `expire_failed` — neither ends the loop, so no answer of the wake is dropped uncounted.
    /// Save the state, then set the alarm: the next wake `every` from `now_ms`, or (stopped meanwhile) the expiry.
    pub fn record(
        &mut self,
        measured: Vec<Measured>,
        answers: &impl Answers,
        now_ms: f64,
    ) -> Alarm {
        for m in measured {
            if let Err(e) = answers.keep(m.t_ms as i64, &m.line) {
                self.keep_failed += 1;
                self.last_error = Some(format!("keeping an answer failed: {e}"));
                continue;
            }
            self.last_colo = Some(m.colo);
            self.last_t_ms = Some(m.t_ms as i64);
            self.last_error = m.last_error;
            if let Some(witnessed) = m.placement {
                count_placement(&mut self.placement, witnessed);
            }
            if let Err(e) = answers.expire(m.t_ms, self.keep_s()) {
                self.expire_failed += 1;
                self.last_error = Some(format!("deleting expired answers failed: {e}"));
            }
        }
        self.next_alarm(answers, now_ms)
    }

    /// A wake that failed outside the measurement (its storage): said in `last_error`, and the
    /// chain goes on — the next wake of a live probe, else the expiry.
    pub fn wake_failed(&mut self, error: &str, answers: &impl Answers, now_ms: f64) -> Alarm {
        self.last_error = Some(format!("probe failed: {error}"));
        self.next_alarm(answers, now_ms)
    }

    fn next_alarm(&mut self, answers: &impl Answers, now_ms: f64) -> Alarm {
        if self.target().is_some() {
            let every_ms = f64::from(self.every_s.max(probes::MIN_EVERY_S)) * 1000.0;
            Alarm::At(now_ms + every_ms)
        } else {
            self.expiry_alarm(answers, now_ms)
        }
    }

    /// Its status (`GET /status`): `count` of what it keeps, `alarm` the object's, `measuring`
    /// whether a wake is under way (no alarm is set while it measures: it is still running).
    pub fn status(&self, count: Count, alarm: Option<i64>, measuring: bool) -> ProbeStatus {
        ProbeStatus {
            member: self.member.as_ref().map(|m| m.label.clone()),
            colo: self.last_colo.clone(),
            every_s: self.every_s,
            keep_s: self.keep_s,
            running: !self.stopped && (alarm.is_some() || measuring),
            stopped: self.stopped,
            next_alarm_ms: alarm,
            kept: count.kept,
            first_t_ms: count.first_t_ms,
            last_t_ms: count.last_t_ms.or(self.last_t_ms),
            last_error: self.last_error.clone(),
            keep_failed: self.keep_failed,
            expire_failed: self.expire_failed,
            placement: self.member.is_some().then(|| self.placement.clone()),
            hint: self.hint.clone(),
        }
    }
}

/// How many answers an object keeps, and the first and last one's time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Count {
    pub kept: u64,
    pub first_t_ms: Option<i64>,
    pub last_t_ms: Option<i64>,
}

/// Counts a member's answer by where it ran; only a placed one counts in its label's row. A
/// disagreement of its two witnesses is counted whatever the verdict.
pub fn count_placement(counts: &mut PlacementCounts, witnessed: Witnessed) {
    match witnessed.verdict.check {
        PlacementCheck::Placed => counts.placed += 1,
        PlacementCheck::Elsewhere => counts.elsewhere += 1,
        PlacementCheck::TraceElsewhere => counts.trace_elsewhere += 1,
        PlacementCheck::Unplaced | PlacementCheck::Other => counts.unplaced += 1,
    }
    counts.trace_disagrees += u64::from(witnessed.verdict.disagree);
    counts.last = witnessed.header;
    counts.last_trace =
        Some(kvbench_wire::trace::header_value(witnessed.trace.as_deref()).to_string());
}

/// A member answer's place: its verdict and the two witnesses it was drawn from.
#[derive(Debug, Clone, PartialEq)]
pub struct Witnessed {
    pub verdict: fleet::Verdict,
    /// Its `cf-placement`.
    pub header: Option<String>,
    /// The colo its trace named (`None`: unknown).
    pub trace: Option<String>,
}

/// What one measurement leaves to keep.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Its start, epoch ms.
    pub t_ms: f64,
    /// The kept line.
    pub line: String,
    /// A member answer's place, and what it was witnessed by.
    pub placement: Option<Witnessed>,
    /// Its stores' failures, or why it produced no answer.
    pub last_error: Option<String>,
    /// Where it ran.
    pub colo: String,
    /// A cold answer: another, warm one is measured at once after it.
    pub cold: bool,
}

/// How long a wake whose state could not be read waits to try again: nothing is saved over a
/// state it did not read, and the chain goes on.
pub const UNREAD_RETRY_MS: f64 = 60_000.0;

/// The most measurements of one wake: a cold one, then a warm one.
pub const MAX_PER_WAKE: usize = 2;

/// A wake's answers: one, or — when it was cold (a new instance: connections, Deno KV's
/// metadata exchange and the value generator all start afresh) — a warm one at once after it,
/// both kept and marked, so every wake yields a warm answer, and never more than
/// [`MAX_PER_WAKE`]. A measurement cannot fail: what went wrong is its line's failure.
/// `measure_one` is given where the previous answer ran.
pub async fn measure_until_warm<F, Fut>(
    last_colo: Option<String>,
    mut measure_one: F,
) -> Vec<Measured>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Measured>,
{
    let mut kept: Vec<Measured> = Vec::new();
    let mut last_colo = last_colo;
    while kept.len() < MAX_PER_WAKE {
        let measured = measure_one(last_colo.clone()).await;
        let cold = measured.cold;
        last_colo = Some(measured.colo.clone());
        kept.push(measured);
        if !cold {
            break;
        }
    }
    kept
}

/// A hint probe's `/test`, as it answered in the probe object's own isolate.
#[derive(Debug, Clone, Copy)]
pub struct HintReply<'a> {
    pub hint: &'a str,
    /// The colo the object runs in, or "unknown".
    pub colo: &'a str,
    /// Where the previous answer ran.
    pub last_colo: Option<&'a str>,
    /// The start, epoch ms.
    pub t_ms: f64,
    /// The handler's wall time.
    pub handler_ms: f64,
    pub status: u16,
    pub body: &'a str,
}

/// A hint probe's kept line: the `/test` answer as it came, or — a reply other than a 200
/// answer (the isolate's budget, a bad var) — a failure of this vantage point, never a gap
/// (`Kept::with_reply`). Cold: the object's first answer; `warm` is the object's own mark,
/// set by its first answer.
pub fn hint_answer(reply: HintReply<'_>, warm: &Cell<bool>) -> Measured {
    let kept = Kept {
        seq: None,
        t_ms: reply.t_ms as i64,
        label: reply.hint.into(),
        vantage: Vantage::Hint,
        hint: Some(reply.hint.into()),
        colo: reply.colo.into(),
        placement: None,
        trace_colo: None,
        trace_disagrees: false,
        placement_check: None,
        cold: false,
        colo_changed: reply.last_colo.is_some_and(|c| c != reply.colo),
        handler_ms: Some(reply.handler_ms),
        call_ms: None,
        answer: None,
        failure: None,
    }
    .with_reply(reply.status, reply.body);
    let cold = kept.answer.is_some() && !warm.replace(true);
    Measured {
        t_ms: reply.t_ms,
        line: Kept { cold, ..kept }.to_line(),
        placement: None,
        last_error: match reply.status {
            200 => store_errors(reply.body),
            status => Some(format!(
                "/test answered {status}: {}",
                clean_detail(reply.body, 300)
            )),
        },
        colo: reply.colo.to_string(),
        cold,
    }
}

/// A member probe's kept line: the member's answer as it came, with its own handler time (its
/// `Server-Timing`, whenever it sent one), the call's round trip apart (the wait, for a failure), the
/// two witnesses of its place (its `cf-placement`, its trace colo) and whether that is where the
/// label says ([`fleet::classify`]); anything else (`called` failed, or answered no `/test` answer) a failure
/// line — never a gap. `t_ms`: the call's start; `call_ms`: its round trip.
pub fn member_answer(
    member: &ArmMember,
    called: Result<&Called, (FailureKind, &str)>,
    t_ms: f64,
    call_ms: f64,
    last_colo: Option<&str>,
) -> Measured {
    let (reply, placement, handler_ms, body) = match called {
        Ok(c) => (
            fleet::member_reply(c.status, &c.body, c.handler_ms),
            c.placement.as_deref(),
            c.handler_ms,
            c.body.as_str(),
        ),
        Err((kind, detail)) => (
            fleet::MemberReply {
                colo: "unknown".into(),
                cold: false,
                failure: Some((kind, None, clean_detail(detail, 300))),
            },
            None,
            None,
            "",
        ),
    };
    // What the member said of its trace, when it answered at all ("unknown" when it said none).
    let trace = called.ok().and_then(|c| c.trace_colo.as_deref());
    let trace_colo = called
        .is_ok()
        .then(|| kvbench_wire::trace::header_value(trace));
    let (answer, failure, mut last_error) = member_outcome(&reply, body);
    // Only an answer has a placement to check; a failure is the member's failure wherever it
    // ran.
    let verdict = answer.is_some().then(|| {
        let expected = fleet::region(&member.label).map(|r| r.colos.as_slice());
        fleet::classify(placement, trace, expected)
    });
    if let Some(e) =
        verdict.and_then(|v| fleet::placement_error(&member.label, placement, trace, v))
    {
        last_error = Some(match last_error {
            Some(stores) => format!("{e}; {stores}"),
            None => e,
        });
    }
    let line = Kept {
        seq: None,
        t_ms: t_ms as i64,
        label: member.label.as_str().into(),
        vantage: Vantage::Member,
        hint: None,
        colo: reply.colo.as_str().into(),
        placement: placement.map(Into::into),
        trace_colo: trace_colo.map(Into::into),
        trace_disagrees: verdict.is_some_and(|v| v.disagree),
        placement_check: verdict.map(|v| v.check),
        cold: reply.cold,
        colo_changed: last_colo.is_some_and(|c| c != reply.colo),
        // The member's own handler time, on any status it sent it with (like every other
        // vantage's); the round trip apart, also the wait of a failure.
        handler_ms,
        call_ms: Some(call_ms),
        answer,
        failure,
    }
    .to_line();
    Measured {
        t_ms,
        line,
        placement: verdict.map(|verdict| Witnessed {
            verdict,
            header: placement.map(str::to_string),
            trace: trace.map(str::to_string),
        }),
        last_error,
        cold: reply.cold,
        colo: reply.colo,
    }
}

/// A member's reply as a kept line has it: its answer (kept as sent) and its stores' failures,
/// or its failure and what went wrong.
fn member_outcome<'a>(
    reply: &'a fleet::MemberReply,
    body: &'a str,
) -> (Option<Embedded<'a>>, Option<Failure<'a>>, Option<String>) {
    match &reply.failure {
        None => (Embedded::new(body), None, store_errors(body)),
        Some((kind, status, detail)) => (
            None,
            Some(Failure {
                kind: *kind,
                status: *status,
                detail: detail.as_str().into(),
            }),
            Some(match status {
                Some(status) => format!("member answered {status}: {detail}"),
                None => format!("member {}: {detail}", kind.as_str()),
            }),
        ),
    }
}

/// The member of an arm, as the fleet names it.
pub fn member_of(arm: &ArmMember) -> Member {
    Member {
        label: arm.label.clone(),
        url: arm.url.clone(),
    }
}

/// The failed stores of an answer, other than those not configured: `kv: timeout (...)`.
pub fn store_errors(body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let text = |e: &serde_json::Value, k: &str| {
        e.get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let errors: Vec<String> = v
        .get("stores")?
        .as_object()?
        .iter()
        .filter_map(|(store, r)| {
            let e = r.get("error").filter(|e| !e.is_null())?;
            let kind = text(e, "kind");
            (kind != "not_configured").then(|| format!("{store}: {kind} ({})", text(e, "message")))
        })
        .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}

/// A probe as the budget counts it, from its status (`None`: it could not be read, counted as
/// if it would run); `armed_here`: one of the probes an arming is for.
pub fn probe_now(status: Option<&ProbeStatus>, armed_here: bool) -> ProbeNow {
    let Some(v) = status else {
        return ProbeNow {
            armed_here,
            ..ProbeNow::unknown()
        };
    };
    ProbeNow {
        armed_here,
        running: v.running,
        stopped: v.stopped,
        every_s: v.every_s,
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// A kept-answers table in memory, whose writes can be made to fail.
    #[derive(Default)]
    struct Table {
        lines: RefCell<Vec<(i64, String)>>,
        keep_fails: Cell<bool>,
        expire_fails: Cell<bool>,
        read_fails: Cell<bool>,
        expired: Cell<u32>,
    }

    impl Answers for Table {
        fn keep(&self, t_ms: i64, line: &str) -> Result<(), String> {
            if self.keep_fails.get() {
                return Err("disk full".into());
            }
            self.lines.borrow_mut().push((t_ms, line.to_string()));
            Ok(())
        }
        fn expire(&self, now_ms: f64, keep_s: u32) -> Result<(), String> {
            if self.expire_fails.get() {
                return Err("locked".into());
            }
            self.expired.set(self.expired.get() + 1);
            let cutoff = now_ms - probes::expiry_after_ms(keep_s);
            self.lines.borrow_mut().retain(|(t, _)| *t as f64 >= cutoff);
            Ok(())
        }
        fn next_expiry_ms(&self, keep_s: u32) -> Result<Option<f64>, String> {
            if self.read_fails.get() {
                return Err("read failed".into());
            }
            let first = self.lines.borrow().iter().map(|(t, _)| *t).min();
            Ok(first.map(|t| t as f64 + probes::expiry_after_ms(keep_s)))
        }
    }

    const NOW: f64 = 1_700_000_000_000.0;

    fn hint_arm(every_s: u32, keep_s: u32) -> Arm {
        Arm {
            hint: Some("weur".into()),
            member: None,
            every_s,
            keep_s,
        }
    }

    fn member(label: &str) -> ArmMember {
        ArmMember {
            label: label.into(),
            url: "https://m.example.workers.dev".into(),
        }
    }

    fn member_state(label: &str) -> ProbeState {
        let mut s = ProbeState::default();
        let arm = Arm {
            hint: None,
            member: Some(member(label)),
            every_s: 60,
            keep_s: 3600,
        };
        s.arm(arm, true, false, NOW);
        s
    }

    fn measured(t_ms: f64, colo: &str, cold: bool) -> Measured {
        Measured {
            t_ms,
            line: format!("{{\"t_ms\":{t_ms}}}"),
            placement: None,
            last_error: None,
            colo: colo.into(),
            cold,
        }
    }

    #[test]
    fn a_stored_state_reads_back_as_its_deserialize_reads_it() {
        let mut full = member_state("aws:us-east-1");
        full.stopped = true;
        full.last_colo = Some("IAD".into());
        full.last_t_ms = Some(1_790_000_000_000);
        full.last_error = Some("placed elsewhere".into());
        full.keep_failed = 2;
        full.expire_failed = 3;
        count_placement(
            &mut full.placement,
            Witnessed {
                verdict: fleet::Verdict {
                    check: PlacementCheck::TraceElsewhere,
                    disagree: true,
                },
                header: Some("remote-IAD".into()),
                trace: Some("NRT".into()),
            },
        );
        let mut hint = ProbeState::default();
        hint.arm(hint_arm(300, 604_800), true, false, NOW);
        for state in [full, hint, ProbeState::default()] {
            let v = serde_json::to_value(&state).unwrap();
            assert_eq!(ProbeState::read(&v), state);
            assert_eq!(serde_json::from_value::<ProbeState>(v).unwrap(), state);
        }
        // A field of the wrong type reads as absent (the derived reader would refuse the whole
        // state, and the probe would start afresh).
        let odd = serde_json::json!({ "every_s": "x", "member": { "label": "a" }, "stopped": 1 });
        assert_eq!(ProbeState::read(&odd), ProbeState::default());
        assert_eq!(
            ProbeState::read(&serde_json::json!({})),
            ProbeState::default()
        );
    }

    #[test]
    fn a_start_arms_now_and_clears_a_stop_a_tick_never_undoes_a_stop() {
        let mut s = ProbeState {
            stopped: true,
            ..ProbeState::default()
        };
        let (armed, alarm) = s.arm(hint_arm(300, 3600), false, false, NOW);
        assert_eq!(
            (armed.armed, armed.stopped, alarm),
            (false, true, Alarm::Unchanged)
        );
        assert_eq!(
            s,
            ProbeState {
                stopped: true,
                ..ProbeState::default()
            },
            "a refused tick changes nothing"
        );
        let (armed, alarm) = s.arm(hint_arm(300, 3600), true, true, NOW);
        assert_eq!(
            (armed.armed, armed.stopped, alarm),
            (true, false, Alarm::At(NOW))
        );
        assert!(!s.stopped);
        assert_eq!(s.target(), Some(Target::Hint("weur".into())));
    }

    #[test]
    fn a_tick_arms_only_a_chain_that_died_and_keeps_the_starts_interval() {
        let mut s = ProbeState::default();
        // A probe that never ran takes the vars' interval from the tick.
        let (armed, alarm) = s.arm(hint_arm(300, 3600), false, false, NOW);
        assert!(armed.armed);
        assert_eq!((s.every_s, s.keep_s, alarm), (300, 3600, Alarm::At(NOW)));
        // A start's interval persists through the cron's ticks.
        s.arm(hint_arm(10, 600), true, true, NOW);
        let (armed, alarm) = s.arm(hint_arm(300, 3600), false, true, NOW);
        assert_eq!((armed.armed, alarm), (false, Alarm::Unchanged));
        assert_eq!((s.every_s, s.keep_s), (10, 600));
        // Its chain died (no alarm): the tick re-arms it, still at the start's interval.
        let (armed, alarm) = s.arm(hint_arm(300, 3600), false, false, NOW);
        assert_eq!((armed.armed, alarm), (true, Alarm::At(NOW)));
        assert_eq!(s.every_s, 10);
    }

    #[test]
    fn a_stop_keeps_an_alarm_only_for_what_is_kept_and_a_failed_read_retries() {
        let table = Table::default();
        let mut s = ProbeState::default();
        s.arm(hint_arm(60, 3600), true, false, NOW);
        assert_eq!(s.stop(&table, NOW), Alarm::Delete, "nothing kept: no alarm");
        assert!(s.stopped && s.target().is_none());
        table.keep(NOW as i64 - 1000, "a").unwrap();
        let due = NOW - 1000.0 + probes::expiry_after_ms(3600);
        assert_eq!(s.stop(&table, NOW), Alarm::At(due));
        // Already due: the next wake, a second from now, not a loop.
        let later = due + 50_000.0;
        assert_eq!(s.stop(&table, later), Alarm::At(later + 1000.0));
        table.read_fails.set(true);
        assert_eq!(s.stop(&table, NOW), Alarm::At(NOW + EXPIRY_RETRY_MS));
        assert!(s.last_error.as_deref().unwrap().contains("read failed"));
    }

    #[test]
    fn an_idle_wake_expires_counts_a_failure_and_never_ends_the_chain() {
        let table = Table::default();
        let mut s = ProbeState::default();
        s.arm(hint_arm(60, 60), true, false, NOW);
        table.keep(NOW as i64, "a").unwrap();
        s.stop(&table, NOW);
        let before = s.clone();
        let wake = s.wake(None, &table, NOW + 10.0);
        let due = NOW + probes::expiry_after_ms(60);
        assert_eq!(
            wake,
            Wake::Idle {
                save: false,
                alarm: Alarm::At(due)
            }
        );
        assert_eq!(s, before);
        table.expire_fails.set(true);
        let wake = s.wake(None, &table, due);
        assert_eq!(
            wake,
            Wake::Idle {
                save: true,
                alarm: Alarm::At(due + 1000.0)
            }
        );
        assert_eq!(s.expire_failed, 1);
        assert!(s.last_error.as_deref().unwrap().contains("locked"));
        table.expire_fails.set(false);
        let wake = s.wake(None, &table, due + 1000.0);
        assert_eq!(
            wake,
            Wake::Idle {
                save: false,
                alarm: Alarm::Delete
            }
        );
        assert!(table.lines.borrow().is_empty());
        // Never armed: nothing to measure either.
        let mut fresh = ProbeState::default();
        assert!(matches!(fresh.wake(None, &table, NOW), Wake::Idle { .. }));
    }

    #[test]
    fn a_member_out_of_the_fleet_stops_at_its_next_wake() {
        let table = Table::default();
        let fleet = "eu-west-1=https://m.example.workers.dev";
        let mut s = member_state("eu-west-1");
        assert_eq!(
            s.wake(Some(fleet), &table, NOW),
            Wake::Measure(Target::Member(member("eu-west-1")))
        );
        for fleet in [
            None,
            Some("us-east-1=https://us-east-1.example.workers.dev"),
            Some("not a fleet"),
        ] {
            let mut s = member_state("eu-west-1");
            assert_eq!(
                s.wake(fleet, &table, NOW),
                Wake::Retired {
                    alarm: Alarm::Delete
                }
            );
            assert!(s.stopped, "{fleet:?}");
            assert_eq!(
                s.last_error.as_deref(),
                Some("stopped: eu-west-1 is no longer in FLEET")
            );
        }
        // A hint probe does not ask the fleet.
        let mut s = ProbeState::default();
        s.arm(hint_arm(60, 60), true, false, NOW);
        assert_eq!(
            s.wake(None, &table, NOW),
            Wake::Measure(Target::Hint("weur".into()))
        );
    }

    fn witnessed(
        check: PlacementCheck,
        disagree: bool,
        header: &str,
        trace: Option<&str>,
    ) -> Witnessed {
        Witnessed {
            verdict: fleet::Verdict { check, disagree },
            header: Some(header.into()),
            trace: trace.map(Into::into),
        }
    }

    #[test]
    fn a_member_counts_each_verdict_and_each_disagreement_of_its_witnesses() {
        let mut counts = PlacementCounts::default();
        for w in [
            witnessed(PlacementCheck::Placed, true, "remote-CDG", Some("ORY")),
            witnessed(
                PlacementCheck::TraceElsewhere,
                false,
                "remote-LHR",
                Some("LHR"),
            ),
            witnessed(
                PlacementCheck::TraceElsewhere,
                true,
                "remote-CDG",
                Some("LHR"),
            ),
            witnessed(PlacementCheck::Elsewhere, false, "remote-IAD", None),
            witnessed(PlacementCheck::Unplaced, false, "local-CDG", None),
        ] {
            count_placement(&mut counts, w);
        }
        let c = &counts;
        assert_eq!(
            (
                c.placed,
                c.elsewhere,
                c.trace_elsewhere,
                c.unplaced,
                c.trace_disagrees
            ),
            (1, 1, 2, 1, 2)
        );
        assert_eq!(c.last.as_deref(), Some("local-CDG"));
        assert_eq!(c.last_trace.as_deref(), Some("unknown"));
    }

    #[test]
    fn the_keep_loop_counts_every_failure_and_goes_on() {
        let table = Table::default();
        let mut s = member_state("eu-west-1");
        let mut placed = measured(NOW, "CDG", true);
        placed.placement = Some(witnessed(
            PlacementCheck::Placed,
            false,
            "remote-CDG",
            Some("CDG"),
        ));
        let mut elsewhere = measured(NOW + 1.0, "IAD", false);
        elsewhere.placement = Some(witnessed(
            PlacementCheck::Elsewhere,
            false,
            "remote-IAD",
            None,
        ));
        elsewhere.last_error = Some("placed elsewhere".into());
        let alarm = s.record(vec![placed, elsewhere], &table, NOW + 5.0);
        assert_eq!(alarm, Alarm::At(NOW + 5.0 + 60_000.0));
        assert_eq!(table.lines.borrow().len(), 2);
        assert_eq!((s.placement.placed, s.placement.elsewhere), (1, 1));
        assert_eq!(s.placement.last.as_deref(), Some("remote-IAD"));
        assert_eq!(s.placement.last_trace.as_deref(), Some("unknown"));
        assert_eq!(s.last_colo.as_deref(), Some("IAD"));
        assert_eq!(s.last_error.as_deref(), Some("placed elsewhere"));
        assert_eq!(
            table.expired.get(),
            2,
            "each kept answer expires the old ones"
        );

        // An expiry that fails does not drop the wake's other answers: both kept, both counted.
        table.expire_fails.set(true);
        let alarm = s.record(
            vec![
                measured(NOW + 10.0, "CDG", true),
                measured(NOW + 11.0, "CDG", false),
            ],
            &table,
            NOW + 20.0,
        );
        assert_eq!(alarm, Alarm::At(NOW + 20.0 + 60_000.0));
        assert_eq!(table.lines.borrow().len(), 4);
        assert_eq!(s.expire_failed, 2);
        table.expire_fails.set(false);

        // A keep that fails is counted, and the wake's next answer is still kept.
        table.keep_fails.set(true);
        s.record(vec![measured(NOW + 30.0, "CDG", true)], &table, NOW + 31.0);
        table.keep_fails.set(false);
        let mut timed_out = measured(NOW + 40.0, "CDG", false);
        timed_out.last_error = Some("member timeout: no answer within 150 s".into());
        s.record(vec![timed_out], &table, NOW + 41.0);
        assert_eq!(s.keep_failed, 1);
        assert_eq!(table.lines.borrow().len(), 5);
        assert_eq!(s.last_t_ms, Some((NOW + 40.0) as i64));
        assert_eq!(
            s.last_error.as_deref(),
            Some("member timeout: no answer within 150 s"),
            "the latest answer's trouble is the one said"
        );
    }

    #[test]
    fn a_probe_stopped_while_it_measured_keeps_what_it_measured_and_only_expires() {
        let table = Table::default();
        let mut s = ProbeState::default();
        s.arm(hint_arm(60, 60), true, false, NOW);
        s.stop(&table, NOW);
        let alarm = s.record(vec![measured(NOW, "LHR", false)], &table, NOW + 1.0);
        assert_eq!(alarm, Alarm::At(NOW + probes::expiry_after_ms(60)));
        assert_eq!(table.lines.borrow().len(), 1);
        // A failed wake goes on the same way: a live probe's next wake, else the expiry.
        assert_eq!(
            s.wake_failed("storage", &table, NOW + 2.0),
            Alarm::At(NOW + probes::expiry_after_ms(60))
        );
        s.arm(hint_arm(60, 60), true, true, NOW);
        assert_eq!(
            s.wake_failed("storage", &table, NOW + 2.0),
            Alarm::At(NOW + 60_002.0)
        );
        assert_eq!(s.last_error.as_deref(), Some("probe failed: storage"));
    }

    #[test]
    fn a_wake_measures_until_warm_and_at_most_twice() {
        let run = |answers: Vec<Measured>| {
            let answers = RefCell::new(answers.into_iter());
            let seen = RefCell::new(Vec::new());
            let kept =
                futures::executor::block_on(measure_until_warm(Some("AMS".into()), |last| {
                    seen.borrow_mut().push(last);
                    let next = answers.borrow_mut().next().expect("asked once too often");
                    async move { next }
                }));
            (kept, seen.into_inner())
        };
        let (kept, seen) = run(vec![measured(1.0, "LHR", false)]);
        assert_eq!(kept.len(), 1, "a warm answer ends the wake");
        assert_eq!(seen, vec![Some("AMS".to_string())]);
        let (kept, seen) = run(vec![
            measured(1.0, "LHR", true),
            measured(2.0, "CDG", false),
        ]);
        assert_eq!(kept.len(), 2, "a cold one is followed by a warm one");
        assert_eq!(
            seen,
            vec![Some("AMS".into()), Some("LHR".into())],
            "the colo carries on"
        );
        // Cold twice (a member whose isolates keep changing): bounded all the same.
        let (kept, _) = run(vec![measured(1.0, "LHR", true), measured(2.0, "LHR", true)]);
        assert_eq!(kept.len(), MAX_PER_WAKE);
    }

    fn line(m: &Measured) -> serde_json::Value {
        serde_json::from_str(&m.line).unwrap()
    }

    #[test]
    fn a_hint_answer_is_cold_only_as_the_objects_first_answer() {
        let warm = Cell::new(false);
        let body = r#"{"colo":"LHR","stores":{"kv":{"error":{"kind":"timeout","message":"5 s"}},"redis":{"error":{"kind":"not_configured","message":"-"}}}}"#;
        let reply = HintReply {
            hint: "weur",
            colo: "LHR",
            last_colo: Some("CDG"),
            t_ms: NOW,
            handler_ms: 12.5,
            status: 503,
            body: "over budget",
        };
        // A failure first: no answer, so the next answer is still the object's first.
        let failed = hint_answer(reply, &warm);
        let v = line(&failed);
        assert_eq!(
            (
                v["failure"]["kind"].as_str(),
                v["failure"]["status"].as_u64()
            ),
            (Some("status"), Some(503))
        );
        assert_eq!(
            failed.last_error.as_deref(),
            Some("/test answered 503: over budget")
        );
        assert!(!failed.cold && !warm.get());
        let first = hint_answer(
            HintReply {
                status: 200,
                body,
                ..reply
            },
            &warm,
        );
        let v = line(&first);
        assert!(first.cold && v["cold"] == true && warm.get());
        assert_eq!(
            (
                v["label"].as_str(),
                v["vantage"].as_str(),
                v["hint"].as_str()
            ),
            (Some("weur"), Some("hint"), Some("weur"))
        );
        assert_eq!(
            (v["colo_changed"] == true, v["handler_ms"].as_f64()),
            (true, Some(12.5))
        );
        assert_eq!(v["answer"]["colo"], "LHR");
        assert_eq!(
            first.last_error.as_deref(),
            Some("kv: timeout (5 s)"),
            "not_configured is no failure"
        );
        let second = hint_answer(
            HintReply {
                status: 200,
                body,
                last_colo: Some("LHR"),
                ..reply
            },
            &warm,
        );
        assert!(!second.cold && line(&second)["colo_changed"] == false);
        // A 200 that is no JSON is malformed, never a gap.
        let v = line(&hint_answer(
            HintReply {
                status: 200,
                body: "<html>",
                ..reply
            },
            &warm,
        ));
        assert_eq!(v["failure"]["kind"], "malformed");
    }

    fn called(status: u16, placement: Option<&str>, body: &str) -> Called {
        Called {
            status,
            placement: placement.map(str::to_string),
            handler_ms: Some(40.0),
            trace_colo: None,
            body: body.into(),
        }
    }

    #[test]
    fn a_member_answer_keeps_its_handler_time_and_where_it_ran() {
        let m = member("aws:us-east-1");
        let body = r#"{"colo":"IAD","isolate_requests":1,"stores":{}}"#;
        let c = called(200, Some("remote-IAD"), body);
        let a = member_answer(&m, Ok(&c), NOW, 95.0, Some("IAD"));
        let v = line(&a);
        assert_eq!(
            (v["handler_ms"].as_f64(), v["call_ms"].as_f64()),
            (Some(40.0), Some(95.0))
        );
        assert_eq!(
            (v["placement"].as_str(), v["placement_check"].as_str()),
            (Some("remote-IAD"), Some("placed"))
        );
        assert!(a.cold && v["cold"] == true && v["colo_changed"] == false);
        // A member that said no trace colo: kept as "unknown", the header alone decides.
        assert_eq!(v["trace_colo"], "unknown");
        assert!(v.get("trace_disagrees").is_none());
        let check = |a: &Measured| a.placement.as_ref().map(|p| p.verdict.check);
        assert_eq!(check(&a), Some(PlacementCheck::Placed));
        assert_eq!(a.last_error, None);

        let c = called(200, Some("remote-DUB"), body);
        let a = member_answer(&m, Ok(&c), NOW, 95.0, Some("IAD"));
        assert_eq!(check(&a), Some(PlacementCheck::Elsewhere));
        assert!(a
            .last_error
            .as_deref()
            .unwrap()
            .starts_with("placed elsewhere: cf-placement remote-DUB"));
        let c = called(200, None, body);
        let a = member_answer(&m, Ok(&c), NOW, 95.0, None);
        assert_eq!(check(&a), Some(PlacementCheck::Unplaced));

        // The trace decides where it is known, and its colo is on the line beside the header.
        let traced = |placement, trace: &str| Called {
            trace_colo: Some(trace.into()),
            ..called(200, placement, body)
        };
        let a = member_answer(&m, Ok(&traced(None, "IAD")), NOW, 95.0, None);
        let v = line(&a);
        assert_eq!(
            (
                v["trace_colo"].as_str(),
                v["placement_check"].as_str(),
                v["placement"].as_str()
            ),
            (Some("IAD"), Some("placed"), None)
        );
        let a = member_answer(&m, Ok(&traced(Some("remote-IAD"), "NRT")), NOW, 95.0, None);
        let v = line(&a);
        assert_eq!(
            (
                v["trace_colo"].as_str(),
                v["placement_check"].as_str(),
                v["trace_disagrees"].as_bool()
            ),
            (Some("NRT"), Some("trace_elsewhere"), Some(true))
        );
        assert!(a
            .last_error
            .unwrap()
            .starts_with("ran elsewhere: Cloudflare's trace says NRT"));
    }

    #[test]
    fn a_member_that_did_not_answer_is_a_failure_line_timed_by_the_wait() {
        let m = member("eu-west-1");
        let a = member_answer(
            &m,
            Err((FailureKind::Timeout, "no answer within 150 s")),
            NOW,
            150_000.0,
            None,
        );
        let v = line(&a);
        assert_eq!(v["failure"]["kind"], "timeout");
        assert_eq!(
            (v.get("handler_ms"), v["call_ms"].as_f64()),
            (None, Some(150_000.0)),
            "no handler answered: the wait is the call's"
        );
        assert!(v.get("answer").is_none() && v.get("placement_check").is_none());
        assert!(
            v.get("trace_colo").is_none(),
            "no answer, nothing said of a trace"
        );
        assert_eq!(
            (a.colo.as_str(), a.cold, a.placement.clone()),
            ("unknown", false, None)
        );
        assert_eq!(
            a.last_error.as_deref(),
            Some("member timeout: no answer within 150 s")
        );
        // A 200 without the member's handler time is another build's: malformed, not kept as
        // an answer (a round trip is another quantity).
        let mut c = called(200, Some("remote-DUB"), r#"{"colo":"DUB","stores":{}}"#);
        c.handler_ms = None;
        let v = line(&member_answer(&m, Ok(&c), NOW, 95.0, None));
        assert_eq!(
            (
                v["failure"]["kind"].as_str(),
                v.get("handler_ms"),
                v["call_ms"].as_f64()
            ),
            (Some("malformed"), None, Some(95.0))
        );
        // A refusal that says its handler time keeps it: the handler answered.
        let c = called(401, None, "unauthorized");
        let a = member_answer(&m, Ok(&c), NOW, 5.0, None);
        assert_eq!(line(&a)["handler_ms"].as_f64(), Some(40.0));
        assert_eq!(
            a.last_error.as_deref(),
            Some("member answered 401: unauthorized")
        );
    }

    #[test]
    fn the_status_says_running_while_a_wake_measures_and_placement_only_for_members() {
        let s = member_state("eu-west-1");
        let count = Count {
            kept: 3,
            first_t_ms: Some(1),
            last_t_ms: None,
        };
        let st = s.status(count, None, true);
        assert!(
            st.running && !st.stopped,
            "no alarm while it measures: still running"
        );
        assert!(!s.status(count, None, false).running);
        assert_eq!(st.member.as_deref(), Some("eu-west-1"));
        assert!(st.placement.is_some() && st.hint.is_none());
        let mut h = ProbeState {
            last_t_ms: Some(7),
            ..ProbeState::default()
        };
        h.arm(hint_arm(60, 60), true, false, NOW);
        let st = h.status(count, Some(NOW as i64), false);
        assert!(st.running && st.placement.is_none());
        assert_eq!(
            (st.kept, st.first_t_ms, st.last_t_ms),
            (3, Some(1), Some(7))
        );
        h.stopped = true;
        assert!(
            !h.status(count, Some(NOW as i64), false).running,
            "a stopped probe's alarm only expires"
        );
        // As the budget counts it; a status that could not be read counts as running.
        let now = probe_now(Some(&st), true);
        assert_eq!((now.running, now.every_s), (true, 60));
        assert_eq!(
            probe_now(None, false),
            ProbeNow {
                armed_here: false,
                ..ProbeNow::unknown()
            }
        );
    }
}
