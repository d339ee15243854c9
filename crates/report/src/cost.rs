//! Cost projection: measured operations per request (reads, writes, value sizes, connections) × a
//! request rate × a dated price table → a monthly bill per store and plan, with every input
//! shown. Only operations that succeeded are priced; failed ones (auth, 5xx, timeouts — the store
//! may or may not bill them) are shown apart per request, and requests never sent, or sent to a
//! store that was not configured, cost nothing. Bandwidth counts the bytes that travel (Upstash
//! REST reads as base64) where the provider bills it beyond an included amount (Upstash). The
//! prices come from [`crate::prices`]; the estimate's lines are derived, never stored on the
//! measured model ([`crate::derived`]).

use serde::{Deserialize, Serialize};

use crate::prices::{Price, PriceTable, WorkerPrice};
use crate::report::{Report, Section, StoreStats};

/// A month for projections: 30 days.
pub const SECONDS_PER_MONTH: f64 = 30.0 * 24.0 * 3600.0;

/// What the projection needs to know about the deployment and the answers do not say.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Deployment {
    /// The database number `REDIS_URL` names (`--redis-db`): other than 0, each connection
    /// sends a (billed) `SELECT`.
    pub redis_db: u32,
    /// Keys a store holds at most (`/test`'s `keys`): with the measured mean value size, the
    /// data at rest. `None`: the worker's setting in the report's provenance, else
    /// [`DEFAULT_KEYS`].
    pub keys: Option<u64>,
    /// CPU milliseconds the worker spends per request (`--worker-cpu-ms`): a run cannot
    /// measure a deployed worker's CPU. `None`: [`DEFAULT_WORKER_CPU_MS`].
    pub worker_cpu_ms: Option<f64>,
    /// Price withdrawn plans too (`--historical`), marked as such.
    pub historical: bool,
}

/// `/test`'s default `keys`.
pub const DEFAULT_KEYS: u64 = 1000;
/// The worker CPU per request a bill assumes unless told (`--worker-cpu-ms`): of the order of
/// the local measurements in docs/measured.md for one to three stores, an assumption shown as
/// such wherever it is used.
pub const DEFAULT_WORKER_CPU_MS: f64 = 1.0;

impl Deployment {
    fn holds(&self, when: kvbench_spec::When) -> bool {
        use kvbench_spec::When;
        match when {
            When::Always => true,
            When::RedisDbNonZero => self.redis_db != 0,
        }
    }
}

/// Units per request for a unit size: exact counters for the sizes the collector counts, an
/// approximation from the value-size histogram for any other.
fn units(count: u64, exact: Option<u64>, bytes: &crate::hist::Hist, unit_bytes: u64) -> f64 {
    if unit_bytes == 0 {
        return count as f64;
    }
    if let Some(exact) = exact {
        return exact as f64;
    }
    bytes
        .buckets()
        .iter()
        .map(|b| b.count as f64 * b.lowest.div_ceil(unit_bytes).max(1) as f64)
        .sum()
}

/// Bytes that travel for the values of successful reads and writes (from the size histograms:
/// within their 0.1% precision): reads as the store's wire carries them (base64 for Upstash
/// REST), writes as sent.
fn bytes_moved(store_name: &str, store: &StoreStats) -> f64 {
    use kvbench_spec::{StoreId, Wire};
    let wire = StoreId::parse(store_name).map_or(Wire::Raw, |id| id.spec().billing.read_wire);
    let read: f64 = store
        .read_bytes
        .buckets()
        .iter()
        .map(|b| b.count as f64 * wire.bytes(b.median) as f64)
        .sum();
    let written = store.write_bytes.mean() * store.write_bytes.len() as f64;
    read + written
}

fn line(store: &StoreStats, p: &Price) -> CostLine {
    let per = |x: f64| {
        if store.answers == 0 {
            0.0
        } else {
            x / store.answers as f64
        }
    };
    // Priced: successful operations. A failed read counted one (minimum) unit and a failed
    // write its attempted size in the unit counters; they come off here.
    let ok_reads = store.reads.saturating_sub(store.failed_reads);
    let ok_writes = store.writes.saturating_sub(store.failed_writes);
    let read_exact = (p.read_unit_bytes == 4096)
        .then_some(store.read_units_4k.saturating_sub(store.failed_reads));
    let write_exact = (p.write_unit_bytes == 1024).then_some(
        store
            .write_units_1k
            .saturating_sub(store.failed_write_units_1k),
    );
    CostLine {
        store: p.store.clone(),
        plan: p.plan.clone(),
        as_of: p.as_of.clone(),
        source: p.source.clone(),
        historical: p.historical,
        reads_per_request: per(ok_reads as f64),
        writes_per_request: per(ok_writes as f64),
        failed_reads_per_request: per(store.failed_reads as f64),
        failed_writes_per_request: per(store.failed_writes as f64),
        bytes_per_request: per(bytes_moved(&p.store, store)),
        read_units_per_request: per(units(
            ok_reads,
            read_exact,
            &store.read_bytes,
            p.read_unit_bytes,
        )),
        write_units_per_request: per(units(
            ok_writes,
            write_exact,
            &store.write_bytes,
            p.write_unit_bytes,
        )),
        read_per_million: p.read_per_million,
        write_per_million: p.write_per_million,
        bandwidth_per_gb: p.bandwidth_per_gb,
        included_gb_per_month: p.included_gb_per_month,
        monthly_read_units: 0.0,
        monthly_write_units: 0.0,
        monthly_gb: 0.0,
        bandwidth_usd: 0.0,
        monthly_usd: 0.0,
        units: Vec::new(),
        fixed_usd: p.fixed_monthly_usd,
        stored_gb: 0.0,
        storage_usd: 0.0,
        over_limit: None,
    }
}

/// GB a store holds at most: `keys` values of the mean size it wrote (read, when it wrote none).
fn stored_gb(store: &StoreStats, keys: u64) -> f64 {
    let sizes = if store.write_bytes.is_empty() {
        &store.read_bytes
    } else {
        &store.write_bytes
    };
    if sizes.is_empty() {
        return 0.0;
    }
    keys as f64 * sizes.mean() / 1e9
}

/// Why a month of this line does not fit its plan's limits, if it does not.
fn over_limit(l: &CostLine, p: &Price) -> Option<String> {
    let operations = if l.units.is_empty() {
        l.monthly_read_units + l.monthly_write_units
    } else {
        l.units.iter().map(|u| u.monthly_units).sum()
    };
    let checks = [
        (p.max_operations_per_month, operations, "operations a month"),
        (p.max_gb_per_month, l.monthly_gb, "GB moved a month"),
        (p.max_storage_gb, l.stored_gb, "GB stored"),
    ];
    checks.iter().find_map(|(max, used, what)| {
        max.filter(|m| used > m).map(|m| {
            format!(
                "{what}: needs {}, the plan allows {}",
                short(*used),
                short(m)
            )
        })
    })
}

/// 1234567.8 → `1.23M`, 0.0123 → `0.0123`: a quantity in a sentence.
fn short(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}K", x / 1e3)
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.4}")
    }
}

/// Units of one charge for `ops` operations (`hits` of them found a value, `time_us` their wall
/// times), from the measured operations.
fn charge_units(
    count: kvbench_spec::Count,
    ops: u64,
    hits: u64,
    exact: impl Fn(u32) -> Option<u64>,
    bytes: &crate::hist::Hist,
    time_us: &crate::hist::Hist,
) -> f64 {
    use kvbench_spec::Count;
    match count {
        Count::Each(n) => f64::from(n) * ops as f64,
        Count::OnHit(n) => f64::from(n) * hits as f64,
        Count::PerBytes(b) => units(ops, exact(b), bytes, u64::from(b)),
        // GB-s: seconds of the operations' wall time x the billed memory in GB.
        Count::DurationAtMb(mb) => {
            time_us.mean() * time_us.len() as f64 / 1e6 * f64::from(mb) / 1024.0
        }
    }
}

/// Billing units per answered request by unit name, as the store's description defines them,
/// for a deployment whose database numbers are 0 (see [`units_per_request_in`]).
pub fn units_per_request(store_name: &str, s: &StoreStats) -> Vec<(String, f64)> {
    units_per_request_in(store_name, s, &Deployment::default())
}

/// Billing units per answered request by unit name, as the store's description defines them:
/// successful reads and writes (with what a write causes later), and the charges of each
/// connection that was set up (e.g. Redis `SELECT` of a non-zero database).
pub fn units_per_request_in(
    store_name: &str,
    s: &StoreStats,
    deployment: &Deployment,
) -> Vec<(String, f64)> {
    let Some(spec) = kvbench_spec::StoreId::parse(store_name).map(|id| id.spec()) else {
        return Vec::new();
    };
    let answers = s.answers.max(1) as f64;
    let ok_reads = s.reads.saturating_sub(s.failed_reads);
    let ok_writes = s.writes.saturating_sub(s.failed_writes);
    let hits = s.read_hit_us.len();
    let read_exact = |b: u32| (b == 4096).then_some(s.read_units_4k.saturating_sub(s.failed_reads));
    let write_exact =
        |b: u32| (b == 1024).then_some(s.write_units_1k.saturating_sub(s.failed_write_units_1k));
    let mut out: Vec<(String, f64)> = Vec::new();
    let mut add = |unit: &str, n: f64| match out.iter_mut().find(|(u, _)| u == unit) {
        Some((_, total)) => *total += n / answers,
        None => out.push((unit.to_string(), n / answers)),
    };
    let none = crate::hist::Hist::default();
    let billed = |c: &&kvbench_spec::Charge| deployment.holds(c.when);
    for c in spec.billing.read.iter().filter(billed) {
        add(
            c.unit,
            charge_units(
                c.count,
                ok_reads,
                hits,
                read_exact,
                &s.read_bytes,
                &s.read_us,
            ),
        );
    }
    for c in spec.billing.write.iter().filter(billed) {
        add(
            c.unit,
            charge_units(
                c.count,
                ok_writes,
                0,
                write_exact,
                &s.write_bytes,
                &s.write_us,
            ),
        );
    }
    for c in spec.billing.per_connection.iter().filter(billed) {
        add(
            c.unit,
            charge_units(c.count, s.connected, 0, |_| None, &none, &none),
        );
    }
    out
}

/// Projects the section's measured mix at `project_rps` (or the achieved rate).
pub fn estimate(
    section: &Section,
    prices: &PriceTable,
    project_rps: Option<f64>,
    deployment: &Deployment,
) -> Estimate {
    let (rps, source) = match project_rps {
        Some(r) => (r, "--project-rps".to_string()),
        None => (section.achieved_rate, "measured".to_string()),
    };
    let requests = rps * SECONDS_PER_MONTH;
    let keys = deployment.keys.unwrap_or(DEFAULT_KEYS);
    let mut lines = Vec::new();
    for p in &prices.price {
        let Some(store) = section.stores.get(&p.store) else {
            continue;
        };
        if p.historical && !deployment.historical {
            continue;
        }
        let mut l = line(store, p);
        l.monthly_read_units = l.read_units_per_request * requests;
        l.monthly_write_units = l.write_units_per_request * requests;
        l.monthly_gb = l.bytes_per_request * requests / 1e9;
        l.bandwidth_usd = (l.monthly_gb - p.included_gb_per_month).max(0.0) * p.bandwidth_per_gb;
        let operations_usd = if p.units.is_empty() {
            (l.monthly_read_units * p.read_per_million
                + l.monthly_write_units * p.write_per_million)
                / 1e6
        } else {
            // Priced per unit of the store's description; a unit without a price is free here
            // and listed with a null price, so a gap in the table is visible.
            let mut usd = 0.0;
            for (unit, per_request) in units_per_request_in(&p.store, store, deployment) {
                let monthly = per_request * requests;
                let included = p.included.get(&unit).copied().unwrap_or(0.0);
                let billed = (monthly - included).max(0.0);
                let price = p.units.get(&unit).copied();
                usd += billed * price.unwrap_or(0.0) / 1e6;
                l.units.push(UnitLine {
                    unit,
                    per_request,
                    per_million: price,
                    monthly_units: monthly,
                    included_per_month: included,
                    billed_units: billed,
                });
            }
            usd
        };
        l.stored_gb = stored_gb(store, keys);
        l.storage_usd = (l.stored_gb - p.included_storage_gb).max(0.0) * p.storage_per_gb_month;
        l.monthly_usd = l.fixed_usd + operations_usd + l.bandwidth_usd + l.storage_usd;
        l.over_limit = over_limit(&l, p);
        lines.push(l);
    }
    let worker = prices
        .worker
        .as_ref()
        .map(|w| worker_line(w, requests, deployment.worker_cpu_ms));
    Estimate {
        project_rps: rps,
        rps_source: source,
        redis_db: deployment.redis_db,
        keys,
        seconds_per_month: SECONDS_PER_MONTH,
        lines,
        worker,
    }
}

/// The estimate of `report` at `project_rps` (else its measured rate): the keys a store holds
/// are the deployment's when given, else the measuring worker's own setting.
pub fn of(
    report: &Report,
    table: &PriceTable,
    project_rps: Option<f64>,
    deployment: &Deployment,
) -> Estimate {
    let mut deployment = *deployment;
    if deployment.keys.is_none() {
        deployment.keys = report.provenance.as_ref().and_then(|p| p.settings.keys());
    }
    estimate(&report.total, table, project_rps, &deployment)
}

/// The Workers plan's month at `requests` a month and `cpu_ms` per request (given or assumed).
fn worker_line(w: &WorkerPrice, requests: f64, given: Option<f64>) -> WorkerLine {
    let cpu_ms_per_request = given.unwrap_or(DEFAULT_WORKER_CPU_MS);
    let cpu_ms = requests * cpu_ms_per_request;
    let requests_usd = (requests - w.included_requests).max(0.0) * w.request_per_million / 1e6;
    let cpu_usd = (cpu_ms - w.included_cpu_ms).max(0.0) * w.cpu_ms_per_million / 1e6;
    WorkerLine {
        plan: w.plan.clone(),
        as_of: w.as_of.clone(),
        source: w.source.clone(),
        minimum_usd: w.minimum_usd,
        requests_per_month: requests,
        included_requests: w.included_requests,
        requests_usd,
        cpu_ms_per_request,
        cpu_given: given.is_some(),
        cpu_ms_per_month: cpu_ms,
        included_cpu_ms: w.included_cpu_ms,
        cpu_usd,
        monthly_usd: w.minimum_usd + requests_usd + cpu_usd,
    }
}

/// The month a deployer of every measured store pays: the worker's plan plus each store's
/// cheapest current plan that the month fits.
#[derive(Debug, Clone, PartialEq)]
pub struct Month {
    pub usd: f64,
    /// `worker 44.88`, `kv 308.45 (its plan)`, …, and the stores no plan fits.
    pub parts: Vec<String>,
}

/// `store`'s cheapest current plan that the month fits (the first of equals), if any.
pub fn cheapest_line<'a>(e: &'a Estimate, store: &str) -> Option<&'a CostLine> {
    e.lines
        .iter()
        .filter(|l| l.store == store && !l.historical && l.over_limit.is_none())
        .min_by(|a, b| a.monthly_usd.total_cmp(&b.monthly_usd))
}

/// [`Month`] of an estimate; `None` when it prices nothing.
pub fn cheapest_month(e: &Estimate) -> Option<Month> {
    let stores: std::collections::BTreeSet<&str> =
        e.lines.iter().map(|l| l.store.as_str()).collect();
    let best: Vec<(&str, Option<&CostLine>)> = stores
        .into_iter()
        .map(|store| (store, cheapest_line(e, store)))
        .collect();
    if best.is_empty() && e.worker.is_none() {
        return None;
    }
    let mut usd = 0.0;
    let mut parts = Vec::new();
    if let Some(w) = &e.worker {
        usd += w.monthly_usd;
        parts.push(format!("worker {:.2}", w.monthly_usd));
    }
    for (store, line) in best {
        match line {
            Some(l) => {
                usd += l.monthly_usd;
                parts.push(format!("{store} {:.2}", l.monthly_usd));
            }
            None => parts.push(format!("{store}: no current plan fits")),
        }
    }
    Some(Month { usd, parts })
}

/// The cost projection and everything it was computed from (see [`crate::cost`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Requests per second the month is projected at.
    pub project_rps: f64,
    /// `measured` (the run's achieved rate) or `--project-rps`.
    pub rps_source: String,
    /// `--redis-db`: the database number `REDIS_URL` names (non-zero: a `SELECT` per connection).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redis_db: u32,
    /// Keys a store holds at most: with each store's mean value size, its data at rest.
    #[serde(default)]
    pub keys: u64,
    pub seconds_per_month: f64,
    pub lines: Vec<CostLine>,
    /// The worker itself on its Workers plan (absent with a price table that has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerLine>,
}

/// The Workers plan's month: its price, the requests and CPU time beyond what it includes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerLine {
    pub plan: String,
    pub as_of: String,
    pub source: String,
    pub minimum_usd: f64,
    pub requests_per_month: f64,
    pub included_requests: f64,
    pub requests_usd: f64,
    pub cpu_ms_per_request: f64,
    /// Whether `cpu_ms_per_request` was given (`--worker-cpu-ms`) or is the default assumption.
    pub cpu_given: bool,
    pub cpu_ms_per_month: f64,
    pub included_cpu_ms: f64,
    pub cpu_usd: f64,
    pub monthly_usd: f64,
}

/// One store × plan of the projection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostLine {
    pub store: String,
    pub plan: String,
    pub as_of: String,
    pub source: String,
    /// The plan is no longer offered ([`crate::prices::Price::historical`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub historical: bool,
    /// Measured: successful operations and their billing units per answered request.
    pub reads_per_request: f64,
    pub writes_per_request: f64,
    pub read_units_per_request: f64,
    pub write_units_per_request: f64,
    /// Failed operations per answered request, not priced (shown apart).
    #[serde(default)]
    pub failed_reads_per_request: f64,
    #[serde(default)]
    pub failed_writes_per_request: f64,
    /// Bytes of values read and written per answered request.
    #[serde(default)]
    pub bytes_per_request: f64,
    pub read_per_million: f64,
    pub write_per_million: f64,
    #[serde(default)]
    pub bandwidth_per_gb: f64,
    #[serde(default)]
    pub included_gb_per_month: f64,
    pub monthly_read_units: f64,
    pub monthly_write_units: f64,
    /// GB of values moved per month, and what the part beyond the included amount costs.
    #[serde(default)]
    pub monthly_gb: f64,
    #[serde(default)]
    pub bandwidth_usd: f64,
    /// The plan's fixed monthly price (a fixed plan), included in `monthly_usd`.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub fixed_usd: f64,
    /// GB at rest (the deployment's keys × the mean value size written) and what it costs
    /// beyond the plan's included storage.
    #[serde(default)]
    pub stored_gb: f64,
    #[serde(default)]
    pub storage_usd: f64,
    /// Fixed price, operations, bandwidth and storage.
    pub monthly_usd: f64,
    /// Why this month does not fit the plan (a limit it passes): then it is no store's cheapest
    /// plan. Absent when it fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_limit: Option<String>,
    /// For stores priced per unit of their description: each unit's quantity and price.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<UnitLine>,
}

/// One billing unit of a store's description in a cost line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitLine {
    pub unit: String,
    pub per_request: f64,
    /// USD per million; `null` when the price table has none for this unit (priced at 0).
    pub per_million: Option<f64>,
    pub monthly_units: f64,
    /// Units the plan includes per month (taken off before pricing), and what is left to pay.
    #[serde(default)]
    pub included_per_month: f64,
    #[serde(default)]
    pub billed_units: f64,
}

fn is_zero_f64(n: &f64) -> bool {
    *n == 0.0
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn projection_table() {
        let mut s = Section {
            achieved_rate: 10.0,
            ..Section::default()
        };
        // 100 answers; denokv: 100 reads of 5000 B (2 units each), 50 writes of 5000 B (5 units).
        let mut d = StoreStats {
            answers: 100,
            reads: 100,
            writes: 50,
            read_units_4k: 200,
            write_units_1k: 250,
            ..Default::default()
        };
        for _ in 0..100 {
            d.read_bytes.record(5000);
        }
        s.stores.insert("denokv".into(), d);
        s.stores.insert(
            "kv".into(),
            StoreStats {
                answers: 100,
                reads: 100,
                writes: 10,
                ..Default::default()
            },
        );
        let e = estimate(
            &s,
            &PriceTable::default_table().unwrap(),
            Some(1.0),
            &Deployment::default(),
        );
        assert_eq!(e.rps_source, "--project-rps");
        let month = SECONDS_PER_MONTH;
        let kv = e.lines.iter().find(|l| l.store == "kv").unwrap();
        assert!((kv.monthly_usd - (month * 0.5 + month * 0.1 * 5.0) / 1e6).abs() < 1e-9);
        // Current plans only: a self-hosted denokv, at no price per operation.
        let deno: Vec<&CostLine> = e.lines.iter().filter(|l| l.store == "denokv").collect();
        assert_eq!(deno.len(), 1);
        assert!(deno[0].plan.contains("self-hosted") && deno[0].monthly_usd == 0.0);
        // Asked for (`--historical`), the withdrawn Deno Deploy Classic price too, marked.
        let with_old = estimate(
            &s,
            &PriceTable::default_table().unwrap(),
            Some(1.0),
            &Deployment {
                historical: true,
                ..Deployment::default()
            },
        );
        let deno = with_old
            .lines
            .iter()
            .find(|l| l.store == "denokv" && l.historical)
            .unwrap();
        assert!(deno.plan.contains("Classic"));
        assert_eq!(
            (deno.read_units_per_request, deno.write_units_per_request),
            (2.0, 2.5)
        );
        assert!((deno.monthly_usd - (month * 2.0 * 1.0 + month * 2.5 * 2.5) / 1e6).abs() < 1e-9);
        assert!(
            e.lines.iter().all(|l| l.store != "upstash"),
            "unmeasured stores are not priced"
        );
        let measured = estimate(
            &s,
            &PriceTable::default_table().unwrap(),
            None,
            &Deployment::default(),
        );
        assert_eq!(
            (measured.project_rps, measured.rps_source.as_str()),
            (10.0, "measured")
        );
    }

    #[test]
    fn other_unit_sizes_come_from_the_size_histogram() {
        let mut st = StoreStats {
            answers: 2,
            reads: 2,
            ..Default::default()
        };
        st.read_bytes.record(100);
        st.read_bytes.record(3000);
        let p = Price {
            store: "x".into(),
            plan: String::new(),
            as_of: String::new(),
            source: String::new(),
            historical: false,
            storage_per_gb_month: 0.0,
            read_per_million: 1.0,
            write_per_million: 1.0,
            read_unit_bytes: 1000,
            write_unit_bytes: 0,
            bandwidth_per_gb: 0.0,
            included_gb_per_month: 0.0,
            units: Default::default(),
            included: Default::default(),
            ..Price::default()
        };
        assert_eq!(line(&st, &p).read_units_per_request, 2.0); // (1 + 3) / 2
    }

    #[test]
    fn failed_operations_are_not_priced_and_bandwidth_beyond_the_included_is() {
        let mut st = StoreStats {
            answers: 10,
            reads: 10,
            writes: 4,
            failed_reads: 2,
            failed_writes: 1,
            ..Default::default()
        };
        // 8 successful reads of 1 MB; 3 successful writes of 1 MB (the failed one moved nothing).
        for _ in 0..8 {
            st.read_bytes.record(1_000_000);
        }
        for _ in 0..3 {
            st.write_bytes.record(1_000_000);
        }
        let p = Price {
            store: "up".into(),
            plan: String::new(),
            as_of: String::new(),
            source: String::new(),
            historical: false,
            storage_per_gb_month: 0.0,
            read_per_million: 2.0,
            write_per_million: 2.0,
            read_unit_bytes: 0,
            write_unit_bytes: 0,
            bandwidth_per_gb: 0.03,
            included_gb_per_month: 200.0,
            units: Default::default(),
            included: Default::default(),
            ..Price::default()
        };
        let mut s = Section {
            achieved_rate: 1.0,
            ..Section::default()
        };
        s.stores.insert("up".into(), st);
        let e = estimate(
            &s,
            &PriceTable {
                price: vec![p],
                worker: None,
            },
            Some(10.0),
            &Deployment::default(),
        );
        let l = &e.lines[0];
        assert_eq!((l.reads_per_request, l.writes_per_request), (0.8, 0.3));
        assert_eq!(
            (l.failed_reads_per_request, l.failed_writes_per_request),
            (0.2, 0.1)
        );
        let requests = 10.0 * SECONDS_PER_MONTH;
        // 1.1 MB per request (within the size histogram's 0.1%).
        assert!(
            (l.bytes_per_request / 1.1e6 - 1.0).abs() < 0.002,
            "{}",
            l.bytes_per_request
        );
        let gb = l.bytes_per_request * requests / 1e9;
        assert!((l.monthly_gb - gb).abs() < 1e-6);
        assert!((l.bandwidth_usd - (gb - 200.0) * 0.03).abs() < 1e-6);
        let ops = (0.8 + 0.3) * requests * 2.0 / 1e6;
        assert!((l.monthly_usd - (ops + l.bandwidth_usd)).abs() < 1e-6);
    }

    #[test]
    fn upstash_bandwidth_is_in_the_embedded_table() {
        let t = PriceTable::default_table().unwrap();
        let up = t.price.iter().find(|p| p.store == "upstash").unwrap();
        assert_eq!(
            (up.bandwidth_per_gb, up.included_gb_per_month),
            (0.03, 200.0)
        );
        assert!(t.price.iter().all(|p| p.as_of.starts_with("20")));
    }

    #[test]
    fn unit_prices_follow_the_store_description() {
        // D1: one row read per hit (an absent key reads none); per write, in the steady state,
        // 3 rows written (the row, its index entry, an expired row deleted) and 7 rows read.
        let mut st = StoreStats {
            answers: 10,
            reads: 10,
            writes: 4,
            ..Default::default()
        };
        for _ in 0..6 {
            st.read_hit_us.record(1000);
        }
        let units = units_per_request("d1", &st);
        let names: Vec<&str> = units.iter().map(|(u, _)| u.as_str()).collect();
        assert_eq!(names, ["row read", "row written"]);
        for ((_, got), want) in units.iter().zip([0.6 + 0.4 * 7.0, 0.4 * 3.0]) {
            assert!((got - want).abs() < 1e-9, "{units:?}");
        }
        // Redis over TCP: a command per read and write (AUTH is not billed).
        let redis = units_per_request("redis", &st);
        let total: f64 = redis.iter().map(|(_, n)| n).sum();
        assert!((total - (1.0 + 0.4)).abs() < 1e-9, "{redis:?}");
        let t = PriceTable::default_table().unwrap();
        let mut s = Section {
            achieved_rate: 1.0,
            ..Section::default()
        };
        s.stores.insert("d1".into(), st);
        let e = estimate(&s, &t, Some(1.0), &Deployment::default());
        let d1 = e
            .lines
            .iter()
            .find(|l| l.store == "d1")
            .expect("d1 is priced");
        let month = SECONDS_PER_MONTH;
        let want = ((0.6 + 2.8) * month * 0.001 + 1.2 * month * 1.0) / 1e6;
        assert!(
            (d1.monthly_usd - want).abs() < 1e-9,
            "{} vs {want}",
            d1.monthly_usd
        );
        assert!(d1.units.iter().all(|u| u.per_million.is_some()));
    }

    /// Upstash does not bill AUTH (nor INFO, PING, QUIT, COMMAND), and a store that was not
    /// configured ran nothing.
    #[test]
    fn redis_bills_only_commands_that_ran() {
        let total =
            |s: &StoreStats| -> f64 { units_per_request("redis", s).iter().map(|(_, n)| n).sum() };
        let ran = StoreStats {
            answers: 10,
            reads: 10,
            writes: 4,
            ..Default::default()
        };
        assert!(
            (total(&ran) - 1.4).abs() < 1e-9,
            "{:?}",
            units_per_request("redis", &ran)
        );
        let not_configured = StoreStats {
            answers: 10,
            ..Default::default()
        };
        assert_eq!(total(&not_configured), 0.0);
        assert!(PriceTable::default_table()
            .unwrap()
            .price
            .iter()
            .filter(|p| p.store == "redis")
            .all(|p| p.units.keys().all(|u| !u.contains("AUTH"))));
    }

    /// A `SELECT` of a non-zero database runs once per connection that was set up, and is a
    /// billed command; database 0 sends none.
    #[test]
    fn a_select_of_a_non_zero_database_is_a_command_per_connection() {
        let st = StoreStats {
            answers: 10,
            reads: 8,
            writes: 2,
            // 8 connections set up (2 answers could not connect: no SELECT ran).
            connected: 8,
            ..Default::default()
        };
        let total = |db: u32| -> f64 {
            units_per_request_in(
                "redis",
                &st,
                &Deployment {
                    redis_db: db,
                    ..Deployment::default()
                },
            )
            .iter()
            .map(|(_, n)| n)
            .sum()
        };
        assert!((total(0) - 1.0).abs() < 1e-9);
        assert!((total(2) - 1.8).abs() < 1e-9);
        let mut s = Section {
            achieved_rate: 1.0,
            ..Section::default()
        };
        s.stores.insert("redis".into(), st);
        let e = estimate(
            &s,
            &PriceTable::default_table().unwrap(),
            Some(1.0),
            &Deployment {
                redis_db: 2,
                ..Deployment::default()
            },
        );
        assert_eq!(e.redis_db, 2);
        let l = e.lines.iter().find(|l| l.store == "redis").unwrap();
        let want = 1.8 * SECONDS_PER_MONTH * 2.0 / 1e6;
        assert!(
            (l.monthly_usd - want).abs() < 1e-6,
            "{} vs {want}",
            l.monthly_usd
        );
    }

    /// Durable Objects: every call and every expiry alarm is a request; each write's setAlarm
    /// and the alarm's delete are rows written, its scan a row read; duration is the calls' wall
    /// time at 128 MB.
    #[test]
    fn durable_objects_bill_requests_alarms_and_duration() {
        let mut st = StoreStats {
            answers: 10,
            reads: 10,
            writes: 4,
            ..Default::default()
        };
        for _ in 0..6 {
            st.read_hit_us.record(1000);
        }
        for _ in 0..10 {
            st.read_us.record(20_000);
        }
        for _ in 0..4 {
            st.write_us.record(50_000);
        }
        let units: BTreeMap<String, f64> = units_per_request("do", &st).into_iter().collect();
        let near = |unit: &str, want: f64| {
            let got = units.get(unit).copied().unwrap_or(f64::NAN);
            assert!(
                (got / want - 1.0).abs() < 0.002,
                "{unit}: {got} vs {want} in {units:?}"
            );
        };
        // 10 reads + 4 writes + 4 alarms.
        near("Durable Object request", 1.8);
        // 6 hits + 4 alarm scans.
        near("SQLite row read", 1.0);
        // 4 upserts + 4 setAlarms + 4 deletes.
        near("SQLite row written", 1.2);
        // (10 x 20 ms + 4 x 50 ms) x 0.125 GB / 10 answers.
        near("GB-s", 0.4 * 0.125 / 10.0);
        let t = PriceTable::default_table().unwrap();
        let p = t.price.iter().find(|p| p.store == "do").unwrap();
        assert_eq!(p.units.get("Durable Object request"), Some(&0.15));
        assert_eq!(p.units.get("GB-s"), Some(&12.50));
        assert_eq!(p.included.get("Durable Object request"), Some(&1e6));
        // The included million comes off the month's requests before pricing.
        let mut s = Section {
            achieved_rate: 1.0,
            ..Section::default()
        };
        s.stores.insert("do".into(), st);
        let e = estimate(&s, &t, Some(1.0), &Deployment::default());
        let line = e.lines.iter().find(|l| l.store == "do").unwrap();
        let requests = line
            .units
            .iter()
            .find(|u| u.unit == "Durable Object request")
            .unwrap();
        let month = SECONDS_PER_MONTH;
        assert!((requests.monthly_units - 1.8 * month).abs() < 1e-3);
        assert!((requests.billed_units - (1.8 * month - 1e6)).abs() < 1e-3);
    }

    /// Upstash REST reads travel base64 (4 bytes per 3, rounded up); writes travel as JSON
    /// text; Redis over TCP reads travel raw.
    #[test]
    fn bandwidth_counts_what_travels() {
        let mut st = StoreStats {
            answers: 2,
            reads: 2,
            writes: 1,
            ..Default::default()
        };
        st.read_bytes.record(3000);
        st.read_bytes.record(1);
        st.write_bytes.record(900);
        let mut s = Section {
            achieved_rate: 1.0,
            ..Section::default()
        };
        s.stores.insert("upstash".into(), st.clone());
        s.stores.insert("redis".into(), st);
        let e = estimate(
            &s,
            &PriceTable::default_table().unwrap(),
            Some(1.0),
            &Deployment::default(),
        );
        let bytes = |store: &str| {
            e.lines
                .iter()
                .find(|l| l.store == store)
                .unwrap()
                .bytes_per_request
        };
        let want = (4000.0 + 4.0 + 900.0) / 2.0;
        assert!(
            (bytes("upstash") / want - 1.0).abs() < 0.002,
            "{}",
            bytes("upstash")
        );
        let raw = (3000.0 + 1.0 + 900.0) / 2.0;
        assert!(
            (bytes("redis") / raw - 1.0).abs() < 0.002,
            "{}",
            bytes("redis")
        );
    }

    /// The bill a deployer pays today: a fixed plan fits while the month stays within its
    /// bandwidth, the free plan within its commands; storage is the keys × the mean value size
    /// beyond what the plan includes; the worker's own plan is a line of its own.
    #[test]
    fn fixed_plans_fit_within_their_limits_storage_and_the_worker_are_billed() {
        let mut up = StoreStats {
            answers: 1000,
            reads: 1000,
            writes: 400,
            ..Default::default()
        };
        for _ in 0..400 {
            up.write_bytes.record(30_000);
        }
        for _ in 0..600 {
            up.read_bytes.record(30_000);
        }
        let mut s = Section {
            achieved_rate: 1.0,
            ..Section::default()
        };
        s.stores.insert("upstash".into(), up.clone());
        s.stores.insert("kv".into(), up);
        let table = PriceTable::default_table().unwrap();
        let at = |rps: f64, keys: u64| {
            estimate(
                &s,
                &table,
                Some(rps),
                &Deployment {
                    keys: Some(keys),
                    ..Deployment::default()
                },
            )
        };
        let plan = |e: &Estimate, name: &str| -> CostLine {
            e.lines
                .iter()
                .find(|l| l.plan.contains(name))
                .unwrap_or_else(|| panic!("{name}"))
                .clone()
        };
        // 0.1 req/s: 1.4 ops a request, 363K a month: the free plan fits, $0.
        let slow = at(0.1, 1000);
        let free = plan(&slow, "Upstash Redis Free (");
        assert_eq!((free.over_limit.as_deref(), free.monthly_usd), (None, 0.0));
        // 50 req/s: ~4.4 TB a month, past every fixed plan up to 50 GB's 5 TB but not that one.
        let busy = at(50.0, 1000);
        assert!(plan(&busy, "Upstash Redis Free (")
            .over_limit
            .unwrap()
            .contains("operations a month"));
        let small = plan(&busy, "Fixed 250MB");
        assert!(small.over_limit.unwrap().contains("GB moved a month"));
        let fits = plan(&busy, "Fixed 50GB");
        assert_eq!(
            (fits.over_limit, fits.fixed_usd, fits.monthly_usd),
            (None, 400.0, 400.0)
        );
        // Storage: 1000 keys of 30 KB = 0.03 GB, within KV's included GB; 100,000 keys = 3 GB,
        // 2 GB of it billed at $0.50.
        let kv = plan(&busy, "Workers KV");
        assert!(
            (kv.stored_gb - 0.03).abs() < 1e-4 && kv.storage_usd == 0.0,
            "{kv:?}"
        );
        let many = plan(&at(50.0, 100_000), "Workers KV");
        assert!((many.storage_usd - 2.0 * 0.5).abs() < 0.01, "{many:?}");
        // The worker: $5 with 10M requests and 30M CPU-ms; 50 req/s is 129.6M requests.
        let w = busy.worker.unwrap();
        assert_eq!(
            (w.minimum_usd, w.cpu_given, w.cpu_ms_per_request),
            (5.0, false, 1.0)
        );
        let requests = 50.0 * SECONDS_PER_MONTH;
        assert!((w.requests_usd - (requests - 10e6) * 0.30 / 1e6).abs() < 1e-9);
        assert!((w.cpu_usd - (requests - 30e6) * 0.02 / 1e6).abs() < 1e-9);
        assert!((w.monthly_usd - (5.0 + w.requests_usd + w.cpu_usd)).abs() < 1e-9);
        assert_eq!(busy.keys, 1000);
    }

    /// The keys priced are the measuring worker's own setting unless given.
    #[test]
    fn the_keys_come_from_the_workers_settings() {
        let mut r = crate::report::Report::empty();
        r.provenance = Some(crate::report::Provenance {
            settings: [("keys".to_string(), "250".to_string())].into(),
            ..Default::default()
        });
        let table = PriceTable::default_table().unwrap();
        let derived = of(&r, &table, Some(1.0), &Deployment::default());
        assert_eq!(derived.keys, 250);
        let given = Deployment {
            keys: Some(7),
            ..Deployment::default()
        };
        assert_eq!(of(&r, &table, Some(1.0), &given).keys, 7);
    }
}
