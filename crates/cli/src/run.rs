//! `kvbench run` as a table of contents: shards run a pacer (*when*) over a connection pool
//! (*how*); the collector on the main thread folds their results into the report; Ctrl-C stops,
//! drains (bounded) and still yields a partial report.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use hyper::header::{HeaderName, HeaderValue};
use hyper::Uri;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::attack::Attacker;
use crate::batch::{self, Batch, Read};
use crate::pacer::Pacer;
use crate::pool::{InFlight, Queue, Shared};
use crate::progress::Progress;
use crate::shard::{self, Shard};
use crate::signal::Sigints;
use kvbench_report::collect::Collector;
use kvbench_report::hist::Hist;
use kvbench_report::report::{Report, RunInfo};
use kvbench_report::sample;

/// How often the collector takes the results that arrived (and the cost of a result waiting).
const COLLECT_EVERY: Duration = Duration::from_millis(10);
/// How often the progress display is refreshed.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// What `kvbench run` needs, already validated.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Where to send (`--url`, at least one): shard `i` sends to `urls[i % urls.len()]`, each URL
    /// the same share.
    pub urls: Vec<Uri>,
    pub rate: f64,
    pub duration: Duration,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub label: String,
    pub timeout: Duration,
    pub max_in_flight: u64,
    /// Size of the connection pool (split among the threads).
    pub connections: u64,
    /// Shards, each a thread with its own runtime, share of the schedule and of the connections.
    pub threads: u64,
    pub interval: Duration,
    pub samples_csv: Option<PathBuf>,
    /// `--max-concurrent`.
    pub max_concurrent: Option<u32>,
}

type CsvOut = BufWriter<File>;

fn open_csv(path: Option<&Path>) -> anyhow::Result<Option<CsvOut>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let mut w = BufWriter::new(
        File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    w.write_all(sample::CSV_HEADER.as_bytes())?;
    Ok(Some(w))
}

/// The collector's side of the run: the results buffer, the optional samples.csv.
struct Folding {
    collector: Collector,
    csv: Option<CsvOut>,
    csv_error: Option<std::io::Error>,
    batch: Batch,
}

impl Folding {
    /// Takes what arrived since the last call and folds it in.
    fn fold(&mut self, results: &batch::Shared) {
        results.take(&mut self.batch);
        for hit in &self.batch.hits {
            let read = batch::read(hit.ending, self.batch.text(hit));
            batch::record(&mut self.collector, hit.intended_us, hit.latency_us, &read);
            if hit.retried {
                self.collector.record_retried();
            }
            if let (Some(w), None) = (self.csv.as_mut(), &self.csv_error) {
                let written = match &read {
                    Read::Answer(a) => sample::write_answer_csv(
                        w,
                        (hit.intended_us, hit.latency_us, hit.retried),
                        &a.colo,
                        a.key.as_deref(),
                        a.stores.iter().map(|(name, r)| (name.as_ref(), r)),
                    ),
                    Read::Failure(kind, _) => sample::write_failure_csv(
                        w,
                        hit.intended_us,
                        hit.latency_us,
                        *kind,
                        hit.retried,
                    ),
                };
                self.csv_error = written.err();
            }
        }
        self.batch.clear();
    }
}

/// The collector task: folds results every few milliseconds, refreshes the progress display, and
/// ends after a last fold once `done` is set.
fn spawn_collector(
    mut folding: Folding,
    shards: Vec<Arc<Shared>>,
    in_flight: Arc<InFlight>,
    mut progress: Progress,
    mut done: watch::Receiver<bool>,
) -> JoinHandle<Folding> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(COLLECT_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut next_progress = Instant::now();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = done.wait_for(|d| *d) => break,
            }
            for shard in &shards {
                folding.fold(&shard.results);
            }
            if Instant::now() >= next_progress {
                next_progress += PROGRESS_EVERY;
                progress.update(&folding.collector.snapshot(), in_flight.get());
            }
        }
        for shard in &shards {
            folding.fold(&shard.results);
        }
        progress.finish();
        if let Some(mut w) = folding.csv.take() {
            if folding.csv_error.is_none() {
                folding.csv_error = w.flush().err();
            }
        }
        folding
    })
}

/// Splits `n` into `parts` nearly equal shares (the first ones get the remainder).
fn share(n: u64, parts: u64, index: u64) -> u64 {
    n / parts + u64::from(index < n % parts)
}

/// Each thread's shard state: its attacker (of URL `i % attackers.len()`), its share of the
/// connections' queue (all under one `in_flight` bound), its own results buffer.
fn shared_per_thread(
    cfg: &RunConfig,
    threads: u64,
    attackers: &[Arc<Attacker>],
    in_flight: &Arc<InFlight>,
) -> Vec<Arc<Shared>> {
    (0..threads)
        .map(|i| {
            Arc::new(Shared {
                attacker: attackers[i as usize % attackers.len()].clone(),
                queue: Queue::new(
                    share(cfg.connections, threads, i) as usize,
                    in_flight.clone(),
                ),
                results: batch::Shared::default(),
                timeout: cfg.timeout,
            })
        })
        .collect()
}

/// Runs the load and returns this run's report (partial when interrupted).
pub async fn run(mut cfg: RunConfig, mut progress: Progress) -> anyhow::Result<Report> {
    let schedule = Pacer::new(cfg.rate, cfg.duration).context("--rate/--duration")?;
    anyhow::ensure!(!cfg.urls.is_empty(), "--url: at least one");
    // Every thread needs a connection of its own, and each URL the same number of threads.
    let threads = shards_for(cfg.threads, cfg.connections, cfg.urls.len() as u64);
    cfg.connections = cfg.connections.max(threads);
    let attackers = cfg
        .urls
        .iter()
        .map(|url| Ok(Arc::new(Attacker::new(url, &cfg.headers)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let in_flight = Arc::new(InFlight::new(cfg.max_in_flight));
    let shards = shared_per_thread(&cfg, threads, &attackers, &in_flight);
    let folding = Folding {
        collector: Collector::new(cfg.interval, cfg.timeout)
            .with_max_concurrent(cfg.max_concurrent),
        csv: open_csv(cfg.samples_csv.as_deref())?,
        csv_error: None,
        batch: Batch::default(),
    };
    let sigints = Sigints::install()?;
    progress.started(&format!(
        "kvbench: {} req/s to {} for {} over up to {} connections on {} thread(s) (label {}); \
         Ctrl-C stops and writes a partial report",
        cfg.rate,
        urls_text(&cfg.urls),
        humantime::format_duration(cfg.duration),
        cfg.connections,
        threads,
        cfg.label
    ));
    let (done_tx, done_rx) = watch::channel(false);
    let collector = spawn_collector(folding, shards.clone(), in_flight, progress, done_rx);

    let mut running = shards
        .iter()
        .enumerate()
        .map(|(i, shared)| {
            Shard::spawn(shard::Plan {
                index: i,
                schedule: schedule.clone().shard(i as u64, threads),
                connections: share(cfg.connections, threads, i as u64) as usize,
                shared: shared.clone(),
                sigints: sigints.counter(),
                max_in_flight: cfg.max_in_flight,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    for shard in &mut running {
        shard.opened().await;
    }
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let start = Instant::now();
    for shard in &mut running {
        shard.start(start);
    }
    let mut ended = Vec::with_capacity(running.len());
    for shard in running {
        ended.push(shard.join().await?);
    }
    drop(sigints);
    let stuck: usize = ended.iter().map(|e| e.drained.stuck).sum();
    if stuck > 0 {
        eprintln!(
            "kvbench: {stuck} connection(s) ignored cancellation; their requests are missing \
             from the report"
        );
    }
    let _ = done_tx.send(true);
    let folding = collector.await.context("the collector panicked")?;
    if let Some(e) = folding.csv_error {
        eprintln!("kvbench: samples.csv is incomplete: {e}");
    }
    Ok(folding
        .collector
        .finish(run_info(&cfg, &ended, started_at, start)))
}

/// How many shards to run: `--threads`, at most one per connection, rounded up to a multiple of
/// the URLs (connections are raised to one per shard in [`run`]).
fn shards_for(threads: u64, connections: u64, urls: u64) -> u64 {
    let urls = urls.max(1);
    threads.clamp(1, connections.max(1)).div_ceil(urls) * urls
}

/// The run's URLs as the report names them: separated by spaces (a URL has none).
fn urls_text(urls: &[Uri]) -> String {
    urls.iter()
        .map(Uri::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// How the run went, from its shards' ends.
fn run_info(
    cfg: &RunConfig,
    ended: &[shard::Ended],
    started_at: String,
    start: Instant,
) -> RunInfo {
    let mut pacer_lag_us = Hist::default();
    for e in ended {
        pacer_lag_us.add(&e.sent.lag_us);
    }
    let interrupted = ended
        .iter()
        .any(|e| e.sent.interrupted || e.drained.cut_short);
    let send_window = ended
        .iter()
        .map(|e| e.sent.send_window)
        .max()
        .unwrap_or_default();
    RunInfo {
        label: cfg.label.clone(),
        url: urls_text(&cfg.urls),
        started_at,
        requested_rate: cfg.rate,
        planned_duration_s: cfg.duration.as_secs_f64(),
        send_window_s: send_window.as_secs_f64(),
        elapsed_s: start.elapsed().as_secs_f64(),
        timeout_s: cfg.timeout.as_secs_f64(),
        max_in_flight: cfg.max_in_flight,
        interrupted,
        pacer_lag_us,
        engine: "kvbench".into(),
        latency_from: "intended".into(),
        import: None,
        read_us: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_url_gets_whole_shards() {
        // (threads, connections, urls) -> shards
        for ((t, c, u), want) in [
            ((1, 64, 1), 1),
            ((1, 64, 2), 2),
            ((3, 64, 2), 4),
            ((4, 64, 2), 4),
            ((8, 2, 3), 3),
            ((1, 1, 2), 2),
            ((0, 0, 0), 1),
        ] {
            assert_eq!(super::shards_for(t, c, u), want, "{t} {c} {u}");
        }
    }

    #[test]
    fn shares_add_up() {
        for (n, parts) in [(64, 2), (65, 2), (1, 1), (7, 3), (256, 4)] {
            let shares: Vec<u64> = (0..parts).map(|i| super::share(n, parts, i)).collect();
            assert_eq!(shares.iter().sum::<u64>(), n, "{n}/{parts}");
            assert!(shares.iter().max().unwrap() - shares.iter().min().unwrap() <= 1);
        }
    }
}
