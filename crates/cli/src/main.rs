//! `kvbench`: the command-line entry point — parses flags and hands each subcommand to the library.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser as _;

use kvbench::args::{
    report_path, Cli, Command, ImportSource, MergeArgs, PriceArgs, RunArgs, WorkerArgs,
};
use kvbench::describe;
use kvbench::import::{import_k6, ImportOptions};
use kvbench::import_worker::{import_worker, Archive, WorkerImport};
use kvbench::progress::Progress;
use kvbench::run::{self, RunConfig};
use kvbench_report::prices::PriceTable;
use kvbench_report::print;
use kvbench_report::report::{MergeError, RawData, Report};
use kvbench_report::Analysed;

/// Exit code of a run stopped by Ctrl-C (128 + SIGINT), after its partial report is written.
const EXIT_INTERRUPTED: u8 = 130;

/// The report with what derives from it: the cost over a price table, the summary and history
/// every printer shows.
fn derive(r: Report, price: &PriceArgs) -> anyhow::Result<Analysed> {
    let table = PriceTable::load(price.prices.as_deref())?;
    Ok(kvbench_report::derive(
        r,
        &table,
        price.project_rps,
        &price.deployment(),
    ))
}

/// report.json, the charts and report.html into `dir`, then the terminal report.
fn publish(a: &Analysed, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    a.write(&dir.join("report.json"))?;
    print::write_files(a, dir)?;
    print::text::render(&a.report, &a.derived, &mut std::io::stdout().lock())?;
    println!(
        "\nwrote {} (report.html, report.json, charts)",
        dir.display()
    );
    Ok(())
}

fn run_command(a: RunArgs) -> anyhow::Result<ExitCode> {
    if let Err(e) = kvbench::args::refuse_credentials(&a.urls) {
        eprintln!("kvbench: error: {e}");
        return Ok(ExitCode::from(2));
    }
    let headers = match a.parsed_headers() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("kvbench: error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    // Fail on a bad price file before spending the run's time.
    PriceTable::load(a.price.prices.as_deref())?;
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("--out: cannot create {}", a.out.display()))?;
    let interval = a.interval.for_run(a.duration);
    let (timeout, why) = a.timeout();
    if a.timeout.is_none() {
        eprintln!(
            "kvbench: --timeout {} = {why}",
            humantime::format_duration(timeout)
        );
    }
    let headers_for_describe = headers.clone();
    let cfg = RunConfig {
        urls: a.urls.clone(),
        rate: a.rate,
        duration: a.duration,
        headers,
        label: a.label.clone(),
        timeout,
        max_in_flight: a.max_in_flight(),
        connections: a.connections(),
        threads: a.threads,
        max_concurrent: a.max_concurrent,
        interval,
        samples_csv: a.samples_csv.then(|| a.out.join("samples.csv")),
    };
    // The main thread collects and reports; the shards send from threads of their own.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let progress = Progress::new(a.duration, interval);
    let mut r = runtime.block_on(run::run(cfg, progress))?;
    // Where, when and with what it ran: asked of the first URL's worker once the run is over.
    let url = &a.urls[0];
    let index =
        (!a.no_describe).then(|| runtime.block_on(describe::index(url, &headers_for_describe)));
    let mut raw = vec![RawData {
        what: "report.json (every histogram)".into(),
        href: "report.json".into(),
    }];
    if a.samples_csv {
        raw.push(RawData {
            what: "samples.csv (one row per request and store)".into(),
            href: "samples.csv".into(),
        });
    }
    r.provenance = Some(describe::provenance(url, index, raw));
    let interrupted = r.runs.iter().any(|r| r.interrupted);
    publish(&derive(r, &a.price)?, &a.out)?;
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    Ok(if interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

fn main_inner() -> anyhow::Result<ExitCode> {
    match Cli::parse().command {
        Command::Run(a) => run_command(a),
        Command::Report(a) => {
            let path = report_path(&a.dir);
            let r = derive(Report::read(&path)?, &a.price)?;
            if !a.no_charts {
                let dir = path.parent().unwrap_or(Path::new("."));
                print::write_files(&r, dir)?;
            }
            print::text::render(&r.report, &r.derived, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Import(a) => match a.source {
            ImportSource::K6(k) => {
                PriceTable::load(k.price.prices.as_deref())?;
                let options = ImportOptions {
                    label: k.label.clone(),
                    interval: k.interval.fixed(),
                };
                let r = import_k6(&k.files, &options)?;
                publish(&derive(r, &k.price)?, &k.out)?;
                Ok(ExitCode::SUCCESS)
            }
            ImportSource::Worker(w) => import_worker_command(&w),
        },
        Command::Merge(a) => merge_command(&a),
        Command::Fresh(a) => fresh_command(a),
        Command::Cost(a) => {
            let r = derive(Report::read(&report_path(&a.dir))?, &a.price)?;
            print::text::render_cost(
                r.derived.cost.as_ref().expect("just computed"),
                &mut std::io::stdout().lock(),
            )?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `kvbench fresh`: the rounds, added to the report in `--out` (a new one when there is none).
fn fresh_command(a: kvbench::args::FreshArgs) -> anyhow::Result<ExitCode> {
    let headers: Result<Vec<_>, String> = a
        .headers
        .iter()
        .enumerate()
        .map(|(i, h)| {
            kvbench::args::parse_header(h).map_err(|e| format!("--header #{}: {e}", i + 1))
        })
        .collect();
    let stores: Result<Vec<&'static str>, String> = a
        .stores
        .split(',')
        .map(|s| {
            kvbench_core::StoreId::parse(s.trim())
                .map(|id| id.as_str())
                .ok_or_else(|| format!("--stores: {:?} is not a store", s.trim()))
        })
        .collect();
    let (headers, stores) = match (headers, stores) {
        (Ok(h), Ok(s)) => (h, s),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("kvbench: error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    PriceTable::load(a.price.prices.as_deref())?;
    let member = |(label, url): (String, hyper::Uri)| kvbench::fresh::Member { label, url };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let cfg = kvbench::fresh::FreshConfig {
        writer: member(a.writer),
        readers: a.readers.into_iter().map(member).collect(),
        variants: kvbench::fresh::variants(&stores),
        rounds: a.rounds,
        interval: a.interval,
        limit: a.limit,
        headers,
        session: format!("{:x}", nanos % (1 << 40)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let rounds = runtime.block_on(kvbench::fresh::run(&cfg));
    let path = a.out.join("report.json");
    let mut r = if path.exists() {
        Report::read(&path)?
    } else {
        Report::empty()
    };
    r.freshness.extend(rounds);
    publish(&derive(r, &a.price)?, &a.out)?;
    Ok(ExitCode::SUCCESS)
}

/// `kvbench import worker`: a deployed worker's kept answers (its probes', or a run's) into a
/// report.
fn import_worker_command(w: &WorkerArgs) -> anyhow::Result<ExitCode> {
    PriceTable::load(w.price.prices.as_deref())?;
    if let Some(run) = &w.run {
        kvbench_core::operations::runs::parse_run("--run", run)
            .map_err(|e| anyhow::anyhow!("{}: {}", e.parameter, e.message))?;
    }
    let import = WorkerImport {
        url: w.url.clone(),
        archive: match &w.run {
            Some(id) => Archive::Run(id.clone()),
            None => Archive::Probes,
        },
        since: w.since.clone(),
        until: w.until.clone(),
        token: std::env::var(&w.token_env)
            .ok()
            .filter(|t| !t.trim().is_empty()),
        interval: w.interval.fixed(),
        max_concurrent: w.max_concurrent,
        limits: w.limits.limits(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let r = runtime.block_on(import_worker(&import))?;
    publish(&derive(r, &w.price)?, &w.out)?;
    Ok(ExitCode::SUCCESS)
}

/// `kvbench merge`: several reports into one, naming the file whose counts could not be added.
fn merge_command(a: &MergeArgs) -> anyhow::Result<ExitCode> {
    let reports = a
        .reports
        .iter()
        .map(|p| Report::read(&report_path(p)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let merged = Report::merge(reports).map_err(|e| match e {
        // Name the file whose counts could not be added.
        MergeError::Add { report, error } => {
            let path = a
                .reports
                .get(report.saturating_sub(1))
                .map(|p| report_path(p));
            match path {
                Some(p) => anyhow::anyhow!("merge: {}: {error}", p.display()),
                None => anyhow::anyhow!("merge: {error}"),
            }
        }
        other => anyhow::anyhow!("merge: {other}"),
    })?;
    publish(&derive(merged, &a.price)?, &a.out)?;
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    match main_inner() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kvbench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
