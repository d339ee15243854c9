//! The `cache` store's rules: a key's URL, the expiry header, and where the Cache API cannot
//! work (`*.workers.dev`: `put` is a no-op, every `match` misses).

use percent_encoding::utf8_percent_encode;

use crate::stores::http::PATH_SEGMENT;

/// The cache key for `store_key` (`kvbench:cache:<key>`) on the worker's own origin (the
/// Cache API keeps entries per zone).
pub fn url(origin: &str, store_key: &str) -> String {
    format!(
        "{}/{}",
        origin.trim_end_matches('/'),
        utf8_percent_encode(store_key, PATH_SEGMENT)
    )
}

/// The `Cache-Control` of a written entry.
pub fn cache_control(ttl_s: u32) -> String {
    format!("max-age={ttl_s}")
}

/// Why the Cache API does nothing for a request to `host`, if it does nothing.
pub fn unavailable(host: &str) -> Option<&'static str> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (host == "workers.dev" || host.ends_with(".workers.dev")).then_some(
        "the Cache API has no effect on *.workers.dev (puts are dropped, every match misses): \
         serve the worker from a custom domain to measure it",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_headers_and_workers_dev() {
        assert_eq!(
            url("https://bench.example.com/", "kvbench:cache:a b/c-d.e_f~"),
            "https://bench.example.com/kvbench%3Acache%3Aa%20b%2Fc-d.e_f~"
        );
        assert_eq!(cache_control(60), "max-age=60");
        for host in [
            "kvbench.me.workers.dev",
            "KVBENCH.ME.WORKERS.DEV.",
            "workers.dev",
        ] {
            assert!(unavailable(host).is_some(), "{host}");
        }
        for host in ["bench.example.com", "localhost", "notworkers.dev"] {
            assert!(unavailable(host).is_none(), "{host}");
        }
    }
}
