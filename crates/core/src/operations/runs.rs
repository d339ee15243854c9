//! A load run's archive (`/test?run=<id>`), kept across `RUN_SHARDS` `RunArchive` objects
//! (`run:<id>#<k>`, one object's SQLite writes serialize), picked round robin from a random
//! start per isolate. A streamed line's `seq` is `k << SHARD_SEQ_BITS` plus its shard's, so a
//! run's stream has one rising `seq` per line and a reader resumes by it as with one object.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;

use crate::error::ParamError;

/// The var fixing a deployment's shards per run.
pub const SHARDS_VAR: &str = "RUN_SHARDS";
/// Shards of a run when `RUN_SHARDS` is not set (docs/probes.md, "Kept runs": what one object keeps a second).
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

enum Waiting {
    Done,
    /// An append is under way and a later line of the run waits behind this one: that line's
    /// keep waits for both (lines are taken in order), so this one may stop waiting.
    HandedOn,
    Flushing,
    Free,
}

/// An append under way; its lines are done when it finishes or is dropped.
struct Flush<'a> {
    writer: &'a Writer,
    run: &'a str,
    n: u64,
}

impl Flush<'_> {
    fn finish(self) {
        self.writer.flushed(self.run, self.n, true);
        std::mem::forget(self);
    }
}

impl Drop for Flush<'_> {
    fn drop(&mut self) {
        self.writer.flushed(self.run, self.n, false);
    }
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

/// Answers of one append at most (a few KiB each: one append stays well under a MiB).
pub const MAX_BATCH_LINES: usize = 200;
/// Bytes of one append at most, short of SQLite's 2 MB string once the lines are escaped as
/// one JSON array (an answer alone may pass it).
pub const MAX_BATCH_BYTES: usize = 512 << 10;
/// Appends of one run under way at once in an isolate, at most (each to the next shard): one at
/// a time held a local run to one shard's commit time. A further append starts only once a
/// full batch ([`MAX_BATCH_LINES`]) waits, so a slow rate still goes in batches.
pub const MAX_PARALLEL_APPENDS: u32 = 8;
/// Appends one caller makes in a row for the run's waiting lines, at most.
const MAX_ROUNDS: usize = 4;
/// Answers of a run waiting in an isolate at most; past it an answer is kept on its own.
pub const MAX_BUFFERED_LINES: usize = 4 * MAX_BATCH_LINES;
/// How long a keep waits for the appends under way before counting the answers behind them as
/// failed: `waitUntil` is cut 30 s after the response, and an answer cut off there would go
/// uncounted. The rest of the 30 s records the count.
pub const KEEP_DEADLINE_MS: f64 = KEEP_DEADLINE_S as f64 * 1000.0;
const KEEP_DEADLINE_S: u32 = 20;

/// A run's answers waiting in the isolate for an append, in the order they came. `id`s count the
/// lines pushed since the buffer was made (`made` tells buffers of one run apart).
#[derive(Debug)]
struct Buffer {
    made: u64,
    lines: VecDeque<String>,
    /// The id of the next line pushed.
    next: u64,
    /// Lines before this id were taken by an append.
    taken: u64,
    /// Lines before this id are done (kept, or counted as failed).
    done: u64,
    /// Appends of this run under way in this isolate (at most [`MAX_PARALLEL_APPENDS`], and at
    /// most its shards: each goes to the next shard).
    flushing: u32,
}

/// An isolate's writer of run answers: its shard choice, the answers waiting to be appended
/// together, and the failed keeps it could not yet record, per run.
#[derive(Debug)]
pub struct Writer {
    picker: ShardPicker,
    pending: RefCell<BTreeMap<String, u64>>,
    buffers: RefCell<BTreeMap<String, Buffer>>,
    made: Cell<u64>,
}

/// Where a line waits: its buffer and id.
#[derive(Debug, Clone, Copy)]
struct Ticket {
    made: u64,
    id: u64,
}

impl Writer {
    pub fn new(start: u32) -> Writer {
        Writer {
            picker: ShardPicker::new(start),
            pending: RefCell::default(),
            buffers: RefCell::default(),
            made: Cell::new(0),
        }
    }

    /// Keeps one answer `line` of `run` with the others waiting in this isolate: whoever finds
    /// no append of the run under way (or fewer than its shards and a full batch waiting)
    /// appends up to [`MAX_BATCH_LINES`] at a time; the others look again after `tick`. Returns
    /// once the line is kept or counted failed, or once a later line waits behind it (so only
    /// the last line ticks: a tick per answer cost more CPU than the keep). Once `expired`
    /// ([`KEEP_DEADLINE_MS`]) the lines still waiting are counted as failed keeps, never lost.
    pub async fn keep_batched<F: Future<Output = ()>>(
        &self,
        sink: &impl ShardSink,
        run: &str,
        shards: u32,
        line: String,
        tick: impl Fn() -> F,
        expired: impl Fn() -> bool,
    ) -> Vec<Keep> {
        let Some(ticket) = self.push(run, &line) else {
            return vec![self.keep(sink, run, shards, &line, 1).await];
        };
        let parallel = shards.clamp(1, MAX_PARALLEL_APPENDS);
        let mut outcomes = Vec::new();
        loop {
            match self.state(run, ticket, parallel) {
                Waiting::Done | Waiting::HandedOn => return outcomes,
                Waiting::Flushing if expired() => {
                    outcomes.extend(self.give_up(sink, run, shards).await);
                    return outcomes;
                }
                Waiting::Flushing => tick().await,
                Waiting::Free => {
                    // A few appends, then the line's own wait again: a caller does not append
                    // for others for ever (another takes over at its tick).
                    for _ in 0..MAX_ROUNDS {
                        let Some((body, n)) = self.take(run) else {
                            break;
                        };
                        // However this append ends, even dropped mid-way (its request went), the
                        // lines it took are done and the buffer free again.
                        let guard = Flush {
                            writer: self,
                            run,
                            n,
                        };
                        outcomes.push(self.keep(sink, run, shards, &body, n).await);
                        guard.finish();
                    }
                }
            }
        }
    }

    fn push(&self, run: &str, line: &str) -> Option<Ticket> {
        let mut buffers = self.buffers.borrow_mut();
        let buffer = match buffers.get_mut(run) {
            Some(b) => b,
            None => {
                let made = self.made.get() + 1;
                self.made.set(made);
                buffers.entry(run.to_string()).or_insert(Buffer {
                    made,
                    lines: VecDeque::new(),
                    next: 0,
                    taken: 0,
                    done: 0,
                    flushing: 0,
                })
            }
        };
        if buffer.lines.len() >= MAX_BUFFERED_LINES {
            return None;
        }
        buffer.lines.push_back(line.to_string());
        buffer.next += 1;
        Some(Ticket {
            made: buffer.made,
            id: buffer.next - 1,
        })
    }

    fn state(&self, run: &str, ticket: Ticket, parallel: u32) -> Waiting {
        match self.buffers.borrow().get(run) {
            Some(b) if b.made == ticket.made && ticket.id >= b.done => {
                let waiting = !b.lines.is_empty();
                let more =
                    b.flushing == 0 || (b.flushing < parallel && b.lines.len() >= MAX_BATCH_LINES);
                if waiting && more {
                    Waiting::Free
                } else if b.flushing > 0 && ticket.id + 1 < b.next {
                    Waiting::HandedOn
                } else if b.flushing > 0 {
                    Waiting::Flushing
                } else {
                    // Nothing under way and nothing to take: nothing left to wait for.
                    Waiting::Done
                }
            }
            // Done, or the buffer went (it goes only when every line in it is done).
            _ => Waiting::Done,
        }
    }

    /// The next append's body and lines, marking the run's buffer as flushing; `None` when
    /// nothing waits (the buffer then goes).
    fn take(&self, run: &str) -> Option<(String, u64)> {
        let mut buffers = self.buffers.borrow_mut();
        let buffer = buffers.get_mut(run)?;
        if buffer.lines.is_empty() {
            if buffer.done == buffer.next && buffer.flushing == 0 {
                buffers.remove(run);
            }
            return None;
        }
        let mut n = 0;
        let mut bytes = 0;
        for line in buffer.lines.iter().take(MAX_BATCH_LINES) {
            if n > 0 && bytes + line.len() > MAX_BATCH_BYTES {
                break;
            }
            bytes += line.len();
            n += 1;
        }
        let body: String = buffer.lines.drain(..n).collect();
        buffer.taken += n as u64;
        buffer.flushing += 1;
        Some((body, n as u64))
    }

    /// The lines of `run` still waiting for an append, counted as failed keeps (recorded in a
    /// shard with what the isolate held, or held); `None` when none waits.
    async fn give_up(&self, sink: &impl ShardSink, run: &str, shards: u32) -> Option<Keep> {
        let lines = {
            let mut buffers = self.buffers.borrow_mut();
            let buffer = buffers.get_mut(run)?;
            let n = buffer.lines.len() as u64;
            buffer.lines.clear();
            buffer.taken += n;
            buffer.done = (buffer.done + n).min(buffer.taken);
            n
        };
        if lines == 0 {
            return None;
        }
        let before = self.pending(run);
        let recorded = sink
            .record_failed(self.picker.pick(shards), before + lines)
            .await
            .is_ok();
        if recorded {
            self.release(run, before);
        } else {
            self.hold(run, lines);
        }
        Some(Keep::Failed {
            lines,
            errors: vec![format!(
                "still waiting for an append under way after {KEEP_DEADLINE_S} s: counted as failed keeps"
            )],
            recorded,
        })
    }

    /// An append of `n` lines is over (kept, or counted): they are done.
    fn flushed(&self, run: &str, n: u64, counted: bool) {
        let mut buffers = self.buffers.borrow_mut();
        if let Some(buffer) = buffers.get_mut(run) {
            buffer.done = (buffer.done + n).min(buffer.taken);
            buffer.flushing = buffer.flushing.saturating_sub(1);
            if buffer.lines.is_empty() && buffer.done == buffer.next && buffer.flushing == 0 {
                buffers.remove(run);
            }
        }
        drop(buffers);
        if !counted {
            // Dropped mid-way: whether the shard took them is unknown; they are counted as
            // failed keeps (the report may then count them twice, never zero times).
            self.hold(run, n);
        }
    }

    /// Failed keeps of `run` this isolate holds, not yet recorded in any shard.
    pub fn pending(&self, run: &str) -> u64 {
        self.pending.borrow().get(run).copied().unwrap_or(0)
    }

    /// `n` held failures of `run` were recorded in a shard.
    fn release(&self, run: &str, n: u64) {
        let mut pending = self.pending.borrow_mut();
        if let Some(held) = pending.get_mut(run) {
            *held = held.saturating_sub(n);
            if *held == 0 {
                pending.remove(run);
            }
        }
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

    /// Keeps `body` (`lines` answers of `run`) in the picked shard, else the next; failing both,
    /// counted as failed keeps and recorded in a third shard, or held (with earlier failures)
    /// for the run's next keep.
    pub async fn keep(
        &self,
        sink: &impl ShardSink,
        run: &str,
        shards: u32,
        body: &str,
        lines: u64,
    ) -> Keep {
        let k = self.picker.pick(shards);
        // Held counts stay held until a shard took them (a keep dropped mid-way loses none).
        let before = self.pending(run);
        let first = match sink.append(k, body, lines, before).await {
            Ok(()) => {
                self.release(run, before);
                return Keep::Kept { shard: k };
            }
            Err(e) => e,
        };
        let to = retry_shard(k, shards);
        let second = match sink.append(to, body, lines, before).await {
            Ok(()) => {
                self.release(run, before);
                return Keep::Moved {
                    from: k,
                    to,
                    error: first,
                };
            }
            Err(e) => e,
        };
        let recorded = sink
            .record_failed(retry_shard(to, shards), before + lines)
            .await
            .is_ok();
        if recorded {
            self.release(run, before);
        }
        let failed = before + lines;
        let held = recorded || self.hold(run, lines);
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

/// The header form of `/test?run=`, for load tools that cannot change the query.
pub const RUN_HEADER: &str = "Kvbench-Run";
/// Longest run id.
pub const MAX_RUN_LEN: usize = 64;

/// A run id: 1-64 of `A-Z a-z 0-9 . _ -`.
pub fn parse_run(parameter: &str, text: &str) -> Result<String, ParamError> {
    // `/runs/<id>/answers` reads a run back: `.` and `..` would be resolved away in that path.
    if text == "." || text == ".." {
        return Err(ParamError::new(
            parameter,
            format!("{text:?} cannot be a run id: /runs/{text}/answers could never read it back"),
        ));
    }
    crate::operations::name::parse_name(parameter, "run id", text, MAX_RUN_LEN, b"._-")
}

/// A run's kept line: one `/test` answer or its failure (`Kept::with_reply`), labelled by its
/// colo. `started_ms`: the request's start; `handler_ms`: its handler's time; `cold`: the
/// isolate's first request.
pub fn run_line(
    colo: &str,
    started_ms: f64,
    handler_ms: f64,
    cold: bool,
    status: u16,
    body: &str,
) -> String {
    kvbench_wire::kept::Kept {
        seq: None,
        t_ms: started_ms as i64,
        label: colo.into(),
        vantage: kvbench_wire::kept::Vantage::Run,
        hint: None,
        colo: colo.into(),
        placement: None,
        trace_colo: None,
        trace_disagrees: false,
        placement_check: None,
        cold,
        colo_changed: false,
        handler_ms: Some(handler_ms),
        call_ms: None,
        answer: None,
        failure: None,
    }
    .with_reply(status, body)
    .to_line()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_line_is_its_answer_or_its_failure() {
        let line = |status, body| -> serde_json::Value {
            serde_json::from_str(&run_line("FRA", 1_000.0, 12.5, true, status, body)).unwrap()
        };
        let v = line(200, r#"{"colo":"FRA","stores":{}}"#);
        assert_eq!(
            (
                v["label"].as_str(),
                v["vantage"].as_str(),
                v["colo"].as_str()
            ),
            (Some("FRA"), Some("run"), Some("FRA"))
        );
        assert_eq!(
            (
                v["t_ms"].as_i64(),
                v["handler_ms"].as_f64(),
                v["cold"].as_bool()
            ),
            (Some(1_000), Some(12.5), Some(true))
        );
        assert_eq!(v["answer"]["colo"], "FRA");
        assert!(v.get("failure").is_none());
        let v = line(503, "over the isolate's budget");
        assert!(v.get("answer").is_none());
        assert_eq!(
            (
                v["failure"]["kind"].as_str(),
                v["failure"]["status"].as_u64()
            ),
            (Some("status"), Some(503))
        );
        assert_eq!(
            v["handler_ms"].as_f64(),
            Some(12.5),
            "a refusal is timed like an answer"
        );
        assert_eq!(line(200, "<html>")["failure"]["kind"], "malformed");
    }

    #[test]
    fn run_ids() {
        assert_eq!(
            parse_run("run", "k6-2026.12.01_a").unwrap(),
            "k6-2026.12.01_a"
        );
        for bad in ["", ".", "..", "a b", "a/b", "é", &"x".repeat(65)] {
            assert_eq!(
                parse_run("run", bad).unwrap_err().parameter,
                "run",
                "{bad:?}"
            );
        }
    }

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

    /// Pending once, then ready: lets the other tasks run (an append in flight, a tick).
    struct YieldOnce(bool);
    impl std::future::Future for YieldOnce {
        type Output = ();
        fn poll(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<()> {
            if self.0 {
                return std::task::Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }

    /// A script whose calls take a turn of the executor, as an append in flight does.
    struct Slow(Script);
    impl ShardSink for Slow {
        async fn append(&self, k: u32, body: &str, l: u64, failed: u64) -> Result<(), String> {
            YieldOnce(false).await;
            self.0.append(k, body, l, failed).await
        }
        async fn record_failed(&self, k: u32, failed: u64) -> Result<(), String> {
            YieldOnce(false).await;
            self.0.record_failed(k, failed).await
        }
    }

    /// `n` answers of run `r` kept at once by as many callers; what each call returned.
    fn keep_many(w: &Writer, sink: &Slow, n: usize) -> Vec<Vec<Keep>> {
        let calls: Vec<_> = (0..n)
            .map(|i| {
                w.keep_batched(
                    sink,
                    "r",
                    4,
                    format!("{i}\n"),
                    || YieldOnce(false),
                    || false,
                )
            })
            .collect();
        run(futures::future::join_all(calls))
    }

    #[test]
    fn answers_kept_at_once_go_in_few_appends_each_once_in_order() {
        let sink = Slow(Script::default());
        let w = Writer::new(0);
        let outcomes = keep_many(&w, &sink, 450);
        let appended = sink.0.appended.borrow();
        assert!(
            appended.len() < 10,
            "{} appends for 450 answers",
            appended.len()
        );
        assert!(appended
            .iter()
            .all(|(_, body, _)| body.lines().count() <= MAX_BATCH_LINES));
        let lines: Vec<String> = appended
            .iter()
            .flat_map(|(_, body, _)| body.lines().map(str::to_string).collect::<Vec<_>>())
            .collect();
        let want: Vec<String> = (0..450).map(|i| i.to_string()).collect();
        assert_eq!(lines, want);
        assert_eq!(outcomes.iter().map(Vec::len).sum::<usize>(), appended.len());
        assert!(
            w.buffers.borrow().is_empty(),
            "the buffer goes once all is done"
        );
    }

    /// A sink whose appends take `turns` turns of the executor each (a slow shard).
    struct Slower(Script, usize);
    impl ShardSink for Slower {
        async fn append(&self, k: u32, body: &str, l: u64, failed: u64) -> Result<(), String> {
            for _ in 0..self.1 {
                YieldOnce(false).await;
            }
            self.0.append(k, body, l, failed).await
        }
        async fn record_failed(&self, k: u32, failed: u64) -> Result<(), String> {
            self.0.record_failed(k, failed).await
        }
    }

    /// A tick that counts itself in `ticks`.
    fn counted_tick(ticks: &Cell<u32>) -> impl Fn() -> YieldOnce + Copy + '_ {
        move || {
            ticks.set(ticks.get() + 1);
            YieldOnce(false)
        }
    }

    #[test]
    fn while_an_append_is_under_way_only_the_last_line_waits() {
        let sink = Slower(Script::default(), 50);
        let w = Writer::new(0);
        let ticks = Cell::new(0u32);
        let tick = counted_tick(&ticks);
        let calls: Vec<_> = (0..300)
            .map(|i| w.keep_batched(&sink, "r", 4, format!("{i}\n"), tick, || false))
            .collect();
        run(futures::future::join_all(calls));
        let lines: Vec<String> = sink
            .0
            .appended
            .borrow()
            .iter()
            .flat_map(|(_, body, _)| body.lines().map(str::to_string).collect::<Vec<_>>())
            .collect();
        assert_eq!(lines, (0..300).map(|i| i.to_string()).collect::<Vec<_>>());
        // Each waiting caller looks once more and hands its wait on; the last one ticks through
        // the appends (about 50 turns each). A tick per caller per turn would be ~15,000.
        assert!(ticks.get() < 300 + 4 * 50, "{} ticks", ticks.get());
        assert!(w.buffers.borrow().is_empty());
    }

    /// A slow sink counting the appends under way at once.
    #[derive(Default)]
    struct Counting {
        script: Script,
        now: Cell<u32>,
        most: Cell<u32>,
    }
    impl ShardSink for Counting {
        async fn append(&self, k: u32, body: &str, l: u64, failed: u64) -> Result<(), String> {
            self.now.set(self.now.get() + 1);
            self.most.set(self.most.get().max(self.now.get()));
            for _ in 0..20 {
                YieldOnce(false).await;
            }
            self.now.set(self.now.get() - 1);
            self.script.append(k, body, l, failed).await
        }
        async fn record_failed(&self, k: u32, failed: u64) -> Result<(), String> {
            self.script.record_failed(k, failed).await
        }
    }

    #[test]
    fn appends_of_a_run_go_to_its_shards_at_once_as_many_as_it_has() {
        // Lines at once: a full batch waits behind each append under way (and no more than
        // the buffer holds, past which a line is kept on its own).
        for (shards, n, want) in [(1, 400, 1), (3, 1000, 3), (64, 2000, MAX_PARALLEL_APPENDS)] {
            let sink = Counting::default();
            let w = Writer::new(0);
            let calls: Vec<_> = (0..n)
                .map(|i| {
                    w.keep_batched(
                        &sink,
                        "r",
                        shards,
                        format!("{i}\n"),
                        || YieldOnce(false),
                        || false,
                    )
                })
                .collect();
            run(futures::future::join_all(calls));
            assert_eq!(sink.most.get(), want, "{shards} shards");
            let mut lines: Vec<u32> = sink
                .script
                .appended
                .borrow()
                .iter()
                .flat_map(|(_, b, _)| b.lines().map(|l| l.parse().unwrap()).collect::<Vec<_>>())
                .collect();
            lines.sort();
            assert_eq!(lines, (0..n).collect::<Vec<_>>(), "each line once");
            assert!(w.buffers.borrow().is_empty());
        }
    }

    #[test]
    fn lines_short_of_a_batch_wait_for_the_append_under_way() {
        // 150 lines while one append is under way: one more append, not one per line.
        let sink = Counting::default();
        let w = Writer::new(0);
        let calls: Vec<_> = (0..151)
            .map(|i| {
                w.keep_batched(
                    &sink,
                    "r",
                    8,
                    format!("{i}\n"),
                    || YieldOnce(false),
                    || false,
                )
            })
            .collect();
        run(futures::future::join_all(calls));
        assert_eq!(sink.most.get(), 1, "one append at a time");
        let sizes: Vec<usize> = sink
            .script
            .appended
            .borrow()
            .iter()
            .map(|(_, b, _)| b.lines().count())
            .collect();
        assert_eq!(
            sizes,
            [1, 150],
            "the first line's append, then the 150 that waited"
        );
    }

    #[test]
    fn an_append_stays_within_its_bytes() {
        // Long answers: one append within its bytes (one answer alone may pass them).
        let long = Slow(Script::default());
        let w = Writer::new(0);
        let calls: Vec<_> = (0..10)
            .map(|_| {
                w.keep_batched(
                    &long,
                    "r",
                    4,
                    "x".repeat(200 << 10),
                    || YieldOnce(false),
                    || false,
                )
            })
            .collect();
        run(futures::future::join_all(calls));
        let sizes: Vec<usize> = long
            .0
            .appended
            .borrow()
            .iter()
            .map(|(_, b, _)| b.len())
            .collect();
        assert_eq!(sizes.iter().sum::<usize>(), 10 * (200 << 10));
        assert!(sizes.iter().all(|s| *s <= MAX_BATCH_BYTES), "{sizes:?}");
        assert!(sizes.len() < 10, "{sizes:?}");
    }

    #[test]
    fn answers_no_shard_took_are_all_counted() {
        let sink = Slow(Script::default());
        sink.0.down.borrow_mut().extend(0..4);
        let w = Writer::new(0);
        keep_many(&w, &sink, 30);
        assert_eq!(w.pending("r"), 30, "every answer counted, none twice");
        sink.0.down.borrow_mut().clear();
        keep_many(&w, &sink, 1);
        assert_eq!(
            sink.0.appended.borrow()[0].2,
            30,
            "the count went with the next append"
        );
        assert_eq!(w.pending("r"), 0);
    }

    #[test]
    fn an_append_dropped_mid_way_counts_its_lines_and_frees_the_buffer() {
        let sink = Slow(Script::default());
        let w = Writer::new(0);
        {
            let mut call = Box::pin(w.keep_batched(
                &sink,
                "r",
                4,
                "a\n".into(),
                || YieldOnce(false),
                || false,
            ));
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            assert!(
                call.as_mut().poll(&mut cx).is_pending(),
                "the append is in flight"
            );
        }
        assert_eq!(
            w.pending("r"),
            1,
            "unknown whether it was kept: counted as failed"
        );
        keep_many(&w, &sink, 1);
        assert_eq!(*sink.0.appended.borrow(), [(1, "0\n".to_string(), 1)]);
    }

    /// An append that outlasts the keep's deadline: the caller still waiting stops, and every
    /// line that waited behind the append is counted as a failed keep, recorded in a shard; the
    /// append's own lines are kept when it ends. Nothing is lost uncounted, nothing counted twice.
    #[test]
    fn past_the_deadline_what_still_waits_is_counted_not_lost() {
        let sink = Slower(Script::default(), 50);
        let w = Writer::new(0);
        let ticks = Cell::new(0u32);
        let tick = counted_tick(&ticks);
        // The deadline passes after 10 ticks: during the first append.
        let expired = || ticks.get() >= 10;
        let calls: Vec<_> = (0..300)
            .map(|i| w.keep_batched(&sink, "r", 1, format!("{i}\n"), tick, expired))
            .collect();
        let outcomes = run(futures::future::join_all(calls));
        let kept: usize = sink
            .0
            .appended
            .borrow()
            .iter()
            .map(|(_, body, _)| body.lines().count())
            .sum();
        let counted: u64 = sink.0.recorded.borrow().iter().map(|(_, n)| n).sum();
        assert!(kept > 0 && counted > 0, "kept {kept}, counted {counted}");
        assert_eq!(
            kept as u64 + counted,
            300,
            "every answer kept or counted, once"
        );
        let failed: u64 = outcomes
            .iter()
            .flatten()
            .map(|k| match k {
                Keep::Failed { lines, .. } => *lines,
                _ => 0,
            })
            .sum();
        assert_eq!(failed, counted);
        assert_eq!(w.pending("r"), 0, "recorded, none held");
        assert!(w.buffers.borrow().is_empty(), "the buffer goes");
        // A shard that cannot record it: the count is held for the run's next keep.
        let down = Slower(Script::default(), 50);
        let w = Writer::new(0);
        let ticks = Cell::new(0u32);
        let tick = counted_tick(&ticks);
        let expired = || {
            let past = ticks.get() >= 10;
            if past {
                down.0.down.borrow_mut().push(0);
            }
            past
        };
        let calls: Vec<_> = (0..300)
            .map(|i| w.keep_batched(&down, "r", 1, format!("{i}\n"), tick, expired))
            .collect();
        run(futures::future::join_all(calls));
        let kept: usize = down
            .0
            .appended
            .borrow()
            .iter()
            .map(|(_, body, _)| body.lines().count())
            .sum();
        assert_eq!(kept as u64 + w.pending("r"), 300);
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
