//! A synthetic k6 `--out json` file in the exact shape k6 v1.1.0 writes for `k6/kvbench.js`, for
//! `bench-import.sh` (the import benchmark); and a check of an import's `report.json` against
//! what was written.
//!
//! Per iteration, like k6: the HTTP sample container (`http_reqs`, `http_req_duration`,
//! `http_req_blocked`, `http_req_connecting`, `http_req_tls_handshaking`, `http_req_sending`,
//! `http_req_waiting`, `http_req_receiving`, `http_req_failed`, one timestamp), then the script's
//! points one by one (per store `kvbench_store_value_bytes`, `kvbench_store_read_ms`,
//! `kvbench_store_write_ms` on a miss, sometimes `kvbench_store_connect_ms` and
//! `kvbench_store_errors`; last `kvbench_request_ms`), then the iteration container (`data_sent`,
//! `data_received`, `iteration_duration`, `iterations`); every point carries the metadata
//! `kvbench_req` = "VU:ITER". Tags are in k6's (sorted) order, each with `load_zone`; a metric's
//! `{"type":"Metric",...}` line comes before its first point; `vus`/`vus_max` every second per
//! zone; `dropped_iterations` for some arrivals. Iterations of all VUs of all zones are written
//! in time order of their sample containers, so concurrent iterations interleave as in k6.
//! Deterministic (xorshift), bounded memory (only in-flight iterations are held).
//!
//!   k6_synth gen --zones 20 --rate 10 --duration 1800 [--gzip] --out FILE --counts COUNTS.json
//!   k6_synth verify --counts COUNTS.json --report DIR/report.json

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use serde::{Deserialize, Serialize};

#[derive(Parser)]
#[command(about = "Synthetic k6 JSON output of k6/kvbench.js (for bench-import.sh)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Writes a synthetic file; prints its counts (JSON) on stdout.
    Gen {
        /// Load zones (tag `load_zone`), at most 20.
        #[arg(long, default_value_t = 20)]
        zones: usize,
        /// Arrivals per second per zone.
        #[arg(long, default_value_t = 10.0)]
        rate: f64,
        /// Seconds.
        #[arg(long, default_value_t = 1800)]
        duration: u64,
        /// Gzip the output (like `--out json=FILE.gz`).
        #[arg(long)]
        gzip: bool,
        /// Gzip level (k6 uses Go's default, 6).
        #[arg(long, default_value_t = 6)]
        gzip_level: u32,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        out: PathBuf,
        /// Also writes the counts here.
        #[arg(long)]
        counts: Option<PathBuf>,
    },
    /// Compares an import's report.json with the counts `gen` wrote; exits 1 on a mismatch.
    Verify {
        #[arg(long)]
        counts: PathBuf,
        #[arg(long)]
        report: PathBuf,
    },
}

const ZONES: [(&str, &str, u64); 20] = [
    // (load zone, Cloudflare colo it lands on, base latency to the worker in µs)
    ("amazon:us:ashburn", "IAD", 38_000),
    ("amazon:us:columbus", "ORD", 52_000),
    ("amazon:us:palo alto", "SJC", 45_000),
    ("amazon:us:portland", "SEA", 49_000),
    ("amazon:ca:montreal", "YUL", 56_000),
    ("amazon:br:sao paulo", "GRU", 95_000),
    ("amazon:ie:dublin", "DUB", 61_000),
    ("amazon:gb:london", "LHR", 47_000),
    ("amazon:de:frankfurt", "FRA", 42_000),
    ("amazon:fr:paris", "CDG", 44_000),
    ("amazon:it:milan", "MXP", 58_000),
    ("amazon:se:stockholm", "ARN", 66_000),
    ("amazon:in:mumbai", "BOM", 140_000),
    ("amazon:sg:singapore", "SIN", 120_000),
    ("amazon:jp:tokyo", "NRT", 110_000),
    ("amazon:kr:seoul", "ICN", 125_000),
    ("amazon:au:sydney", "SYD", 180_000),
    ("amazon:cn:hong kong", "HKG", 130_000),
    ("amazon:za:cape town", "CPT", 210_000),
    ("amazon:bh:bahrain", "BAH", 160_000),
];

/// (store, base read µs, value bytes)
const STORES: [(&str, u64, u64); 3] = [
    ("kv", 9_000, 4096),
    ("upstash", 14_000, 4096),
    ("denokv", 11_000, 4096),
];

const SCENARIO: &str = "kvbench";
const URL: &str = "https://kvbench.example.workers.dev/test";
/// 2026-11-30T02:00:00Z
const EPOCH_S: u64 = 1_796_004_000;

// Probabilities per arrival / iteration / store.
const P_DROPPED: f64 = 0.0005;
const P_NON_200: f64 = 0.004;
const P_MALFORMED: f64 = 0.001;
const P_HIT: f64 = 0.92;
const P_STORE_ERROR: f64 = 0.003;
const P_CONNECT: f64 = 0.01;
const P_NEW_CONN: f64 = 0.02;
const P_SLOW: f64 = 0.01;

/// k6's metric definitions: (name, type, contains, submetrics).
const METRICS: [(&str, &str, &str, &str); 22] = [
    ("kvbench_config", "gauge", "default", "null"),
    ("data_sent", "counter", "data", "null"),
    ("data_received", "counter", "data", "null"),
    ("http_reqs", "counter", "default", "null"),
    (
        "http_req_duration",
        "trend",
        "time",
        r#"[{"name":"http_req_duration{expected_response:true}","suffix":"expected_response:true","tags":{"expected_response":"true"}}]"#,
    ),
    ("http_req_blocked", "trend", "time", "null"),
    ("http_req_connecting", "trend", "time", "null"),
    ("http_req_tls_handshaking", "trend", "time", "null"),
    ("http_req_sending", "trend", "time", "null"),
    ("http_req_waiting", "trend", "time", "null"),
    ("http_req_receiving", "trend", "time", "null"),
    ("http_req_failed", "rate", "default", "null"),
    ("kvbench_store_value_bytes", "trend", "default", "null"),
    ("kvbench_store_read_ms", "trend", "time", "null"),
    ("kvbench_store_write_ms", "trend", "time", "null"),
    ("kvbench_store_connect_ms", "trend", "time", "null"),
    ("kvbench_store_errors", "counter", "default", "null"),
    ("kvbench_request_ms", "trend", "time", "null"),
    ("iteration_duration", "trend", "time", "null"),
    ("iterations", "counter", "default", "null"),
    ("dropped_iterations", "counter", "default", "null"),
    ("vus", "gauge", "default", "null"),
];
const VUS_MAX: &str = "vus_max";

#[derive(Serialize, Deserialize, Default, Debug, Clone, PartialEq)]
struct StoreCounts {
    answers: u64,
    reads: u64,
    writes: u64,
    errors: BTreeMap<String, u64>,
}

#[derive(Serialize, Deserialize, Default, Debug, Clone, PartialEq)]
struct ZoneCounts {
    /// Arrivals: iterations + dropped.
    scheduled: u64,
    /// Iterations run (requests sent).
    iterations: u64,
    answered: u64,
    dropped: u64,
    /// By kvbench's failure key: http_503, malformed, not_sent, ...
    failures: BTreeMap<String, u64>,
    stores: BTreeMap<String, StoreCounts>,
}

impl ZoneCounts {
    fn add(&mut self, o: &ZoneCounts) {
        self.scheduled += o.scheduled;
        self.iterations += o.iterations;
        self.answered += o.answered;
        self.dropped += o.dropped;
        for (k, v) in &o.failures {
            *self.failures.entry(k.clone()).or_default() += v;
        }
        for (k, s) in &o.stores {
            let t = self.stores.entry(k.clone()).or_default();
            t.answers += s.answers;
            t.reads += s.reads;
            t.writes += s.writes;
            for (e, n) in &s.errors {
                *t.errors.entry(e.clone()).or_default() += n;
            }
        }
    }
}

#[derive(Serialize, Deserialize, Default, Debug)]
struct Counts {
    zones_n: usize,
    rate_per_zone: f64,
    duration_s: u64,
    /// Lines and bytes of the uncompressed JSON.
    lines: u64,
    bytes: u64,
    /// Bytes on disk (compressed when gzip).
    file_bytes: u64,
    gzip: bool,
    total: ZoneCounts,
    zones: BTreeMap<String, ZoneCounts>,
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    fn f(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
    /// A log-normal-ish factor around 1 (median 1).
    fn spread(&mut self, sigma: f64) -> f64 {
        // Sum of 4 uniforms ≈ normal (mean 2, sd 0.577).
        let n = (self.f() + self.f() + self.f() + self.f() - 2.0) / 0.577;
        (n * sigma).exp()
    }
}

/// RFC 3339 with nanoseconds, trailing zeros trimmed, like Go's RFC3339Nano (k6's JSON output).
fn push_time(out: &mut String, ns: u64) {
    let secs = ns / 1_000_000_000;
    let frac = ns % 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let _ = write!(
        out,
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    );
    if frac != 0 {
        let mut digits = format!("{frac:09}");
        while digits.ends_with('0') {
            digits.pop();
        }
        out.push('.');
        out.push_str(&digits);
    }
    out.push('Z');
}

/// Milliseconds from nanoseconds, as k6 computes them (float64(d) / float64(time.Millisecond)).
fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// One point line; `tags` are the inner of the tags object, already in k6's sorted order.
fn point(out: &mut String, metric: &str, ns: u64, value: f64, tags: &str, req: Option<(u32, u64)>) {
    out.push_str(r#"{"metric":""#);
    out.push_str(metric);
    out.push_str(r#"","type":"Point","data":{"time":""#);
    push_time(out, ns);
    let _ = write!(out, r#"","value":{value},"tags":{{{tags}}}"#);
    if let Some((vu, it)) = req {
        let _ = write!(out, r#","metadata":{{"kvbench_req":"{vu}:{it}"}}"#);
    }
    out.push_str("}}\n");
}

/// A run of lines with one timestamp (a k6 sample container or one custom point).
struct Chunk {
    ns: u64,
    seq: u64,
    text: String,
    /// The VU this chunk frees (the iteration's last chunk).
    release: Option<(usize, u32)>,
}

impl PartialEq for Chunk {
    fn eq(&self, o: &Self) -> bool {
        (self.ns, self.seq) == (o.ns, o.seq)
    }
}
impl Eq for Chunk {}
impl PartialOrd for Chunk {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Chunk {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.ns, self.seq).cmp(&(o.ns, o.seq))
    }
}

struct Zone {
    name: &'static str,
    colo: &'static str,
    base_us: u64,
    /// First arrival, ns since the epoch (zones start a few ms apart, like separate instances).
    start_ns: u64,
    next_arrival: u64,
    free: Vec<u32>,
    next_vu: u32,
    vu_base: u32,
    vus_max: u32,
    busy: u32,
    iters: Vec<u64>,
    counts: ZoneCounts,
}

/// Counts bytes written through it.
struct Counting<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(b)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The file, plain or gzip (finished explicitly, so a failure to write its end is an error).
enum Sink {
    Plain(BufWriter<File>),
    Gzip(flate2::write::GzEncoder<BufWriter<File>>),
}

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(b),
            Sink::Gzip(w) => w.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Gzip(w) => w.flush(),
        }
    }
}

struct Out {
    w: Counting<Sink>,
    lines: u64,
    unseen: Vec<&'static str>,
    def: String,
}

impl Out {
    /// Writes a chunk, each metric's definition line before its first point.
    fn chunk(&mut self, text: &str) -> std::io::Result<()> {
        if !self.unseen.is_empty() {
            for line in text.split_inclusive('\n') {
                let name = line
                    .strip_prefix(r#"{"metric":""#)
                    .and_then(|r| r.split('"').next())
                    .unwrap_or("");
                if let Some(i) = self.unseen.iter().position(|m| *m == name) {
                    self.unseen.swap_remove(i);
                    let (n, kind, contains, sub) = METRICS
                        .iter()
                        .copied()
                        .find(|m| m.0 == name)
                        .unwrap_or((VUS_MAX, "gauge", "default", "null"));
                    self.def.clear();
                    let _ = writeln!(
                        self.def,
                        r#"{{"type":"Metric","data":{{"name":"{n}","type":"{kind}","contains":"{contains}","thresholds":[],"submetrics":{sub}}},"metric":"{n}"}}"#
                    );
                    self.w.write_all(self.def.as_bytes())?;
                    self.lines += 1;
                }
                self.w.write_all(line.as_bytes())?;
                self.lines += 1;
            }
            return Ok(());
        }
        self.lines += text.bytes().filter(|&b| b == b'\n').count() as u64;
        self.w.write_all(text.as_bytes())
    }
}

impl Out {
    /// The output file, gzipped at `level` when `gzip`.
    fn create(path: &PathBuf, gzip: bool, level: u32) -> std::io::Result<Out> {
        let file = BufWriter::with_capacity(1 << 20, File::create(path)?);
        let sink = if gzip {
            Sink::Gzip(flate2::write::GzEncoder::new(
                file,
                flate2::Compression::new(level),
            ))
        } else {
            Sink::Plain(file)
        };
        Ok(Out {
            w: Counting {
                inner: sink,
                bytes: 0,
            },
            lines: 0,
            unseen: METRICS.iter().map(|m| m.0).chain([VUS_MAX]).collect(),
            def: String::new(),
        })
    }

    /// Flushes the file (and writes the gzip end).
    fn finish(self) -> std::io::Result<()> {
        match self.w.inner {
            Sink::Plain(mut f) => f.flush(),
            Sink::Gzip(gz) => gz.finish()?.flush(),
        }
    }
}

/// The first `n` zones, each starting a few ms after `t0`, with `vus` VUs to begin with.
fn new_zones(rng: &mut Rng, n: usize, vus: u32, t0: u64) -> Vec<Zone> {
    ZONES[..n]
        .iter()
        .enumerate()
        .map(|(i, &(name, colo, base_us))| Zone {
            name,
            colo,
            base_us,
            start_ns: t0 + 25_000_000 + rng.range(0, 40_000_000),
            next_arrival: 0,
            free: Vec::new(),
            next_vu: 0,
            vu_base: i as u32 * vus * 4,
            vus_max: vus,
            busy: 0,
            iters: Vec::new(),
            counts: ZoneCounts::default(),
        })
        .collect()
}

/// setup(): the config gauge and setup's data points, on the first zone's instance.
fn setup_points(text: &mut String, t0: u64, total_rate: f64, duration: u64, zone: &str) {
    let duration_tag = if duration.is_multiple_of(60) {
        format!("{}m", duration / 60)
    } else {
        format!("{duration}s")
    };
    point(
        text,
        "kvbench_config",
        t0,
        total_rate,
        &format!(
            r#""duration":"{duration_tag}","group":"::setup","load_zone":"{zone}","url":"{URL}""#
        ),
        None,
    );
    let setup_tags = format!(r#""group":"::setup","load_zone":"{zone}""#);
    point(text, "data_sent", t0 + 21_311, 0.0, &setup_tags, None);
    point(text, "data_received", t0 + 21_311, 0.0, &setup_tags, None);
}

/// Every zone's `vus` and `vus_max` at `ns`.
fn vus_points(text: &mut String, zones: &[Zone], ns: u64) {
    for z in zones {
        let tags = format!(r#""load_zone":"{}""#, z.name);
        point(text, "vus", ns, z.busy as f64, &tags, None);
        point(text, VUS_MAX, ns, z.vus_max as f64, &tags, None);
    }
}

/// An arrival of `z` at `at`: dropped (its point written to `text`, `None`), or started on a
/// free VU (a new one when none is free), its chunks returned.
fn arrive(
    rng: &mut Rng,
    zi: usize,
    z: &mut Zone,
    at: u64,
    text: &mut String,
) -> Option<Vec<Chunk>> {
    z.next_arrival += 1;
    z.counts.scheduled += 1;
    if rng.f() < P_DROPPED {
        z.counts.dropped += 1;
        *z.counts.failures.entry("not_sent".into()).or_default() += 1;
        text.clear();
        let tags = format!(r#""load_zone":"{}","scenario":"{SCENARIO}""#, z.name);
        point(text, "dropped_iterations", at + 61_000, 1.0, &tags, None);
        return None;
    }
    let vu = z.free.pop().unwrap_or_else(|| {
        z.next_vu += 1;
        z.vus_max = z.vus_max.max(z.next_vu);
        z.vu_base + z.next_vu
    });
    z.busy += 1;
    let slot = (vu - z.vu_base - 1) as usize;
    if z.iters.len() <= slot {
        z.iters.resize(slot + 1, 0);
    }
    let iter = z.iters[slot];
    z.iters[slot] += 1;
    z.counts.iterations += 1;
    let start = at + rng.range(20_000, 400_000);
    Some(iteration(rng, zi, z, vu, iter, start))
}

/// The run after setup(): every zone's arrivals every `gap_ns` (`per_zone` each), their
/// iterations' chunks in time order, and the VU gauges every second.
#[allow(clippy::too_many_arguments)]
fn write_iterations(
    out: &mut Out,
    rng: &mut Rng,
    zones: &mut [Zone],
    text: &mut String,
    t0: u64,
    duration: u64,
    gap_ns: u64,
    per_zone: u64,
) -> std::io::Result<()> {
    let mut heap: BinaryHeap<Reverse<Chunk>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut next_tick = EPOCH_S * 1_000_000_000 + 1_145_897_930;
    let end_ns = t0 + duration * 1_000_000_000 + 120_000_000_000;
    loop {
        // The earliest of: the next arrival of any zone, the next pending chunk, the next tick.
        let arrival = zones
            .iter()
            .enumerate()
            .filter(|(_, z)| z.next_arrival < per_zone)
            .map(|(i, z)| (z.start_ns + z.next_arrival * gap_ns, i))
            .min();
        let pending = heap.peek().map(|c| c.0.ns);
        let first = arrival.map(|a| a.0).into_iter().chain(pending).min();
        let Some(now) = first else { break };
        if next_tick <= now && next_tick < end_ns {
            text.clear();
            vus_points(text, zones, next_tick);
            out.chunk(text)?;
            next_tick += 1_000_000_000;
            continue;
        }
        if pending == Some(now) && arrival.is_none_or(|a| a.0 >= now) {
            let Reverse(c) = heap.pop().expect("peeked");
            out.chunk(&c.text)?;
            if let Some((zi, vu)) = c.release {
                let z = &mut zones[zi];
                z.free.push(vu);
                z.busy -= 1;
            }
            continue;
        }
        let (at, zi) = arrival.expect("an arrival is due");
        match arrive(rng, zi, &mut zones[zi], at, text) {
            None => out.chunk(text)?,
            Some(chunks) => {
                for c in chunks {
                    seq += 1;
                    heap.push(Reverse(Chunk { seq, ..c }));
                }
            }
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn gen(
    zones_n: usize,
    rate: f64,
    duration: u64,
    gzip: bool,
    level: u32,
    seed: u64,
    out_path: &PathBuf,
) -> anyhow::Result<Counts> {
    anyhow::ensure!(
        (1..=ZONES.len()).contains(&zones_n),
        "--zones must be 1..=20"
    );
    anyhow::ensure!(rate > 0.0, "--rate must be above 0");
    let mut out = Out::create(out_path, gzip, level)?;
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let t0 = EPOCH_S * 1_000_000_000 + 192_386_617;
    let gap_ns = (1e9 / rate).round() as u64;
    let per_zone = (rate * duration as f64).round() as u64;
    let vus = (rate * 2.0).ceil().max(10.0) as u32;
    let mut zones = new_zones(&mut rng, zones_n, vus, t0);

    let mut text = String::with_capacity(8192);
    setup_points(
        &mut text,
        t0,
        rate * zones_n as f64,
        duration,
        zones[0].name,
    );
    out.chunk(&text)?;

    write_iterations(
        &mut out, &mut rng, &mut zones, &mut text, t0, duration, gap_ns, per_zone,
    )?;

    let (lines, bytes) = (out.lines, out.w.bytes);
    out.finish()?;
    let mut counts = Counts {
        zones_n,
        rate_per_zone: rate,
        duration_s: duration,
        lines,
        bytes,
        file_bytes: std::fs::metadata(out_path)?.len(),
        gzip,
        ..Counts::default()
    };
    for z in zones {
        counts.total.add(&z.counts);
        counts.zones.insert(z.name.to_string(), z.counts);
    }
    Ok(counts)
}

/// An iteration's chunks as they are written: the text of the one being built, and the time.
struct Chunks {
    text: String,
    done: Vec<Chunk>,
    t: u64,
    /// The iteration's `kvbench_req` (VU, iteration).
    req: Option<(u32, u64)>,
}

impl Chunks {
    /// A point at the current time, in the chunk being built.
    fn point(&mut self, metric: &str, value: f64, tags: &str) {
        point(&mut self.text, metric, self.t, value, tags, self.req);
    }

    /// Closes the chunk being built, at the current time.
    fn flush(&mut self) {
        self.done.push(Chunk {
            ns: self.t,
            seq: 0,
            text: std::mem::take(&mut self.text),
            release: None,
        });
    }

    /// A point in a chunk of its own, then the script's gap before the next.
    fn alone(&mut self, rng: &mut Rng, metric: &str, value: f64, tags: &str) {
        self.point(metric, value, tags);
        self.flush();
        self.t += rng.range(4_000, 30_000);
    }
}

/// One iteration's HTTP request, as drawn.
struct Http {
    new_conn: bool,
    connecting: u64,
    tls: u64,
    blocked: u64,
    sending: u64,
    waiting: u64,
    receiving: u64,
    duration: u64,
    status: u16,
    /// `ok`, `malformed` or `http_<status>`.
    outcome: &'static str,
}

impl Http {
    /// The request of a zone whose round trip is `base_us`; `iter` 0 is a VU's first.
    fn draw(rng: &mut Rng, base_us: u64, iter: u64) -> Http {
        let new_conn = iter == 0 || rng.f() < P_NEW_CONN;
        let rtt = base_us * 1000 / 2;
        let (connecting, tls) = if new_conn {
            (
                (rtt as f64 * rng.spread(0.2)) as u64,
                (rtt as f64 * 1.6 * rng.spread(0.2)) as u64,
            )
        } else {
            (0, 0)
        };
        let blocked = connecting + tls + rng.range(1_500, 12_000);
        let mut latency = (base_us as f64 * 1000.0 * rng.spread(0.35)) as u64;
        if rng.f() < P_SLOW {
            latency *= rng.range(3, 12);
        }
        let sending = rng.range(15_000, 120_000);
        let receiving = rng.range(25_000, 450_000);
        let waiting = latency.saturating_sub(sending + receiving).max(1_000);
        let duration = sending + waiting + receiving;
        let roll = rng.f();
        let (status, outcome): (u16, &str) = if roll < P_NON_200 {
            match rng.next() % 10 {
                0..=6 => (503, "http_503"),
                7 | 8 => (500, "http_500"),
                _ => (429, "http_429"),
            }
        } else if roll < P_NON_200 + P_MALFORMED {
            (200, "malformed")
        } else {
            (200, "ok")
        };
        Http {
            new_conn,
            connecting,
            tls,
            blocked,
            sending,
            waiting,
            receiving,
            duration,
            status,
            outcome,
        }
    }

    fn failed(&self) -> bool {
        self.status != 200
    }

    /// k6's HTTP sample container, in the chunk being built.
    fn points(&self, w: &mut Chunks, zone: &str) {
        let failed = self.failed();
        let status = self.status;
        let http_tags = format!(
            r#"{}"expected_response":"{}","group":"","load_zone":"{zone}","method":"GET","name":"/test","proto":"HTTP/2.0","scenario":"{SCENARIO}","status":"{status}","url":"/test""#,
            if failed {
                format!(r#""error_code":"{}","#, 1000 + status)
            } else {
                String::new()
            },
            !failed,
        );
        for (metric, value) in [
            ("http_reqs", 1.0),
            ("http_req_duration", ms(self.duration)),
            ("http_req_blocked", ms(self.blocked)),
            ("http_req_connecting", ms(self.connecting)),
            ("http_req_tls_handshaking", ms(self.tls)),
            ("http_req_sending", ms(self.sending)),
            ("http_req_waiting", ms(self.waiting)),
            ("http_req_receiving", ms(self.receiving)),
            ("http_req_failed", if failed { 1.0 } else { 0.0 }),
        ] {
            w.point(metric, value, &http_tags);
        }
    }
}

/// One iteration of the script: its chunks, in order (seq is filled in by the caller).
fn iteration(rng: &mut Rng, zi: usize, z: &mut Zone, vu: u32, iter: u64, start: u64) -> Vec<Chunk> {
    let zone = z.name;
    let http = Http::draw(rng, z.base_us, iter);
    let mut w = Chunks {
        text: String::with_capacity(4096),
        done: Vec::with_capacity(16),
        t: start + http.blocked + http.duration,
        req: Some((vu, iter)),
    };
    http.points(&mut w, zone);
    w.flush();

    // The script's points: JSON.parse, then per store, then kvbench_request_ms.
    w.t += rng.range(60_000, 400_000);
    let colo = z.colo;
    let c = &mut z.counts;
    let request_tags = match http.outcome {
        "ok" => {
            c.answered += 1;
            for &(store, base_us, bytes) in &STORES {
                let s = c.stores.entry(store.to_string()).or_default();
                store_points(rng, &mut w, s, (store, base_us, bytes), colo, zone);
            }
            format!(
                r#""colo":"{colo}","group":"","load_zone":"{zone}","outcome":"ok","scenario":"{SCENARIO}""#
            )
        }
        failure => {
            *c.failures.entry(failure.to_string()).or_default() += 1;
            failure_tags(failure, zone)
        }
    };
    w.point("kvbench_request_ms", ms(http.duration), &request_tags);
    w.flush();
    end_points(rng, w, &http, zone, start, (zi, vu))
}

/// One store's points of an answered request, each in a chunk of its own: the value's size,
/// the read, the write on a miss, sometimes a connect and an error; counted in `s`.
fn store_points(
    rng: &mut Rng,
    w: &mut Chunks,
    s: &mut StoreCounts,
    (store, base_us, bytes): (&str, u64, u64),
    colo: &str,
    zone: &str,
) {
    s.answers += 1;
    let hit = rng.f() < P_HIT;
    let error = (rng.f() < P_STORE_ERROR).then(|| {
        let kind = ["timeout", "network", "rate_limited"][(rng.next() % 3) as usize];
        let op = if !hit && rng.next().is_multiple_of(3) {
            "write"
        } else {
            "read"
        };
        (kind, op)
    });
    let tags = format!(r#""colo":"{colo}","group":"","load_zone":"{zone}""#);
    let store_tag = format!(r#""scenario":"{SCENARIO}","store":"{store}""#);
    w.alone(
        rng,
        "kvbench_store_value_bytes",
        bytes as f64,
        &format!("{tags},{store_tag}"),
    );
    // Workers time with whole or coarse milliseconds; keep 3 decimals.
    let read_us = (base_us as f64 * rng.spread(0.5)) as u64;
    let result = match error {
        Some((_, "read")) => "error",
        _ if hit => "hit",
        _ => "miss",
    };
    s.reads += 1;
    w.alone(
        rng,
        "kvbench_store_read_ms",
        read_us as f64 / 1000.0,
        &format!(r#"{tags},"result":"{result}",{store_tag}"#),
    );
    if !hit {
        s.writes += 1;
        let write_us = (base_us as f64 * 1.8 * rng.spread(0.5)) as u64;
        let result = if matches!(error, Some((_, "write"))) {
            "error"
        } else {
            "ok"
        };
        w.alone(
            rng,
            "kvbench_store_write_ms",
            write_us as f64 / 1000.0,
            &format!(r#"{tags},"result":"{result}",{store_tag}"#),
        );
    }
    if rng.f() < P_CONNECT {
        let connect_us = (base_us as f64 * 2.5 * rng.spread(0.4)) as u64;
        w.alone(
            rng,
            "kvbench_store_connect_ms",
            connect_us as f64 / 1000.0,
            &format!("{tags},{store_tag}"),
        );
    }
    if let Some((kind, op)) = error {
        *s.errors.entry(format!("{kind}/{op}")).or_default() += 1;
        w.alone(
            rng,
            "kvbench_store_errors",
            1.0,
            &format!(
                r#""colo":"{colo}","group":"","kind":"{kind}","load_zone":"{zone}","op":"{op}",{store_tag}"#
            ),
        );
    }
}

/// `kvbench_request_ms`'s tags for a request that failed with `failure`.
fn failure_tags(failure: &str, zone: &str) -> String {
    let detail = match failure {
        "http_503" => r"worker overloaded \u0026 shedding load, retry later",
        "http_500" => r#"upstash: GET failed: {\"error\":\"ERR max requests limit exceeded\"}"#,
        "http_429" => "Too Many Requests",
        // k6 escapes <, > and & as Go's encoding/json does.
        _ => r"body is not JSON: invalid character '\u003c' looking for beginning of value",
    };
    format!(
        r#""detail":"{detail}","group":"","load_zone":"{zone}","outcome":"{failure}","scenario":"{SCENARIO}""#
    )
}

/// The iteration's end: k6's iteration container, the last chunk, which frees the VU.
fn end_points(
    rng: &mut Rng,
    mut w: Chunks,
    http: &Http,
    zone: &str,
    start: u64,
    release: (usize, u32),
) -> Vec<Chunk> {
    w.t += rng.range(3_000, 15_000);
    let tags = format!(r#""group":"","load_zone":"{zone}","scenario":"{SCENARIO}""#);
    let sent = rng.range(110, 140) + if http.new_conn { 520 } else { 0 };
    let received = if http.failed() {
        rng.range(230, 320)
    } else {
        rng.range(760, 880)
    } + if http.new_conn { 4_100 } else { 0 };
    w.point("data_sent", sent as f64, &tags);
    w.point("data_received", received as f64, &tags);
    w.point("iteration_duration", ms(w.t - start), &tags);
    w.point("iterations", 1.0, &tags);
    w.done.push(Chunk {
        ns: w.t,
        seq: 0,
        text: w.text,
        release: Some(release),
    });
    w.done
}

/// `report.json`'s figures for one section (total or label).
fn section_counts(v: &serde_json::Value) -> ZoneCounts {
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let map = |v: &serde_json::Value| -> BTreeMap<String, u64> {
        v.as_object()
            .map(|o| o.iter().map(|(k, x)| (k.clone(), n(x))).collect())
            .unwrap_or_default()
    };
    let failures = map(&v["failures"]);
    let scheduled = n(&v["scheduled"]);
    let sent = n(&v["sent"]);
    ZoneCounts {
        scheduled,
        iterations: sent,
        answered: n(&v["answered"]),
        dropped: failures.get("not_sent").copied().unwrap_or(0),
        failures,
        stores: v["stores"]
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, s)| {
                        (
                            k.clone(),
                            StoreCounts {
                                answers: n(&s["answers"]),
                                reads: n(&s["reads"]),
                                writes: n(&s["writes"]),
                                errors: map(&s["errors"]),
                            },
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn verify(counts: &PathBuf, report: &PathBuf) -> anyhow::Result<bool> {
    let counts: Counts = serde_json::from_reader(File::open(counts)?)?;
    let report: serde_json::Value =
        serde_json::from_reader(std::io::BufReader::new(File::open(report)?))?;
    let mut problems = Vec::new();
    let mut check = |what: &str, want: &ZoneCounts, got: &ZoneCounts| {
        if want != got {
            problems.push(format!("{what}: wrote {want:?}\n  imported {got:?}"));
        }
    };
    check("total", &counts.total, &section_counts(&report["total"]));
    for (zone, want) in &counts.zones {
        check(zone, want, &section_counts(&report["labels"][zone]));
    }
    let labels = report["labels"].as_object().map_or(0, |o| o.len());
    if labels != counts.zones.len() {
        problems.push(format!(
            "labels: wrote {}, imported {labels}",
            counts.zones.len()
        ));
    }
    let (mut lines, mut malformed, mut incomplete, mut truncated) = (0, 0, 0, false);
    for run in report["runs"].as_array().into_iter().flatten() {
        let i = &run["import"];
        lines += i["lines"].as_u64().unwrap_or(0);
        malformed += i["malformed_lines"].as_u64().unwrap_or(0);
        incomplete += i["incomplete_requests"].as_u64().unwrap_or(0);
        truncated |= i["truncated"].as_bool().unwrap_or(false);
    }
    if (lines, malformed, incomplete, truncated) != (counts.lines, 0, 0, false) {
        problems.push(format!(
            "import: lines {lines} (wrote {}), malformed {malformed}, incomplete {incomplete}, truncated {truncated}",
            counts.lines
        ));
    }
    for p in &problems {
        eprintln!("MISMATCH {p}");
    }
    let t = &counts.total;
    println!(
        "verify {}: {} labels, scheduled {}, sent {}, answered {}, failures {:?}, lines {}",
        if problems.is_empty() { "OK" } else { "FAILED" },
        labels,
        t.scheduled,
        t.iterations,
        t.answered,
        t.failures,
        lines
    );
    Ok(problems.is_empty())
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Gen {
            zones,
            rate,
            duration,
            gzip,
            gzip_level,
            seed,
            out,
            counts,
        } => {
            let c = gen(zones, rate, duration, gzip, gzip_level, seed, &out)?;
            let json = serde_json::to_string_pretty(&c)?;
            if let Some(path) = counts {
                std::fs::write(path, &json)?;
            }
            println!("{json}");
        }
        Cmd::Verify { counts, report } => {
            if !verify(&counts, &report)? {
                std::process::exit(1);
            }
        }
    }
    Ok(())
}
