//! The run archive: the answers of a load run (`/test?run=<id>` or the `Kvbench-Run` header),
//! kept by a Durable Object class of its own, `RunArchive`, across `RUN_SHARDS` objects per run
//! (`run:<id>#<k>`, `kvbench_core::runs`): one object's SQLite writes serialize, so a run that
//! sends thousands of answers a second spreads them. The worker keeps each answer from
//! `waitUntil` after its response ([`keep_answer`]), in the shard its isolate picks, the next one
//! when that fails; an answer no shard took is counted, and the count recorded in a shard (or
//! carried by the run's next keep), so `GET /runs/<id>/answers` says how many keeps failed.
//! Answers older than `PROBE_KEEP` are deleted by each shard's alarm.

use kvbench_core::ParamError;
use std::cell::Cell;

use kvbench_core::probes::{self, KEEP_VAR};
use kvbench_core::runs::{self, Keep, ShardSink, Writer};
use kvbench_core::spec::env::RUNS;
use serde_json::json;
use worker::durable::{ObjectNamespace, State, Stub};
use worker::{durable_object, DurableObject, Env, Method, Request, Response};

use crate::bindings::env_text;
use crate::kept_table::{KeptTable, Source};
use crate::probes::{at, now_ms, status_of};

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
        let rows = body
            .lines()
            .filter(|l| !l.is_empty())
            .map(|row| {
                row.split_once('\t')
                    .and_then(|(t, line)| Some((t.parse::<i64>().ok()?, line)))
            })
            .collect::<Option<Vec<_>>>()
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
        Response::from_json(&json!({
            "kept": count.kept,
            "first_t_ms": count.first_t_ms,
            "last_t_ms": count.last_t_ms,
            "keep_failed": self.kept.failed()?,
        }))
    }
}

impl DurableObject for RunArchive {
    fn new(state: State, _env: Env) -> Self {
        let kept = KeptTable::new(state.storage().sql());
        RunArchive {
            state,
            kept,
            alarmed: Cell::new(false),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let url = req.url()?;
        let answer = match (req.method(), url.path()) {
            (Method::Post, "/append") => self.append(&url, &req.text().await?).await,
            (Method::Post, "/failed") => {
                let n = Self::query(&url, "n").unwrap_or(0).max(0) as u64;
                match self.kept.add_failed(n) {
                    Ok(()) => self.ensure_alarm(&url, None).await.and(Response::empty()),
                    Err(e) => Err(e),
                }
            }
            (Method::Get, "/status") => self.status(),
            (Method::Get, "/answers") => self.kept.page(&url, 0),
            _ => Response::error("no such run archive call", 404),
        };
        answer.or_else(|e| Response::error(format!("run archive: {e}"), 500))
    }

    /// Deletes what is due, re-arms for when the oldest answer left is due (so an answer lives
    /// `keep` plus the grace, not up to twice `keep`).
    async fn alarm(&self) -> worker::Result<Response> {
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

/// The worker's side: this deployment's run archive.
pub struct Archive {
    namespace: ObjectNamespace,
    /// `RUN_SHARDS`.
    pub shards: u32,
    /// `PROBE_KEEP`: how long a run's answers are kept.
    pub keep_s: u32,
}

impl Archive {
    /// The binding and the vars; a var that does not parse (or the missing binding) is an
    /// error naming it.
    pub fn from_env(env: &Env) -> Result<Archive, ParamError> {
        let namespace = env
            .durable_object(RUNS)
            .map_err(|_| ParamError::new(RUNS, "the Durable Object binding is missing"))?;
        let shards = match env_text(env, runs::SHARDS_VAR) {
            Some(v) => runs::parse_shards(&v)?,
            None => runs::DEFAULT_SHARDS,
        };
        let keep_s = match env_text(env, KEEP_VAR) {
            Some(v) => probes::parse_seconds(KEEP_VAR, &v, probes::MIN_KEEP_S, probes::MAX_KEEP_S)?,
            None => probes::DEFAULT_KEEP_S,
        };
        Ok(Archive {
            namespace,
            shards,
            keep_s,
        })
    }

    pub fn shard(&self, run: &str, k: u32) -> worker::Result<Stub> {
        self.namespace.get_by_name(&runs::shard_object_name(run, k))
    }

    /// A run's shards as the sources of one stream, in shard order.
    pub fn sources(&self, run: &str) -> worker::Result<Vec<Source>> {
        (0..self.shards)
            .map(|k| {
                Ok(Source {
                    label: format!("{run}#{k}"),
                    stub: self.shard(run, k)?,
                    seq_base: runs::seq_base(k),
                })
            })
            .collect()
    }
}

/// A run's shards as [`ShardSink`]: `POST /append` and `POST /failed` to its objects.
struct Shards<'a> {
    archive: &'a Archive,
    run: &'a str,
}

impl ShardSink for Shards<'_> {
    async fn append(&self, k: u32, body: &str, _lines: u64, failed: u64) -> Result<(), String> {
        let path = format!("append?keep={}&failed={failed}", self.archive.keep_s);
        self.archive.post_raw(self.run, k, &path, body).await
    }

    async fn record_failed(&self, k: u32, failed: u64) -> Result<(), String> {
        let path = format!("failed?n={failed}&keep={}", self.archive.keep_s);
        self.archive.post_raw(self.run, k, &path, "").await
    }
}

impl Archive {
    /// `POST <path>` with `body` to shard `k` of `run` on the runtime's own objects: the SDK's
    /// `Stub::fetch_with_request` reads the request's and the answer's `cf` across JS into
    /// objects of its own, which profiled at ~0.8 ms of workerd CPU per kept answer with the
    /// archive in a workerd of its own (`bench/runs.mjs --split --profile`). A non-2xx answer is
    /// an error with its status and text.
    async fn post_raw(&self, run: &str, k: u32, path: &str, body: &str) -> Result<(), String> {
        use wasm_bindgen::JsCast;
        let js = |e: wasm_bindgen::JsValue| crate::bindings::js_text(&e);
        let namespace: &wasm_bindgen::JsValue = self.namespace.as_ref();
        let call = |target: &wasm_bindgen::JsValue, method: &str, arg: &wasm_bindgen::JsValue| {
            js_sys::Reflect::get(target, &method.into())
                .and_then(|f| f.dyn_into::<js_sys::Function>())
                .and_then(|f| f.call1(target, arg))
        };
        let stub = call(
            namespace,
            "getByName",
            &runs::shard_object_name(run, k).into(),
        )
        .map_err(js)?;
        let init = worker::web_sys::RequestInit::new();
        init.set_method("POST");
        init.set_body(&body.into());
        let request = worker::web_sys::Request::new_with_str_and_init(
            &format!("{}/{path}", crate::kept_table::ORIGIN),
            &init,
        )
        .map_err(js)?;
        let promise: js_sys::Promise = call(&stub, "fetch", &request).map_err(js)?.unchecked_into();
        let response: worker::web_sys::Response =
            worker::wasm_bindgen_futures::JsFuture::from(promise)
                .await
                .map_err(js)?
                .unchecked_into();
        let status = response.status();
        let text = response.text().map_err(js)?;
        let text = worker::wasm_bindgen_futures::JsFuture::from(text)
            .await
            .map_err(js)?;
        if status >= 300 {
            return Err(format!(
                "{status}: {}",
                text.as_string().unwrap_or_default()
            ));
        }
        Ok(())
    }
}

thread_local! {
    /// This isolate's writer, starting at a random shard (isolates do not all begin at 0).
    static WRITER: &'static Writer = Box::leak(Box::new(Writer::new(
        (js_sys::Math::random() * f64::from(runs::MAX_SHARDS)) as u32,
    )));
}

/// One line as an append carries it.
pub fn append_line(t_ms: i64, line: &str) -> String {
    format!("{t_ms}\t{line}\n")
}

/// How long a keep waiting for another's append sleeps before it looks again.
const TICK_MS: u64 = 2;

/// Keeps one `/test` answer of `run` (called from `waitUntil`, after the answer was sent),
/// appended with the others of this isolate that wait ([`Writer::keep_batched`]); what went
/// wrong is logged, and an answer no shard took is counted.
pub async fn keep_answer(archive: &Archive, run: &str, t_ms: i64, line: &str) {
    let writer = WRITER.with(|w| *w);
    let shards = Shards { archive, run };
    let tick = || worker::Delay::from(std::time::Duration::from_millis(TICK_MS));
    let outcomes = writer
        .keep_batched(&shards, run, archive.shards, append_line(t_ms, line), tick)
        .await;
    for kept in outcomes {
        match kept {
            Keep::Kept { .. } => {}
            Keep::Moved { from, to, error } => worker::console_error!(
                "run {run}: shard {from} failed ({error}); kept in shard {to}"
            ),
            Keep::Failed {
                lines,
                errors,
                recorded,
            } => worker::console_error!(
                "run {run}: {lines} answer(s) not kept ({}); counted{}",
                errors.join("; "),
                if recorded {
                    ""
                } else {
                    ", the count held for the run's next keep"
                }
            ),
        }
    }
}

/// A run's shards with their status: the sum of what they keep and of the failed keeps.
pub async fn totals(archive: &Archive, run: &str) -> Result<(u64, u64), String> {
    let (mut kept, mut failed) = (0, 0);
    for k in 0..archive.shards {
        let status = status_of(&archive.shard(run, k).map_err(|e| e.to_string())?).await?;
        let n = |name: &str| {
            status
                .get(name)
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
        };
        kept += n("kept");
        failed += n("keep_failed");
    }
    Ok((kept, failed))
}
