//! What the benchmark worker and the report worker say to each other: kept answers streamed in
//! the body of `POST /render` ([`RenderQuery`]) or `POST /bill` ([`BillQuery`]), the worker's
//! URL and description in headers; back the page, or the bill whose head is [`BillHead`].

use serde::{Deserialize, Serialize};

/// The benchmark worker's URL, the report's links and provenance.
pub const WORKER_URL_HEADER: &str = "kvbench-worker-url";
/// The benchmark worker's description (`{"provenance":..,"defaults":..}`, what its `GET /` says).
pub const DESCRIBE_HEADER: &str = "kvbench-describe";

/// The answers a report is made of: its clock's origin (the first kept answer, or the window's
/// start), the span its timeline covers, and the window asked for (epoch ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub origin_ms: i64,
    pub span_ms: i64,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
}

/// What `POST /render` makes: the page, or the report.json it is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Html,
    Json,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Html => "html",
            Format::Json => "json",
        }
    }
}

/// `POST /render?origin_ms=..&span_ms=..&since_ms=..&until_ms=..&window_s=..&format=html|json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderQuery {
    pub span: Span,
    /// The window the page names, seconds.
    pub window_s: Option<u32>,
    pub format: Format,
}

/// `POST /bill?origin_ms=..&span_ms=..&since_ms=..&until_ms=..&probes=N&every_s=S&keep_s=K`:
/// the month of N probes waking every S seconds and keeping their answers K seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BillQuery {
    pub span: Span,
    pub probes: u32,
    pub every_s: u32,
    pub keep_s: u32,
}

impl RenderQuery {
    pub const PATH: &'static str = "/render";
}

impl BillQuery {
    pub const PATH: &'static str = "/bill";
}

/// A query's value by name (the URL's query pairs).
type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// A whole number, as the query carries it (a finite number, its fraction dropped).
fn number(get: Lookup<'_>, name: &str) -> Option<i64> {
    get(name)?
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v as i64)
}

impl Span {
    fn query(&self) -> String {
        let mut q = format!("origin_ms={}&span_ms={}", self.origin_ms, self.span_ms);
        for (name, v) in [("since_ms", self.since_ms), ("until_ms", self.until_ms)] {
            if let Some(v) = v {
                q.push_str(&format!("&{name}={v}"));
            }
        }
        q
    }

    fn read(get: Lookup<'_>) -> Result<Span, String> {
        Ok(Span {
            origin_ms: number(get, "origin_ms").ok_or("origin_ms is missing")?,
            span_ms: number(get, "span_ms").unwrap_or(0).max(0),
            since_ms: number(get, "since_ms"),
            until_ms: number(get, "until_ms"),
        })
    }
}

impl RenderQuery {
    /// Its query string (no `?`).
    pub fn query(&self) -> String {
        let mut q = self.span.query();
        if let Some(w) = self.window_s {
            q.push_str(&format!("&window_s={w}"));
        }
        q.push_str(&format!("&format={}", self.format.as_str()));
        q
    }

    /// Reads it from a request's query (`get`: a value by name); `format` other than `json` is
    /// the page.
    pub fn read(get: impl Fn(&str) -> Option<String>) -> Result<RenderQuery, String> {
        Ok(RenderQuery {
            span: Span::read(&get)?,
            window_s: number(&get, "window_s").and_then(|w| u32::try_from(w).ok()),
            format: match get("format").as_deref() {
                Some("json") => Format::Json,
                _ => Format::Html,
            },
        })
    }
}

impl BillQuery {
    /// Its query string (no `?`).
    pub fn query(&self) -> String {
        format!(
            "{}&probes={}&every_s={}&keep_s={}",
            self.span.query(),
            self.probes,
            self.every_s,
            self.keep_s
        )
    }

    /// Reads it from a request's query (`get`: a value by name): `probes` ≥ 1 and `every_s` > 0
    /// are required; `keep_s` is 0 without it.
    pub fn read(get: impl Fn(&str) -> Option<String>) -> Result<BillQuery, String> {
        let count = |name: &str| number(&get, name).and_then(|v| u32::try_from(v).ok());
        let (Some(probes), Some(every_s)) = (count("probes"), count("every_s")) else {
            return Err("probes and every_s are required, as finite numbers".into());
        };
        if probes < 1 || every_s == 0 {
            return Err("probes >= 1 and every_s > 0".into());
        }
        Ok(BillQuery {
            span: Span::read(&get)?,
            probes,
            every_s,
            keep_s: count("keep_s").unwrap_or(0),
        })
    }
}

/// What the benchmark worker reads of a bill (or `monthly_usd: null` and why): a month's cost
/// and answers, so one answer's cost.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BillHead {
    pub monthly_usd: Option<f64>,
    pub answers_per_month: Option<f64>,
    pub why: Option<String>,
}

impl BillHead {
    /// Reads it out of parsed JSON as its `Deserialize` does, without a deserializer of its own
    /// (see [`crate::object::ProbeStatus::read`]).
    pub fn read(v: &serde_json::Value) -> BillHead {
        BillHead {
            monthly_usd: v.get("monthly_usd").and_then(serde_json::Value::as_f64),
            answers_per_month: v
                .get("answers_per_month")
                .and_then(serde_json::Value::as_f64),
            why: v.get("why").and_then(|w| w.as_str()).map(str::to_string),
        }
    }

    /// What one answer costs (none before any answer was kept).
    pub fn per_answer_usd(&self) -> Option<f64> {
        let answers = self.answers_per_month.filter(|a| *a > 0.0)?;
        Some(self.monthly_usd? / answers)
    }
}
