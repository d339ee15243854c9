//! `kvbench`: the command-line entry point — parses flags and hands each subcommand to the library.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser as _;

use kvbench::args::{report_path, Cli, Command, PriceArgs, RunArgs};
use kvbench::cost::{self, PriceTable};
use kvbench::progress::Progress;
use kvbench::report::{self, Report};
use kvbench::run::{self, RunConfig};

/// Exit code of a run stopped by Ctrl-C (128 + SIGINT), after its partial report is written.
const EXIT_INTERRUPTED: u8 = 130;

fn with_cost(mut r: Report, price: &PriceArgs) -> anyhow::Result<Report> {
    let table = PriceTable::load(price.prices.as_deref())?;
    r.cost = Some(cost::estimate(&r.total, &table, price.project_rps));
    Ok(r)
}

/// report.json + charts into `dir`, then the terminal report.
fn publish(r: &Report, dir: &Path, charts: bool) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    r.write(&dir.join("report.json"))?;
    if charts {
        kvbench::chart::write_all(r, dir)?;
    }
    report::render(r, &mut std::io::stdout().lock())?;
    println!("\nwrote {}", dir.display());
    Ok(())
}

fn run_command(a: RunArgs) -> anyhow::Result<ExitCode> {
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
    let cfg = RunConfig {
        url: a.url.clone(),
        rate: a.rate,
        duration: a.duration,
        headers,
        label: a.label.clone(),
        timeout: a.timeout,
        max_in_flight: a.max_in_flight,
        interval: a.interval,
        samples_csv: a.samples_csv.then(|| a.out.join("samples.csv")),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let progress = Progress::new(a.duration, a.interval);
    let r = runtime.block_on(run::run(cfg, progress))?;
    let interrupted = r.runs.iter().any(|r| r.interrupted);
    let r = with_cost(r, &a.price)?;
    publish(&r, &a.out, true)?;
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
            let r = with_cost(Report::read(&path)?, &a.price)?;
            let dir = path.parent().unwrap_or(Path::new("."));
            if a.no_charts {
                report::render(&r, &mut std::io::stdout().lock())?;
            } else {
                kvbench::chart::write_all(&r, dir)?;
                report::render(&r, &mut std::io::stdout().lock())?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Merge(a) => {
            let reports = a
                .reports
                .iter()
                .map(|p| Report::read(&report_path(p)))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let merged = kvbench::merge::merge(reports)?;
            publish(&with_cost(merged, &a.price)?, &a.out, true)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Cost(a) => {
            let r = with_cost(Report::read(&report_path(&a.dir))?, &a.price)?;
            cost::render(
                r.cost.as_ref().expect("just computed"),
                &mut std::io::stdout().lock(),
            )?;
            Ok(ExitCode::SUCCESS)
        }
    }
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
