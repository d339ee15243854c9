//! One probe as a sans-IO state machine (as quinn-proto's `Connection`): events come in as
//! `handle_*` calls, effects come out of [`Probe::poll`], and the object
//! (`src/operations/probes.rs`) executes each and feeds its result back. Also the builder of a
//! kept line, the expiry rule the run archive shares ([`expiry_alarm`]), and the status.

use std::collections::VecDeque;

use kvbench_wire::kept::{
    clean_detail, Embedded, Failure, FailureKind, Kept, PlacementCheck, Vantage,
};
use kvbench_wire::object::{Arm, ArmMember, Armed, PlacementCounts, ProbeStatus};
use serde::{Deserialize, Serialize};

use crate::operations::fleet::{self, Called, Member};
use crate::operations::probes;
use crate::operations::spend::ProbeNow;
use crate::spec::keep;

/// The vantage point a probe measures: a location hint, or a fleet member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    Hint(String),
    Member(ArmMember),
}

impl Target {
    /// An arming's vantage point (a hint, else a member; `None`: neither).
    pub fn of(arm: &Arm) -> Option<Target> {
        match (&arm.hint, &arm.member) {
            (Some(hint), _) => Some(Target::Hint(hint.clone())),
            (None, Some(member)) => Some(Target::Member(member.clone())),
            (None, None) => None,
        }
    }
}

/// How often a probe measures and how long it keeps what it measured, as its latest start (or,
/// before any start, the cron's first tick) set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    pub every_s: u32,
    pub keep_s: u32,
}

/// What a probe object keeps besides its answers (its Durable Object storage, key `probe`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProbeState {
    /// What it measures; `None` until its first arming.
    pub target: Option<Target>,
    /// `None` until its first arming.
    pub schedule: Option<Schedule>,
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

/// What the object does next, as [`Probe::poll`] hands it out; each that answers is fed back
/// with its `handle_*`, a failed save or alarm with [`Probe::handle_failed`].
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Keep this state (it changed since it was last saved or read).
    Save(ProbeState),
    /// Keep this line, measured at `t_ms`.
    Keep { t_ms: i64, line: String },
    /// Delete the answers measured before this epoch ms.
    Expire { before_ms: f64 },
    /// Read the time of the oldest answer kept.
    ReadOldest,
    /// Measure `target` once; `last_colo`: where the previous answer ran; `first`: this
    /// instance has not answered yet (a hint's answer is then cold, [`hint_answer`]).
    Measure {
        target: Target,
        last_colo: Option<String>,
        first: bool,
    },
    /// Set the alarm for this epoch ms.
    ArmAt(f64),
    /// Delete the alarm: there is nothing left to do.
    Disarm,
}

/// What becomes of an alarm that only deletes what is kept ([`expiry_alarm`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Alarm {
    /// Set for this epoch ms.
    At(f64),
    /// None: nothing is kept.
    Delete,
}

impl Alarm {
    fn effect(self) -> Effect {
        match self {
            Alarm::At(ms) => Effect::ArmAt(ms),
            Alarm::Delete => Effect::Disarm,
        }
    }
}

/// How long after a failed read of the oldest answer's time an expiry alarm tries again: the
/// answers must still expire, so the chain never ends on an error.
pub const EXPIRY_RETRY_MS: f64 = 3_600_000.0;

/// The earliest an expiry alarm is set after now (a due answer is deleted by the next wake, not
/// in a tight loop).
pub const EXPIRY_MIN_WAIT_MS: f64 = 1000.0;

/// How long a wake whose state could not be read waits to try again: nothing is saved over a
/// state it did not read, and the chain goes on.
pub const UNREAD_RETRY_MS: f64 = 60_000.0;

/// The most measurements of one wake: a cold one, then a warm one.
pub const MAX_PER_WAKE: usize = 2;

/// The expiry rule of every keeper of answers (a probe, a run's shard): the alarm that deletes
/// the oldest answer when due (at the earliest [`EXPIRY_MIN_WAIT_MS`] from now), none when
/// nothing is kept, and when the oldest could not be read a retry in [`EXPIRY_RETRY_MS`] — never
/// the end of the chain while answers may be kept.
pub fn expiry_alarm(
    oldest_t_ms: Result<Option<i64>, String>,
    keep_s: u32,
    now_ms: f64,
) -> (Alarm, Option<String>) {
    match oldest_t_ms {
        Ok(Some(t)) => {
            let due = t as f64 + keep::expiry_after_ms(keep_s);
            (Alarm::At(due.max(now_ms + EXPIRY_MIN_WAIT_MS)), None)
        }
        Ok(None) => (Alarm::Delete, None),
        Err(e) => (
            Alarm::At(now_ms + EXPIRY_RETRY_MS),
            Some(format!("reading the oldest answer's time failed: {e}")),
        ),
    }
}

/// The cutoff of an expiry at `now_ms`: answers measured before it are past `keep_s` and the
/// grace.
pub fn expire_before_ms(now_ms: f64, keep_s: u32) -> f64 {
    now_ms - keep::expiry_after_ms(keep_s)
}

/// What a result fed back continues.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// Nothing is awaited.
    Ready,
    /// An idle wake's expiry: then the oldest answer's time.
    IdleExpiry,
    /// A wake's answers being kept: this one's keep, then its expiry, then the next.
    Keeping(Measured),
    Expiring,
    /// The oldest answer's time, for the alarm that deletes it.
    Oldest,
}

/// One probe object's machine, living as long as the object's instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    state: ProbeState,
    /// The state as storage has it (`None`: unknown, after a failed save).
    saved: Option<ProbeState>,
    effects: VecDeque<Effect>,
    step: Step,
    /// A wake is measuring: its target and its answers so far (alarms are at-least-once: a
    /// retry must not overlap it).
    wake: Option<(Target, Vec<Measured>)>,
    /// A wake's answers left to keep.
    to_keep: VecDeque<Measured>,
    /// This instance has answered once: its next hint answer is warm.
    answered: bool,
    /// This instance set an alarm whose wake has not begun. While an alarm is being delivered
    /// the object's storage no longer holds it, and the wake has not started yet: without this
    /// a status read in that moment would call a started probe not running.
    armed: bool,
}

impl ProbeState {
    /// Reads a stored state out of parsed JSON as its `Deserialize` does, without a
    /// deserializer of its own: a derived one costs the bundle kilobytes (tested against
    /// `Deserialize` in `a_stored_state_reads_back_as_its_deserialize_reads_it`).
    pub fn read(v: &serde_json::Value) -> ProbeState {
        let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
        let count = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        ProbeState {
            target: v.get("target").and_then(read_target),
            schedule: v.get("schedule").and_then(read_schedule),
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

    /// How long it keeps its answers: its schedule's, the default before any arming.
    pub fn keep_s(&self) -> u32 {
        self.schedule.map_or(keep::DEFAULT_KEEP_S, |s| s.keep_s)
    }

    /// What it measures now: `None` when it is stopped or was never armed.
    pub fn live_target(&self) -> Option<&Target> {
        self.target.as_ref().filter(|_| !self.stopped)
    }

    /// Its status (`GET /status`): `count` of what it keeps, `alarm` the object's, `measuring`
    /// whether a wake is under way (no alarm is set while it measures: it is still running).
    pub fn status(&self, count: Count, alarm: Option<i64>, measuring: bool) -> ProbeStatus {
        let (hint, member) = match &self.target {
            Some(Target::Hint(h)) => (Some(h.clone()), None),
            Some(Target::Member(m)) => (None, Some(m.label.clone())),
            None => (None, None),
        };
        ProbeStatus {
            placement: member.is_some().then(|| self.placement.clone()),
            member,
            colo: self.last_colo.clone(),
            // 0 before any arming, as the status has always said it.
            every_s: self.schedule.map_or(0, |s| s.every_s),
            keep_s: self.schedule.map_or(0, |s| s.keep_s),
            running: !self.stopped && (alarm.is_some() || measuring),
            stopped: self.stopped,
            next_alarm_ms: alarm,
            kept: count.kept,
            first_t_ms: count.first_t_ms,
            last_t_ms: count.last_t_ms.or(self.last_t_ms),
            last_error: self.last_error.clone(),
            keep_failed: self.keep_failed,
            expire_failed: self.expire_failed,
            hint,
        }
    }
}

/// A stored target, as `Deserialize` reads it: `{"hint":"weur"}` or
/// `{"member":{"label":..,"url":..}}`.
fn read_target(v: &serde_json::Value) -> Option<Target> {
    if let Some(hint) = v.get("hint").and_then(|h| h.as_str()) {
        return Some(Target::Hint(hint.to_string()));
    }
    let m = v.get("member")?;
    let field = |k: &str| m.get(k).and_then(|x| x.as_str()).map(str::to_string);
    Some(Target::Member(ArmMember {
        label: field("label")?,
        url: field("url")?,
    }))
}

/// A stored schedule, as `Deserialize` reads it (both fields, or none).
fn read_schedule(v: &serde_json::Value) -> Option<Schedule> {
    let seconds = |k: &str| {
        v.get(k)
            .and_then(serde_json::Value::as_u64)
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
    };
    Some(Schedule {
        every_s: seconds("every_s")?,
        keep_s: seconds("keep_s")?,
    })
}

impl Probe {
    /// The machine of an instance, over the state storage holds (the default when none).
    pub fn new(state: ProbeState) -> Probe {
        Probe {
            saved: Some(state.clone()),
            state,
            effects: VecDeque::new(),
            step: Step::Ready,
            wake: None,
            to_keep: VecDeque::new(),
            answered: false,
            armed: false,
        }
    }

    pub fn state(&self) -> &ProbeState {
        &self.state
    }

    /// A wake is measuring.
    pub fn measuring(&self) -> bool {
        self.wake.is_some()
    }

    /// The next effect to execute, `None`: nothing (until the next event).
    pub fn poll(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// A start: arm now, clear a stop, take the arming's target and schedule.
    pub fn handle_start(&mut self, arm: &Arm, now_ms: f64) -> Armed {
        self.state.stopped = false;
        self.state.target = Target::of(arm);
        self.state.schedule = Some(Schedule {
            every_s: arm.every_s,
            keep_s: arm.keep_s,
        });
        self.finish(Some(Alarm::At(now_ms)));
        Armed {
            armed: true,
            stopped: false,
        }
    }

    /// The cron's tick (`alarm_set`: the object has an alarm): a stopped probe is refused; a
    /// live one takes the arming's target (its schedule only when it had none) and is armed
    /// now only when its chain died. Saved only when that changed anything.
    pub fn handle_tick(&mut self, arm: &Arm, alarm_set: bool, now_ms: f64) -> Armed {
        if self.state.stopped {
            return Armed {
                armed: false,
                stopped: true,
            };
        }
        self.state.target = Target::of(arm);
        if self.state.schedule.is_none() {
            self.state.schedule = Some(Schedule {
                every_s: arm.every_s,
                keep_s: arm.keep_s,
            });
        }
        // A wake under way has no alarm set, and is alive: it sets the next one.
        let armed = !alarm_set && self.wake.is_none();
        self.finish(armed.then_some(Alarm::At(now_ms)));
        Armed {
            armed,
            stopped: false,
        }
    }

    /// A stop: it measures no more; the alarm stays only to delete what it kept.
    pub fn handle_stop(&mut self) {
        self.state.stopped = true;
        self.read_oldest();
    }

    /// A wake of the alarm. `fleet`: the worker's `FLEET` var (`None` unset); a member taken out
    /// of it stops with its next wake, since nothing else would stop it. A probe with nothing to
    /// measure only expires; a wake while one measures does nothing.
    pub fn handle_alarm(&mut self, fleet: Option<&str>, now_ms: f64) {
        self.armed = false;
        if self.wake.is_some() {
            return;
        }
        let Some(target) = self.state.live_target().cloned() else {
            self.step = Step::IdleExpiry;
            let before_ms = expire_before_ms(now_ms, self.state.keep_s());
            self.effects.push_back(Effect::Expire { before_ms });
            return;
        };
        if let Target::Member(member) = &target {
            let listed = fleet
                .and_then(|text| fleet::parse_members(fleet::FLEET_VAR, text).ok())
                .is_some_and(|members| members.iter().any(|m| m.label == member.label));
            if !listed {
                self.state.stopped = true;
                self.state.last_error = Some(format!(
                    "stopped: {} is no longer in {}",
                    member.label,
                    fleet::FLEET_VAR
                ));
                return self.read_oldest();
            }
        }
        self.measure(target, self.state.last_colo.clone());
    }

    fn measure(&mut self, target: Target, last_colo: Option<String>) {
        self.effects.push_back(Effect::Measure {
            target: target.clone(),
            last_colo,
            first: !self.answered,
        });
        let answers = self.wake.take().map(|(_, a)| a).unwrap_or_default();
        self.wake = Some((target, answers));
    }

    /// A measurement's answer: a cold one (a new instance) is followed at once by another, so
    /// every wake yields a warm answer, at most [`MAX_PER_WAKE`]. Then the answers are kept, in
    /// the state as it is now (a stop or start meanwhile is not undone).
    pub fn handle_measured(&mut self, measured: Measured, now_ms: f64) {
        let Some((target, mut answers)) = self.wake.take() else {
            return;
        };
        self.answered |= measured.answered;
        let again = measured.cold && answers.len() + 1 < MAX_PER_WAKE;
        let colo = measured.colo.clone();
        answers.push(measured);
        if again {
            self.wake = Some((target.clone(), answers));
            return self.measure(target, Some(colo));
        }
        self.to_keep = answers.into();
        self.keep_next(now_ms);
    }

    /// Keeps the wake's next answer, or — all kept — sets the next alarm: the next wake `every`
    /// from now for a live probe, else (stopped meanwhile) the expiry.
    fn keep_next(&mut self, now_ms: f64) {
        match self.to_keep.pop_front() {
            Some(m) => {
                self.effects.push_back(Effect::Keep {
                    t_ms: m.t_ms as i64,
                    line: m.line.clone(),
                });
                self.step = Step::Keeping(m);
            }
            None => self.next_alarm(now_ms),
        }
    }

    fn next_alarm(&mut self, now_ms: f64) {
        match (self.state.live_target(), self.state.schedule) {
            (Some(_), Some(schedule)) => {
                let every_ms = f64::from(schedule.every_s.max(probes::MIN_EVERY_S)) * 1000.0;
                self.finish(Some(Alarm::At(now_ms + every_ms)));
            }
            _ => self.read_oldest(),
        }
    }

    /// A keep's result: kept, it is recorded and what is past `keep` deleted after it; failed,
    /// it is counted in `keep_failed` and the next answer kept all the same.
    pub fn handle_kept(&mut self, result: Result<(), String>, now_ms: f64) {
        let Step::Keeping(m) = std::mem::replace(&mut self.step, Step::Ready) else {
            return;
        };
        if let Err(e) = result {
            self.state.keep_failed += 1;
            self.state.last_error = Some(format!("keeping an answer failed: {e}"));
            return self.keep_next(now_ms);
        }
        let s = &mut self.state;
        s.last_colo = Some(m.colo);
        s.last_t_ms = Some(m.t_ms as i64);
        s.last_error = m.last_error;
        if let Some(witnessed) = m.placement {
            count_placement(&mut s.placement, witnessed);
        }
        let before_ms = expire_before_ms(m.t_ms, s.keep_s());
        self.effects.push_back(Effect::Expire { before_ms });
        self.step = Step::Expiring;
    }

    /// An expiry's result: a failure is counted in `expire_failed` and said, and the chain goes
    /// on (the next answer to keep, or the alarm) — never its end.
    pub fn handle_expired(&mut self, result: Result<(), String>, now_ms: f64) {
        let step = std::mem::replace(&mut self.step, Step::Ready);
        if !matches!(step, Step::IdleExpiry | Step::Expiring) {
            return;
        }
        if let Err(e) = result {
            self.state.expire_failed += 1;
            self.state.last_error = Some(format!("deleting expired answers failed: {e}"));
        }
        match step {
            Step::IdleExpiry => self.read_oldest(),
            _ => self.keep_next(now_ms),
        }
    }

    fn read_oldest(&mut self) {
        self.effects.push_back(Effect::ReadOldest);
        self.step = Step::Oldest;
    }

    /// The oldest answer's time: the alarm of a probe with nothing to measure ([`expiry_alarm`]).
    pub fn handle_oldest(&mut self, oldest_t_ms: Result<Option<i64>, String>, now_ms: f64) {
        if std::mem::replace(&mut self.step, Step::Ready) != Step::Oldest {
            return;
        }
        let (alarm, error) = expiry_alarm(oldest_t_ms, self.state.keep_s(), now_ms);
        if error.is_some() {
            self.state.last_error = error;
        }
        self.finish(Some(alarm));
    }

    /// A save or an alarm that failed: said in `last_error`, the rest dropped, and the chain goes
    /// on (the next wake, else the expiry) with the state saved again.
    pub fn handle_failed(&mut self, error: &str, now_ms: f64) {
        self.effects.clear();
        self.step = Step::Ready;
        self.saved = None;
        self.state.last_error = Some(format!("probe failed: {error}"));
        self.next_alarm(now_ms);
    }

    /// The end of an event: the state saved when it changed, then the alarm set.
    fn finish(&mut self, alarm: Option<Alarm>) {
        self.step = Step::Ready;
        if self.saved.as_ref() != Some(&self.state) {
            self.saved = Some(self.state.clone());
            self.effects.push_back(Effect::Save(self.state.clone()));
        }
        match alarm {
            Some(Alarm::At(_)) => self.armed = true,
            Some(Alarm::Delete) => self.armed = false,
            None => {}
        }
        self.effects.extend(alarm.map(Alarm::effect));
    }

    /// Its status ([`ProbeState::status`]).
    pub fn status(&self, count: Count, alarm: Option<i64>) -> ProbeStatus {
        self.state
            .status(count, alarm, self.measuring() || self.armed)
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
    /// It is an answer, not a failure: the instance has answered.
    pub answered: bool,
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

/// A hint probe's kept line: the `/test` answer, or for any other reply a failure of this
/// vantage point, never a gap (`Kept::with_reply`). `first`: the instance's first answer (cold).
pub fn hint_answer(reply: HintReply<'_>, first: bool) -> Measured {
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
    let answered = kept.answer.is_some();
    let cold = answered && first;
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
        answered,
    }
}

/// A member probe's kept line: the member's answer with its own handler time (`Server-Timing`),
/// the round trip apart, and the two witnesses of its place classified against the label
/// ([`fleet::classify`]); anything else a failure line, never a gap.
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
    // Only an answer has a placement to check.
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
        // The member's own handler time on any status; the round trip apart.
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
        answered: reply.failure.is_none(),
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
    use super::*;

    /// A kept-answers table in memory, whose calls can be made to fail.
    #[derive(Default)]
    struct Table {
        lines: Vec<(i64, String)>,
        keep_fails: bool,
        expire_fails: bool,
        read_fails: bool,
        expired: u32,
    }

    /// The object's loop, with `table` for its storage: executes each effect (feeding back
    /// the results of keep, expire and read) and returns every effect seen.
    fn drive(p: &mut Probe, table: &mut Table, now: f64) -> Vec<Effect> {
        let mut seen = Vec::new();
        while let Some(effect) = p.poll() {
            match &effect {
                Effect::Keep { t_ms, line } => {
                    let r = if table.keep_fails {
                        Err("disk full".to_string())
                    } else {
                        table.lines.push((*t_ms, line.clone()));
                        Ok(())
                    };
                    p.handle_kept(r, now);
                }
                Effect::Expire { before_ms } => {
                    let r = if table.expire_fails {
                        Err("locked".to_string())
                    } else {
                        table.expired += 1;
                        table.lines.retain(|(t, _)| *t as f64 >= *before_ms);
                        Ok(())
                    };
                    p.handle_expired(r, now);
                }
                Effect::ReadOldest => {
                    let r = if table.read_fails {
                        Err("read failed".to_string())
                    } else {
                        Ok(table.lines.iter().map(|(t, _)| *t).min())
                    };
                    p.handle_oldest(r, now);
                }
                Effect::Save(_) | Effect::Measure { .. } | Effect::ArmAt(_) | Effect::Disarm => {}
            }
            seen.push(effect);
        }
        seen
    }

    /// The saves and the alarm effects among `effects`, in order (what leaves the object).
    fn outward(effects: &[Effect]) -> Vec<Effect> {
        effects
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Effect::Save(_) | Effect::ArmAt(_) | Effect::Disarm | Effect::Measure { .. }
                )
            })
            .cloned()
            .collect()
    }

    fn saves(effects: &[Effect]) -> usize {
        effects
            .iter()
            .filter(|e| matches!(e, Effect::Save(_)))
            .count()
    }

    fn alarm(effects: &[Effect]) -> Option<Effect> {
        effects
            .iter()
            .rev()
            .find(|e| matches!(e, Effect::ArmAt(_) | Effect::Disarm))
            .cloned()
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

    fn member_arm(label: &str) -> Arm {
        Arm {
            hint: None,
            member: Some(member(label)),
            every_s: 60,
            keep_s: 3600,
        }
    }

    /// A probe started (and its start's effects executed).
    fn started(arm: &Arm) -> Probe {
        let mut p = Probe::new(ProbeState::default());
        p.handle_start(arm, NOW);
        drive(&mut p, &mut Table::default(), NOW);
        p
    }

    fn measured(t_ms: f64, colo: &str, cold: bool) -> Measured {
        Measured {
            t_ms,
            line: format!("{{\"t_ms\":{t_ms}}}"),
            placement: None,
            last_error: None,
            colo: colo.into(),
            cold,
            answered: true,
        }
    }

    #[test]
    fn a_stored_state_reads_back_as_its_deserialize_reads_it() {
        let mut full = started(&member_arm("aws:us-east-1")).state().clone();
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
        let hint = started(&hint_arm(300, 604_800)).state().clone();
        assert_eq!(hint.target, Some(Target::Hint("weur".into())));
        for state in [full, hint, ProbeState::default()] {
            let v = serde_json::to_value(&state).unwrap();
            assert_eq!(ProbeState::read(&v), state);
            assert_eq!(serde_json::from_value::<ProbeState>(v).unwrap(), state);
        }
        // A field of the wrong type reads as absent (the derived reader would refuse the whole
        // state, and the probe would start afresh).
        let odd = serde_json::json!({
            "schedule": { "every_s": "x", "keep_s": 60 },
            "target": { "member": { "label": "a" } },
            "stopped": 1
        });
        assert_eq!(ProbeState::read(&odd), ProbeState::default());
        assert_eq!(
            ProbeState::read(&serde_json::json!({})),
            ProbeState::default()
        );
    }

    /// A start's alarm fires at once; a status read while it is delivered finds no alarm in
    /// storage and no wake yet (seen under load in control-hostile's racing starts): the probe
    /// is running all the same. Stopped, it is not.
    #[test]
    fn a_status_read_while_its_alarm_is_delivered_still_says_running() {
        let mut p = Probe::new(ProbeState::default());
        p.handle_start(&hint_arm(300, 3600), NOW);
        drive(&mut p, &mut Table::default(), NOW);
        assert!(
            p.status(Count::default(), None).running,
            "armed, alarm in delivery"
        );
        p.handle_alarm(None, NOW);
        assert!(p.status(Count::default(), None).running, "measuring");
        p.handle_stop();
        assert!(!p.status(Count::default(), None).running, "stopped");
        let mut idle = Probe::new(ProbeState::default());
        assert!(!idle.status(Count::default(), None).running, "never armed");
        idle.handle_alarm(None, NOW);
        assert!(!idle.status(Count::default(), None).running, "an idle wake");
    }

    #[test]
    fn a_start_saves_then_arms_now_and_clears_a_stop_a_tick_never_undoes_a_stop() {
        let stopped = ProbeState {
            stopped: true,
            ..ProbeState::default()
        };
        let mut p = Probe::new(stopped.clone());
        let armed = p.handle_tick(&hint_arm(300, 3600), false, NOW);
        assert_eq!((armed.armed, armed.stopped), (false, true));
        assert_eq!(p.poll(), None, "a refused tick has no effect");
        assert_eq!(p.state(), &stopped, "and changes nothing");
        let armed = p.handle_start(&hint_arm(300, 3600), NOW);
        assert_eq!((armed.armed, armed.stopped), (true, false));
        let effects = drive(&mut p, &mut Table::default(), NOW);
        let state = p.state().clone();
        assert_eq!(
            effects,
            vec![Effect::Save(state.clone()), Effect::ArmAt(NOW)]
        );
        assert!(!state.stopped);
        assert_eq!(state.live_target(), Some(&Target::Hint("weur".into())));
        assert_eq!(
            state.schedule,
            Some(Schedule {
                every_s: 300,
                keep_s: 3600
            })
        );
    }

    #[test]
    fn a_tick_arms_only_a_chain_that_died_and_keeps_the_starts_schedule() {
        let mut p = Probe::new(ProbeState::default());
        // A probe that never ran takes the vars' schedule from the tick.
        assert!(p.handle_tick(&hint_arm(300, 3600), false, NOW).armed);
        let effects = drive(&mut p, &mut Table::default(), NOW);
        assert_eq!(
            (saves(&effects), alarm(&effects)),
            (1, Some(Effect::ArmAt(NOW)))
        );
        assert_eq!(p.state().keep_s(), 3600);
        // A start's schedule persists through the cron's ticks.
        p.handle_start(&hint_arm(10, 600), NOW);
        drive(&mut p, &mut Table::default(), NOW);
        assert!(!p.handle_tick(&hint_arm(300, 3600), true, NOW).armed);
        drive(&mut p, &mut Table::default(), NOW);
        let every = p.state().schedule.map(|s| (s.every_s, s.keep_s));
        assert_eq!(every, Some((10, 600)));
        // Its chain died (no alarm): the tick re-arms it, still on the start's schedule, and
        // saves nothing (nothing changed).
        assert!(p.handle_tick(&hint_arm(300, 3600), false, NOW).armed);
        let effects = drive(&mut p, &mut Table::default(), NOW);
        assert_eq!(effects, vec![Effect::ArmAt(NOW)]);
    }

    #[test]
    fn a_tick_that_changes_nothing_emits_no_save() {
        let arm = hint_arm(300, 3600);
        let mut p = started(&arm);
        assert!(!p.handle_tick(&arm, true, NOW + 300_000.0).armed);
        assert_eq!(
            p.poll(),
            None,
            "a live chain, nothing changed: no effect at all"
        );
        // Read back from storage in a new instance: the same.
        let mut fresh = Probe::new(p.state().clone());
        fresh.handle_tick(&arm, true, NOW);
        assert_eq!(fresh.poll(), None);
        // A tick that changes the target (a member's new URL) saves it.
        let mut m = started(&member_arm("eu-west-1"));
        let mut moved = member_arm("eu-west-1");
        moved.member = Some(ArmMember {
            label: "eu-west-1".into(),
            url: "https://new.example.workers.dev".into(),
        });
        m.handle_tick(&moved, true, NOW);
        let effects = drive(&mut m, &mut Table::default(), NOW);
        assert_eq!(effects, vec![Effect::Save(m.state().clone())]);
    }

    #[test]
    fn a_stop_keeps_an_alarm_only_for_what_is_kept_and_a_failed_read_retries() {
        let mut table = Table::default();
        let mut p = started(&hint_arm(60, 3600));
        p.handle_stop();
        let effects = drive(&mut p, &mut table, NOW);
        assert_eq!(
            outward(&effects),
            vec![Effect::Save(p.state().clone()), Effect::Disarm],
            "nothing kept: no alarm"
        );
        assert!(p.state().stopped && p.state().live_target().is_none());
        table.lines.push((NOW as i64 - 1000, "a".into()));
        let due = NOW - 1000.0 + keep::expiry_after_ms(3600);
        p.handle_stop();
        let effects = drive(&mut p, &mut table, NOW);
        assert_eq!(
            outward(&effects),
            vec![Effect::ArmAt(due)],
            "already saved stopped"
        );
        // Already due: the next wake, a second from now, not a loop.
        let later = due + 50_000.0;
        p.handle_stop();
        assert_eq!(
            alarm(&drive(&mut p, &mut table, later)),
            Some(Effect::ArmAt(later + EXPIRY_MIN_WAIT_MS))
        );
        table.read_fails = true;
        p.handle_stop();
        let effects = drive(&mut p, &mut table, NOW);
        assert_eq!(alarm(&effects), Some(Effect::ArmAt(NOW + EXPIRY_RETRY_MS)));
        assert_eq!(saves(&effects), 1, "the error said is a change");
        assert!(p
            .state()
            .last_error
            .as_deref()
            .unwrap()
            .contains("read failed"));
    }

    #[test]
    fn an_idle_wake_expires_counts_a_failure_and_never_ends_the_chain() {
        let mut table = Table::default();
        let mut p = started(&hint_arm(60, 60));
        table.lines.push((NOW as i64, "a".into()));
        p.handle_stop();
        drive(&mut p, &mut table, NOW);
        let due = NOW + keep::expiry_after_ms(60);
        p.handle_alarm(None, NOW + 10.0);
        let effects = drive(&mut p, &mut table, NOW + 10.0);
        assert_eq!(
            effects,
            vec![
                Effect::Expire {
                    before_ms: NOW + 10.0 - keep::expiry_after_ms(60)
                },
                Effect::ReadOldest,
                Effect::ArmAt(due)
            ],
            "nothing changed: no save"
        );
        table.expire_fails = true;
        p.handle_alarm(None, due);
        let effects = drive(&mut p, &mut table, due);
        assert_eq!(
            outward(&effects),
            vec![
                Effect::Save(p.state().clone()),
                Effect::ArmAt(due + EXPIRY_MIN_WAIT_MS)
            ]
        );
        assert_eq!(p.state().expire_failed, 1);
        assert!(p.state().last_error.as_deref().unwrap().contains("locked"));
        table.expire_fails = false;
        p.handle_alarm(None, due + 1000.0);
        let effects = drive(&mut p, &mut table, due + 1000.0);
        assert_eq!(outward(&effects), vec![Effect::Disarm]);
        assert!(table.lines.is_empty());
        // Never armed: nothing to measure either.
        let mut fresh = Probe::new(ProbeState::default());
        fresh.handle_alarm(None, NOW);
        assert_eq!(
            drive(&mut fresh, &mut Table::default(), NOW).last(),
            Some(&Effect::Disarm)
        );
    }

    #[test]
    fn a_member_out_of_the_fleet_stops_at_its_next_wake() {
        let fleet = "eu-west-1=https://m.example.workers.dev";
        let mut p = started(&member_arm("eu-west-1"));
        p.handle_alarm(Some(fleet), NOW);
        assert_eq!(
            p.poll(),
            Some(Effect::Measure {
                target: Target::Member(member("eu-west-1")),
                last_colo: None,
                first: true
            })
        );
        for fleet in [
            None,
            Some("us-east-1=https://us-east-1.example.workers.dev"),
            Some("not a fleet"),
        ] {
            let mut p = started(&member_arm("eu-west-1"));
            p.handle_alarm(fleet, NOW);
            let effects = drive(&mut p, &mut Table::default(), NOW);
            assert_eq!(
                outward(&effects),
                vec![Effect::Save(p.state().clone()), Effect::Disarm]
            );
            assert!(p.state().stopped, "{fleet:?}");
            assert_eq!(
                p.state().last_error.as_deref(),
                Some("stopped: eu-west-1 is no longer in FLEET")
            );
        }
        // A hint probe does not ask the fleet.
        let mut p = started(&hint_arm(60, 60));
        p.handle_alarm(None, NOW);
        assert!(matches!(p.poll(), Some(Effect::Measure { .. })));
    }

    #[test]
    fn a_wake_measures_until_warm_and_at_most_twice_and_a_retry_does_not_overlap() {
        let mut p = started(&hint_arm(60, 3600));
        p.handle_alarm(None, NOW);
        assert_eq!(
            p.poll(),
            Some(Effect::Measure {
                target: Target::Hint("weur".into()),
                last_colo: None,
                first: true
            })
        );
        assert!(p.measuring());
        // An alarm again while it measures (at-least-once): nothing.
        p.handle_alarm(None, NOW);
        assert_eq!(p.poll(), None);
        // Cold: measured again at once, the colo carried on, the instance no longer first.
        p.handle_measured(measured(NOW, "LHR", true), NOW + 1.0);
        assert_eq!(
            p.poll(),
            Some(Effect::Measure {
                target: Target::Hint("weur".into()),
                last_colo: Some("LHR".into()),
                first: false
            })
        );
        // Cold twice (a member whose isolates keep changing): bounded all the same.
        p.handle_measured(measured(NOW + 2.0, "LHR", true), NOW + 3.0);
        let mut table = Table::default();
        let effects = drive(&mut p, &mut table, NOW + 3.0);
        assert_eq!(table.lines.len(), MAX_PER_WAKE);
        assert!(!p.measuring());
        assert_eq!(alarm(&effects), Some(Effect::ArmAt(NOW + 3.0 + 60_000.0)));
        // A warm answer ends the wake.
        p.handle_alarm(None, NOW + 60_000.0);
        assert!(matches!(
            p.poll(),
            Some(Effect::Measure { first: false, .. })
        ));
        p.handle_measured(measured(NOW + 60_000.0, "LHR", false), NOW + 60_001.0);
        let effects = drive(&mut p, &mut table, NOW + 60_001.0);
        assert!(!effects.iter().any(|e| matches!(e, Effect::Measure { .. })));
        assert_eq!(table.lines.len(), 3);
    }

    #[test]
    fn the_keep_loop_counts_every_failure_and_goes_on() {
        let mut table = Table::default();
        let mut p = started(&member_arm("eu-west-1"));
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
        let fleet = Some("eu-west-1=https://m.example.workers.dev");
        let wake = |p: &mut Probe, table: &mut Table, answers: Vec<Measured>, now: f64| {
            p.handle_alarm(fleet, now);
            for m in answers {
                assert!(matches!(p.poll(), Some(Effect::Measure { .. })));
                p.handle_measured(m, now);
            }
            drive(p, table, now)
        };
        let effects = wake(&mut p, &mut table, vec![placed, elsewhere], NOW + 5.0);
        assert_eq!(
            outward(&effects),
            vec![
                Effect::Save(p.state().clone()),
                Effect::ArmAt(NOW + 5.0 + 60_000.0)
            ]
        );
        let s = p.state();
        assert_eq!(table.lines.len(), 2);
        assert_eq!((s.placement.placed, s.placement.elsewhere), (1, 1));
        assert_eq!(s.placement.last.as_deref(), Some("remote-IAD"));
        assert_eq!(s.placement.last_trace.as_deref(), Some("unknown"));
        assert_eq!(s.last_colo.as_deref(), Some("IAD"));
        assert_eq!(s.last_error.as_deref(), Some("placed elsewhere"));
        assert_eq!(table.expired, 2, "each kept answer expires the old ones");

        // An expiry that fails does not drop the wake's other answers: both kept, both counted.
        table.expire_fails = true;
        let answers = vec![
            measured(NOW + 10.0, "CDG", true),
            measured(NOW + 11.0, "CDG", false),
        ];
        let effects = wake(&mut p, &mut table, answers, NOW + 20.0);
        assert_eq!(alarm(&effects), Some(Effect::ArmAt(NOW + 20.0 + 60_000.0)));
        assert_eq!(table.lines.len(), 4);
        assert_eq!(p.state().expire_failed, 2);
        table.expire_fails = false;

        // A keep that fails is counted, and the wake's next answer is still kept.
        table.keep_fails = true;
        wake(
            &mut p,
            &mut table,
            vec![measured(NOW + 30.0, "CDG", false)],
            NOW + 31.0,
        );
        table.keep_fails = false;
        let mut timed_out = measured(NOW + 40.0, "CDG", false);
        timed_out.last_error = Some("member timeout: no answer within 150 s".into());
        wake(&mut p, &mut table, vec![timed_out], NOW + 41.0);
        assert_eq!(p.state().keep_failed, 1);
        assert_eq!(table.lines.len(), 5);
        assert_eq!(p.state().last_t_ms, Some((NOW + 40.0) as i64));
        assert_eq!(
            p.state().last_error.as_deref(),
            Some("member timeout: no answer within 150 s"),
            "the latest answer's trouble is the one said"
        );
    }

    #[test]
    fn a_probe_stopped_while_it_measured_keeps_what_it_measured_and_only_expires() {
        let mut table = Table::default();
        let mut p = started(&hint_arm(60, 60));
        p.handle_alarm(None, NOW);
        p.poll();
        // A stop comes in while it measures, and is not undone by the wake's end.
        p.handle_stop();
        drive(&mut p, &mut table, NOW);
        p.handle_measured(measured(NOW, "LHR", false), NOW + 1.0);
        let effects = drive(&mut p, &mut table, NOW + 1.0);
        let due = NOW + keep::expiry_after_ms(60);
        assert_eq!(alarm(&effects), Some(Effect::ArmAt(due)));
        assert_eq!(table.lines.len(), 1);
        assert!(p.state().stopped);
    }

    #[test]
    fn a_failed_save_or_alarm_is_said_and_the_chain_goes_on() {
        let mut table = Table::default();
        table.lines.push((NOW as i64, "a".into()));
        let mut p = started(&hint_arm(60, 60));
        p.handle_stop();
        // The stop's save fails: what was left (its alarm) is dropped, the error said and the
        // state saved again, then the expiry alarm set.
        assert!(matches!(p.poll(), Some(Effect::ReadOldest)));
        p.handle_oldest(Ok(Some(NOW as i64)), NOW);
        assert!(matches!(p.poll(), Some(Effect::Save(_))));
        p.handle_failed("storage", NOW + 2.0);
        let effects = drive(&mut p, &mut table, NOW + 2.0);
        assert_eq!(
            outward(&effects),
            vec![
                Effect::Save(p.state().clone()),
                Effect::ArmAt(NOW + keep::expiry_after_ms(60))
            ]
        );
        assert_eq!(
            p.state().last_error.as_deref(),
            Some("probe failed: storage")
        );
        // A live probe's failed alarm: its next wake, and saved even unchanged since.
        let mut p = started(&hint_arm(60, 60));
        p.handle_failed("storage", NOW + 2.0);
        p.handle_failed("storage", NOW + 2.0);
        let effects = drive(&mut p, &mut table, NOW + 2.0);
        assert_eq!(
            outward(&effects),
            vec![
                Effect::Save(p.state().clone()),
                Effect::ArmAt(NOW + 60_002.0)
            ]
        );
    }

    #[test]
    fn the_expiry_rule_arms_for_the_oldest_never_sooner_than_a_second_and_retries_a_failed_read() {
        let after = keep::expiry_after_ms(60);
        assert_eq!(
            expiry_alarm(Ok(Some(NOW as i64)), 60, NOW),
            (Alarm::At(NOW + after), None)
        );
        assert_eq!(
            expiry_alarm(Ok(Some(NOW as i64)), 60, NOW + after),
            (Alarm::At(NOW + after + EXPIRY_MIN_WAIT_MS), None)
        );
        assert_eq!(expiry_alarm(Ok(None), 60, NOW), (Alarm::Delete, None));
        let (alarm, error) = expiry_alarm(Err("gone".into()), 60, NOW);
        assert_eq!(alarm, Alarm::At(NOW + EXPIRY_RETRY_MS));
        assert!(error.unwrap().contains("gone"));
        assert_eq!(expire_before_ms(NOW, 60), NOW - after);
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

    fn line(m: &Measured) -> serde_json::Value {
        serde_json::from_str(&m.line).unwrap()
    }

    /// The `first` of the next measurement the machine asks for.
    fn first_of(effect: Option<Effect>) -> bool {
        match effect {
            Some(Effect::Measure { first, .. }) => first,
            other => panic!("not a measurement: {other:?}"),
        }
    }

    #[test]
    fn a_hint_answer_is_cold_only_as_the_instances_first_answer() {
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
        let mut table = Table::default();
        let mut p = started(&hint_arm(60, 60));
        p.handle_alarm(None, NOW);
        // A failure first: no answer, so the next answer is still the instance's first.
        let failed = hint_answer(reply, first_of(p.poll()));
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
        assert!(!failed.cold && !failed.answered);
        p.handle_measured(failed, NOW);
        drive(&mut p, &mut table, NOW);
        p.handle_alarm(None, NOW);
        let ok = HintReply {
            status: 200,
            body,
            ..reply
        };
        let first = hint_answer(ok, first_of(p.poll()));
        let v = line(&first);
        assert!(first.cold && v["cold"] == true);
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
        p.handle_measured(first, NOW);
        let second = hint_answer(
            HintReply {
                last_colo: Some("LHR"),
                ..ok
            },
            first_of(p.poll()),
        );
        assert!(!second.cold && line(&second)["colo_changed"] == false);
        // A 200 that is no JSON is malformed, never a gap.
        let v = line(&hint_answer(
            HintReply {
                status: 200,
                body: "<html>",
                ..reply
            },
            true,
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
        let mut p = started(&member_arm("eu-west-1"));
        let count = Count {
            kept: 3,
            first_t_ms: Some(1),
            last_t_ms: None,
        };
        // A new instance reading a started state, with no alarm and no wake: a dead chain (the
        // cron's tick re-arms it), not running.
        assert!(!Probe::new(p.state().clone()).status(count, None).running);
        p.handle_alarm(Some("eu-west-1=https://m.example.workers.dev"), NOW);
        let st = p.status(count, None);
        assert!(
            st.running && !st.stopped,
            "no alarm while it measures: still running"
        );
        assert_eq!(st.member.as_deref(), Some("eu-west-1"));
        assert!(st.placement.is_some() && st.hint.is_none());
        assert_eq!(
            ProbeState::default().status(count, None, false).every_s,
            0,
            "never armed: 0, as before"
        );
        let mut h = ProbeState {
            last_t_ms: Some(7),
            ..started(&hint_arm(60, 60)).state().clone()
        };
        let st = h.status(count, Some(NOW as i64), false);
        assert!(st.running && st.placement.is_none());
        assert_eq!(st.hint.as_deref(), Some("weur"));
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
