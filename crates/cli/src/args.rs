//! Command-line interface: flags, their parsers and the messages a bad value gets (always naming
//! the flag — clap adds it in front of the parser's reason).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use hyper::header::{HeaderName, HeaderValue};
use hyper::Uri;

#[derive(Debug, Parser)]
#[command(
    name = "kvbench",
    version,
    about = "Open-loop load generator and report tool for the KV benchmark worker"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Send requests to a /test URL at a fixed rate and report what the stores did.
    Run(RunArgs),
    /// Re-render a report (terminal, charts, report.html) from DIR/report.json.
    Report(ReportArgs),
    /// Turn another load tool's output into a kvbench report (report.json, charts, report.html).
    Import(ImportArgs),
    /// Add reports from several runs (e.g. vantage points) into one.
    Merge(MergeArgs),
    /// Print only the cost projection of a report.
    Cost(CostArgs),
    /// Freshness rounds: how long after a write at one vantage point a read at another returns
    /// it, per store; added to DIR/report.json's `freshness` (a new report when there is none).
    Fresh(FreshArgs),
}

#[derive(Debug, Clone, Args)]
pub struct FreshArgs {
    /// The vantage point that writes, as LABEL=URL (its worker's origin, e.g.
    /// local-1=http://127.0.0.1:8788); it reads too (read-your-write).
    #[arg(long, value_name = "LABEL=URL", value_parser = parse_member)]
    pub writer: (String, Uri),
    /// A vantage point that reads, as LABEL=URL; repeat it for several.
    #[arg(long = "reader", value_name = "LABEL=URL", value_parser = parse_member)]
    pub readers: Vec<(String, Uri)>,
    /// Stores to follow (comma-separated); kv, denokv and d1 add a row per consistency option.
    #[arg(
        long,
        default_value = "kv,upstash,denokv,do,d1,r2,cache,redis,postgres,hyperdrive"
    )]
    pub stores: String,
    /// Rounds of each case (cold, then primed).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,
    /// How often a reader reads (at most 250ms).
    #[arg(long, default_value = "100ms", value_parser = parse_poll_interval)]
    pub interval: Duration,
    /// How long a reader waits for a version at most (KV's cache time is 60 s by default).
    #[arg(long, default_value = "90s", value_parser = parse_duration)]
    pub limit: Duration,
    /// Extra request header, e.g. "Authorization: Bearer $BENCH_TOKEN"; repeatable.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Directory of the report the rounds are added to.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    #[command(flatten)]
    pub price: PriceArgs,
}

fn parse_member(s: &str) -> Result<(String, Uri), String> {
    let (label, url) = s.split_once('=').ok_or("expected LABEL=URL")?;
    Ok((parse_label(label)?, parse_url(url)?))
}

fn parse_poll_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() || d > Duration::from_millis(250) {
        return Err("must be more than 0 and at most 250ms".into());
    }
    Ok(d)
}

#[derive(Debug, Clone, Args)]
pub struct PriceArgs {
    /// Price table (TOML, same shape as the embedded prices.toml).
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Project the monthly cost at this many requests/s instead of the achieved rate.
    #[arg(long, value_name = "REQ_PER_S", value_parser = parse_rate)]
    pub project_rps: Option<f64>,
    /// The database number in the worker's REDIS_URL (its path, `/2`): other than 0, each
    /// connection sends a SELECT, which Upstash bills as a command. The answers do not say.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub redis_db: u32,
    /// Keys each store holds at most (the worker's `keys`): with the measured mean value size,
    /// the data at rest the bill prices. Default: the measuring worker's setting when the
    /// report names it, else 1000.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub keys: Option<u64>,
    /// CPU milliseconds the worker spends per request, for its Workers plan line: a run cannot
    /// measure a deployed worker's CPU. Default: 1.0, an assumption the bill says it is.
    #[arg(long, value_name = "MS", value_parser = parse_cpu_ms)]
    pub worker_cpu_ms: Option<f64>,
    /// Also price plans that are no longer offered (marked historical), such as the published
    /// comparison's prices and Deno Deploy Classic.
    #[arg(long)]
    pub historical: bool,
}

fn parse_cpu_ms(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(ms) if ms.is_finite() && (0.0..=300_000.0).contains(&ms) => Ok(ms),
        _ => Err(format!(
            "expected milliseconds between 0 and 300000 (a Worker's CPU limit), got {text:?}"
        )),
    }
}

impl PriceArgs {
    /// What the cost must assume about the deployment.
    pub fn deployment(&self) -> kvbench_report::cost::Deployment {
        kvbench_report::cost::Deployment {
            redis_db: self.redis_db,
            keys: self.keys,
            worker_cpu_ms: self.worker_cpu_ms,
            historical: self.historical,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The worker's /test URL (http or https). Repeat it to spread the load over several
    /// workers as one run (several local workerd processes, or fleet members): --threads is
    /// rounded up to a multiple of the URLs and each thread sends to one of them, so each URL
    /// gets the same share of the schedule.
    #[arg(long = "url", required = true, value_name = "URL", value_parser = parse_url)]
    pub urls: Vec<Uri>,
    /// Requests per second (open loop: the schedule does not wait for answers).
    #[arg(long, default_value = "10", value_name = "REQ_PER_S", value_parser = parse_rate)]
    pub rate: f64,
    /// How long to send, e.g. 90s, 30m, 1h.
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    pub duration: Duration,
    /// Extra request header 'Name: value' (repeatable). Validated after parsing by
    /// [`RunArgs::parsed_headers`], whose errors never repeat the value (it is often a token).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Name of this run in merged reports (e.g. the vantage point).
    #[arg(long, default_value = "default", value_parser = parse_label)]
    pub label: String,
    /// Directory for report.json, report.html, the charts (and samples.csv).
    #[arg(long, default_value = "kvbench-out", value_name = "DIR")]
    pub out: PathBuf,
    /// Give up on a request after this long (counted as `timeout`). Default: the worker's worst
    /// case for the URL's query — every measured store's setup, read, setup again and write, each
    /// bounded by `timeout_ms` — plus 5 s, so a slow store comes back as that store's `timeout`
    /// error instead of losing the whole answer (printed at the start, with what it assumed).
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Requests allowed in flight (queued for a connection or being sent); beyond it a request is
    /// counted `not_sent`, never delayed. Default: 512, or 100 ms of the schedule when that is
    /// more (3,000 at 30,000 req/s), so a short stall of the machine is latency, not a refusal.
    #[arg(long, value_name = "N", value_parser = parse_max_in_flight)]
    pub max_in_flight: Option<u64>,
    /// Connections in the pool, opened before the schedule starts; requests queue for them in
    /// schedule order. Default: enough for one second of latency at --rate, at least 16, at most
    /// 256 (and at most --max-in-flight).
    #[arg(long, value_name = "N", value_parser = parse_connections)]
    pub connections: Option<u64>,
    /// Threads sending, each with its own runtime and an equal share of the schedule and of the
    /// connections (wrk's threads).
    #[arg(long, default_value = "1", value_name = "N", value_parser = parse_threads)]
    pub threads: u64,
    /// Leave out answers whose worker isolate had more than N other requests in flight during
    /// them (the answers' `concurrent`): on a deployed worker those requests' CPU may be in the
    /// spans. Left-out answers are counted in `excluded_concurrent`. Default: keep all.
    #[arg(long, value_name = "N")]
    pub max_concurrent: Option<u32>,
    /// Timeline resolution and period of the plain progress lines; `auto`: 1/60 of --duration,
    /// between 5 s and 60 s (30 s for a 30-minute run).
    #[arg(long, default_value = "auto", value_parser = parse_interval)]
    pub interval: Interval,
    /// Also write samples.csv (one row per request and store).
    #[arg(long)]
    pub samples_csv: bool,
    /// Do not ask the worker's `GET /` for its build and settings after the run (the report's
    /// provenance then names only where and when it ran).
    #[arg(long)]
    pub no_describe: bool,
    #[command(flatten)]
    pub price: PriceArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// A run's output directory (or its report.json).
    pub dir: PathBuf,
    /// Only print: do not rewrite the charts and report.html.
    #[arg(long)]
    pub no_charts: bool,
    #[command(flatten)]
    pub price: PriceArgs,
}

#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// report.json files (or run directories) to add up.
    #[arg(required = true, num_args = 1..)]
    pub reports: Vec<PathBuf>,
    /// Directory for the merged report.json and charts.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    #[command(flatten)]
    pub price: PriceArgs,
}

#[derive(Debug, Clone, Args)]
pub struct CostArgs {
    /// A run's output directory (or its report.json).
    pub dir: PathBuf,
    #[command(flatten)]
    pub price: PriceArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    #[command(subcommand)]
    pub source: ImportSource,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ImportSource {
    /// k6 `--out json=FILE` output of k6/kvbench.js (plain or .gz; several files: one per runner
    /// or vantage point).
    K6(K6Args),
    /// The answers a deployed worker kept: its probes' (`--probes`, one label per location hint)
    /// or a load run's (`--run ID`, from `/test?run=ID`; one label per colo).
    Worker(WorkerArgs),
}

#[derive(Debug, Clone, Args)]
pub struct WorkerArgs {
    /// The worker's URL, e.g. https://kvbench.example.workers.dev
    pub url: String,
    /// A load run's id (`/test?run=ID` or the Kvbench-Run header).
    #[arg(
        long,
        value_name = "ID",
        conflicts_with = "probes",
        required_unless_present = "probes"
    )]
    pub run: Option<String>,
    /// The probes' answers.
    #[arg(long)]
    pub probes: bool,
    /// From when: epoch milliseconds or a duration ago (30m, 24h, 7d); default: all kept.
    #[arg(long, value_parser = parse_when)]
    pub since: Option<String>,
    /// Until when (same forms); default: now.
    #[arg(long, value_parser = parse_when)]
    pub until: Option<String>,
    /// The environment variable holding the worker's BENCH_TOKEN (never printed).
    #[arg(long, value_name = "VAR", default_value = "BENCH_TOKEN")]
    pub token_env: String,
    /// Directory for report.json, report.html and the charts.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Leave out answers whose worker isolate had more than N other requests in flight during
    /// them (the answers' `concurrent`): on a deployed worker those requests' CPU may be in the
    /// spans. Left-out answers are counted in `excluded_concurrent`. Default: keep all.
    #[arg(long, value_name = "N")]
    pub max_concurrent: Option<u32>,
    /// Timeline resolution; `auto`: 1/60 of the span, between 5 s and 60 s.
    #[arg(long, default_value = "auto", value_parser = parse_interval)]
    pub interval: Interval,
    #[command(flatten)]
    pub limits: WorkerLimitArgs,
    #[command(flatten)]
    pub price: PriceArgs,
}

/// How long `kvbench import worker` waits and how much it takes from the worker; past a bound
/// it fails naming the flag (defaults: `import_worker::Limits::default()`, a test holds them
/// equal).
#[derive(Debug, Clone, Args)]
pub struct WorkerLimitArgs {
    /// Give up connecting (TCP and TLS) after this long.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// Give up when the response's headers have not come this long after the request.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub header_timeout: Duration,
    /// The longest wait for the stream's next line (bytes that complete no line do not count);
    /// past it the stream is fetched again, like a cut one.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// Give up when the whole download (every attempt) has not finished after this long.
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = parse_duration)]
    pub max_time: Duration,
    /// Most bytes of answers spooled to the temporary file (or received in one attempt), e.g.
    /// 4GiB, 512MiB.
    #[arg(long, value_name = "BYTES", default_value = "4GiB", value_parser = parse_bytes)]
    pub max_spool: u64,
    /// Most answers read (spooled, or received in one attempt).
    #[arg(long, value_name = "N", default_value = "2000000", value_parser = parse_count)]
    pub max_answers: u64,
    /// Most distinct labels (vantage points; each costs a collector).
    #[arg(long, value_name = "N", default_value = "1000", value_parser = parse_count)]
    pub max_labels: u64,
}

impl WorkerLimitArgs {
    pub fn limits(&self) -> crate::import_worker::Limits {
        crate::import_worker::Limits {
            connect: self.connect_timeout,
            headers: self.header_timeout,
            idle: self.idle_timeout,
            total: self.max_time,
            spool_bytes: self.max_spool,
            answers: self.max_answers,
            labels: usize::try_from(self.max_labels).unwrap_or(usize::MAX),
        }
    }
}

/// A byte count: a whole number, optionally with `B`, `KiB`, `MiB` or `GiB` (also `K`, `M`,
/// `G`, binary either way).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => return Err("expected a size like 4GiB, 512MiB, 64KiB or 1000000".into()),
    };
    match digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
    {
        Some(n) if n >= 1 => Ok(n),
        Some(_) => Err("must be at least 1 byte".into()),
        None => Err("expected a size like 4GiB, 512MiB, 64KiB or 1000000".into()),
    }
}

/// A whole number, at least 1.
pub fn parse_count(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a whole number, at least 1".into()),
    }
}

/// `--since`/`--until`: epoch ms or a duration ago, as the worker takes them.
fn parse_when(text: &str) -> Result<String, String> {
    let digits = !text.is_empty() && text.len() <= 13 && text.bytes().all(|b| b.is_ascii_digit());
    let ago = text.len() > 1
        && text.ends_with(['m', 'h', 'd'])
        && text[..text.len() - 1].bytes().all(|b| b.is_ascii_digit());
    if digits || ago {
        Ok(text.to_string())
    } else {
        Err(format!(
            "expected epoch milliseconds or a duration ago (30m, 24h, 7d), got {text:?}"
        ))
    }
}

#[derive(Debug, Clone, Args)]
pub struct K6Args {
    /// k6 JSON output files.
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Directory for report.json, report.html and the charts.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// One label for every file (default: the file name without .json/.gz; k6's load_zone
    /// tag, when present, wins).
    #[arg(long, value_parser = parse_label)]
    pub label: Option<String>,
    /// Timeline resolution; `auto`: 1/60 of the run's duration, between 5 s and 60 s.
    #[arg(long, default_value = "auto", value_parser = parse_interval)]
    pub interval: Interval,
    #[command(flatten)]
    pub price: PriceArgs,
}

/// `--interval`: a fixed duration or `auto`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Interval {
    Auto,
    Fixed(Duration),
}

impl Interval {
    /// The interval for a run of `duration`.
    pub fn for_run(self, duration: Duration) -> Duration {
        match self {
            Interval::Auto => kvbench_report::collect::auto_interval(duration),
            Interval::Fixed(d) => d,
        }
    }

    pub fn fixed(self) -> Option<Duration> {
        match self {
            Interval::Auto => None,
            Interval::Fixed(d) => Some(d),
        }
    }
}

pub fn parse_interval(s: &str) -> Result<Interval, String> {
    if s.trim() == "auto" {
        Ok(Interval::Auto)
    } else {
        parse_duration(s).map(Interval::Fixed)
    }
}

/// `DIR` → `DIR/report.json`; a file path stays as it is.
pub fn report_path(p: &Path) -> PathBuf {
    if p.is_dir() {
        p.join("report.json")
    } else {
        p.to_path_buf()
    }
}

pub fn parse_url(s: &str) -> Result<Uri, String> {
    let uri: Uri = s.parse().map_err(|e| format!("not a URL ({e})"))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        _ => return Err("must start with http:// or https://".into()),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err("has no host".into());
    }
    Ok(uri)
}

/// Refuses a `--url` with credentials (`user:password@`): kvbench never sends them, and they
/// would be written into report.json's `url`. Checked after parsing, so the message does not
/// echo the URL (clap repeats a refused value).
pub fn refuse_credentials(urls: &[Uri]) -> Result<(), String> {
    match urls
        .iter()
        .position(|u| u.authority().is_some_and(|a| a.as_str().contains('@')))
    {
        Some(i) => Err(format!(
            "--url #{}: has credentials (user:password@), which kvbench does not send and would write into the report; pass a token with --header 'Authorization: Bearer ...'",
            i + 1
        )),
        None => Ok(()),
    }
}

pub fn parse_rate(s: &str) -> Result<f64, String> {
    let rate: f64 = s
        .trim()
        .parse()
        .map_err(|_| "expected a number of requests per second, e.g. 10 or 0.5".to_string())?;
    if !rate.is_finite() || rate <= 0.0 {
        return Err("must be above 0 requests per second".into());
    }
    if rate > crate::pacer::MAX_RATE {
        return Err(format!(
            "must be at most {} requests per second",
            crate::pacer::MAX_RATE
        ));
    }
    Ok(rate)
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("expected a duration like 500ms, 30s, 10m or 1h ({e})"))?;
    if d.is_zero() {
        return Err("must be longer than 0".into());
    }
    Ok(d)
}

/// The worker's per-call timeout when the query does not set `timeout_ms` (its `TIMEOUT_MS`
/// default in wrangler.toml; a deployment may change it).
pub const WORKER_TIMEOUT_MS: u64 = 10_000;
/// Stores the worker measures when the query names none (its `STORES` default: every store in
/// the descriptions).
pub const WORKER_DEFAULT_STORES: usize = kvbench_core::spec::STORES.len();
/// Timed calls per store at worst: setup, read, setup again (a token refresh), write; the last
/// may time out and then be waited for, at most `min(timeout_ms, DRAIN_MAX_MS)` (a timeout ends
/// the store's turn, so there is one such wait per store at most).
const CALLS_PER_STORE: u64 = 4;

/// The request timeout that covers the worker's worst case for this `/test` URL, and how it was
/// derived (said at the start of a run, since a deployment's defaults cannot be seen from here).
pub fn worst_case_timeout(url: &Uri) -> (Duration, String) {
    let pairs: Vec<(String, String)> = url
        .query()
        .map(|q| {
            q.split('&')
                .filter_map(|p| p.split_once('=').or(Some((p, ""))))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    let get = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let (timeout_ms, ms_from) = match get("timeout_ms").and_then(|v| v.parse::<u64>().ok()) {
        Some(ms) => (ms, "timeout_ms in the URL"),
        None => (
            WORKER_TIMEOUT_MS,
            "the worker's default timeout_ms, if the deployment kept it",
        ),
    };
    let listed = get("stores").or_else(|| get("order").filter(|o| *o != "random"));
    let (stores, stores_from) = match listed {
        Some(list) => (
            list.split([',', '%'])
                .filter(|s| !s.is_empty() && *s != "2C")
                .count()
                .max(1),
            "stores in the URL",
        ),
        None => (
            WORKER_DEFAULT_STORES,
            "the worker's default stores, if the deployment kept them",
        ),
    };
    let drain_ms = timeout_ms.min(u64::from(kvbench_core::measurement::measure::DRAIN_MAX_MS));
    let ms = (timeout_ms * CALLS_PER_STORE + drain_ms) * stores as u64 + 5_000;
    let why = format!(
        "{stores} store(s) ({stores_from}) x ({CALLS_PER_STORE} calls x {timeout_ms} ms ({ms_from}) + {drain_ms} ms waiting for a timed-out call) + 5 s"
    );
    (Duration::from_millis(ms), why)
}

impl RunArgs {
    /// `--timeout`, or the worker's worst case for the URL (with the reason).
    pub fn timeout(&self) -> (Duration, String) {
        match self.timeout {
            Some(t) => (t, "--timeout".into()),
            None => self
                .urls
                .iter()
                .map(worst_case_timeout)
                .max_by_key(|(t, _)| *t)
                .unwrap_or_else(|| (Duration::from_millis(WORKER_TIMEOUT_MS), String::new())),
        }
    }

    /// The `--header` values as header pairs; an error names the flag and the header's position,
    /// never its value.
    pub fn parsed_headers(&self) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
        self.headers
            .iter()
            .enumerate()
            .map(|(i, h)| parse_header(h).map_err(|e| format!("--header #{}: {e}", i + 1)))
            .collect()
    }
}

pub fn parse_header(s: &str) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = s
        .split_once(':')
        .ok_or("expected 'Name: value' (the value is not shown: it may be a secret)")?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| "not a valid header name (the value is not shown)".to_string())?;
    let value = HeaderValue::from_str(value.trim())
        .map_err(|_| "header value has characters a header cannot carry".to_string())?;
    Ok((name, value))
}

pub fn parse_label(s: &str) -> Result<String, String> {
    if s.is_empty() || s.chars().any(|c| c.is_control()) {
        return Err("must be a non-empty name without control characters".into());
    }
    Ok(s.to_string())
}

pub fn parse_max_in_flight(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a whole number of requests, at least 1".into()),
    }
}

pub fn parse_connections(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if (1..=65_536).contains(&n) => Ok(n),
        _ => Err("expected a whole number of connections, from 1 to 65536".into()),
    }
}

pub fn parse_threads(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if (1..=256).contains(&n) => Ok(n),
        _ => Err("expected a whole number of threads, from 1 to 256".into()),
    }
}

impl RunArgs {
    /// `--max-in-flight`, or the default for the rate.
    pub fn max_in_flight(&self) -> u64 {
        self.max_in_flight
            .unwrap_or_else(|| crate::pool::default_max_in_flight(self.rate))
    }

    /// `--connections`, or the default for the rate.
    pub fn connections(&self) -> u64 {
        self.connections
            .unwrap_or_else(|| crate::pool::default_connections(self.rate, self.max_in_flight()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers_table() {
        assert_eq!(parse_rate("400").unwrap(), 400.0);
        assert_eq!(parse_rate("0.5").unwrap(), 0.5);
        for bad in ["0", "-1", "fast", "inf", "NaN", "2000000"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(
            parse_duration("1500ms").unwrap(),
            Duration::from_millis(1500)
        );
        for bad in ["0s", "ten", "", "5"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        let (n, v) = parse_header("Authorization: Bearer abc").unwrap();
        assert_eq!(
            (n.as_str(), v.to_str().unwrap()),
            ("authorization", "Bearer abc")
        );
        for bad in ["NoColon", "Bad Name: x", ": x"] {
            assert!(parse_header(bad).is_err(), "{bad}");
        }
        assert!(parse_url("http://127.0.0.1:8787/test").is_ok());
        for bad in [
            "127.0.0.1:8787/test",
            "ftp://x/test",
            "http://",
            "not a url",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_interval("auto").unwrap(), Interval::Auto);
        assert_eq!(
            parse_interval("5s").unwrap(),
            Interval::Fixed(Duration::from_secs(5))
        );
        assert!(parse_interval("0s").is_err());
        assert_eq!(parse_max_in_flight("8").unwrap(), 8);
        assert_eq!(parse_connections("64").unwrap(), 64);
        for bad in ["0", "-1", "many", "70000"] {
            assert!(parse_connections(bad).is_err(), "{bad}");
        }
        assert!(parse_max_in_flight("0").is_err());
        assert!(parse_label("").is_err());
    }

    #[test]
    fn default_timeout_covers_the_workers_worst_case() {
        let t = |url: &str| worst_case_timeout(&parse_url(url).unwrap()).0.as_secs();
        assert_eq!(t("http://w/test"), 10 * (4 * 10 + 5) + 5);
        assert_eq!(
            t("http://w/test?stores=kv,upstash&timeout_ms=2000"),
            2 * (4 * 2 + 2) + 5
        );
        assert_eq!(t("http://w/test?stores=kv%2Cupstash"), 2 * (4 * 10 + 5) + 5);
        assert_eq!(
            t("http://w/test?order=upstash,kv,denokv"),
            3 * (4 * 10 + 5) + 5
        );
        assert_eq!(t("http://w/test?order=random&stores=kv"), (4 * 10 + 5) + 5);
        let (_, why) = worst_case_timeout(&parse_url("http://w/test").unwrap());
        assert!(why.contains("if the deployment kept"), "{why}");
    }

    #[test]
    fn worker_limits_parse_and_default_to_the_importers_own() {
        assert_eq!(parse_bytes("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_bytes("512 MiB").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("64k").unwrap(), 64 << 10);
        assert_eq!(parse_bytes("1000").unwrap(), 1000);
        for bad in ["", "0", "1.5GiB", "4GB", "-1", "99999999999G", "MiB"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
        assert!(parse_count("0").is_err());
        let cli = Cli::try_parse_from([
            "kvbench", "import", "worker", "http://w", "--probes", "--out", "x",
        ])
        .unwrap();
        let Command::Import(ImportArgs {
            source: ImportSource::Worker(w),
        }) = cli.command
        else {
            panic!("not import worker");
        };
        assert_eq!(w.limits.limits(), crate::import_worker::Limits::default());
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
