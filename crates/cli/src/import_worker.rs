//! `kvbench import worker URL`: a deployed worker's kept answers (`/probes/answers`, a label per
//! hint, or `/runs/<id>/answers`, a label per colo) into `kvbench run`'s report. The stream is
//! spooled to a file and read twice (span, then a collector per label); one cut short is fetched
//! again (bounded), skipping lines by `seq`. The server is untrusted: every wait and size is
//! bounded ([`Limits`]), and its printed text passes through [`tty`].

use std::collections::BTreeMap;
use std::future::Future;
use std::io::{BufRead, BufReader, BufWriter, Seek, Write};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context as _};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::header::{HeaderValue, AUTHORIZATION, HOST, USER_AGENT};
use hyper::{Request, Uri};
use tokio::time::Instant;
use tower_service::Service as _;

use crate::attack::{connector, error_chain, host_header};
use kvbench_report::answer::shorten;
use kvbench_report::kept::{timeline_interval, Aggregate, Kept, Source};
use kvbench_report::print::text::tty;
use kvbench_report::report::{RawData, Report};
use kvbench_wire::stream::{Ending, Item, Reader};

/// Whose kept answers to pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Archive {
    Probes,
    Run(String),
}

#[derive(Debug, Clone)]
pub struct WorkerImport {
    /// The worker's base URL (`https://kvbench.example.workers.dev`).
    pub url: String,
    pub archive: Archive,
    /// `since`/`until` as the worker takes them (epoch ms or a duration ago such as `24h`).
    pub since: Option<String>,
    pub until: Option<String>,
    /// `BENCH_TOKEN`, never printed.
    pub token: Option<String>,
    pub interval: Option<Duration>,
    /// `--max-concurrent`.
    pub max_concurrent: Option<u32>,
    pub limits: Limits,
}

/// How long an import may wait and how much a stream may bring; each has a flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// `--connect-timeout`: TCP connect and TLS handshake.
    pub connect: Duration,
    /// `--header-timeout`: from the request sent to the response's headers.
    pub headers: Duration,
    /// `--idle-timeout`: the longest wait for the stream's next line (bytes that complete no
    /// line do not count, so a drip cannot keep a stream alive).
    pub idle: Duration,
    /// `--max-time`: the whole download, every attempt included.
    pub total: Duration,
    /// `--max-spool`: bytes of answers, spooled or received in one attempt.
    pub spool_bytes: u64,
    /// `--max-answers`: answers, spooled or received in one attempt.
    pub answers: u64,
    /// `--max-labels`: distinct labels (vantage points); each costs a collector.
    pub labels: usize,
}

impl Default for Limits {
    /// The flags' defaults (`args::WorkerArgs` states the same, a test holds them equal).
    fn default() -> Limits {
        Limits {
            connect: Duration::from_secs(10),
            headers: Duration::from_secs(30),
            idle: Duration::from_secs(30),
            total: Duration::from_secs(30 * 60),
            spool_bytes: 4 << 30,
            answers: 2_000_000,
            labels: 1_000,
        }
    }
}

/// Fetch attempts before an import that keeps ending short fails.
const ATTEMPTS: u32 = 4;
/// Longest accepted line (a /test answer is a few KB).
const MAX_LINE: usize = 1 << 20;
/// Most of an error (non-2xx) body that is read; the rest is never received.
pub const ERROR_BODY_MAX: usize = 4 << 10;
/// Longest label, hint, colo or placement in a kept line (the worker's are at most 64).
pub const NAME_MAX_BYTES: usize = 128;

/// A wait that can run out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    Connect,
    Headers,
    Idle,
    Total,
}

/// A wait that ran out: which, and after how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TimedOut {
    wait: Wait,
    after: Duration,
}

impl TimedOut {
    /// What happened, about the worker shown as `shown`, naming the flag.
    fn message(&self, shown: &str) -> String {
        let after = humantime::format_duration(self.after);
        match self.wait {
            Wait::Connect => {
                format!("could not connect to {shown} within {after} (--connect-timeout)")
            }
            Wait::Headers => {
                format!("{shown} sent no response headers within {after} (--header-timeout)")
            }
            Wait::Idle => format!("sent no line for {after} (--idle-timeout)"),
            Wait::Total => {
                format!("the import from {shown} did not finish within {after} (--max-time)")
            }
        }
    }
}

/// The import's deadline (`--max-time`), under every wait's own.
struct Waits<'l> {
    limits: &'l Limits,
    deadline: Instant,
}

impl Waits<'_> {
    /// `fut`, unless `until` (for `wait`) or the deadline comes first.
    async fn by<T>(
        &self,
        wait: Wait,
        until: Instant,
        fut: impl Future<Output = T>,
    ) -> Result<T, TimedOut> {
        let total = until >= self.deadline;
        match tokio::time::timeout_at(until.min(self.deadline), fut).await {
            Ok(out) => Ok(out),
            Err(_) if total => Err(TimedOut {
                wait: Wait::Total,
                after: self.limits.total,
            }),
            Err(_) => Err(TimedOut {
                wait,
                after: match wait {
                    Wait::Connect => self.limits.connect,
                    Wait::Headers => self.limits.headers,
                    Wait::Idle => self.limits.idle,
                    Wait::Total => self.limits.total,
                },
            }),
        }
    }
}

/// Text from the server as stderr may show it: on one line, at most 120 characters, control
/// characters escaped.
fn shown_text(bytes: &[u8]) -> String {
    tty(&shorten(&String::from_utf8_lossy(bytes))).into_owned()
}

/// A byte count as the messages and the docs write it.
pub fn bytes_text(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

impl WorkerImport {
    /// The route the answers are read from.
    fn path(&self) -> String {
        match &self.archive {
            Archive::Probes => "/probes/answers".to_string(),
            Archive::Run(id) => format!("/runs/{id}/answers"),
        }
    }

    fn answers_url(&self) -> anyhow::Result<Uri> {
        let base = self.url.trim_end_matches('/');
        let path = self.path();
        let mut query = Vec::new();
        if let Some(s) = &self.since {
            query.push(format!("since={s}"));
        }
        if let Some(u) = &self.until {
            query.push(format!("until={u}"));
        }
        let q = if query.is_empty() {
            String::new()
        } else {
            format!("?{}", query.join("&"))
        };
        format!("{base}{path}{q}")
            .parse()
            .with_context(|| format!("{}: not a URL", tty(base)))
    }

    /// A URL to show: never the token (it travels in a header), never userinfo.
    fn shown_url(&self) -> String {
        match self.url.parse::<Uri>() {
            Ok(u) => tty(&format!(
                "{}://{}{}",
                u.scheme_str().unwrap_or("https"),
                u.host().unwrap_or("?"),
                u.port().map(|p| format!(":{p}")).unwrap_or_default()
            ))
            .into_owned(),
            Err(_) => "(the worker)".into(),
        }
    }
}

/// The spool: the new answers, as the worker wrote them, one line each, in an unlinked file.
struct Spool {
    file: BufWriter<std::fs::File>,
    bytes: u64,
    lines: u64,
    line: Vec<u8>,
}

impl Spool {
    fn new() -> anyhow::Result<Spool> {
        Ok(Spool {
            file: BufWriter::with_capacity(1 << 16, tempfile()?),
            bytes: 0,
            lines: 0,
            line: Vec::new(),
        })
    }

    /// Appends `kept`, unless it would pass a bound.
    fn push(&mut self, kept: &Kept<'_>, limits: &Limits) -> anyhow::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, kept)?;
        self.line.push(b'\n');
        too_much(limits, self.bytes + self.line.len() as u64, self.lines + 1)?;
        self.file.write_all(&self.line)?;
        self.bytes += self.line.len() as u64;
        self.lines += 1;
        Ok(())
    }

    /// The file, written out and read from its start.
    fn finish(self) -> anyhow::Result<std::fs::File> {
        let mut file = self.file.into_inner().map_err(|e| e.into_error())?;
        file.rewind()?;
        Ok(file)
    }
}

/// Fails when `bytes` or `answers` pass their bound, naming its flag.
fn too_much(limits: &Limits, bytes: u64, answers: u64) -> anyhow::Result<()> {
    let narrow = "narrow the window (--since/--until)";
    if bytes > limits.spool_bytes {
        bail!(
            "the answers pass {} (--max-spool): {narrow} or raise --max-spool",
            bytes_text(limits.spool_bytes)
        );
    }
    if answers > limits.answers {
        bail!(
            "the answers pass {} answers (--max-answers): {narrow} or raise --max-answers",
            limits.answers
        );
    }
    Ok(())
}

/// How one fetch ended.
#[derive(Debug)]
enum Fetched {
    /// With the end line, and the keeps it says failed (`None`: a worker that does not count).
    Complete { keep_failed: Option<u64> },
    /// Short, and how (for the message).
    Short(String),
}

/// One fetch's handling of the stream's lines.
struct Lines<'a> {
    limits: &'a Limits,
    /// The last `seq` spooled, per label.
    seen: &'a mut BTreeMap<String, i64>,
    spool: &'a mut Spool,
    /// The stream's error line, when it sent one.
    stopped: Option<String>,
}

impl Lines<'_> {
    fn item(&mut self, item: Item<'_>) -> anyhow::Result<()> {
        let kept = match item {
            Item::Kept(kept) => kept,
            Item::Malformed { line, error } => bail!(
                "the worker sent a line that is not a kept answer ({}): {}",
                tty(&shorten(&error.to_string())),
                shown_text(line.get(..200).unwrap_or(line))
            ),
            Item::Stopped(e) => {
                self.stopped = Some(format!(
                    "was stopped by the worker ({})",
                    shown_text(e.as_bytes())
                ));
                return Ok(());
            }
        };
        let Some(seq) = kept.seq else {
            bail!("a kept answer without seq");
        };
        // The names the report keeps per label (its vantage points' colos, hint, placement).
        let names = [
            Some(&kept.label),
            kept.hint.as_ref(),
            Some(&kept.colo),
            kept.placement.as_ref(),
        ];
        for name in names.into_iter().flatten() {
            if name.len() > NAME_MAX_BYTES {
                bail!(
                    "a kept answer has a name of {} bytes (at most {NAME_MAX_BYTES}): {}",
                    name.len(),
                    shown_text(&name.as_bytes()[..40])
                );
            }
        }
        let label = kept.label.as_str();
        if !self.seen.contains_key(label) {
            if self.seen.len() >= self.limits.labels {
                bail!(
                    "the answers have more than {} labels (vantage points; --max-labels): narrow the window (--since/--until) or raise --max-labels",
                    self.limits.labels
                );
            }
            self.seen.insert(label.to_string(), 0);
        }
        let last = self.seen.get_mut(label).context("a label just seen")?;
        if seq > *last {
            *last = seq;
            self.spool.push(&kept, self.limits)?;
        }
        Ok(())
    }
}

/// The connection's driver, stopped when the fetch is over (a stalled server keeps nothing).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Appends one fetch's new lines to `spool`.
async fn fetch_once(
    w: &WorkerImport,
    waits: &Waits<'_>,
    seen: &mut BTreeMap<String, i64>,
    spool: &mut Spool,
) -> anyhow::Result<Fetched> {
    let limits = &w.limits;
    let shown = w.shown_url();
    let uri = w.answers_url()?;
    let connected = waits
        .by(Wait::Connect, Instant::now() + limits.connect, async {
            let io = connector().call(uri.clone()).await?;
            let (sender, driver) = http1::handshake(io).await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((sender, driver))
        })
        .await
        .map_err(|t| anyhow::anyhow!(t.message(&shown)))?;
    let (mut sender, driver) =
        connected.map_err(|e| anyhow::anyhow!("cannot reach {shown}: {}", error_chain(&*e)))?;
    let _driver = AbortOnDrop(tokio::spawn(async move {
        // Its errors reach the response or the body.
        let _ = driver.await;
    }));
    let mut req = Request::get(
        uri.path_and_query()
            .map_or("/", |p| p.as_str())
            .parse::<Uri>()?,
    )
    .header(HOST, host_header(&uri)?)
    .header(
        USER_AGENT,
        HeaderValue::from_static(concat!("kvbench/", env!("CARGO_PKG_VERSION"))),
    );
    if let Some(t) = &w.token {
        let mut value = HeaderValue::from_str(&format!("Bearer {t}"))
            .context("the token has characters a header cannot carry")?;
        value.set_sensitive(true);
        req = req.header(AUTHORIZATION, value);
    }
    let response = waits
        .by(
            Wait::Headers,
            Instant::now() + limits.headers,
            sender.send_request(req.body(Empty::<Bytes>::new())?),
        )
        .await
        .map_err(|t| anyhow::anyhow!(t.message(&shown)))?
        .map_err(|e| anyhow::anyhow!("{shown} sent no answer: {}", error_chain(&e)))?;
    let status = response.status();
    let mut body = response.into_body();
    if !status.is_success() {
        let text = error_text(&mut body, waits, limits).await;
        match status.as_u16() {
            401 => bail!("{shown} answered 401: pass the worker's BENCH_TOKEN (--token-env)"),
            404 => bail!("{shown}: no such run ({text})"),
            s => bail!("{shown} answered {s}: {text}"),
        }
    }
    read_stream(&mut body, waits, limits, &shown, seen, spool).await
}

/// At most [`ERROR_BODY_MAX`] bytes of an error body, what arrives of it within one
/// `--idle-timeout`, as stderr may show it.
async fn error_text(body: &mut Incoming, waits: &Waits<'_>, limits: &Limits) -> String {
    let until = Instant::now() + limits.idle;
    let mut text = Vec::new();
    while text.len() < ERROR_BODY_MAX {
        let Ok(Some(Ok(frame))) = waits.by(Wait::Idle, until, body.frame()).await else {
            break;
        };
        if let Some(data) = frame.data_ref() {
            let room = ERROR_BODY_MAX - text.len();
            text.extend_from_slice(&data[..data.len().min(room)]);
        }
    }
    shown_text(&text)
}

/// Reads the answers stream into `spool`, each line within `--idle-timeout` of the last.
async fn read_stream(
    body: &mut Incoming,
    waits: &Waits<'_>,
    limits: &Limits,
    shown: &str,
    seen: &mut BTreeMap<String, i64>,
    spool: &mut Spool,
) -> anyhow::Result<Fetched> {
    let mut reader = Reader::new(MAX_LINE);
    let mut lines = Lines {
        limits,
        seen,
        spool,
        stopped: None,
    };
    let mut received = 0u64;
    let mut idle_until = Instant::now() + limits.idle;
    loop {
        let frame = match waits.by(Wait::Idle, idle_until, body.frame()).await {
            Ok(Some(Ok(frame))) => frame,
            Ok(None) => break,
            Ok(Some(Err(e))) => return Ok(Fetched::Short(format!("broke ({})", error_chain(&e)))),
            Err(t) if t.wait == Wait::Total => bail!(t.message(shown)),
            Err(t) => return Ok(Fetched::Short(t.message(shown))),
        };
        let Some(data) = frame.data_ref() else {
            continue;
        };
        // What one attempt receives is bounded too: lines already spooled are not spooled again.
        received += data.len() as u64;
        too_much(limits, received, reader.lines()).map_err(|e| e.context(shown.to_string()))?;
        let before = reader.lines();
        reader
            .push(data, |item| lines.item(item))
            .map_err(|e| e.context(shown.to_string()))?;
        if reader.lines() > before || lines.stopped.is_some() {
            idle_until = Instant::now() + limits.idle;
        }
    }
    // A last line without its newline is a cut-off one: dropped, and the stream is short.
    Ok(match reader.finish() {
        Ending::Complete { keep_failed, .. } => Fetched::Complete { keep_failed },
        Ending::Short { .. } => Fetched::Short(
            lines
                .stopped
                .unwrap_or_else(|| "ended without its end line".into()),
        ),
    })
}

/// Pulls the kept answers and builds the report. Every text of the server's in the error is
/// escaped for the terminal.
pub async fn import_worker(w: &WorkerImport) -> anyhow::Result<Report> {
    fetch_and_build(w)
        .await
        .map_err(|e| anyhow::anyhow!("{}", tty(&format!("{e:#}"))))
}

async fn fetch_and_build(w: &WorkerImport) -> anyhow::Result<Report> {
    let waits = Waits {
        limits: &w.limits,
        deadline: Instant::now() + w.limits.total,
    };
    let mut spool = Spool::new()?;
    let mut seen = BTreeMap::new();
    let mut attempts = 0;
    let mut last_short = String::new();
    let mut keep_failed = None;
    loop {
        attempts += 1;
        match fetch_once(w, &waits, &mut seen, &mut spool).await? {
            Fetched::Complete { keep_failed: f } => {
                keep_failed = f;
                break;
            }
            Fetched::Short(how) if attempts < ATTEMPTS => {
                eprintln!("kvbench: the answers stream {how}; resuming");
            }
            Fetched::Short(how) => {
                last_short = how;
                break;
            }
        }
    }
    let lines = spool.lines;
    if !last_short.is_empty() {
        bail!(
            "the answers stream from {} ended short {ATTEMPTS} times ({lines} answers read): not writing a partial report (the last time it {last_short})",
            w.shown_url()
        );
    }
    if let Some(n) = keep_failed.filter(|n| *n > 0) {
        eprintln!(
            "kvbench: the worker says {n} answer(s) could not be kept (keep_failed): they are in no count of this report"
        );
    }
    if lines == 0 {
        bail!("{} kept no answers in this window", w.shown_url());
    }
    let mut report = build(w, spool.finish()?, lines, attempts - 1)?;
    if let Some(info) = report.runs.iter_mut().find_map(|r| r.import.as_mut()) {
        info.keep_failed = keep_failed;
    }
    let answers = w.answers_url()?;
    let raw = vec![
        RawData {
            what: "the kept answers (NDJSON; the worker's BENCH_TOKEN)".into(),
            href: tty(&answers.to_string()).into_owned(),
        },
        RawData {
            what: "report.json (every histogram)".into(),
            href: "report.json".into(),
        },
    ];
    let mut provenance = crate::describe::provenance(&answers, None, raw);
    provenance.window = Some((
        w.since.clone().unwrap_or_else(|| "the oldest kept".into()),
        w.until.clone().unwrap_or_else(|| "now".into()),
    ));
    report.provenance = Some(provenance);
    Ok(report)
}

fn tempfile() -> anyhow::Result<std::fs::File> {
    let path = std::env::temp_dir().join(format!(
        "kvbench-import-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)?
            .as_nanos()
    ));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    // Unlinked at once: the file lives as long as the handle.
    std::fs::remove_file(&path)?;
    Ok(file)
}

fn build(
    w: &WorkerImport,
    spool: std::fs::File,
    lines: u64,
    resumed: u32,
) -> anyhow::Result<Report> {
    let mut reader = BufReader::new(spool);
    // Pass 1: the span (the timeline's interval and the report's start).
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    for_each_line(&mut reader, |l| {
        // Times no worker keeps are counted malformed by the aggregate, and span nothing.
        if l.time_ok() {
            first = first.min(l.t_ms);
            last = last.max(l.t_ms);
        }
        Ok(())
    })?;
    let span = Duration::from_millis(last.saturating_sub(first).max(0) as u64);
    let interval = w.interval.unwrap_or_else(|| timeline_interval(span));
    reader.rewind()?;
    // Pass 2: one collector per label.
    let mut aggregate = Aggregate::new(first, interval).with_max_concurrent(w.max_concurrent);
    for_each_line(&mut reader, |l| {
        aggregate.push(&l);
        Ok(())
    })?;
    debug_assert_eq!(aggregate.lines(), lines);
    if resumed > 0 {
        eprintln!("kvbench: the stream was resumed {resumed} time(s); every answer was read once");
    }
    let source = Source {
        url: w.shown_url(),
        engine: match w.archive {
            Archive::Probes => "probes",
            Archive::Run(_) => "worker",
        }
        .into(),
        read_from: format!("{}{}", w.shown_url(), w.path()),
    };
    aggregate.finish(&source)?.ok_or_else(|| {
        anyhow::anyhow!(
            "{}: none of the {lines} kept lines is an answer",
            w.shown_url()
        )
    })
}

fn for_each_line(
    reader: &mut BufReader<std::fs::File>,
    mut f: impl FnMut(Kept<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            return Ok(());
        }
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let parsed = Kept::parse(line).context("the spooled answers")?;
        f(parsed)?;
    }
}
