//! `kvbench run` as a table of contents: the pacer decides *when* (its own thread), the
//! [`Attacker`] decides *how* (one task per request), samples flow over a channel to the single
//! collector task, and Ctrl-C stops sending, drains (bounded) and still yields a partial report.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use hyper::header::{HeaderName, HeaderValue};
use hyper::Uri;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::attack::Attacker;
use crate::collect::Collector;
use crate::hist::Hist;
use crate::pacer::{self, Pacer};
use crate::progress::Progress;
use crate::report::{Report, RunInfo};
use crate::sample::{self, FailureKind, Sample};
use crate::signal::Sigints;

/// After the pacer stops and every request got its own timeout, allow this much more.
const DRAIN_SLACK: Duration = Duration::from_secs(1);
/// After cancelling, how long tasks get to report `cancelled`.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// What `kvbench run` needs, already validated.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub url: Uri,
    pub rate: f64,
    pub duration: Duration,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub label: String,
    pub timeout: Duration,
    pub max_in_flight: u64,
    pub interval: Duration,
    pub samples_csv: Option<PathBuf>,
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

/// The collector task: folds samples as they arrive, refreshes the progress display, and ends
/// when every sender is gone (or `done` says the stragglers are abandoned).
fn spawn_collector(
    mut c: Collector,
    mut rx: mpsc::UnboundedReceiver<Sample>,
    mut csv: Option<CsvOut>,
    mut progress: Progress,
    in_flight: Arc<AtomicU64>,
    mut done: watch::Receiver<bool>,
) -> JoinHandle<(Collector, Option<std::io::Error>)> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut csv_error = None;
        loop {
            tokio::select! {
                s = rx.recv() => match s {
                    Some(s) => {
                        c.record(&s);
                        if let (Some(w), None) = (csv.as_mut(), &csv_error) {
                            csv_error = sample::write_csv(w, &s).err();
                        }
                    }
                    None => break,
                },
                _ = tick.tick() => progress.update(&c.snapshot(), in_flight.load(Ordering::Relaxed)),
                _ = done.wait_for(|d| *d) => {
                    // Tasks that outlived the cancel grace: take what already arrived.
                    while let Ok(s) = rx.try_recv() {
                        c.record(&s);
                    }
                    break;
                }
            }
        }
        progress.finish();
        if let Some(mut w) = csv {
            if csv_error.is_none() {
                csv_error = w.flush().err();
            }
        }
        (c, csv_error)
    })
}

/// What the pacer thread reports when the schedule ends.
struct Sent {
    lag_us: Hist,
    interrupted: bool,
    send_window: Duration,
}

/// Everything the pacer thread hands each request.
struct Fire {
    runtime: tokio::runtime::Handle,
    attacker: Attacker,
    tx: mpsc::UnboundedSender<Sample>,
    in_flight: Arc<AtomicU64>,
    max_in_flight: u64,
    cancel: watch::Receiver<bool>,
    sigints: Arc<AtomicU64>,
}

/// The schedule, on its own OS thread: thread sleeps are precise to tens of microseconds, tokio's
/// timer only to a millisecond, which at 2,000 req/s would be two whole periods.
fn spawn_pacer(
    pacer: Pacer,
    start: Instant,
    planned: Duration,
    f: Fire,
) -> std::thread::JoinHandle<Sent> {
    std::thread::spawn(move || {
        let mut lag_us = Hist::default();
        let mut interrupted = false;
        'schedule: for offset in pacer {
            let intended = start + offset;
            loop {
                if f.sigints.load(Ordering::SeqCst) > 0 {
                    interrupted = true;
                    break 'schedule;
                }
                let now = Instant::now();
                if now >= intended {
                    break;
                }
                // Short naps so Ctrl-C is seen promptly even at very low rates.
                std::thread::sleep((intended - now).min(Duration::from_millis(50)));
            }
            lag_us.record(pacer::lag(intended, Instant::now()).as_micros() as u64);
            let intended_us = offset.as_micros() as u64;
            if f.in_flight.load(Ordering::SeqCst) >= f.max_in_flight {
                let detail = format!("--max-in-flight {} reached", f.max_in_flight);
                let _ = f.tx.send(Sample::failure(
                    intended_us,
                    0,
                    FailureKind::NotSent,
                    detail,
                ));
                continue;
            }
            f.in_flight.fetch_add(1, Ordering::SeqCst);
            let (attacker, tx, in_flight, cancel) = (
                f.attacker.clone(),
                f.tx.clone(),
                f.in_flight.clone(),
                f.cancel.clone(),
            );
            f.runtime.spawn(async move {
                let _ = tx.send(attacker.hit(intended, intended_us, cancel).await);
                in_flight.fetch_sub(1, Ordering::SeqCst);
            });
        }
        let send_window = if interrupted {
            start.elapsed()
        } else {
            start.elapsed().max(planned)
        };
        Sent {
            lag_us,
            interrupted,
            send_window,
        }
    })
}

/// Waits for the requests in flight (each has its own timeout, so this ends); a (second) Ctrl-C
/// cuts it short and cancels them. Returns whether it was cut short and how many never reported.
async fn drain(
    in_flight: &AtomicU64,
    sigints: &Sigints,
    timeout: Duration,
    cancel: &watch::Sender<bool>,
) -> (bool, u64) {
    let deadline = tokio::time::Instant::now() + timeout + DRAIN_SLACK;
    let at_drain = sigints.get();
    let mut cut_short = false;
    while in_flight.load(Ordering::Relaxed) > 0 && tokio::time::Instant::now() < deadline {
        if sigints.get() > at_drain {
            cut_short = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if in_flight.load(Ordering::Relaxed) > 0 {
        let _ = cancel.send(true);
        let deadline = tokio::time::Instant::now() + CANCEL_GRACE;
        while in_flight.load(Ordering::Relaxed) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    (cut_short, in_flight.load(Ordering::Relaxed))
}

/// Runs the load and returns this run's report (partial when interrupted).
pub async fn run(cfg: RunConfig, mut progress: Progress) -> anyhow::Result<Report> {
    let pacer = Pacer::new(cfg.rate, cfg.duration).context("--rate/--duration")?;
    let max_idle = cfg.max_in_flight.min(1024) as usize;
    let attacker = Attacker::new(&cfg.url, &cfg.headers, cfg.timeout, max_idle)?;
    let csv = open_csv(cfg.samples_csv.as_deref())?;
    let (tx, rx) = mpsc::unbounded_channel::<Sample>();
    let in_flight = Arc::new(AtomicU64::new(0));
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let (done_tx, done_rx) = watch::channel(false);
    let sigints = Sigints::install()?;
    progress.started(&format!(
        "kvbench: {} req/s to {} for {} (label {}); Ctrl-C stops and writes a partial report",
        cfg.rate,
        cfg.url,
        humantime::format_duration(cfg.duration),
        cfg.label
    ));
    let collector = spawn_collector(
        Collector::new(cfg.interval, cfg.timeout),
        rx,
        csv,
        progress,
        in_flight.clone(),
        done_rx,
    );

    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let start = Instant::now();
    let fire = Fire {
        runtime: tokio::runtime::Handle::current(),
        attacker,
        tx: tx.clone(),
        in_flight: in_flight.clone(),
        max_in_flight: cfg.max_in_flight,
        cancel: cancel_rx,
        sigints: sigints.counter(),
    };
    let pacer_thread = spawn_pacer(pacer, start, cfg.duration, fire);
    let sent = tokio::task::spawn_blocking(move || pacer_thread.join())
        .await
        .context("waiting for the pacer")?
        .map_err(|_| anyhow::anyhow!("the pacer thread panicked"))?;

    let (cut_short, stuck) = drain(&in_flight, &sigints, cfg.timeout, &cancel_tx).await;
    drop(sigints);
    drop(tx);
    if stuck > 0 {
        eprintln!(
            "kvbench: {stuck} request(s) ignored cancellation and are missing from the report"
        );
        let _ = done_tx.send(true);
    }
    let (collector, csv_error) = collector.await.context("the collector panicked")?;
    if let Some(e) = csv_error {
        eprintln!("kvbench: samples.csv is incomplete: {e}");
    }
    Ok(collector.finish(RunInfo {
        label: cfg.label.clone(),
        url: cfg.url.to_string(),
        started_at,
        requested_rate: cfg.rate,
        planned_duration_s: cfg.duration.as_secs_f64(),
        send_window_s: sent.send_window.as_secs_f64(),
        elapsed_s: start.elapsed().as_secs_f64(),
        timeout_s: cfg.timeout.as_secs_f64(),
        max_in_flight: cfg.max_in_flight,
        interrupted: sent.interrupted || cut_short,
        pacer_lag_us: sent.lag_us,
        engine: "kvbench".into(),
        latency_from: "intended".into(),
        import: None,
    }))
}
