//! The run archive's object: one shard of a load run's kept answers (`RunArchive`, a Durable
//! Object class of its own; the worker's side that keeps into it is `crate::keep`), its appends,
//! the count of keeps that failed, its pages, and its alarm, which deletes answers older than
//! `PROBE_KEEP`. Also the two reads over a run's shards: their totals and their answers as the
//! sources of one stream.

use std::cell::Cell;

use kvbench_core::operations::probes;
use kvbench_core::operations::runs;
use worker::durable::State;
use worker::{durable_object, DurableObject, Env, Request, Response};

use crate::keep::Archive;
use crate::operations::kept_table::{KeptTable, Source};
use crate::operations::object::{at, get_json, now_ms};
use kvbench_wire::object::{ObjectCall, ShardCall, ShardStatus};

/// One shard of a run: its kept answers, and how long it keeps them (storage key `keep_s`).
#[durable_object(alarm)]
pub struct RunArchive {
    state: State,
    kept: KeptTable,
    /// This instance made sure an alarm will delete what expires.
    alarmed: Cell<bool>,
}

impl RunArchive {
    fn query(url: &worker::Url, name: &str) -> Option<i64> {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.parse::<i64>().ok())
    }

    /// `POST /append?keep=..&failed=..`: lines `<t_ms>\t<kept line>`, kept in one statement
    /// (all or none: a keep retried in another shard is never kept twice), then the failed
    /// keeps it carries are recorded.
    async fn append(&self, url: &worker::Url, body: &str) -> worker::Result<Response> {
        let rows = kvbench_wire::object::read_append(body)
            .ok_or_else(|| worker::Error::RustError("an append line is <t_ms>\\t<line>".into()))?;
        self.kept.keep_many(&rows)?;
        self.kept
            .add_failed(Self::query(url, "failed").unwrap_or(0).max(0) as u64)?;
        let first_t = rows.iter().map(|(t, _)| *t).min();
        self.ensure_alarm(url, first_t).await?;
        Response::empty()
    }

    /// The first write of an instance makes sure an alarm will delete what is older than `keep`
    /// seconds (runs are bounded like the probes).
    async fn ensure_alarm(&self, url: &worker::Url, t_ms: Option<i64>) -> worker::Result<()> {
        if self.alarmed.replace(true) {
            return Ok(());
        }
        let storage = self.state.storage();
        if storage.get_alarm().await?.is_some() {
            return Ok(());
        }
        let keep_s = Self::query(url, "keep")
            .unwrap_or(i64::from(probes::DEFAULT_KEEP_S))
            .clamp(i64::from(probes::MIN_KEEP_S), i64::from(probes::MAX_KEEP_S))
            as u32;
        storage.put("keep_s", keep_s).await?;
        let t = t_ms.map_or_else(now_ms, |t| t as f64);
        let due = self
            .kept
            .next_expiry_ms(keep_s)?
            .unwrap_or(t + probes::expiry_after_ms(keep_s));
        storage.set_alarm(at(due.max(now_ms() + 1000.0))).await
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
            alarmed: Cell::new(false),
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
                    Ok(()) => self.ensure_alarm(&url, None).await.and(Response::empty()),
                    Err(e) => Err(e),
                }
            }
            Some(ShardCall::Status) => self.status(),
            Some(ShardCall::Answers) => self.kept.page(&url, 0),
            None => Response::error("no such run archive call", 404),
        };
        answer.or_else(|e| Response::error(format!("run archive: {e}"), 500))
    }

    /// Deletes what is due, re-arms for when the oldest answer left is due (so an answer lives
    /// `keep` plus the grace, not up to twice `keep`).
    async fn alarm(&self) -> worker::Result<Response> {
        let _visit = crate::in_flight().enter();
        let storage = self.state.storage();
        let keep_s = storage
            .get::<u32>("keep_s")
            .await?
            .unwrap_or(probes::DEFAULT_KEEP_S);
        self.kept.expire(now_ms(), keep_s)?;
        if let Some(due) = self.kept.next_expiry_ms(keep_s)? {
            storage.set_alarm(at(due.max(now_ms() + 1000.0))).await?;
        }
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
