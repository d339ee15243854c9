//! Which handler a request reaches: a pure function of its method and path. The main worker
//! answers every route; a fleet member (built without the `main-worker` feature) only `/`,
//! `/healthz`, `/test` and `/fresh` — the rest is a 404 there, as for any path nobody serves.

/// The methods the read routes answer (HEAD is GET without the body, RFC 9110).
pub const READ: &str = "GET, HEAD";
/// The methods the probes' control routes answer.
pub const CONTROL: &str = "POST";

/// Where a request goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a> {
    Index,
    Healthz,
    Test,
    /// A freshness round's read or write (`/test`'s parameters and `op`).
    Fresh,
    Probes,
    ProbesStart,
    ProbesStop,
    ProbesCheck,
    ProbeAnswers,
    /// `/runs/<id>/answers`, with the id as it is in the path.
    RunAnswers(&'a str),
    Report,
    /// A route that does not answer this method: 405, with these in `Allow`.
    MethodNotAllowed(&'static str),
    NotFound,
}

/// The route of `method` and `path`; `operations`: whether this build serves the probes, runs
/// and report routes (the main worker) or not (a fleet member).
pub fn route<'a>(method: &str, path: &'a str, operations: bool) -> Route<'a> {
    let (route, allow) = match path {
        "/" => (Route::Index, READ),
        "/healthz" => (Route::Healthz, READ),
        "/test" => (Route::Test, READ),
        "/fresh" => (Route::Fresh, READ),
        _ if !operations => return Route::NotFound,
        "/probes" => (Route::Probes, READ),
        "/probes/start" => (Route::ProbesStart, CONTROL),
        "/probes/stop" => (Route::ProbesStop, CONTROL),
        "/probes/check" => (Route::ProbesCheck, CONTROL),
        "/probes/answers" => (Route::ProbeAnswers, READ),
        "/report" => (Route::Report, READ),
        _ => match run_of(path) {
            Some(id) => (Route::RunAnswers(id), READ),
            None => return Route::NotFound,
        },
    };
    let allowed = match allow {
        READ => method == "GET" || method == "HEAD",
        _ => method == "POST",
    };
    if allowed {
        route
    } else {
        Route::MethodNotAllowed(allow)
    }
}

/// The id of `/runs/<id>/answers`: one path segment, not empty.
fn run_of(path: &str) -> Option<&str> {
    let id = path.strip_prefix("/runs/")?.strip_suffix("/answers")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// The path of a request URL as the runtime serializes it (`scheme://host[:port]/path?query`):
/// from the first `/` after the host up to the query.
pub fn path_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let rest = url.get(after_scheme..).unwrap_or("");
    let path = rest.find('/').and_then(|i| rest.get(i..)).unwrap_or("/");
    path.split(['?', '#']).next().unwrap_or(path)
}

/// The query of a request URL, without its `?` (empty when there is none).
pub fn query_of(url: &str) -> &str {
    let url = url.split('#').next().unwrap_or(url);
    url.split_once('?').map_or("", |(_, q)| q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_routes_answer_get_and_head_only() {
        for (path, want) in [
            ("/", Route::Index),
            ("/healthz", Route::Healthz),
            ("/test", Route::Test),
            ("/fresh", Route::Fresh),
            ("/probes", Route::Probes),
            ("/probes/answers", Route::ProbeAnswers),
            ("/report", Route::Report),
            ("/runs/r-1/answers", Route::RunAnswers("r-1")),
        ] {
            for method in ["GET", "HEAD"] {
                assert_eq!(route(method, path, true), want, "{method} {path}");
            }
            for method in ["POST", "PUT", "DELETE", "OPTIONS", "get"] {
                assert_eq!(
                    route(method, path, true),
                    Route::MethodNotAllowed(READ),
                    "{method} {path}"
                );
            }
        }
    }

    #[test]
    fn control_routes_answer_post_only() {
        for (path, want) in [
            ("/probes/start", Route::ProbesStart),
            ("/probes/stop", Route::ProbesStop),
            ("/probes/check", Route::ProbesCheck),
        ] {
            assert_eq!(route("POST", path, true), want);
            for method in ["GET", "HEAD", "PUT"] {
                assert_eq!(route(method, path, true), Route::MethodNotAllowed(CONTROL));
            }
        }
    }

    #[test]
    fn a_member_answers_only_the_measured_routes() {
        assert_eq!(route("GET", "/", false), Route::Index);
        assert_eq!(route("HEAD", "/healthz", false), Route::Healthz);
        assert_eq!(route("GET", "/test", false), Route::Test);
        assert_eq!(route("GET", "/fresh", false), Route::Fresh);
        assert_eq!(route("POST", "/test", false), Route::MethodNotAllowed(READ));
        for path in [
            "/probes",
            "/probes/start",
            "/probes/stop",
            "/probes/check",
            "/probes/answers",
            "/report",
            "/runs/r-1/answers",
        ] {
            for method in ["GET", "HEAD", "POST"] {
                assert_eq!(
                    route(method, path, false),
                    Route::NotFound,
                    "{method} {path}"
                );
            }
        }
    }

    #[test]
    fn anything_else_is_not_found() {
        for path in [
            "",
            "/test/",
            "/probes/",
            "/healthz/x",
            "/runs//answers",
            "/runs/a/b/answers",
            "/runs/a",
            "/runs/a/answers/",
            "/favicon.ico",
        ] {
            assert_eq!(route("GET", path, true), Route::NotFound, "{path:?}");
        }
    }

    #[test]
    fn path_and_query_of_a_runtime_url() {
        let url = "https://kvbench.example.workers.dev/test?stores=kv&key=1#frag";
        assert_eq!(path_of(url), "/test");
        assert_eq!(query_of(url), "stores=kv&key=1");
        assert_eq!(path_of("http://127.0.0.1:8787"), "/");
        assert_eq!(query_of("http://127.0.0.1:8787/"), "");
        assert_eq!(
            path_of("http://h/runs/a%2Fb/answers?x"),
            "/runs/a%2Fb/answers"
        );
    }
}
