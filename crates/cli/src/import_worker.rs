//! `kvbench import worker URL`: the answers a deployed worker kept — its probes'
//! (`/probes/answers`, one label per location hint) or a load run's (`/runs/<id>/answers`, one
//! label per colo) — into the same report as `kvbench run`. The NDJSON stream is spooled to a
//! temporary file (memory stays flat whatever its length), then read twice: once for the time
//! span (the timeline's interval), once into one collector per label. A stream that ends without
//! its `end` line, or with an `error` line, is fetched again (bounded) and the lines already read
//! are skipped by their per-label `seq`; if it still ends short, the import fails saying so.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Seek, Write};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context as _};
use http_body_util::BodyExt;
use hyper::Uri;

use crate::report::Report;
use kvbench_report::kept::{timeline_interval, Aggregate, Kept, Source};
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
}

/// Fetch attempts before an import that keeps ending short fails.
const ATTEMPTS: u32 = 4;
/// Longest accepted line (a /test answer is a few KB).
const MAX_LINE: usize = 1 << 20;

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
            .with_context(|| format!("{base}: not a URL"))
    }

    /// A URL to show: never the token (it travels in a header), never userinfo.
    fn shown_url(&self) -> String {
        match self.url.parse::<Uri>() {
            Ok(u) => format!(
                "{}://{}{}",
                u.scheme_str().unwrap_or("https"),
                u.host().unwrap_or("?"),
                u.port().map(|p| format!(":{p}")).unwrap_or_default()
            ),
            Err(_) => "(the worker)".into(),
        }
    }
}

/// Appends one fetch's new lines to `spool`; `Ok(true)` when the stream ended complete.
async fn fetch_once(
    w: &WorkerImport,
    seen: &mut BTreeMap<String, i64>,
    spool: &mut std::fs::File,
    lines: &mut u64,
) -> anyhow::Result<bool> {
    let uri = w.answers_url()?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, http_body_util::Empty<bytes::Bytes>>(
        hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .wrap_connector({
                let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
                http.enforce_http(false);
                http.set_nodelay(true);
                http
            }),
    );
    let mut req = hyper::Request::get(uri);
    if let Some(t) = &w.token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let response = client
        .request(req.body(http_body_util::Empty::new())?)
        .await
        .with_context(|| format!("cannot reach {}", w.shown_url()))?;
    let status = response.status();
    let mut body = response.into_body();
    if !status.is_success() {
        let text = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&text[..text.len().min(500)]).into_owned();
        match status.as_u16() {
            401 => bail!(
                "{} answered 401: pass the worker's BENCH_TOKEN (--token-env)",
                w.shown_url()
            ),
            404 => bail!("{}: no such run ({text})", w.shown_url()),
            s => bail!("{} answered {s}: {text}", w.shown_url()),
        }
    }
    let mut reader = Reader::new(MAX_LINE);
    let shown = w.shown_url();
    let mut handle = |item: Item<'_>| -> anyhow::Result<()> {
        let kept = match item {
            Item::Kept(kept) => kept,
            Item::Malformed { line, error } => bail!(
                "the worker sent a line that is not a kept answer ({error}): {}",
                String::from_utf8_lossy(line.get(..200).unwrap_or(line))
            ),
            Item::Stopped(e) => {
                eprintln!("kvbench: the worker stopped the stream early ({e}); resuming");
                return Ok(());
            }
        };
        let Some(seq) = kept.seq else {
            bail!("a kept answer without seq");
        };
        let last = seen.entry(kept.label.to_string()).or_insert(0);
        if seq > *last {
            *last = seq;
            // Spooled as the worker wrote it.
            serde_json::to_writer(&mut *spool, &kept)?;
            spool.write_all(b"\n")?;
            *lines += 1;
        }
        Ok(())
    };
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(f) => f,
            Err(e) => {
                eprintln!("kvbench: the answers stream broke ({e}); resuming");
                return Ok(false);
            }
        };
        let Some(data) = frame.data_ref() else {
            continue;
        };
        reader
            .push(data, &mut handle)
            .map_err(|e| e.context(shown.clone()))?;
    }
    // A last line without its newline is a cut-off one: dropped, and the stream is short.
    Ok(matches!(reader.finish(), Ending::Complete { .. }))
}

/// Pulls the kept answers and builds the report.
pub async fn import_worker(w: &WorkerImport) -> anyhow::Result<Report> {
    let mut spool = tempfile()?;
    let mut seen = BTreeMap::new();
    let mut lines = 0u64;
    let mut complete = false;
    let mut attempts = 0;
    while !complete && attempts < ATTEMPTS {
        attempts += 1;
        complete = fetch_once(w, &mut seen, &mut spool, &mut lines).await?;
    }
    if !complete {
        bail!(
            "the answers stream from {} ended short {ATTEMPTS} times ({lines} answers read): not writing a partial report",
            w.shown_url()
        );
    }
    if lines == 0 {
        bail!("{} kept no answers in this window", w.shown_url());
    }
    spool.rewind()?;
    build(w, spool, lines, attempts - 1)
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
