//! The report of a synthetic fleet, natively: peak heap and CPU time of folding the kept answers
//! of `--labels` vantage points answering every `--every` seconds over `--window` seconds into a
//! report, and of rendering report.html — the same code the report worker runs behind
//! `GET /report`. `cargo run --release -p kvbench-report --example fleet_report -- --labels 42
//! --every 300 --window 86400` (docs/probes.md's table, "Memory of a render", is made with it); `--html PATH` also writes the
//! page (and its text report and report.json beside it) to look at; `--bill [--prices FILE]` prints the probes'
//! monthly bill of that fleet; `--slower-from DAY` makes region-03's kv reads half as slow
//! again from that day of the window on (0 the first), for the History section to mark.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kvbench_report::kept::{Aggregate, Kept, Source};

struct Counting;
static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn cpu() -> Duration {
    let mut t = libc_timespec::default();
    // SAFETY: clock_gettime writes one timespec.
    unsafe { clock_gettime(2, &mut t) };
    Duration::new(t.sec as u64, t.nsec as u32)
}

#[repr(C)]
#[derive(Default)]
struct libc_timespec {
    sec: i64,
    nsec: i64,
}
extern "C" {
    fn clock_gettime(clock: i32, t: *mut libc_timespec) -> i32;
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name}: a number")))
        .unwrap_or(default)
}

const STORES: [&str; 8] = [
    "kv", "upstash", "redis", "denokv", "do", "d1", "r2", "cache",
];

fn main() {
    let labels = arg("--labels", 42);
    let every = arg("--every", 300);
    let window = arg("--window", 86_400);
    let origin_ms: i64 = 1_790_000_000_000;
    let cpu0 = cpu();
    let wall0 = Instant::now();
    let mut agg = Aggregate::new(
        origin_ms,
        kvbench_report::kept::timeline_interval(Duration::from_secs(window)),
    );
    let slower_from = arg("--slower-from", u64::MAX);
    let answers = push_answers(&mut agg, (labels, every, window, slower_from), origin_ms);
    let source = Source {
        url: "https://kvbench.example".into(),
        engine: "probes".into(),
        read_from: "synthetic".into(),
    };
    let report = agg.finish(&source).expect("report").expect("answers");
    let fold_peak = PEAK.load(Ordering::Relaxed);
    let fold_cpu = cpu() - cpu0;
    let report = kvbench_report::derive(
        report,
        &kvbench_report::prices::PriceTable::default_table().expect("the embedded prices"),
        None,
        &kvbench_report::cost::Deployment::default(),
    );
    let derive_peak = PEAK.load(Ordering::Relaxed);
    let html = kvbench_report::print::page(&report).expect("page");
    if let Some(i) = std::env::args().position(|a| a == "--html") {
        let path = std::env::args().nth(i + 1).expect("--html PATH");
        write_page(&report, &html, &path);
    }
    if std::env::args().any(|a| a == "--bill") {
        print_bill(&report, labels, every);
    }
    let total_cpu = cpu() - cpu0;
    println!(
        "labels {labels}, every {every} s, window {window} s: {answers} answers, {} intervals of {} s\n\
         fold:   peak heap {:.1} MB, cpu {:.2} s\n\
         derive: peak heap {:.1} MB\n\
         render: peak heap {:.1} MB, cpu {:.2} s total (wall {:.2} s), page {:.1} MB",
        report.report.timeline.intervals.len(),
        report.report.timeline.interval_s,
        fold_peak as f64 / 1e6,
        fold_cpu.as_secs_f64(),
        derive_peak as f64 / 1e6,
        PEAK.load(Ordering::Relaxed) as f64 / 1e6,
        total_cpu.as_secs_f64(),
        wall0.elapsed().as_secs_f64(),
        html.len() as f64 / 1e6
    );
    print_days(&report.report);
}

/// `--html PATH`: the page, and beside it the text report (`PATH.txt`) and report.json
/// (`PATH.json`).
fn write_page(report: &kvbench_report::Analysed, html: &str, path: &str) {
    std::fs::write(path, html).expect("write the page");
    let mut text = Vec::new();
    kvbench_report::print::text::render(&report.report, &report.derived, &mut text).expect("text");
    std::fs::write(format!("{path}.txt"), text).expect("write the text");
    let json = serde_json::to_string(report).expect("the report serializes");
    std::fs::write(format!("{path}.json"), json).expect("write report.json");
}

/// `--bill [--prices FILE]`: the probes' monthly bill of this fleet (a week kept, 1.5 KB a
/// line), with the embedded price table or another (an older one, to compare).
fn print_bill(report: &kvbench_report::Analysed, labels: u64, every: u64) {
    let table = match std::env::args().position(|a| a == "--prices") {
        Some(i) => {
            let path = std::env::args().nth(i + 1).expect("--prices FILE");
            kvbench_report::prices::PriceTable::parse(&std::fs::read_to_string(path).expect("read"))
                .expect("a price table")
        }
        None => kvbench_report::prices::PriceTable::default_table().expect("the embedded prices"),
    };
    let usage = kvbench_report::bill::ProbeUsage {
        points: labels as f64,
        every_s: every as f64,
        stored_s: 7.0 * 86_400.0 + 3_600.0,
        line_bytes: 1_500.0,
    };
    let bill = kvbench_report::bill::bill(&report.report, &table, usage, None);
    println!(
        "{}",
        serde_json::to_string_pretty(&bill).expect("the bill serializes")
    );
}

/// How many day histograms the report holds, and their size in report.json.
fn print_days(report: &kvbench_report::report::Report) {
    let days: usize = report
        .days
        .0
        .values()
        .flat_map(|l| l.values())
        .map(|s| s.len())
        .sum();
    let days_json = serde_json::to_string(&report.days)
        .expect("days serialize")
        .len();
    println!(
        "days:   {} dates, {days} histograms, {:.2} MB in report.json",
        report.days.0.len(),
        days_json as f64 / 1e6
    );
}

/// Pushes `labels` vantage points' synthetic kept answers, one every `every` s over `window` s,
/// into `agg` (region-03's kv 1.5 times as slow from day `slower_from`); returns how many.
fn push_answers(
    agg: &mut Aggregate,
    (labels, every, window, slower_from): (u64, u64, u64, u64),
    origin_ms: i64,
) -> u64 {
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut answers = 0u64;
    let mut line = String::new();
    for l in 0..labels {
        let label = format!("region-{l:02}");
        let colo = format!("C{:02}", l % 30);
        for i in 0..window / every {
            let t = origin_ms + (i * every * 1000 + l * 37) as i64;
            line.clear();
            // A few members whose placement did not apply (one answer in 5 of every 7th label) or
            // landed in another metro (one in 3 of every 11th): counted apart in the report.
            let (placement, check) = if l % 7 == 3 && i % 5 == 0 {
                (format!("local-{colo}"), "unplaced")
            } else if l % 11 == 5 && i % 3 == 0 {
                ("remote-XYZ".to_string(), "elsewhere")
            } else {
                (format!("remote-{colo}"), "placed")
            };
            line.push_str(&format!(
                r#"{{"seq":{i},"t_ms":{t},"label":"{label}","vantage":"member","colo":"{colo}","placement":"{placement}","placement_check":"{check}","cold":{},"handler_ms":{},"answer":{{"key":"{}","colo":"{colo}","isolate_requests":2,"stores":{{"#,
                i % 2 == 0,
                20 + next() % 200,
                next() % 1000
            ));
            for (s, store) in STORES.iter().enumerate() {
                let hit = next() % 10 != 0;
                let mut read = (1 + next() % 4000) as f64 / 10.0 * (s + 1) as f64;
                if l == 3 && s == 0 && i * every / 86_400 >= slower_from {
                    read = (read * 15.0).round() / 10.0;
                }
                let write = if hit {
                    "null".to_string()
                } else {
                    format!("{}", (next() % 9000) as f64 / 10.0)
                };
                line.push_str(&format!(
                    r#"{}"{store}":{{"read_ms":{read},"hit":{hit},"value_bytes":{},"write_ms":{write},"error":null}}"#,
                    if s == 0 { "" } else { "," },
                    if hit { 4096 + next() % 61440 } else { 0 },
                ));
            }
            line.push_str("}}}");
            agg.push(&Kept::parse(line.as_bytes()).expect("a kept line"));
            answers += 1;
        }
    }
    answers
}
