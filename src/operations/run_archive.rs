//! `RunArchive`, one shard of a load run's kept answers (kept into by `crate::keep`): appends,
//! failed keeps, pages and the expiry alarm; also the reads over a run's shards.

use std::cell::RefCell;

use kvbench_core::operations::runs;
use kvbench_core::operations::shard::{Effect, Shard, ShardState};
use worker::durable::State;
use worker::{durable_object, DurableObject, Env, Request, Response};

use crate::keep::Archive;
use crate::operations::kept_table::{KeptTable, Source};
use crate::operations::object::{self, at, get_json, now_ms};
use kvbench_wire::object::{ObjectCall, ShardCall, ShardStatus};

/// One shard of a run: its kept answers, and its machine ([`Shard`]: how long it keeps them,
/// the expiries that failed, its alarm), whose state is kept under the storage key `shard`.
#[durable_object(alarm)]
pub struct RunArchive {
    state: State,
    kept: KeptTable,
    /// The shard's machine, over its state read once per instance.
    shard: RefCell<Option<Shard>>,
}

impl RunArchive {
    fn query(url: &worker::Url, name: &str) -> Option<i64> {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.parse::<i64>().ok())
    }

    /// `POST /append?keep=..&failed=..`: lines `<t_ms>\t<kept line>` in one statement (all or
    /// none: a keep retried elsewhere is never kept twice), then the failed keeps recorded.
    async fn append(&self, url: &worker::Url, body: &str) -> worker::Result<Response> {
        let rows = kvbench_wire::object::read_append(body)
            .ok_or_else(|| worker::Error::RustError("an append line is <t_ms>\\t<line>".into()))?;
        self.kept.keep_many(&rows)?;
        self.kept
            .add_failed(Self::query(url, "failed").unwrap_or(0).max(0) as u64)?;
        self.ensure_alarm(url).await;
        Response::empty()
    }

    /// A write makes sure an alarm will expire what it kept ([`Shard::handle_write`]); a failure
    /// is logged and the next write tries again.
    async fn ensure_alarm(&self, url: &worker::Url) {
        let keep_s = Self::query(url, "keep");
        let fed = match self.ready().await {
            Ok(()) => self.feed(|s| s.handle_write(keep_s)),
            Err(e) => Err(e),
        };
        if let Err(e) = fed {
            worker::console_error!("run archive: reading its state failed: {e}");
            return;
        }
        if let Err(e) = self.execute().await {
            worker::console_error!("run archive: arming its alarm failed: {e}");
        }
    }

    /// Reads the machine's state from storage on the instance's first event (one copy of
    /// this await for every event, not one per caller).
    async fn ready(&self) -> worker::Result<()> {
        if self.shard.borrow().is_none() {
            let stored: Option<serde_json::Value> =
                object::load(&self.state.storage(), "shard").await?;
            let state = stored.as_ref().map(ShardState::read).unwrap_or_default();
            // Another event may have read it meanwhile: the first machine stays.
            self.shard
                .borrow_mut()
                .get_or_insert_with(|| Shard::new(state));
        }
        Ok(())
    }

    /// Feeds an event to the machine ([`Self::ready`] first).
    fn feed<R>(&self, event: impl FnOnce(&mut Shard) -> R) -> worker::Result<R> {
        let mut machine = self.shard.borrow_mut();
        let machine = machine
            .as_mut()
            .ok_or_else(|| worker::Error::RustError("the shard's state is not read".into()))?;
        Ok(event(machine))
    }

    fn fed(&self, result: impl FnOnce(&mut Shard)) {
        if let Some(machine) = self.shard.borrow_mut().as_mut() {
            result(machine);
        }
    }

    /// Executes the machine's effects until it has none, each result fed back at once; the first
    /// failed save or arm is returned after the rest ran.
    async fn execute(&self) -> worker::Result<()> {
        let storage = self.state.storage();
        let text = |e: worker::Error| e.to_string();
        let mut failed = Ok(());
        loop {
            let Some(effect) = self.shard.borrow_mut().as_mut().and_then(Shard::poll) else {
                return failed;
            };
            match effect {
                Effect::Save(state) => {
                    if let Err(e) = object::save(&storage, "shard", &state).await {
                        failed = failed.and(Err(e));
                    }
                }
                Effect::Expire { before_ms } => {
                    let expired = self.kept.expire_before(before_ms).map_err(text);
                    self.fed(|s| s.handle_expired(expired));
                }
                Effect::ReadOldest => {
                    let oldest = self.kept.oldest_t_ms().map_err(text);
                    self.fed(|s| s.handle_oldest(oldest, now_ms()));
                }
                Effect::ArmAt(ms) => {
                    let armed = storage.set_alarm(at(ms)).await;
                    self.fed(|s| {
                        s.handle_armed(armed.as_ref().map(|_| ()).map_err(|e| e.to_string()))
                    });
                    if let Err(e) = armed {
                        failed = failed.and(Err(e));
                    }
                }
            }
        }
    }

    fn status(&self) -> worker::Result<Response> {
        let count = self.kept.count()?;
        crate::respond::message(&ShardStatus {
            kept: count.kept,
            first_t_ms: count.first_t_ms,
            last_t_ms: count.last_t_ms,
            keep_failed: self.kept.failed()?,
        })
    }
}

impl DurableObject for RunArchive {
    fn new(state: State, env: Env) -> Self {
        crate::operations::object::call_log_from(&env);
        let kept = KeptTable::new(state.storage().sql());
        RunArchive {
            state,
            kept,
            shard: RefCell::new(None),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        crate::operations::object::log_call("run-archive", &req);
        let _visit = crate::in_flight().enter();
        let url = req.url()?;
        let answer = match ShardCall::of(req.method().as_ref(), url.path()) {
            Some(ShardCall::Append) => self.append(&url, &req.text().await?).await,
            Some(ShardCall::Failed) => {
                let n = Self::query(&url, "n").unwrap_or(0).max(0) as u64;
                match self.kept.add_failed(n) {
                    Ok(()) => {
                        self.ensure_alarm(&url).await;
                        Response::empty()
                    }
                    Err(e) => Err(e),
                }
            }
            Some(ShardCall::Status) => self.status(),
            Some(ShardCall::Answers) => self.kept.page(&url, 0),
            None => Response::error("no such run archive call", 404),
        };
        answer.or_else(|e| Response::error(format!("run archive: {e}"), 500))
    }

    /// Deletes what is due and re-arms for the oldest left ([`Shard::handle_alarm`]). Only a
    /// failed re-arm throws, for Cloudflare's retries.
    async fn alarm(&self) -> worker::Result<Response> {
        let _visit = crate::in_flight().enter();
        self.ready().await?;
        self.feed(|s| s.handle_alarm(now_ms()))?;
        self.execute().await?;
        Response::ok("")
    }
}

/// A run's shards as the sources of one stream, in shard order.
pub fn sources(archive: &Archive, run: &str) -> worker::Result<Vec<Source>> {
    (0..archive.shards)
        .map(|k| {
            Ok(Source {
                label: format!("{run}#{k}"),
                stub: archive.shard(run, k)?,
                seq_base: runs::seq_base(k),
            })
        })
        .collect()
}

/// A run's shards with their status, all asked at once (up to 64 objects: one after the other,
/// their round trips would add up): the sum of what they keep and of the failed keeps.
pub async fn totals(archive: &Archive, run: &str) -> Result<(u64, u64), String> {
    let reads = (0..archive.shards).map(|k| async move {
        let shard = archive.shard(run, k).map_err(|e| e.to_string())?;
        Ok::<_, String>(ShardStatus::read(
            &get_json(&shard, ShardCall::Status).await?,
        ))
    });
    let (mut kept, mut failed) = (0, 0);
    for status in futures::future::join_all(reads).await {
        let status = status?;
        kept += status.kept;
        failed += status.keep_failed;
    }
    Ok((kept, failed))
}
