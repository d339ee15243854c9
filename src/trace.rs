//! Where this isolate runs: the one fetch of Cloudflare's trace, for a probe object (once per
//! instance) and a member's `/test` (rules: `kvbench_core::operations::trace`).

use std::cell::RefCell;

use kvbench_core::operations::trace::{self, TraceCache};
use kvbench_core::Clock;
use worker::Env;

use crate::bindings::{env_text, JsClock};

thread_local! {
    /// A member isolate's trace: what it learned, and when it last asked.
    static MEMBER: RefCell<TraceCache> = RefCell::default();
}

/// The colo `PROBE_COLO_URL`'s trace names, asked now; `None` (unknown) when the var is "none",
/// or the trace fails, takes longer than [`trace::DEADLINE_MS`] or names no colo.
pub async fn colo(env: &Env) -> Option<String> {
    let url = trace::colo_url(env_text(env, trace::COLO_URL_VAR))?;
    ask(&url).await
}

/// A member isolate's trace colo, asked when due ([`TraceCache::due`]) and only when `may_ask`
/// (a refused request costs no subrequest).
pub async fn member_colo(env: &Env, may_ask: bool) -> Option<String> {
    if may_ask && MEMBER.with(|t| t.borrow_mut().due(JsClock.now_ms())) {
        let learned = colo(env).await;
        MEMBER.with(|t| t.borrow_mut().on_trace(learned));
    }
    MEMBER.with(|t| t.borrow().colo().map(str::to_string))
}

/// `GET url` and its `colo=` line, within [`trace::DEADLINE_MS`].
async fn ask(url: &str) -> Option<String> {
    let request = crate::bindings::js_request("GET", url, &[], None, false).ok()?;
    let fetch = worker::Fetch::Request(request);
    let sleep = worker::Delay::from(std::time::Duration::from_millis(trace::DEADLINE_MS));
    let get = async {
        let mut r = fetch.send().await.ok()?;
        if r.status_code() != 200 {
            return None;
        }
        r.text().await.ok()
    };
    let body = match futures::future::select(std::pin::pin!(get), std::pin::pin!(sleep)).await {
        futures::future::Either::Left((body, _)) => body?,
        futures::future::Either::Right(_) => return None,
    };
    trace::trace_colo(&body)
}
