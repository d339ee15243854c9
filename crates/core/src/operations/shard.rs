//! One shard of a run's archive (`RunArchive`) as a sans-IO machine: the first write arms an
//! alarm for the oldest answer, the alarm expires and re-arms by [`probe::expiry_alarm`]; a
//! failed expiry or first arm is retried, never the chain's end.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::operations::probe::{self, Alarm};
use crate::spec::keep;

/// What a shard keeps besides its answers (its Durable Object storage, key `shard`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShardState {
    /// How long it keeps its answers, as its run's writes said; `None` before the first.
    pub keep_s: Option<u32>,
    /// Deletions of expired answers that failed (they stay until a later one succeeds).
    pub expire_failed: u64,
}

impl ShardState {
    /// Reads a stored state as its `Deserialize` does (absent or mistyped fields take their
    /// default), without a derived deserializer in the bundle (tested against `Deserialize`).
    pub fn read(v: &serde_json::Value) -> ShardState {
        ShardState {
            keep_s: v
                .get("keep_s")
                .and_then(serde_json::Value::as_u64)
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            expire_failed: v
                .get("expire_failed")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
        }
    }

    /// How long it keeps: its run's `keep`, the default before any write said one.
    pub fn keep_s(&self) -> u32 {
        self.keep_s.unwrap_or(keep::DEFAULT_KEEP_S)
    }
}

/// What the object does next ([`Shard::poll`]), each answered with its `handle_*`.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Keep this state (it changed).
    Save(ShardState),
    /// Delete the answers measured before this epoch ms.
    Expire { before_ms: f64 },
    /// Read the time of the oldest answer kept.
    ReadOldest,
    /// Set the alarm for this epoch ms.
    ArmAt(f64),
}

/// What a result fed back continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Ready,
    Expiring,
    Oldest,
}

/// One shard object's machine, for the life of its instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Shard {
    state: ShardState,
    /// The state as storage has it.
    saved: ShardState,
    /// This instance has set an alarm (or is setting one): its writes need not.
    armed: bool,
    step: Step,
    effects: VecDeque<Effect>,
}

impl Shard {
    /// The machine of an instance, over the state storage holds (the default when none).
    pub fn new(state: ShardState) -> Shard {
        Shard {
            saved: state.clone(),
            state,
            armed: false,
            step: Step::Ready,
            effects: VecDeque::new(),
        }
    }

    pub fn state(&self) -> &ShardState {
        &self.state
    }

    /// The next effect to execute, `None`: nothing (until the next event).
    pub fn poll(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// A write with its run's `keep` (seconds, clamped): the first of an instance, or after a
    /// failed arm, arms for the oldest answer.
    pub fn handle_write(&mut self, keep_s: Option<i64>) {
        if self.armed || self.step != Step::Ready {
            return;
        }
        let keep_s = keep_s
            .unwrap_or(i64::from(keep::DEFAULT_KEEP_S))
            .clamp(i64::from(keep::MIN_KEEP_S), i64::from(keep::MAX_KEEP_S));
        self.state.keep_s = u32::try_from(keep_s).ok();
        self.armed = true;
        self.read_oldest();
    }

    /// The alarm: deletes what is due, then re-arms for the oldest answer left.
    pub fn handle_alarm(&mut self, now_ms: f64) {
        self.step = Step::Expiring;
        let before_ms = probe::expire_before_ms(now_ms, self.state.keep_s());
        self.effects.push_back(Effect::Expire { before_ms });
    }

    /// An expiry's result: a failure is counted, and the alarm is set all the same.
    pub fn handle_expired(&mut self, result: Result<(), String>) {
        if std::mem::replace(&mut self.step, Step::Ready) != Step::Expiring {
            return;
        }
        if result.is_err() {
            self.state.expire_failed += 1;
        }
        self.read_oldest();
    }

    fn read_oldest(&mut self) {
        self.step = Step::Oldest;
        self.effects.push_back(Effect::ReadOldest);
    }

    /// The oldest answer's time: the alarm for when it is due ([`probe::expiry_alarm`]; a
    /// failed read retried later), or none when nothing is kept — the next write arms again.
    pub fn handle_oldest(&mut self, oldest_t_ms: Result<Option<i64>, String>, now_ms: f64) {
        if std::mem::replace(&mut self.step, Step::Ready) != Step::Oldest {
            return;
        }
        let (alarm, _) = probe::expiry_alarm(oldest_t_ms, self.state.keep_s(), now_ms);
        if self.state != self.saved {
            self.saved = self.state.clone();
            self.effects.push_back(Effect::Save(self.state.clone()));
        }
        match alarm {
            Alarm::At(ms) => {
                self.armed = true;
                self.effects.push_back(Effect::ArmAt(ms));
            }
            Alarm::Delete => self.armed = false,
        }
    }

    /// An arm's result: one that failed leaves the instance unarmed, so the next write tries
    /// again.
    pub fn handle_armed(&mut self, result: Result<(), String>) {
        if result.is_err() {
            self.armed = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: f64 = 1_700_000_000_000.0;

    /// The object's loop over a table holding answers at `oldest` (none: empty): executes each
    /// effect, feeding back `expire` and `arm` as the results, and returns every effect seen.
    fn drive(
        s: &mut Shard,
        oldest: Option<i64>,
        expire: Result<(), String>,
        arm: Result<(), String>,
        now: f64,
    ) -> Vec<Effect> {
        let mut seen = Vec::new();
        while let Some(effect) = s.poll() {
            match &effect {
                Effect::Expire { .. } => s.handle_expired(expire.clone()),
                Effect::ReadOldest => s.handle_oldest(Ok(oldest), now),
                Effect::ArmAt(_) => s.handle_armed(arm.clone()),
                Effect::Save(_) => {}
            }
            seen.push(effect);
        }
        seen
    }

    #[test]
    fn a_first_write_takes_the_keep_and_arms_for_the_oldest_answer_once() {
        let mut s = Shard::new(ShardState::default());
        s.handle_write(Some(60));
        let effects = drive(&mut s, Some(NOW as i64), Ok(()), Ok(()), NOW);
        let state = ShardState {
            keep_s: Some(60),
            expire_failed: 0,
        };
        let due = NOW + keep::expiry_after_ms(60);
        assert_eq!(
            effects,
            vec![
                Effect::ReadOldest,
                Effect::Save(state.clone()),
                Effect::ArmAt(due)
            ]
        );
        s.handle_write(Some(60));
        assert_eq!(s.poll(), None, "armed: a later write does nothing");
        // A new instance over the saved state: arms again, saves nothing.
        let mut again = Shard::new(state);
        again.handle_write(Some(60));
        let effects = drive(&mut again, Some(NOW as i64), Ok(()), Ok(()), NOW);
        assert_eq!(effects, vec![Effect::ReadOldest, Effect::ArmAt(due)]);
        // A keep out of bounds is clamped.
        let mut s = Shard::new(ShardState::default());
        s.handle_write(Some(1));
        assert_eq!(s.state().keep_s, Some(keep::MIN_KEEP_S));
    }

    #[test]
    fn a_failed_first_arm_is_retried_by_the_next_write() {
        let mut s = Shard::new(ShardState::default());
        s.handle_write(None);
        drive(&mut s, Some(NOW as i64), Ok(()), Err("storage".into()), NOW);
        s.handle_write(None);
        let effects = drive(&mut s, Some(NOW as i64), Ok(()), Ok(()), NOW);
        let due = NOW + keep::expiry_after_ms(keep::DEFAULT_KEEP_S);
        assert_eq!(effects, vec![Effect::ReadOldest, Effect::ArmAt(due)]);
        s.handle_write(None);
        assert_eq!(s.poll(), None, "armed now");
    }

    #[test]
    fn the_alarm_rearms_after_a_failed_expiry_and_counts_it() {
        let mut s = Shard::new(ShardState {
            keep_s: Some(60),
            expire_failed: 0,
        });
        let due = NOW + keep::expiry_after_ms(60);
        s.handle_alarm(due);
        let effects = drive(&mut s, Some(NOW as i64), Err("locked".into()), Ok(()), due);
        let counted = ShardState {
            keep_s: Some(60),
            expire_failed: 1,
        };
        assert_eq!(
            effects,
            vec![
                Effect::Expire {
                    before_ms: due - keep::expiry_after_ms(60)
                },
                Effect::ReadOldest,
                Effect::Save(counted),
                Effect::ArmAt(due + probe::EXPIRY_MIN_WAIT_MS)
            ],
            "never the end of the chain"
        );
        // The next one deletes: re-armed for the oldest left, nothing to save.
        s.handle_alarm(due + 1000.0);
        let later = NOW as i64 + 5000;
        let effects = drive(&mut s, Some(later), Ok(()), Ok(()), due + 1000.0);
        assert_eq!(
            effects.last(),
            Some(&Effect::ArmAt(later as f64 + keep::expiry_after_ms(60)))
        );
        assert_eq!(effects.len(), 3);
        // Nothing left: no alarm, and the next write arms again.
        s.handle_alarm(due + 10_000.0);
        let effects = drive(&mut s, None, Ok(()), Ok(()), due + 10_000.0);
        assert!(!effects.iter().any(|e| matches!(e, Effect::ArmAt(_))));
        s.handle_write(Some(60));
        assert_eq!(s.poll(), Some(Effect::ReadOldest));
    }

    #[test]
    fn a_failed_read_of_the_oldest_retries_later() {
        let mut s = Shard::new(ShardState::default());
        s.handle_alarm(NOW);
        assert!(matches!(s.poll(), Some(Effect::Expire { .. })));
        s.handle_expired(Ok(()));
        assert_eq!(s.poll(), Some(Effect::ReadOldest));
        s.handle_oldest(Err("gone".into()), NOW);
        assert_eq!(s.poll(), Some(Effect::ArmAt(NOW + probe::EXPIRY_RETRY_MS)));
    }

    #[test]
    fn a_stored_state_reads_back_as_its_deserialize_reads_it() {
        for state in [
            ShardState::default(),
            ShardState {
                keep_s: Some(3600),
                expire_failed: 4,
            },
        ] {
            let v = serde_json::to_value(&state).unwrap();
            assert_eq!(ShardState::read(&v), state);
            assert_eq!(serde_json::from_value::<ShardState>(v).unwrap(), state);
        }
        let odd = serde_json::json!({ "keep_s": "x", "expire_failed": -1 });
        assert_eq!(ShardState::read(&odd), ShardState::default());
    }
}
