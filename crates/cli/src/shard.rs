//! One shard of the load (wrk's threads): an OS thread with its own runtime whose pacer releases
//! every `--threads`-th request to its share of the connections. Shards share only the
//! in-flight count, so a descheduled one does not stall the others.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use tokio::sync::oneshot;

use crate::pacer::{self, Pacer, Sent};
use crate::pool::{Drained, Pool, Shared};

/// What one shard needs.
pub struct Plan {
    pub index: usize,
    /// This shard's share of the schedule (see [`Pacer::shard`]).
    pub schedule: Pacer,
    pub connections: usize,
    pub shared: Arc<Shared>,
    pub sigints: Arc<AtomicU64>,
    pub max_in_flight: u64,
}

/// How a shard ended.
pub struct Ended {
    pub sent: Sent,
    pub drained: Drained,
}

/// A running shard.
pub struct Shard {
    opened: Option<oneshot::Receiver<()>>,
    start: Option<oneshot::Sender<Instant>>,
    ended: oneshot::Receiver<anyhow::Result<Ended>>,
    thread: std::thread::JoinHandle<()>,
}

async fn work(
    plan: Plan,
    opened: oneshot::Sender<()>,
    start: oneshot::Receiver<Instant>,
) -> anyhow::Result<Ended> {
    let Plan {
        schedule,
        connections,
        shared,
        sigints,
        max_in_flight,
        ..
    } = plan;
    let pool = Pool::spawn(connections, shared.clone());
    pool.opened().await;
    let _ = opened.send(());
    let start = start
        .await
        .map_err(|_| anyhow::anyhow!("the run ended before it started"))?;
    let sent = pacer::release(
        schedule,
        start,
        &shared.queue,
        &shared.results,
        &sigints,
        max_in_flight,
    )
    .await
    .context("the pacer's timer")?;
    shared.queue.close();
    let drained = pool.drain(&sigints).await;
    Ok(Ended { sent, drained })
}

impl Shard {
    pub fn spawn(plan: Plan) -> anyhow::Result<Shard> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting a shard's runtime")?;
        let (tx, ended) = oneshot::channel();
        let (opened_tx, opened) = oneshot::channel();
        let (start, start_rx) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(format!("kvbench-shard-{}", plan.index))
            .spawn(move || {
                let _ = tx.send(runtime.block_on(work(plan, opened_tx, start_rx)));
                // Connections still open are closed with the runtime, right away.
                runtime.shutdown_background();
            })
            .context("starting a shard's thread")?;
        Ok(Shard {
            opened: Some(opened),
            start: Some(start),
            ended,
            thread,
        })
    }

    /// Waits until the shard's connections are open (or failed to open).
    pub async fn opened(&mut self) {
        if let Some(opened) = self.opened.take() {
            let _ = opened.await;
        }
    }

    /// Starts the shard's schedule, counted from `start` (the same for every shard).
    pub fn start(&mut self, start: Instant) {
        if let Some(tx) = self.start.take() {
            let _ = tx.send(start);
        }
    }

    /// Waits for the shard to end (its schedule sent and its requests drained).
    pub async fn join(self) -> anyhow::Result<Ended> {
        let ended = self.ended.await;
        let _ = self.thread.join();
        ended.map_err(|_| anyhow::anyhow!("a shard's thread panicked"))?
    }
}
