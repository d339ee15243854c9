//! Cost projection: measured operations per request (reads, writes, value sizes) × a request rate
//! × a dated price table → a monthly bill per store and plan, with every input shown.

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

fn line(store: &StoreStats, p: &Price) -> CostLine {
    let per = |x: f64| {
        if store.answers == 0 {
            0.0
        } else {
            x / store.answers as f64
        }
    };
    let read_exact = (p.read_unit_bytes == 4096).then_some(store.read_units_4k);
    let write_exact = (p.write_unit_bytes == 1024).then_some(store.write_units_1k);
    CostLine {
        store: p.store.clone(),
        plan: p.plan.clone(),
        as_of: p.as_of.clone(),
        source: p.source.clone(),
        reads_per_request: per(store.reads as f64),
        writes_per_request: per(store.writes as f64),
        read_units_per_request: per(units(
            store.reads,
            read_exact,
            &store.read_bytes,
            p.read_unit_bytes,
        )),
        write_units_per_request: per(units(
            store.writes,
            write_exact,
            &store.write_bytes,
            p.write_unit_bytes,
        )),
        read_per_million: p.read_per_million,
        write_per_million: p.write_per_million,
        monthly_read_units: 0.0,
        monthly_write_units: 0.0,
        monthly_usd: 0.0,
    }
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
        l.monthly_usd = (l.monthly_read_units * p.read_per_million
            + l.monthly_write_units * p.write_per_million)
            / 1e6;
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
        };
        assert_eq!(line(&st, &p).read_units_per_request, 2.0); // (1 + 3) / 2
    }

    #[test]
    fn bad_price_file_is_an_error() {
        assert!(PriceTable::parse("price = 3").is_err());
    }
}
