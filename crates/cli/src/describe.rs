//! A report's provenance: where it ran, when, the measuring worker's build and settings (its
//! `GET /`, asked once after the measurement, never during it) and the raw data beside it.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::client::conn::http1;
use hyper::header::{HeaderName, HeaderValue, HOST, USER_AGENT};
use hyper::{Request, Uri};
use tower_service::Service as _;

use crate::attack::{connector, error_chain, host_header};
use kvbench_report::report::{Provenance, RawData};

/// The longest a `GET /` may take, connection to last byte.
pub const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a `GET /` body read (the worker's is about 30 KB).
pub const DESCRIBE_MAX_BYTES: usize = 256 * 1024;

/// `local` for a worker on this machine (a loopback address, `localhost`), else `deployed`.
pub fn stack_of(url: &Uri) -> &'static str {
    let host = url.host().unwrap_or("").trim_matches(['[', ']']);
    let loopback = host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback {
        "local"
    } else {
        "deployed"
    }
}

/// The worker's `GET /` at `url`'s origin, parsed, within [`DESCRIBE_TIMEOUT`] and
/// [`DESCRIBE_MAX_BYTES`]; `Err` says what went wrong (never a header's value).
pub async fn index(
    url: &Uri,
    headers: &[(HeaderName, HeaderValue)],
) -> Result<serde_json::Value, String> {
    let (status, body) = get_json(url, "/", headers, DESCRIBE_TIMEOUT).await?;
    match (status, body) {
        (200..=299, Some(v)) => Ok(v),
        (200..=299, None) => Err(format!(
            "{} is not a kvbench worker's description (not JSON)",
            origin(url)
        )),
        (status, _) => Err(format!("{} answered {status}", origin(url))),
    }
}

/// `url`'s origin, host and port only: never userinfo.
fn origin(url: &Uri) -> String {
    format!(
        "{}://{}{}",
        url.scheme_str().unwrap_or("http"),
        url.host().unwrap_or(""),
        url.port_u16().map(|p| format!(":{p}")).unwrap_or_default()
    )
}

/// A `GET` of `path_and_query` at `url`'s origin within `timeout`, its body at most
/// [`DESCRIBE_MAX_BYTES`]: the status and the body as JSON (`None` when it is not); `Err` says
/// what went wrong (never a header's value).
pub async fn get_json(
    url: &Uri,
    path_and_query: &str,
    headers: &[(HeaderName, HeaderValue)],
    timeout: Duration,
) -> Result<(u16, Option<serde_json::Value>), String> {
    let shown = origin(url);
    let fetch = async {
        let root: Uri = format!("{shown}/").parse().map_err(|e| format!("{e}"))?;
        let io = connector()
            .call(root.clone())
            .await
            .map_err(|e| format!("cannot reach {shown}: {}", error_chain(&*e)))?;
        let (mut sender, driver) = http1::handshake(io)
            .await
            .map_err(|e| format!("{shown}: {}", error_chain(&e)))?;
        let driver = tokio::spawn(async move {
            let _ = driver.await;
        });
        let mut req = Request::get(path_and_query)
            .header(HOST, host_header(&root).map_err(|e| e.to_string())?)
            .header(
                USER_AGENT,
                HeaderValue::from_static(concat!("kvbench/", env!("CARGO_PKG_VERSION"))),
            );
        for (name, value) in headers {
            req = req.header(name, value);
        }
        let req = req.body(Empty::<Bytes>::new()).map_err(|e| e.to_string())?;
        let result = async {
            let response = sender
                .send_request(req)
                .await
                .map_err(|e| format!("{shown} sent no answer: {}", error_chain(&e)))?;
            let status = response.status().as_u16();
            let body = Limited::new(response.into_body(), DESCRIBE_MAX_BYTES)
                .collect()
                .await
                .map_err(|e| format!("{shown}: {e}"))?
                .to_bytes();
            Ok((status, serde_json::from_slice(&body).ok()))
        }
        .await;
        driver.abort();
        result
    };
    match tokio::time::timeout(timeout, fetch).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "{shown} did not answer within {} s",
            timeout.as_secs_f64()
        )),
    }
}

/// The provenance of a report measured at `url`: the stack by its address (the worker's own word
/// when it gives one), now, what its `GET /` says (`index`: `None` when not asked) and `raw`.
pub fn provenance(
    url: &Uri,
    index: Option<Result<serde_json::Value, String>>,
    raw: Vec<RawData>,
) -> Provenance {
    let mut p = Provenance {
        stack: stack_of(url).into(),
        updated_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        raw,
        ..Provenance::default()
    };
    match index {
        Some(Ok(v)) => p.describe(&v),
        Some(Err(e)) => p.worker_error = Some(e),
        None => p.worker_error = Some("the worker's GET / was not asked".into()),
    }
    if let Some(stack) = p.build.remove("stack") {
        p.stack = stack;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_the_local_stack() {
        for (url, want) in [
            ("http://127.0.0.1:8787/test", "local"),
            ("http://localhost:8787/test", "local"),
            ("http://[::1]:8787/test", "local"),
            ("http://127.3.4.5/test", "local"),
            ("https://kvbench.example.workers.dev/test", "deployed"),
            ("http://10.0.0.1/test", "deployed"),
        ] {
            assert_eq!(stack_of(&url.parse().unwrap()), want, "{url}");
        }
    }

    #[test]
    fn the_workers_word_on_its_stack_wins_and_its_build_is_kept() {
        let url: Uri = "http://127.0.0.1:8787/test".parse().unwrap();
        let index = serde_json::json!({
            "provenance": {"stack": "deployed", "commit": "0123abc", "wrangler": "4.1.0"},
            "defaults": {"keys": 1000, "stores": ["kv", "d1"], "ttl": 60, "do_location": null},
        });
        let p = provenance(&url, Some(Ok(index)), Vec::new());
        assert_eq!(p.stack, "deployed");
        assert_eq!(p.build["commit"], "0123abc");
        assert!(!p.build.contains_key("stack"));
        assert_eq!(p.settings["stores"], "kv,d1");
        assert_eq!(p.settings["keys"], "1000");
        assert!(
            !p.settings.contains_key("do_location"),
            "null settings are left out"
        );
        assert_eq!(p.worker_error, None);
        let failed = provenance(&url, Some(Err("no answer".into())), Vec::new());
        assert_eq!(
            (failed.stack.as_str(), failed.worker_error.as_deref()),
            ("local", Some("no answer"))
        );
        let old = provenance(
            &url,
            Some(Ok(serde_json::json!({"defaults": {}}))),
            Vec::new(),
        );
        assert!(old.worker_error.unwrap().contains("KVBENCH_PROVENANCE"));
    }
}
