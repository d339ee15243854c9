//! Keeping a `/test` answer under its run id (`?run=` or `Kvbench-Run`) in the `BENCH_RUNS`
//! archive, spread over `RUN_SHARDS` objects per run (`kvbench_core::operations::runs`), from
//! `waitUntil` after the response; an answer no shard took is counted.

use kvbench_core::operations::runs::{self, Keep, ShardSink, Writer};
use kvbench_core::operations::window::parse_seconds;
use kvbench_core::spec::env::RUNS;
use kvbench_core::spec::keep::{self, KEEP_VAR};
use kvbench_core::ParamError;
use kvbench_wire::object::{ObjectCall, ShardCall};
use worker::durable::ObjectNamespace;
use worker::{Context, Env};

use crate::bindings::env_text;

/// Keeps a `/test` answer under its run id after the response (`waitUntil`, no span open): a 200
/// as its answer, any other status as a failure, so a report counts every request. The keep is
/// a request in flight of its own.
pub fn keep_run_answer(
    env: &Env,
    ctx: &Context,
    run: &str,
    // When the request started, its handler's time, and whether it was the isolate's first.
    (started_ms, handler_ms, cold): (f64, f64, bool),
    reply: &kvbench_core::measurement::endpoint::Reply,
    colo: &str,
) {
    let archive = match Archive::from_env(env) {
        Ok(a) => a,
        Err(e) => {
            // Unreachable: `/test` refuses a run whose archive this fails for (`Call::keeping`)
            // before measuring it, and the env does not change within a request.
            worker::console_error!("run {run}: not kept: {}: {}", e.parameter, e.message);
            return;
        }
    };
    let line = kvbench_core::operations::runs::run_line(
        colo,
        started_ms,
        handler_ms,
        cold,
        reply.status,
        &reply.body,
    );
    let run = run.to_string();
    let t_ms = started_ms as i64;
    let visit = crate::in_flight().enter();
    ctx.wait_until(async move {
        let _visit = visit;
        keep_answer(&archive, &run, t_ms, &line).await;
    });
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
            Some(v) => parse_seconds(KEEP_VAR, &v, keep::MIN_KEEP_S, keep::MAX_KEEP_S)?,
            None => keep::DEFAULT_KEEP_S,
        };
        Ok(Archive {
            namespace,
            shards,
            keep_s,
        })
    }

    /// Shard `k` of `run` (the archive's reads, the main worker's).
    #[cfg(feature = "main-worker")]
    pub fn shard(&self, run: &str, k: u32) -> worker::Result<worker::durable::Stub> {
        self.namespace.get_by_name(&runs::shard_object_name(run, k))
    }
}

/// A run's shards as [`ShardSink`]: `POST /append` and `POST /failed` to its objects.
struct Shards<'a> {
    archive: &'a Archive,
    run: &'a str,
}

impl ShardSink for Shards<'_> {
    async fn append(&self, k: u32, body: &str, _lines: u64, failed: u64) -> Result<(), String> {
        let path = format!(
            "{}?keep={}&failed={failed}",
            ShardCall::Append.path(),
            self.archive.keep_s
        );
        self.archive.post_raw(self.run, k, &path, body).await
    }

    async fn record_failed(&self, k: u32, failed: u64) -> Result<(), String> {
        let path = format!(
            "{}?n={failed}&keep={}",
            ShardCall::Failed.path(),
            self.archive.keep_s
        );
        self.archive.post_raw(self.run, k, &path, "").await
    }
}

impl Archive {
    /// `POST <path>` with `body` to shard `k` of `run`, on the runtime's objects (the SDK's
    /// `Stub::fetch_with_request` reads `cf` across JS, CPU per answer: docs/measured.md). A
    /// non-2xx answer is an error with its status and text.
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
            &format!("{}{path}", crate::bindings::OBJECT_ORIGIN),
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

/// How long a keep waiting for another's append sleeps before it looks again.
const TICK_MS: u64 = 2;

/// Keeps one `/test` answer of `run` batched with the isolate's others
/// ([`Writer::keep_batched`]); failures are logged and counted.
pub async fn keep_answer(archive: &Archive, run: &str, t_ms: i64, line: &str) {
    let writer = WRITER.with(|w| *w);
    let shards = Shards { archive, run };
    let tick = || worker::Delay::from(std::time::Duration::from_millis(TICK_MS));
    // Within `waitUntil`'s limit: past it what still waits is counted, not cut off uncounted.
    let started_ms = js_sys::Date::now();
    let expired = || js_sys::Date::now() - started_ms > runs::KEEP_DEADLINE_MS;
    let outcomes = writer
        .keep_batched(
            &shards,
            run,
            archive.shards,
            kvbench_wire::object::append_row(t_ms, line),
            tick,
            expired,
        )
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
