//! Ctrl-C as a count: the first stops the pacers, a second cuts the drain short (an atomic the
//! shards read without awaiting).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context as _;

#[cfg(unix)]
struct Interrupt(tokio::signal::unix::Signal);

#[cfg(unix)]
impl Interrupt {
    fn install() -> anyhow::Result<Interrupt> {
        let s = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .context("installing the Ctrl-C handler")?;
        Ok(Interrupt(s))
    }

    async fn recv(&mut self) {
        self.0.recv().await;
    }
}

#[cfg(not(unix))]
struct Interrupt;

#[cfg(not(unix))]
impl Interrupt {
    fn install() -> anyhow::Result<Interrupt> {
        Ok(Interrupt)
    }

    async fn recv(&mut self) {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Counts Ctrl-Cs from the moment it is installed until dropped.
pub struct Sigints {
    count: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Sigints {
    /// Installs the handler (Ctrl-C no longer kills the process) and starts counting.
    pub fn install() -> anyhow::Result<Sigints> {
        let mut interrupt = Interrupt::install()?;
        let count = Arc::new(AtomicU64::new(0));
        let task = {
            let count = count.clone();
            tokio::spawn(async move {
                loop {
                    interrupt.recv().await;
                    count.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        Ok(Sigints { count, task })
    }

    /// A shared view of the count, for threads.
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.count.clone()
    }

    pub fn get(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }
}

impl Drop for Sigints {
    fn drop(&mut self) {
        self.task.abort();
    }
}
