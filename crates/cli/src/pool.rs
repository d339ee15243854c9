//! The fixed pool of connections: `--connections` tasks, each owning one connection opened
//! before the schedule starts. The pacer hands due requests to idle connections (open and most
//! recently busy first) and queues the rest; beyond `--max-in-flight` a request is `not_sent`,
//! never delayed.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::attack::{Attacker, Conn};
use crate::batch::{self, RequestEnd};
use kvbench_report::sample::FailureKind;

/// After the schedule ends and every request got its own timeout, allow this much more.
const DRAIN_SLACK: Duration = Duration::from_secs(1);
/// After cancelling, how long tasks get to report `cancelled`.
const CANCEL_GRACE: Duration = Duration::from_secs(2);
/// Longest wait for a connection to open before the run starts (at most `--timeout`).
const OPEN_WAIT: Duration = Duration::from_secs(10);

/// One scheduled request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    pub intended: Instant,
    /// `intended`, µs after the run start.
    pub intended_us: u64,
}

/// `--max-in-flight` when not given: 512, or 100 ms of the schedule when that is more — at high
/// rates a stall of a few milliseconds (the machine busy elsewhere) then shows as latency instead
/// of requests refused.
pub fn default_max_in_flight(rate: f64) -> u64 {
    ((rate / 10.0).ceil() as u64).max(512)
}

/// `--connections` when not given: enough for one second of latency at the rate (Little's law),
/// at least 16, at most 256 — and never more than may be in flight.
pub fn default_connections(rate: f64, max_in_flight: u64) -> u64 {
    (rate.ceil() as u64).clamp(16, 256).min(max_in_flight)
}

/// Requests queued or being sent, against `--max-in-flight`; shared by every shard's queue.
#[derive(Debug)]
pub struct InFlight {
    count: AtomicU64,
    max: u64,
}

impl InFlight {
    pub fn new(max: u64) -> InFlight {
        InFlight {
            count: AtomicU64::new(0),
            max,
        }
    }

    pub fn get(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Takes room for up to `wanted` requests; returns how many fit.
    fn reserve(&self, wanted: usize) -> usize {
        let mut taken = 0;
        let _ = self
            .count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                taken = wanted.min(self.max.saturating_sub(now) as usize);
                Some(now + taken as u64)
            });
        taken
    }

    fn release(&self, n: usize) {
        self.count.fetch_sub(n as u64, Ordering::AcqRel);
    }
}

#[derive(Default)]
struct Slot {
    /// Set while the connection waits for work.
    waker: Option<Waker>,
    /// A request handed to it by the pacer, not yet picked up.
    job: Option<Job>,
    idle: bool,
}

struct State {
    /// Requests no connection was free for, oldest first.
    backlog: VecDeque<Job>,
    /// Idle tasks with an open connection, most recently idle last.
    idle: Vec<usize>,
    /// Idle tasks without one (never used, or closed), most recently idle last.
    idle_unopened: Vec<usize>,
    slots: Vec<Slot>,
    closed: bool,
}

/// Where the pacer puts requests and the connections take them.
pub struct Queue {
    state: Mutex<State>,
    in_flight: Arc<InFlight>,
}

impl Queue {
    pub fn new(connections: usize, in_flight: Arc<InFlight>) -> Queue {
        Queue {
            state: Mutex::new(State {
                backlog: VecDeque::new(),
                idle: Vec::with_capacity(connections),
                idle_unopened: Vec::with_capacity(connections),
                slots: (0..connections).map(|_| Slot::default()).collect(),
                closed: false,
            }),
            in_flight,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the due requests in order while `--max-in-flight` allows; returns how many (the
    /// rest stay in `due`, not sent). `wake` is the caller's scratch space.
    pub fn offer(&self, due: &mut Vec<Job>, wake: &mut Vec<Waker>) -> usize {
        let taken = self.in_flight.reserve(due.len());
        {
            let mut s = self.lock();
            for job in due.drain(..taken) {
                match s.idle.pop().or_else(|| s.idle_unopened.pop()) {
                    Some(id) => {
                        let slot = &mut s.slots[id];
                        slot.idle = false;
                        slot.job = Some(job);
                        wake.extend(slot.waker.take());
                    }
                    None => s.backlog.push_back(job),
                }
            }
        }
        // Woken outside the lock, so the woken task does not wait for it.
        for w in wake.drain(..) {
            w.wake();
        }
        taken
    }

    /// No more requests will come: idle connections end.
    pub fn close(&self) {
        let wake: Vec<Waker> = {
            let mut s = self.lock();
            s.closed = true;
            s.slots.iter_mut().filter_map(|c| c.waker.take()).collect()
        };
        for w in wake {
            w.wake();
        }
    }

    /// Removes the requests no connection picked up (for cancellation).
    pub fn take_waiting(&self) -> Vec<Job> {
        let mut s = self.lock();
        let mut jobs: Vec<Job> = s.backlog.drain(..).collect();
        jobs.extend(s.slots.iter_mut().filter_map(|c| c.job.take()));
        self.in_flight.release(jobs.len());
        jobs
    }

    /// Marks a request done (it no longer counts as in flight).
    fn done(&self) {
        self.in_flight.release(1);
    }

    /// Connection `id`'s next request, after ending its previous one (`finished`); `None` once
    /// the queue is closed and empty. `open`: whether the task holds an open connection.
    async fn next(&self, id: usize, finished: bool, open: bool) -> Option<Job> {
        if finished {
            self.done();
        }
        poll_fn(|cx| {
            let mut s = self.lock();
            if let Some(job) = s.slots[id].job.take() {
                return Poll::Ready(Some(job));
            }
            if let Some(job) = s.backlog.pop_front() {
                return Poll::Ready(Some(job));
            }
            if s.closed {
                return Poll::Ready(None);
            }
            let slot = &mut s.slots[id];
            match &mut slot.waker {
                Some(w) => w.clone_from(cx.waker()),
                None => slot.waker = Some(cx.waker().clone()),
            }
            if !slot.idle {
                slot.idle = true;
                if open {
                    s.idle.push(id);
                } else {
                    s.idle_unopened.push(id);
                }
            }
            Poll::Pending
        })
        .await
    }
}

/// The request a connection is working on: reported `cancelled` if the task is dropped (aborted)
/// before it ends.
struct Current<'a> {
    job: Option<Job>,
    queue: &'a Queue,
    results: &'a batch::Shared,
}

impl Drop for Current<'_> {
    fn drop(&mut self) {
        if let Some(job) = self.job.take() {
            let latency_us = job.intended.elapsed().as_micros() as u64;
            self.results.lock().push(
                job.intended_us,
                latency_us,
                RequestEnd::Failed(FailureKind::Cancelled),
                b"run stopped before the answer",
            );
            self.queue.done();
        }
    }
}

/// Everything the connection tasks of one shard share.
pub struct Shared {
    pub attacker: Arc<Attacker>,
    pub queue: Queue,
    pub results: batch::Shared,
    pub timeout: Duration,
}

/// One connection's loop: take a request, send it (timed out at its intended start plus
/// `--timeout`), append its result, repeat.
async fn connection(id: usize, shared: Arc<Shared>, warm: Arc<tokio::sync::Semaphore>) {
    let Shared {
        attacker,
        queue,
        results,
        timeout,
    } = &*shared;
    let timed_out = format!("no answer within {}", humantime::format_duration(*timeout));
    let mut current = Current {
        job: None,
        queue,
        results,
    };
    // A connection that cannot be opened now is tried again, and its failure counted, when a
    // request needs it.
    let mut conn: Option<Conn> =
        tokio::time::timeout((*timeout).min(OPEN_WAIT), attacker.connect())
            .await
            .ok()
            .and_then(Result::ok);
    warm.add_permits(1);
    let mut body = Vec::with_capacity(1024);
    let timer = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(timer);
    let mut finished = false;
    while let Some(job) = queue.next(id, finished, conn.is_some()).await {
        current.job = Some(job);
        let mut retried = false;
        let deadline = job.intended + *timeout;
        let ending = if Instant::now() >= deadline {
            // Waited for a connection past its timeout: not worth sending any more.
            Err((FailureKind::Timeout, timed_out.clone()))
        } else {
            timer.as_mut().reset(deadline.into());
            tokio::select! {
                biased;
                _ = &mut timer => {
                    conn = None;
                    Err((FailureKind::Timeout, timed_out.clone()))
                }
                sent = attacker.send(&mut conn, &mut body, &mut retried) => sent,
            }
        };
        let latency_us = job.intended.elapsed().as_micros() as u64;
        {
            let mut out = results.lock();
            match &ending {
                Ok(status) => out.push(
                    job.intended_us,
                    latency_us,
                    RequestEnd::Answered(*status),
                    &body,
                ),
                Err((kind, reason)) => out.push(
                    job.intended_us,
                    latency_us,
                    RequestEnd::Failed(*kind),
                    reason.as_bytes(),
                ),
            }
            if retried {
                out.mark_retried();
            }
        }
        current.job = None;
        finished = true;
    }
}

/// The running connection tasks.
pub struct Pool {
    tasks: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
    /// A permit per connection that finished opening (or failed to).
    warm: Arc<tokio::sync::Semaphore>,
}

/// How the pool ended.
pub struct Drained {
    /// A second Ctrl-C cut the wait short.
    pub cut_short: bool,
    /// Tasks that did not end even after cancellation (their requests are missing).
    pub stuck: usize,
}

impl Pool {
    /// Starts the tasks; each opens its connection at once (see [`Pool::opened`]).
    pub fn spawn(connections: usize, shared: Arc<Shared>) -> Pool {
        let warm = Arc::new(tokio::sync::Semaphore::new(0));
        let tasks = (0..connections)
            .map(|id| tokio::spawn(connection(id, shared.clone(), warm.clone())))
            .collect();
        Pool {
            tasks,
            shared,
            warm,
        }
    }

    /// Waits until every connection is open (or failed to open, within `--timeout` and 10 s).
    pub async fn opened(&self) {
        let _ = self.warm.acquire_many(self.tasks.len() as u32).await;
    }

    fn running(&self) -> usize {
        self.tasks.iter().filter(|t| !t.is_finished()).count()
    }

    /// After the queue is closed: waits for the requests in flight (each has its own timeout, so
    /// this ends); a (second) Ctrl-C cuts it short, and whatever is left is cancelled.
    pub async fn drain(self, sigints: &AtomicU64) -> Drained {
        let deadline = Instant::now() + self.shared.timeout + DRAIN_SLACK;
        let at_drain = sigints.load(Ordering::Relaxed);
        let mut cut_short = false;
        while self.running() > 0 && Instant::now() < deadline {
            if sigints.load(Ordering::Relaxed) > at_drain {
                cut_short = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if self.running() > 0 {
            for t in &self.tasks {
                t.abort();
            }
            let waiting = self.shared.queue.take_waiting();
            {
                let mut out = self.shared.results.lock();
                for job in waiting {
                    let latency_us = job.intended.elapsed().as_micros() as u64;
                    out.push(
                        job.intended_us,
                        latency_us,
                        RequestEnd::Failed(FailureKind::Cancelled),
                        b"run stopped before the answer",
                    );
                }
            }
            let deadline = Instant::now() + CANCEL_GRACE;
            while self.running() > 0 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        Drained {
            cut_short,
            stuck: self.running(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs(n: u64) -> Vec<Job> {
        let t0 = Instant::now();
        (0..n)
            .map(|i| Job {
                intended: t0 + Duration::from_micros(i),
                intended_us: i,
            })
            .collect()
    }

    #[test]
    fn default_max_in_flight_table() {
        for (rate, want) in [
            (0.5, 512),
            (400.0, 512),
            (5_120.0, 512),
            (10_000.0, 1_000),
            (30_000.0, 3_000),
        ] {
            assert_eq!(default_max_in_flight(rate), want, "{rate}");
        }
    }

    #[test]
    fn default_connections_table() {
        for (rate, max, want) in [
            (0.5, 512, 16),
            (10.0, 512, 16),
            (400.0, 512, 256),
            (30_000.0, 512, 256),
            (30_000.0, 64, 64),
            (100.0, 512, 100),
        ] {
            assert_eq!(default_connections(rate, max), want, "{rate} {max}");
        }
    }

    #[tokio::test]
    async fn hands_to_open_connections_first_then_queues_in_order_up_to_max_in_flight() {
        // Three tasks go idle: 0 and 1 with an open connection (1 last), 2 without one.
        let in_flight = Arc::new(InFlight::new(4));
        let q = Queue::new(3, in_flight.clone());
        for (id, open) in [(2, false), (0, true), (1, true)] {
            let next = q.next(id, false, open);
            tokio::pin!(next);
            assert!(futures_poll(next.as_mut()).is_none());
        }
        let mut due = jobs(6);
        assert_eq!(q.offer(&mut due, &mut Vec::new()), 4);
        assert_eq!(
            due.iter().map(|j| j.intended_us).collect::<Vec<_>>(),
            [4, 5]
        );
        assert_eq!(in_flight.get(), 4);
        // Open connections first, the most recently idle first; then the unopened one; one queued.
        assert_eq!(q.next(1, false, true).await.unwrap().intended_us, 0);
        assert_eq!(q.next(0, false, true).await.unwrap().intended_us, 1);
        assert_eq!(q.next(2, false, false).await.unwrap().intended_us, 2);
        assert_eq!(q.next(0, true, true).await.unwrap().intended_us, 3);
        assert_eq!(in_flight.get(), 3);
        q.close();
        for id in 0..3 {
            assert_eq!(q.next(id, true, true).await, None);
        }
        assert_eq!(in_flight.get(), 0);
    }

    #[test]
    fn cancellation_takes_what_no_connection_picked_up() {
        let in_flight = Arc::new(InFlight::new(10));
        let q = Queue::new(1, in_flight.clone());
        let mut due = jobs(4);
        assert_eq!(q.offer(&mut due, &mut Vec::new()), 4);
        assert_eq!(q.take_waiting().len(), 4);
        assert_eq!(in_flight.get(), 0);
    }

    /// Polls once with a no-op waker: `Some` if ready.
    fn futures_poll<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> Option<F::Output> {
        let mut cx = std::task::Context::from_waker(Waker::noop());
        match f.poll(&mut cx) {
            Poll::Ready(v) => Some(v),
            Poll::Pending => None,
        }
    }
}
