//! One `/test` call: pick the key and the order, read every store, write on a miss, time each
//! awaited call. Stores run one after another, never concurrently, so they do not compete for the
//! isolate's network; the shuffled order keeps any first-call advantage from favouring one store.

use std::cell::RefCell;
use std::future::Future;

use futures::future::{select, Either};

use crate::answer::{round_ms, Answer, ErrorBody, Op, StoreResult};
use crate::clock::{Clock, Timer};
use crate::error::{ErrorKind, StoreError};
use crate::params::{Order, Params};
use crate::store::{ReadOptions, Store, StoreId};
use crate::value::ValueGen;

/// The stores of this deployment; an `Err` is a store that is not configured (and why).
pub type StoreSet<'a> = Vec<(StoreId, Result<&'a dyn Store, StoreError>)>;

/// Per-isolate state the probe needs. The generator sits in a `RefCell` because one isolate may
/// interleave several requests: it is only borrowed between awaits, never across one.
pub struct Isolate<'a> {
    pub gen: &'a RefCell<ValueGen>,
    pub clock: &'a dyn Clock,
    pub timer: &'a dyn Timer,
    /// Requests this isolate has served, this one included.
    pub requests: u64,
    pub colo: String,
}

/// Runs one measurement. Never fails: every store failure is data in the answer.
pub async fn probe(params: &Params, stores: &StoreSet<'_>, isolate: &Isolate<'_>) -> Answer {
    let (key, order) = {
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
        (key, order)
    };

    let mut answer = Answer::new(key.clone(), isolate.colo.clone(), isolate.requests);
    // The value written on a miss: generated at most once, so every store gets the same bytes.
    let mut value: Option<Vec<u8>> = None;
    let options = ReadOptions {
        cache_ttl_s: params.cache_ttl_s,
        consistency: params.consistency,
    };
    for id in order {
        let store = match stores.iter().find(|(s, _)| *s == id) {
            Some((_, Ok(store))) => *store,
            Some((_, Err(e))) => {
                answer.push(id, not_configured(e.clone()));
                continue;
            }
            None => {
                let e = StoreError::new(ErrorKind::NotConfigured, "store not available");
                answer.push(id, not_configured(e));
                continue;
            }
        };
        let mut result = StoreResult::default();
        // Setup (Deno KV's metadata exchange) is timed apart, so reads and writes stay comparable.
        if let Err(e) = connect(isolate, params.timeout_ms, store, &mut result).await {
            result.error = Some(ErrorBody::new(e, Op::Read));
            answer.push(id, result);
            continue;
        }
        let (read, read_ms) = timed(isolate, params.timeout_ms, store.get(&key, options)).await;
        result.read_ms = Some(read_ms);
        match read {
            Err(e) => result.error = Some(ErrorBody::new(e, Op::Read)),
            Ok(Some(bytes)) => {
                result.hit = Some(true);
                result.value_bytes = Some(bytes.len() as u64);
            }
            Ok(None) => {
                result.hit = Some(false);
                let bytes = value.get_or_insert_with(|| {
                    let mut gen = isolate.gen.borrow_mut();
                    let size = gen.size(params.min_bytes, params.max_bytes);
                    gen.value(size as usize)
                });
                result.value_bytes = Some(bytes.len() as u64);
                if let Err(e) = connect(isolate, params.timeout_ms, store, &mut result).await {
                    result.error = Some(ErrorBody::new(e, Op::Write));
                    answer.push(id, result);
                    continue;
                }
                let (write, write_ms) = timed(
                    isolate,
                    params.timeout_ms,
                    store.put(&key, bytes, params.ttl_s),
                )
                .await;
                result.write_ms = Some(write_ms);
                if let Err(e) = write {
                    result.error = Some(ErrorBody::new(e, Op::Write));
                }
            }
        }
        answer.push(id, result);
    }
    answer
}

/// Runs the store's setup if due, adding its time to `connect_ms` when it did any work (a failed
/// setup is reported with its time too).
async fn connect(
    isolate: &Isolate<'_>,
    timeout_ms: u32,
    store: &dyn Store,
    result: &mut StoreResult,
) -> Result<(), StoreError> {
    let (outcome, ms) = timed(isolate, timeout_ms, store.connect()).await;
    if !matches!(outcome, Ok(false)) {
        result.connect_ms = Some(round_ms(result.connect_ms.unwrap_or(0.0) + ms));
    }
    outcome.map(|_| ())
}

fn not_configured(e: StoreError) -> StoreResult {
    StoreResult {
        error: Some(ErrorBody::new(e, Op::Read)),
        ..Default::default()
    }
}

/// Awaits `op` under the per-store timeout and returns its outcome with the elapsed milliseconds.
/// On timeout the operation's future is dropped, which aborts the underlying request.
async fn timed<T>(
    isolate: &Isolate<'_>,
    timeout_ms: u32,
    op: impl Future<Output = Result<T, StoreError>>,
) -> (Result<T, StoreError>, f64) {
    let start = isolate.clock.now_ms();
    let op = std::pin::pin!(op);
    let sleep = std::pin::pin!(isolate.timer.sleep_ms(u64::from(timeout_ms)));
    let outcome = match select(op, sleep).await {
        Either::Left((result, _)) => result,
        Either::Right(_) => Err(StoreError::new(
            ErrorKind::Timeout,
            format!("no answer within {timeout_ms} ms"),
        )),
    };
    let elapsed = round_ms((isolate.clock.now_ms() - start).max(0.0));
    (outcome, elapsed)
}
