//! One `/test` call: pick the key and a shuffled order, read every store one after another,
//! write on a miss, time each awaited call. A deployed clock moves only at I/O
//! (docs/measuring.md), so CPU is kept out of the spans: values made after the last I/O, bodies
//! encoded before the first span, hits decoded after the last.

use std::cell::RefCell;
use std::future::Future;

use futures::FutureExt;

use crate::clock::{Clock, Timer};
use crate::error::{ErrorKind, StoreError};
use crate::measurement::answer::{failed, round_ms, Abandoned, Answer, Op, StoreResult};
use crate::measurement::params::{Order, Params};
use crate::stores::store::{Deferred, DynStore, Fetched, Options, StoreId, Write};
use crate::stores::value::ValueGen;

/// The stores of this deployment, built by id only when a request selects them; an `Err` is a
/// store not configured (and why).
pub trait StoreSet {
    fn store(&self, id: StoreId) -> Result<&dyn DynStore, StoreError>;
}

/// Stores listed up front (tests, and anything that has them all at hand).
pub type StoreList<'a> = Vec<(StoreId, Result<&'a dyn DynStore, StoreError>)>;

impl StoreSet for StoreList<'_> {
    fn store(&self, id: StoreId) -> Result<&dyn DynStore, StoreError> {
        match self.iter().find(|(s, _)| *s == id) {
            Some((_, Ok(store))) => Ok(*store),
            Some((_, Err(e))) => Err(e.clone()),
            None => Err(StoreError::new(
                ErrorKind::NotConfigured,
                "store not available",
            )),
        }
    }
}

/// Per-isolate state a measurement needs. The generator sits in a `RefCell` because one isolate may
/// interleave several requests: it is only borrowed between awaits, never across one.
pub struct Isolate<'a> {
    pub gen: &'a RefCell<ValueGen>,
    pub clock: &'a dyn Clock,
    pub timer: &'a dyn Timer,
    /// Requests the answering instance has served, this one included: its answer's
    /// `isolate_requests`.
    pub served: Served,
    pub colo: String,
    /// Value bytes this isolate may hold in flight (see [`crate::measurement::budget`]).
    pub budget: &'a crate::measurement::budget::Budget,
    /// This isolate's requests in flight (see [`crate::measurement::in_flight`]).
    pub in_flight: &'a crate::measurement::in_flight::InFlight,
}

/// Requests an instance has served, this one included, by who counts them: one meaning per
/// name (1: the instance's first, a cold answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// The worker isolate's count (`/test`, a run's request).
    Isolate(u64),
    /// A hint probe object's own count of its measurements (the isolate it runs in also serves
    /// other requests and objects, which it does not count).
    Object(u64),
}

impl Served {
    /// The count, whoever keeps it (an answer's `isolate_requests`).
    pub fn count(self) -> u64 {
        match self {
            Served::Isolate(n) | Served::Object(n) => n,
        }
    }
}

/// A configured store and its write, prepared before the first span (or why it could not be).
type Prepared<'a> = (&'a dyn DynStore, Result<Write<'a>, StoreError>);

/// One store's part of the answer while the request runs: its result so far, the decoding
/// of a hit, if one is pending, and the store, whose report on its calls is read at the end.
struct Measured<'a> {
    id: StoreId,
    result: StoreResult,
    pending: Option<Deferred>,
    store: Option<&'a dyn DynStore>,
}

/// What a call does with each store: `/test`'s read and write on a miss, or one of a freshness
/// round's calls (`/fresh`): a read alone (the version a store holds is its value's size) or a
/// write alone (a new version, whatever the store holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Test,
    Read,
    Write,
}

/// Runs one measurement. Never fails: every store failure is data in the answer.
pub async fn measure(
    params: &Params,
    stores: &dyn StoreSet,
    isolate: &Isolate<'_>,
    visit: &crate::measurement::in_flight::Visit<'_>,
    access: Access,
) -> Answer {
    let (key, order, value) = draw(params, isolate);
    let mut options = params.options();
    if options.do_scope == crate::stores::durable::DoScope::Colo {
        options.colo = Some(isolate.colo.clone());
    }
    let resolved: Vec<(StoreId, Result<&dyn DynStore, StoreError>)> =
        order.iter().map(|&id| (id, stores.store(id))).collect();
    // Each store's own key (its namespace + the key) and write, made before the first span
    // (most writes are built from a copy of the value).
    let store_keys: Vec<String> = resolved
        .iter()
        .map(|(id, _)| id.spec().store_key(&key))
        .collect();
    let prepared: Vec<(StoreId, Result<Prepared<'_>, StoreError>)> = resolved
        .into_iter()
        .zip(&store_keys)
        .map(|((id, store), store_key)| {
            let prepared = store.map(|s| (s, s.prepare(store_key, &value, params.ttl_s)));
            (id, prepared)
        })
        .collect();

    let deadlines = Deadlines::new(isolate);
    let mut measured = Vec::with_capacity(prepared.len());
    let mut wrote = false;
    for ((id, prepared), store_key) in prepared.into_iter().zip(&store_keys) {
        let m = match prepared {
            Err(e) => Measured {
                id,
                result: not_configured(e),
                pending: None,
                store: None,
            },
            Ok((store, write)) => {
                let (result, pending) = measure_store(
                    (params, access),
                    isolate,
                    &deadlines,
                    store,
                    store_key,
                    &options,
                    value.bytes(),
                    write,
                )
                .await;
                wrote |= result.write_ms.is_some();
                let mut result = result;
                if id == StoreId::Do {
                    result.location_hint = options.do_location.map(|h| h.as_str().into());
                    result.near_colo = options.colo.clone().map(Into::into);
                }
                Measured {
                    id,
                    result,
                    pending,
                    store: Some(store),
                }
            }
        };
        measured.push(m);
    }

    // Every span is over: decode the hits, read what the stores reported, then prepare the
    // next request's value.
    let answer = decoded(
        Answer::new(key, isolate.colo.clone(), isolate.served.count()),
        measured,
    );
    refill(params, isolate, visit, value, wrote);
    answer
}

/// After the last span: the value goes back to the isolate's pool unless a store wrote it, and
/// values for the next requests are made, as many as this isolate has had in flight at once —
/// only while no other request is in flight: otherwise this CPU would land in their open spans.
fn refill(
    params: &Params,
    isolate: &Isolate<'_>,
    visit: &crate::measurement::in_flight::Visit<'_>,
    value: crate::Value,
    wrote: bool,
) {
    let mut gen = isolate.gen.borrow_mut();
    if !wrote {
        gen.keep(params.min_bytes, params.max_bytes, value);
    }
    if visit.alone() {
        let want = isolate.in_flight.peak() as usize;
        gen.prepare(params.min_bytes, params.max_bytes, want);
    }
}

/// The request's key, its store order and the value a miss writes (the same bytes for every store).
fn draw(params: &Params, isolate: &Isolate<'_>) -> (String, Vec<StoreId>, crate::Value) {
    let mut gen = isolate.gen.borrow_mut();
    let key = params.key.clone().unwrap_or_else(|| gen.key(params.keys));
    let order = match &params.order {
        Order::Fixed(list) => list.clone(),
        Order::Random => {
            let mut list = params.stores.clone();
            gen.shuffle(&mut list);
            list
        }
    };
    let value = gen.take_value(params.min_bytes, params.max_bytes);
    (key, order, value)
}

/// The answer of the measured stores, each hit decoded and each store's report on its calls
/// read now that no span is open.
fn decoded(mut answer: Answer, measured: Vec<Measured<'_>>) -> Answer {
    for Measured {
        id,
        mut result,
        pending,
        store,
    } in measured
    {
        if let Some(store) = store {
            with_report(&mut result, store.reported());
        }
        if let Some(decode) = pending {
            match decode.finish() {
                Ok(bytes) => result.value_bytes = Some(bytes),
                Err(e) => {
                    result.hit = None;
                    result.error = Some(failed(e, Op::Read));
                }
            }
        }
        answer.push(id, result);
    }
    answer
}

/// What the store reported about its calls, each kept only for a call that was made and only
/// when it says something; a read the store ran more than once is flagged.
fn with_report(result: &mut StoreResult, reported: crate::stores::meta::Reported) {
    let said = |meta: Option<crate::stores::meta::CallMeta>| meta.filter(|m| !m.is_empty());
    if result.read_ms.is_some() {
        result.read_meta = said(reported.read);
        result.read_retried = result
            .read_meta
            .as_ref()
            .is_some_and(|m| m.retried())
            .then_some(true);
    }
    if result.write_ms.is_some() {
        result.write_meta = said(reported.write);
    }
}

/// One store: setup if due, the read, and on a miss the prepared `write`. Returns the result and
/// the decoding of a hit, still to run.
#[allow(clippy::too_many_arguments)]
async fn measure_store<'a>(
    (params, access): (&Params, Access),
    isolate: &Isolate<'_>,
    deadlines: &Deadlines<'_>,
    store: &'a dyn DynStore,
    key: &'a str,
    options: &'a Options,
    value: &[u8],
    write: Result<Write<'a>, StoreError>,
) -> (StoreResult, Option<Deferred>) {
    let mut result = StoreResult::default();
    let done = |result: StoreResult, pending| (result, pending);
    // Setup (Deno KV's metadata exchange, Redis's connection) is timed apart, so reads and
    // writes stay comparable.
    if let Err(e) = connect(isolate, deadlines, params.timeout_ms, store, &mut result).await {
        result.error = Some(failed(e, Op::Read));
        return done(result, None);
    }
    let read = match access {
        Access::Write => Ok(Fetched::Miss),
        Access::Test | Access::Read => {
            read(
                isolate,
                deadlines,
                params.timeout_ms,
                store,
                key,
                options,
                &mut result,
            )
            .await
        }
    };
    match read {
        Err(e) => {
            result.error = Some(failed(e, Op::Read));
            done(result, None)
        }
        Ok(Fetched::Hit(decode)) => {
            result.hit = Some(true);
            done(result, Some(decode))
        }
        Ok(Fetched::Miss) if access == Access::Read => {
            result.hit = Some(false);
            done(result, None)
        }
        Ok(Fetched::Miss) => {
            result.hit = (access == Access::Test).then_some(false);
            result.value_bytes = Some(value.len() as u64);
            let write = match write {
                Ok(write) => write,
                Err(e) => {
                    result.error = Some(failed(e, Op::Write));
                    return done(result, None);
                }
            };
            if let Err(e) = connect(isolate, deadlines, params.timeout_ms, store, &mut result).await
            {
                result.error = Some(failed(e, Op::Write));
                return done(result, None);
            }
            let (write, write_ms, abandoned) =
                timed(isolate, deadlines, params.timeout_ms, write.put(options)).await;
            result.write_ms = Some(write_ms);
            result.abandoned = abandoned;
            if let Err(e) = write {
                result.error = Some(failed(e, Op::Write));
            }
            done(result, None)
        }
    }
}

/// The timed read of `key`.
async fn read<'a>(
    isolate: &Isolate<'_>,
    deadlines: &Deadlines<'_>,
    timeout_ms: u32,
    store: &'a dyn DynStore,
    key: &'a str,
    options: &'a Options,
    result: &mut StoreResult,
) -> Result<Fetched, StoreError> {
    let (read, read_ms, abandoned) =
        timed(isolate, deadlines, timeout_ms, store.get(key, options)).await;
    result.read_ms = Some(read_ms);
    result.abandoned = abandoned;
    read
}

/// Runs the store's setup if due, adding its time to `connect_ms` when it did any work (a failed
/// setup is reported with its time too).
async fn connect(
    isolate: &Isolate<'_>,
    deadlines: &Deadlines<'_>,
    timeout_ms: u32,
    store: &dyn DynStore,
    result: &mut StoreResult,
) -> Result<(), StoreError> {
    let start = isolate.clock.now_ms();
    let mut setup = store.connect();
    // Most stores have no setup, or none due: `Ok(false)` on the first poll, with no I/O awaited
    // and nothing to report (no timer is armed for it). Anything else is timed from `start`.
    let (outcome, ms, abandoned) = match (&mut setup).now_or_never() {
        Some(Ok(false)) => return Ok(()),
        Some(outcome) => {
            let ms = round_ms((isolate.clock.now_ms() - start).max(0.0));
            (outcome, ms, None)
        }
        None => timed_from(isolate, deadlines, timeout_ms, start, setup).await,
    };
    if abandoned.is_some() {
        result.abandoned = abandoned;
    }
    if !matches!(outcome, Ok(false)) {
        result.connect_ms = Some(round_ms(result.connect_ms.unwrap_or(0.0) + ms));
    }
    outcome.map(|_| ())
}

fn not_configured(e: StoreError) -> StoreResult {
    StoreResult {
        error: Some(failed(e, Op::Read)),
        ..Default::default()
    }
}

/// A request's per-call timeouts on one timer (a JS timer per call costs two JS calls): the
/// first call's timer stays armed, and a later call re-arms only if it fires first.
struct Deadlines<'a> {
    timer: &'a dyn Timer,
    clock: &'a dyn Clock,
    /// The armed timer and when it fires (clock ms).
    armed: RefCell<Option<(f64, Sleep<'a>)>>,
}

type Sleep<'a> = std::pin::Pin<Box<dyn Future<Output = ()> + 'a>>;

impl<'a> Deadlines<'a> {
    fn new(isolate: &Isolate<'a>) -> Deadlines<'a> {
        Deadlines {
            timer: isolate.timer,
            clock: isolate.clock,
            armed: RefCell::new(None),
        }
    }

    /// Resolves once the clock reads `deadline` or later.
    async fn until(&self, deadline: f64) {
        loop {
            let now = self.clock.now_ms();
            if now >= deadline {
                return;
            }
            {
                let mut armed = self.armed.borrow_mut();
                if armed.as_ref().is_none_or(|(at, _)| *at > deadline) {
                    let ms = (deadline - now).ceil().max(1.0);
                    *armed = Some((now + ms, self.timer.sleep_ms(ms as u64)));
                }
            }
            // Borrowed only within a poll, never across an await.
            futures::future::poll_fn(|cx| {
                let mut armed = self.armed.borrow_mut();
                let fired = match armed.as_mut() {
                    Some((_, sleep)) => sleep.as_mut().poll(cx).is_ready(),
                    None => true,
                };
                if fired {
                    *armed = None;
                    std::task::Poll::Ready(())
                } else {
                    std::task::Poll::Pending
                }
            })
            .await;
        }
    }
}

/// The longest a store's abandoned call (one that timed out) is waited for before the next
/// store starts.
pub const DRAIN_MAX_MS: u32 = 5_000;

/// Awaits `op` under the per-store timeout, with the elapsed milliseconds. On timeout the span
/// ends, but a binding call is not cancelled by a drop: it is awaited outside any span for up to
/// `min(timeout_ms, DRAIN_MAX_MS)` and reported in `abandoned`.
async fn timed<T>(
    isolate: &Isolate<'_>,
    deadlines: &Deadlines<'_>,
    timeout_ms: u32,
    op: impl Future<Output = Result<T, StoreError>>,
) -> (Result<T, StoreError>, f64, Option<Abandoned>) {
    timed_from(isolate, deadlines, timeout_ms, isolate.clock.now_ms(), op).await
}

/// [`timed`] for a call that began at `start` (clock ms).
async fn timed_from<T>(
    isolate: &Isolate<'_>,
    deadlines: &Deadlines<'_>,
    timeout_ms: u32,
    start: f64,
    op: impl Future<Output = Result<T, StoreError>>,
) -> (Result<T, StoreError>, f64, Option<Abandoned>) {
    let mut op = std::pin::pin!(op);
    let deadline = start + f64::from(timeout_ms);
    let idle = deadlines.until(deadline);
    match by_deadline(isolate.clock, deadline, op.as_mut(), idle).await {
        Some(result) => {
            let elapsed = round_ms((isolate.clock.now_ms() - start).max(0.0));
            (result, elapsed, None)
        }
        None => {
            let timed_out_at = isolate.clock.now_ms();
            let elapsed = round_ms((timed_out_at - start).max(0.0));
            let drain_ms = timeout_ms.min(DRAIN_MAX_MS);
            let drain = isolate.timer.sleep_ms(u64::from(drain_ms));
            let finished = by_deadline(
                isolate.clock,
                timed_out_at + f64::from(drain_ms),
                op.as_mut(),
                drain,
            )
            .await
            .is_some();
            let abandoned = Abandoned {
                finished,
                waited_ms: round_ms((isolate.clock.now_ms() - timed_out_at).max(0.0)),
            };
            let error = StoreError::new(
                ErrorKind::Timeout,
                format!("no answer within {timeout_ms} ms"),
            );
            (Err(error), elapsed, Some(abandoned))
        }
    }
}

/// `op`'s output, or `None` once the clock reads `deadline`. Both a timer (for I/O gone quiet)
/// and a clock read at every poll (for I/O that never pauses, where a timer may never run).
async fn by_deadline<T>(
    clock: &dyn Clock,
    deadline: f64,
    mut op: std::pin::Pin<&mut impl Future<Output = T>>,
    idle: impl Future<Output = ()>,
) -> Option<T> {
    let mut idle = std::pin::pin!(idle);
    futures::future::poll_fn(|cx| {
        // The call first: one that completes at its deadline has made it.
        if let std::task::Poll::Ready(out) = op.as_mut().poll(cx) {
            return std::task::Poll::Ready(Some(out));
        }
        if clock.now_ms() >= deadline || idle.as_mut().poll(cx).is_ready() {
            return std::task::Poll::Ready(None);
        }
        std::task::Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::store::Store;
    use std::cell::Cell;

    /// A clock the timer moves, and a timer that counts the timers set and fires at its due
    /// time once nothing else moves the clock (a round of polls in which the clock stood still),
    /// moving it there unless it is past it.
    #[derive(Default)]
    struct Fake {
        now: Cell<f64>,
        set: Cell<u32>,
    }

    impl Clock for Fake {
        fn now_ms(&self) -> f64 {
            self.now.get()
        }
    }

    #[async_trait::async_trait(?Send)]
    impl Timer for Fake {
        async fn sleep_ms(&self, ms: u64) {
            self.set.set(self.set.get() + 1);
            let due = self.now.get() + ms as f64;
            loop {
                let seen = self.now.get();
                yield_now().await;
                if self.now.get() == seen {
                    break;
                }
            }
            self.now.set(self.now.get().max(due));
        }
    }

    async fn yield_now() {
        let mut yielded = false;
        futures::future::poll_fn(|cx| {
            if std::mem::replace(&mut yielded, true) {
                std::task::Poll::Ready(())
            } else {
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        })
        .await;
    }

    /// What an [`Isolate`] borrows, besides its clock and timer.
    struct Parts {
        gen: RefCell<ValueGen>,
        budget: crate::measurement::budget::Budget,
        in_flight: crate::measurement::in_flight::InFlight,
    }

    impl Default for Parts {
        fn default() -> Self {
            Parts {
                gen: RefCell::new(ValueGen::from_seed([0; 32])),
                budget: crate::measurement::budget::Budget::new(1 << 20),
                in_flight: crate::measurement::in_flight::InFlight::default(),
            }
        }
    }

    impl Parts {
        fn isolate<'a>(&'a self, fake: &'a Fake) -> Isolate<'a> {
            Isolate {
                gen: &self.gen,
                clock: fake,
                timer: fake,
                served: Served::Isolate(1),
                colo: "test".into(),
                budget: &self.budget,
                in_flight: &self.in_flight,
            }
        }
    }

    /// A store call that is pending once (as real I/O is), then done `ms` later.
    async fn call(clock: &Fake, ms: f64) -> Result<(), StoreError> {
        yield_now().await;
        clock.now.set(clock.now.get() + ms);
        Ok(())
    }

    #[test]
    fn a_request_sets_one_timer_and_every_call_keeps_its_own_timeout() {
        let (fake, parts) = (Fake::default(), Parts::default());
        let isolate = parts.isolate(&fake);
        let deadlines = Deadlines::new(&isolate);
        futures::executor::block_on(async {
            for _ in 0..5 {
                let (result, ms, abandoned) =
                    timed(&isolate, &deadlines, 100, call(&fake, 30.0)).await;
                assert!(result.is_ok() && abandoned.is_none());
                assert_eq!(ms, 30.0);
            }
            assert_eq!(fake.set.get(), 1, "five calls, one timer");
            // 150 ms in: the armed timer (due at 100) fires during this call, which re-arms for
            // its own deadline and still times out exactly 100 ms after it began.
            let hung = futures::future::pending::<Result<(), StoreError>>();
            let (result, ms, abandoned) = timed(&isolate, &deadlines, 100, hung).await;
            assert_eq!(result.map_err(|e| e.kind), Err(ErrorKind::Timeout));
            assert_eq!(ms, 100.0, "timed out at its own deadline");
            assert!(abandoned.is_some());
        });
    }

    /// A store that reports on its calls: a read D1 ran twice, a write with its SQL time.
    struct Reporting;

    #[async_trait::async_trait(?Send)]
    impl Store for Reporting {
        type Prepared = ();
        fn reported(&self) -> crate::stores::meta::Reported {
            crate::stores::meta::Reported {
                read: Some(crate::stores::meta::d1(
                    r#"{"served_by_colo":"AMS","served_by_primary":false,"timings":{"sql_duration_ms":0.25},"total_attempts":2}"#,
                )),
                write: Some(crate::stores::meta::d1(
                    r#"{"served_by_primary":true,"timings":{"sql_duration_ms":1.5}}"#,
                )),
            }
        }
        async fn get(&self, _key: &str, _options: &Options) -> Result<Fetched, StoreError> {
            Ok(Fetched::Miss)
        }
        fn prepare(
            &self,
            _key: &str,
            _value: &crate::Value,
            _ttl_s: u32,
        ) -> Result<(), StoreError> {
            Ok(())
        }
        async fn put(
            &self,
            _key: &str,
            _ttl_s: u32,
            _prepared: (),
            _options: &Options,
        ) -> Result<(), StoreError> {
            Ok(())
        }
    }

    #[test]
    fn what_a_store_reports_is_read_after_the_spans_for_the_calls_it_made() {
        let measured = |read_ms: Option<f64>, write_ms: Option<f64>| Measured {
            id: StoreId::D1,
            result: StoreResult {
                read_ms,
                write_ms,
                ..StoreResult::default()
            },
            pending: None,
            store: Some(&Reporting),
        };
        let answer = decoded(
            Answer::new("k".into(), "test".into(), 1),
            vec![measured(Some(3.0), Some(4.0))],
        );
        let d1 = answer.store(&StoreId::D1).unwrap();
        let read = d1.read_meta.as_ref().expect("the read's meta");
        assert_eq!(
            (read.served_by_colo.as_deref(), read.served_by_primary),
            (Some("AMS"), Some(false))
        );
        assert_eq!((read.sql_ms, read.attempts), (Some(0.25), Some(2)));
        assert_eq!(d1.read_retried, Some(true), "two attempts: flagged");
        let write = d1.write_meta.as_ref().expect("the write's meta");
        assert_eq!((write.sql_ms, write.attempts), (Some(1.5), None));
        // A store whose read was never made (its setup failed) and that wrote nothing: no
        // report is attached to a call that did not happen.
        let answer = decoded(
            Answer::new("k".into(), "test".into(), 1),
            vec![measured(None, None)],
        );
        let d1 = answer.store(&StoreId::D1).unwrap();
        assert_eq!(
            (&d1.read_meta, d1.read_retried, &d1.write_meta),
            (&None, None, &None)
        );
    }

    /// A call whose I/O never pauses (a server streaming without end): every poll finds more
    /// to read, moves the clock 1 ms and asks to be polled again, so the fake timer, which
    /// fires only once nothing else moves the clock, never does (a starved JS timer).
    async fn endless(clock: &Fake) -> Result<(), StoreError> {
        loop {
            clock.now.set(clock.now.get() + 1.0);
            yield_now().await;
        }
    }

    #[test]
    fn a_call_whose_io_never_pauses_still_ends_at_its_deadline_and_its_drain_too() {
        let (fake, parts) = (Fake::default(), Parts::default());
        let isolate = parts.isolate(&fake);
        let deadlines = Deadlines::new(&isolate);
        futures::executor::block_on(async {
            let (result, ms, abandoned) = timed(&isolate, &deadlines, 100, endless(&fake)).await;
            assert_eq!(result.map_err(|e| e.kind), Err(ErrorKind::Timeout));
            assert_eq!(
                ms, 100.0,
                "ended at the deadline, not when the stream ended"
            );
            let abandoned = abandoned.expect("the call was abandoned");
            assert!(!abandoned.finished);
            assert_eq!(
                abandoned.waited_ms, 100.0,
                "the drain ends at its own deadline too"
            );
        });
        assert_eq!(fake.now.get(), 200.0, "nothing ran past the drain");
    }
}
