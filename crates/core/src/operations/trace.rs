//! Where code ran, from Cloudflare's trace (`colo=` of `/cdn-cgi/trace`), fetched outside any
//! span with a short deadline; a member asks per new isolate and at most hourly
//! ([`TraceCache`]). Unreadable is "unknown", never a guess. The fetch is `src/trace.rs`.

use kvbench_wire::trace::colo_code;

/// Var: a URL answering `colo=XXX` lines, asked once per probe instance and by a member at most
/// hourly; "none" = do not ask ("unknown").
pub const COLO_URL_VAR: &str = "PROBE_COLO_URL";
/// Where the colo is asked by default.
pub const DEFAULT_COLO_URL: &str = "https://www.cloudflare.com/cdn-cgi/trace";
/// How long a trace may take (`spec::trace`, which the report's bill prices too).
pub use crate::spec::trace::DEADLINE_MS;
/// A member isolate asks again after this long (an isolate does not move, but one that lives
/// for hours is asked again rather than trusted forever).
pub const REFRESH_MS: f64 = 3_600_000.0;

/// The URL to ask, from the var's value: `None` for "none" (do not ask).
pub fn colo_url(var: Option<String>) -> Option<String> {
    let url = var.unwrap_or_else(|| DEFAULT_COLO_URL.to_string());
    (url.trim() != "none").then_some(url)
}

/// The colo in a `/cdn-cgi/trace` body (`colo=LHR` on its own line); `None` when there is none
/// or it is not a colo code.
pub fn trace_colo(body: &str) -> Option<String> {
    body.lines()
        .find_map(|l| l.strip_prefix("colo="))
        .and_then(colo_code)
        .map(str::to_string)
}

/// A member isolate's trace: what it last learned and when it last asked. Sans-IO: the worker
/// asks [`Self::due`], fetches when told to, and hands the outcome to [`Self::on_trace`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceCache {
    colo: Option<String>,
    asked_ms: Option<f64>,
}

impl TraceCache {
    /// Whether a request at `now_ms` should ask: never asked, or [`REFRESH_MS`] since. Marks it
    /// asked, so concurrent requests do not ask again.
    pub fn due(&mut self, now_ms: f64) -> bool {
        let due = self.asked_ms.is_none_or(|t| now_ms - t >= REFRESH_MS);
        if due {
            self.asked_ms = Some(now_ms);
        }
        due
    }

    /// The outcome of an ask: a colo, or `None` when the trace failed or named none — then the
    /// colo is unknown until the next ask (an old colo is not kept as a guess).
    pub fn on_trace(&mut self, colo: Option<String>) {
        self.colo = colo;
    }

    /// The colo the last ask learned; `None`: unknown.
    pub fn colo(&self) -> Option<&str> {
        self.colo.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_colo_of_a_trace_body() {
        assert_eq!(
            trace_colo("fl=1\nh=x\ncolo=LHR\nloc=GB\n").as_deref(),
            Some("LHR")
        );
        assert_eq!(trace_colo("fl=1\n"), None);
        assert_eq!(trace_colo("colo=<script>\n"), None);
        assert_eq!(trace_colo("colo=\n"), None);
    }

    #[test]
    fn the_url_or_none() {
        assert_eq!(colo_url(None).as_deref(), Some(DEFAULT_COLO_URL));
        assert_eq!(
            colo_url(Some("http://127.0.0.1:9/t".into())).as_deref(),
            Some("http://127.0.0.1:9/t")
        );
        assert_eq!(colo_url(Some("none".into())), None);
    }

    #[test]
    fn a_member_asks_when_new_then_at_most_hourly_and_forgets_a_failed_colo() {
        let mut t = TraceCache::default();
        assert_eq!(t.colo(), None, "unknown before any ask");
        assert!(t.due(1_000.0), "a new isolate asks");
        assert!(
            !t.due(1_001.0),
            "a request while it asks does not ask again"
        );
        t.on_trace(Some("FRA".into()));
        assert_eq!(t.colo(), Some("FRA"));
        assert!(!t.due(1_000.0 + REFRESH_MS - 1.0), "not within the hour");
        assert!(t.due(1_000.0 + REFRESH_MS), "an hour later");
        t.on_trace(None);
        assert_eq!(t.colo(), None, "a failed ask is unknown, not the old colo");
        assert!(!t.due(1_000.0 + REFRESH_MS + 10.0));
    }
}
