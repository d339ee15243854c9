//! A load run's archive (`/test?run=<id>`): its answers are kept across `RUN_SHARDS` Durable
//! Objects of their own class (`RunArchive`), `run:<id>#<k>`, because one object's SQLite writes
//! serialize. Writers and readers agree on the shard count through the var; a writer picks the
//! shard per answer, round robin from a random start per isolate (so isolates do not all begin
//! at shard 0). `seq` is per shard object; the stream numbers a line `k << SHARD_SEQ_BITS` plus
//! its shard's `seq`, so a run's stream (shard 0's lines, then shard 1's, ...) has one `seq` per
//! line, unique and rising, and a reader that resumes by `seq` works as with one object.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use crate::params::ParamError;

/// The var fixing a deployment's shards per run.
pub const SHARDS_VAR: &str = "RUN_SHARDS";
/// Shards of a run when `RUN_SHARDS` is not set (README: "Runs": what one object keeps a second).
pub const DEFAULT_SHARDS: u32 = 8;
/// The most shards a run may have (a reader opens each: 64 pages at least per stream).
pub const MAX_SHARDS: u32 = 64;
/// A shard's `seq` lives in the low bits of a streamed `seq`: 2^40 answers per shard, and
/// `MAX_SHARDS << 40` stays below 2^53 (exact as a JS number).
pub const SHARD_SEQ_BITS: u32 = 40;

/// `RUN_SHARDS`: 1 to [`MAX_SHARDS`].
pub fn parse_shards(text: &str) -> Result<u32, ParamError> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_SHARDS).contains(&n) => Ok(n),
        _ => Err(ParamError::new(
            SHARDS_VAR,
            format!("shards per run are a whole number from 1 to {MAX_SHARDS}, not {text:?}"),
        )),
    }
}

/// The name of shard `k` of run `run`.
pub fn shard_object_name(run: &str, k: u32) -> String {
    format!("run:{run}#{k}")
}

/// What shard `k` adds to its own `seq` in a stream.
pub fn seq_base(k: u32) -> i64 {
    i64::from(k) << SHARD_SEQ_BITS
}

/// The shard a streamed `seq` came from, and its `seq` there.
pub fn split_seq(seq: i64) -> (u32, i64) {
    (
        (seq >> SHARD_SEQ_BITS) as u32,
        seq & ((1i64 << SHARD_SEQ_BITS) - 1),
    )
}

/// An isolate's choice of shard: round robin from `start`.
#[derive(Debug)]
pub struct ShardPicker {
    next: Cell<u32>,
}

impl ShardPicker {
    /// Starting at `start` (random per isolate).
    pub fn new(start: u32) -> ShardPicker {
        ShardPicker {
            next: Cell::new(start),
        }
    }

    /// The shard of the next answer among `shards`.
    pub fn pick(&self, shards: u32) -> u32 {
        let k = self.next.get();
        self.next.set(k.wrapping_add(1));
        k % shards.max(1)
    }
}

/// The shard tried when a keep in shard `k` failed: the next one (the same with one shard).
pub fn retry_shard(k: u32, shards: u32) -> u32 {
    (k + 1) % shards.max(1)
}

/// Runs whose failed keeps an isolate holds before it could record them; past this the count of
/// a new run is only logged (a run's count is recorded with its next keep that succeeds).
pub const MAX_PENDING_RUNS: usize = 1_000;

/// Where a run's answers go: its shards (the worker: `RunArchive` objects; tests: a script).
#[allow(async_fn_in_trait)]
pub trait ShardSink {
    /// Keeps `body` (`lines` answers) in shard `k`, recording there `failed` keeps of this run
    /// that failed earlier (both or neither).
    async fn append(&self, k: u32, body: &str, lines: u64, failed: u64) -> Result<(), String>;
    /// Records `failed` keeps of this run that failed, in shard `k`.
    async fn record_failed(&self, k: u32, failed: u64) -> Result<(), String>;
}

/// What became of a keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keep {
    /// Kept in its shard.
    Kept { shard: u32 },
    /// Its shard failed (`error`); kept in the next one.
    Moved { from: u32, to: u32, error: String },
    /// Not kept, in two shards: counted, and the count `recorded` in a shard (else the isolate
    /// holds it for the run's next keep).
    Failed {
        lines: u64,
        errors: Vec<String>,
        recorded: bool,
    },
}

/// An isolate's writer of run answers: its shard choice and the failed keeps it could not yet
/// record, per run.
#[derive(Debug)]
pub struct Writer {
    picker: ShardPicker,
    pending: RefCell<BTreeMap<String, u64>>,
}

impl Writer {
    pub fn new(start: u32) -> Writer {
        Writer {
            picker: ShardPicker::new(start),
            pending: RefCell::default(),
        }
    }

    /// Failed keeps of `run` this isolate holds, not yet recorded in any shard.
    pub fn pending(&self, run: &str) -> u64 {
        self.pending.borrow().get(run).copied().unwrap_or(0)
    }

    fn hold(&self, run: &str, n: u64) -> bool {
        let mut pending = self.pending.borrow_mut();
        if n == 0 {
            return true;
        }
        if !pending.contains_key(run) && pending.len() >= MAX_PENDING_RUNS {
            return false;
        }
        *pending.entry(run.to_string()).or_insert(0) += n;
        true
    }

    /// Keeps `body` (`lines` answers of `run`) in one of its `shards`: the picked one, else the
    /// next; failing both, the answers are counted as failed keeps and the count recorded in a
    /// third shard, or held for the run's next keep. Failures held from before travel with the
    /// keep (and are held again if it fails).
    pub async fn keep(
        &self,
        sink: &impl ShardSink,
        run: &str,
        shards: u32,
        body: &str,
        lines: u64,
    ) -> Keep {
        let k = self.picker.pick(shards);
        let before = self.pending.borrow_mut().remove(run).unwrap_or(0);
        let first = match sink.append(k, body, lines, before).await {
            Ok(()) => return Keep::Kept { shard: k },
            Err(e) => e,
        };
        let to = retry_shard(k, shards);
        let second = match sink.append(to, body, lines, before).await {
            Ok(()) => {
                return Keep::Moved {
                    from: k,
                    to,
                    error: first,
                }
            }
            Err(e) => e,
        };
        let failed = before + lines;
        let recorded = sink
            .record_failed(retry_shard(to, shards), failed)
            .await
            .is_ok();
        let held = recorded || self.hold(run, failed);
        let mut errors = vec![first, second];
        if !held {
            errors.push(format!(
                "{failed} failed keeps not recorded: this isolate holds counts of {MAX_PENDING_RUNS} runs already"
            ));
        }
        Keep::Failed {
            lines,
            errors,
            recorded,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_within_bounds() {
        assert_eq!(parse_shards("8"), Ok(8));
        assert_eq!(parse_shards(" 1 "), Ok(1));
        for bad in ["0", "65", "-1", "two", ""] {
            assert_eq!(
                parse_shards(bad).unwrap_err().parameter,
                SHARDS_VAR,
                "{bad}"
            );
        }
    }

    #[test]
    fn streamed_seqs_are_unique_rise_shard_by_shard_and_split_back() {
        let mut last = 0;
        for k in 0..MAX_SHARDS {
            for local in [1, 2, (1 << SHARD_SEQ_BITS) - 1] {
                let seq = seq_base(k) + local;
                assert!(seq > last, "shard {k} seq {local}");
                assert_eq!(split_seq(seq), (k, local));
                last = seq;
            }
        }
        // Exact as a JS number.
        assert!(last < 1i64 << 53);
        assert_eq!(shard_object_name("r1", 3), "run:r1#3");
    }

    #[test]
    fn an_isolate_goes_round_the_shards_from_its_start() {
        let p = ShardPicker::new(6);
        let picked: Vec<u32> = (0..5).map(|_| p.pick(4)).collect();
        assert_eq!(picked, [2, 3, 0, 1, 2]);
        let wrap = ShardPicker::new(u32::MAX);
        assert_eq!([wrap.pick(8), wrap.pick(8)], [u32::MAX % 8, 0]);
        assert_eq!(ShardPicker::new(3).pick(1), 0);
        assert_eq!([retry_shard(3, 4), retry_shard(0, 1)], [0, 0]);
    }
}

#[cfg(test)]
mod writer_tests {
    use super::*;
    use std::cell::RefCell;

    /// Shards that fail the calls listed, recording what reached each.
    #[derive(Default)]
    struct Script {
        /// Shards whose calls fail.
        down: RefCell<Vec<u32>>,
        /// (shard, body, failed) of each append that succeeded.
        appended: RefCell<Vec<(u32, String, u64)>>,
        /// (shard, failed) of each record that succeeded.
        recorded: RefCell<Vec<(u32, u64)>>,
    }

    impl ShardSink for Script {
        async fn append(&self, k: u32, body: &str, _: u64, failed: u64) -> Result<(), String> {
            if self.down.borrow().contains(&k) {
                return Err(format!("shard {k} down"));
            }
            self.appended.borrow_mut().push((k, body.into(), failed));
            Ok(())
        }
        async fn record_failed(&self, k: u32, failed: u64) -> Result<(), String> {
            if self.down.borrow().contains(&k) {
                return Err(format!("shard {k} down"));
            }
            self.recorded.borrow_mut().push((k, failed));
            Ok(())
        }
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        futures::executor::block_on(f)
    }

    #[test]
    fn a_failed_shard_moves_the_keep_to_the_next() {
        let s = Script::default();
        s.down.borrow_mut().push(1);
        let w = Writer::new(0);
        assert_eq!(run(w.keep(&s, "r", 4, "a", 1)), Keep::Kept { shard: 0 });
        assert!(matches!(
            run(w.keep(&s, "r", 4, "b", 1)),
            Keep::Moved { from: 1, to: 2, .. }
        ));
        assert_eq!(
            *s.appended.borrow(),
            [(0, "a".into(), 0), (2, "b".into(), 0)]
        );
        assert_eq!(w.pending("r"), 0);
    }

    #[test]
    fn a_keep_failing_twice_is_counted_in_a_third_shard() {
        let s = Script::default();
        s.down.borrow_mut().extend([0, 1]);
        let w = Writer::new(0);
        let kept = run(w.keep(&s, "r", 4, "a\nb", 2));
        assert!(
            matches!(kept, Keep::Failed { lines: 2, recorded: true, ref errors } if errors.len() == 2)
        );
        assert_eq!(*s.recorded.borrow(), [(2, 2)]);
        assert_eq!(w.pending("r"), 0);
        assert!(s.appended.borrow().is_empty());
    }

    #[test]
    fn a_count_no_shard_took_travels_with_the_next_keep_of_its_run() {
        let s = Script::default();
        // One shard, down: the keep, its retry and the record all fail.
        s.down.borrow_mut().push(0);
        let w = Writer::new(0);
        assert!(matches!(
            run(w.keep(&s, "r", 1, "a", 1)),
            Keep::Failed {
                recorded: false,
                ..
            }
        ));
        assert!(matches!(
            run(w.keep(&s, "r", 1, "b", 1)),
            Keep::Failed {
                recorded: false,
                ..
            }
        ));
        assert_eq!(w.pending("r"), 2);
        assert_eq!(w.pending("other"), 0);
        s.down.borrow_mut().clear();
        assert_eq!(run(w.keep(&s, "other", 1, "x", 1)), Keep::Kept { shard: 0 });
        assert_eq!(run(w.keep(&s, "r", 1, "c", 1)), Keep::Kept { shard: 0 });
        assert_eq!(
            *s.appended.borrow(),
            [(0, "x".into(), 0), (0, "c".into(), 2)],
            "the run's count went with its next keep, another run's did not"
        );
        assert_eq!(w.pending("r"), 0);
    }

    #[test]
    fn the_isolate_holds_counts_of_a_bounded_number_of_runs() {
        let w = Writer::new(0);
        for i in 0..MAX_PENDING_RUNS {
            assert!(w.hold(&format!("r{i}"), 1));
        }
        assert!(!w.hold("one-more", 1));
        assert!(w.hold("r0", 1), "a run already held adds up");
        assert_eq!(w.pending("r0"), 2);
    }
}
