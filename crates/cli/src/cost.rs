//! Cost projection: measured operations per request (reads, writes, value sizes) × a request rate
//! × a dated price table → a monthly bill per store and plan, with every input shown. Only
//! operations that succeeded are priced; failed ones (auth, 5xx, timeouts — the store may or may
//! not bill them) are shown apart per request, and requests never sent cost nothing. Bandwidth is
//! priced where the provider bills it beyond an included amount (Upstash).

use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::report::{CostLine, Estimate, Section, StoreStats};

/// The price table shipped in the crate.
pub const DEFAULT_PRICES: &str = include_str!("../prices.toml");

/// A month for projections: 30 days.
pub const SECONDS_PER_MONTH: f64 = 30.0 * 24.0 * 3600.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceTable {
    pub price: Vec<Price>,
}

/// One plan's prices for one store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// Store name as the worker reports it (`kv`, `upstash`, `denokv`).
    pub store: String,
    pub plan: String,
    pub as_of: String,
    pub source: String,
    pub read_per_million: f64,
    pub write_per_million: f64,
    /// 0: one unit per operation; else units = max(1, ceil(bytes / unit_bytes)).
    #[serde(default)]
    pub read_unit_bytes: u64,
    #[serde(default)]
    pub write_unit_bytes: u64,
    /// USD per GB of values moved (read and written) beyond `included_gb_per_month`; 0 = free.
    #[serde(default)]
    pub bandwidth_per_gb: f64,
    #[serde(default)]
    pub included_gb_per_month: f64,
    /// USD per million of each billing unit the store's description names (e.g. `"SQLite row
    /// read"`); when set, the quantities come from the description (`kvbench_core::spec`) and
    /// `read_per_million`/`write_per_million` are not used.
    #[serde(default)]
    pub units: std::collections::BTreeMap<String, f64>,
}

impl PriceTable {
    pub fn parse(text: &str) -> Result<PriceTable, toml::de::Error> {
        toml::from_str(text)
    }

    pub fn default_table() -> PriceTable {
        PriceTable::parse(DEFAULT_PRICES).expect("the embedded price table parses (tested)")
    }

    /// `--prices FILE` or the embedded default.
    pub fn load(path: Option<&Path>) -> anyhow::Result<PriceTable> {
        match path {
            None => Ok(PriceTable::default_table()),
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("--prices: cannot read {}", p.display()))?;
                PriceTable::parse(&text)
                    .with_context(|| format!("--prices: {} is not a price table", p.display()))
            }
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
        .0
        .iter_recorded()
        .map(|v| {
            let low = bytes.0.lowest_equivalent(v.value_iterated_to());
            v.count_at_value() as f64 * low.div_ceil(unit_bytes).max(1) as f64
        })
        .sum()
}

/// Bytes of values moved per request: what successful reads returned and writes sent (from the
/// size histograms: within their 0.1% precision).
fn bytes_moved(store: &StoreStats) -> f64 {
    let total = |h: &crate::hist::Hist| h.mean() * h.len() as f64;
    total(&store.read_bytes) + total(&store.write_bytes)
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
        reads_per_request: per(ok_reads as f64),
        writes_per_request: per(ok_writes as f64),
        failed_reads_per_request: per(store.failed_reads as f64),
        failed_writes_per_request: per(store.failed_writes as f64),
        bytes_per_request: per(bytes_moved(store)),
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
    }
}

/// Units of one charge per answered request, from the measured operations.
fn charge_units(
    count: kvbench_core::spec::Count,
    ops: u64,
    hits: u64,
    exact: impl Fn(u32) -> Option<u64>,
    bytes: &crate::hist::Hist,
) -> f64 {
    use kvbench_core::spec::Count;
    match count {
        Count::Each(n) => f64::from(n) * ops as f64,
        Count::OnHit(n) => f64::from(n) * hits as f64,
        Count::PerBytes(b) => units(ops, exact(b), bytes, u64::from(b)),
    }
}

/// Billing units per answered request by unit name, as the store's description defines them:
/// successful reads and writes, and the per-request charges (e.g. Redis `AUTH`).
pub fn units_per_request(store_name: &str, s: &StoreStats) -> Vec<(String, f64)> {
    let Some(spec) = kvbench_core::spec::StoreId::parse(store_name).map(|id| id.spec()) else {
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
    for c in spec.billing.read {
        add(
            c.unit,
            charge_units(c.count, ok_reads, hits, read_exact, &s.read_bytes),
        );
    }
    for c in spec.billing.write {
        add(
            c.unit,
            charge_units(c.count, ok_writes, 0, write_exact, &s.write_bytes),
        );
    }
    for c in spec.billing.per_request {
        add(
            c.unit,
            charge_units(c.count, s.answers, 0, |_| None, &s.read_bytes),
        );
    }
    out
}

/// Projects the section's measured mix at `project_rps` (or the achieved rate).
pub fn estimate(section: &Section, prices: &PriceTable, project_rps: Option<f64>) -> Estimate {
    let (rps, source) = match project_rps {
        Some(r) => (r, "--project-rps".to_string()),
        None => (section.achieved_rate, "measured".to_string()),
    };
    let requests = rps * SECONDS_PER_MONTH;
    let mut lines = Vec::new();
    for p in &prices.price {
        let Some(store) = section.stores.get(&p.store) else {
            continue;
        };
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
            for (unit, per_request) in units_per_request(&p.store, store) {
                let monthly = per_request * requests;
                let price = p.units.get(&unit).copied();
                usd += monthly * price.unwrap_or(0.0) / 1e6;
                l.units.push(crate::report::UnitLine {
                    unit,
                    per_request,
                    per_million: price,
                    monthly_units: monthly,
                });
            }
            usd
        };
        l.monthly_usd = operations_usd + l.bandwidth_usd;
        lines.push(l);
    }
    Estimate {
        project_rps: rps,
        rps_source: source,
        seconds_per_month: SECONDS_PER_MONTH,
        lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_table_parses_and_has_the_brief_prices() {
        let t = PriceTable::default_table();
        let find = |store: &str, rd: f64| {
            t.price
                .iter()
                .any(|p| p.store == store && p.read_per_million == rd)
        };
        assert!(find("kv", 0.5));
        assert!(find("upstash", 2.0));
        assert!(find("upstash", 1.0));
        assert!(find("denokv", 1.0));
        assert!(t
            .price
            .iter()
            .all(|p| !p.as_of.is_empty() && !p.source.is_empty()));
    }

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
        let e = estimate(&s, &PriceTable::default_table(), Some(1.0));
        assert_eq!(e.rps_source, "--project-rps");
        let month = SECONDS_PER_MONTH;
        let kv = e.lines.iter().find(|l| l.store == "kv").unwrap();
        assert!((kv.monthly_usd - (month * 0.5 + month * 0.1 * 5.0) / 1e6).abs() < 1e-9);
        let deno = e.lines.iter().find(|l| l.store == "denokv").unwrap();
        assert_eq!(
            (deno.read_units_per_request, deno.write_units_per_request),
            (2.0, 2.5)
        );
        assert!((deno.monthly_usd - (month * 2.0 * 1.0 + month * 2.5 * 2.5) / 1e6).abs() < 1e-9);
        assert!(
            e.lines.iter().all(|l| l.store != "upstash"),
            "unmeasured stores are not priced"
        );
        let measured = estimate(&s, &PriceTable::default_table(), None);
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
            read_per_million: 1.0,
            write_per_million: 1.0,
            read_unit_bytes: 1000,
            write_unit_bytes: 0,
            bandwidth_per_gb: 0.0,
            included_gb_per_month: 0.0,
            units: Default::default(),
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
            read_per_million: 2.0,
            write_per_million: 2.0,
            read_unit_bytes: 0,
            write_unit_bytes: 0,
            bandwidth_per_gb: 0.03,
            included_gb_per_month: 200.0,
            units: Default::default(),
        };
        let mut s = Section {
            achieved_rate: 1.0,
            ..Section::default()
        };
        s.stores.insert("up".into(), st);
        let e = estimate(&s, &PriceTable { price: vec![p] }, Some(10.0));
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
        let t = PriceTable::default_table();
        let up = t.price.iter().find(|p| p.store == "upstash").unwrap();
        assert_eq!(
            (up.bandwidth_per_gb, up.included_gb_per_month),
            (0.03, 200.0)
        );
        assert!(t.price.iter().all(|p| p.as_of.starts_with("20")));
    }

    #[test]
    fn unit_prices_follow_the_store_description() {
        // D1: one row read per hit (an absent key reads none), one row written per write.
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
        assert_eq!(
            units,
            [
                ("row read".to_string(), 0.6),
                ("row written".to_string(), 0.4)
            ]
        );
        // Redis over TCP: a command per read and write, plus AUTH once per request.
        let redis = units_per_request("redis", &st);
        let total: f64 = redis.iter().map(|(_, n)| n).sum();
        assert!((total - (1.0 + 0.4 + 1.0)).abs() < 1e-9, "{redis:?}");
        let t = PriceTable::default_table();
        let mut s = Section {
            achieved_rate: 1.0,
            ..Section::default()
        };
        s.stores.insert("d1".into(), st);
        let e = estimate(&s, &t, Some(1.0));
        let d1 = e
            .lines
            .iter()
            .find(|l| l.store == "d1")
            .expect("d1 is priced");
        let month = SECONDS_PER_MONTH;
        let want = (0.6 * month * 0.001 + 0.4 * month * 1.0) / 1e6;
        assert!(
            (d1.monthly_usd - want).abs() < 1e-9,
            "{} vs {want}",
            d1.monthly_usd
        );
        assert!(d1.units.iter().all(|u| u.per_million.is_some()));
    }

    #[test]
    fn every_priced_unit_is_one_the_descriptions_name() {
        for p in PriceTable::default_table().price {
            let Some(id) = kvbench_core::spec::StoreId::parse(&p.store) else {
                panic!("prices.toml prices an unknown store {}", p.store);
            };
            let b = &id.spec().billing;
            let named: Vec<&str> = b
                .read
                .iter()
                .chain(b.write)
                .chain(b.per_request)
                .map(|c| c.unit)
                .collect();
            for unit in p.units.keys() {
                assert!(
                    named.contains(&unit.as_str()),
                    "{}: {unit} not in {named:?}",
                    p.store
                );
            }
        }
    }

    #[test]
    fn bad_price_file_is_an_error() {
        assert!(PriceTable::parse("price = 3").is_err());
    }
}
