//! The dated price table: what each store's plans and the Workers plan cost, as prices.toml (or
//! `--prices FILE`) gives them, checked so that every price and amount is finite and not
//! negative. The estimate over it is [`crate::cost`].

use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// The price table shipped in the crate.
pub const DEFAULT_PRICES: &str = include_str!("../prices.toml");

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceTable {
    pub price: Vec<Price>,
    /// The Workers plan the benchmark worker itself runs on.
    #[serde(default)]
    pub worker: Option<WorkerPrice>,
}

/// The Workers plan's prices: what the worker that measures costs, whatever the stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerPrice {
    pub plan: String,
    pub as_of: String,
    pub source: String,
    /// The plan's monthly price, which includes the amounts below.
    pub minimum_usd: f64,
    pub included_requests: f64,
    pub request_per_million: f64,
    pub included_cpu_ms: f64,
    /// USD per million CPU milliseconds beyond the included ones.
    pub cpu_ms_per_million: f64,
}

/// One plan's prices for one store.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Price {
    /// Store name as the worker reports it (`kv`, `upstash`, `denokv`).
    pub store: String,
    pub plan: String,
    pub as_of: String,
    pub source: String,
    /// A price no longer offered, kept to compare with the published runs: shown in a run's
    /// cost table, never chosen as a store's cheapest plan while a current one exists.
    #[serde(default)]
    pub historical: bool,
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
    /// USD per GB-month of data at rest; 0 = not priced.
    #[serde(default)]
    pub storage_per_gb_month: f64,
    /// USD per million of each billing unit the store's description names (e.g. `"SQLite row
    /// read"`); when set, the quantities come from the description (`kvbench_spec`) and
    /// `read_per_million`/`write_per_million` are not used.
    #[serde(default)]
    pub units: std::collections::BTreeMap<String, f64>,
    /// Units of `units` included per month, taken off the month's quantity before pricing
    /// (e.g. Durable Objects' first million requests).
    #[serde(default)]
    pub included: std::collections::BTreeMap<String, f64>,
    /// USD a month the plan costs whatever the usage (a fixed plan's price).
    #[serde(default)]
    pub fixed_monthly_usd: f64,
    /// GB at rest the plan includes before `storage_per_gb_month`.
    #[serde(default)]
    pub included_storage_gb: f64,
    /// The plan's limits: a month beyond one does not fit the plan (it is throttled or refused
    /// there, not billed more), so it is never a store's cheapest plan. Operations are the
    /// billed reads and writes (or the units of `units`); GB the values moved; storage the GB
    /// at rest.
    #[serde(default)]
    pub max_operations_per_month: Option<f64>,
    #[serde(default)]
    pub max_gb_per_month: Option<f64>,
    #[serde(default)]
    pub max_storage_gb: Option<f64>,
}

/// Why a price table cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// Where, which field, its value: a price or an amount must be finite and not negative
    /// (TOML has `nan` and `inf`; either would print as `$NaN/month`).
    #[error("{0}: {1} = {2} is not a price or an amount (finite, 0 or more)")]
    NotAPrice(String, String, f64),
}

/// `value` is a price or an amount: finite and not negative.
fn amount(at: &str, field: &str, value: f64) -> Result<(), PriceError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(PriceError::NotAPrice(at.into(), field.into(), value))
    }
}

impl Price {
    /// Every price and amount of the plan, by field name. Destructured without `..`, so a new
    /// field must be added here (and is then checked) or explicitly left out.
    fn amounts(&self) -> Vec<(String, f64)> {
        let Price {
            store: _,
            plan: _,
            as_of: _,
            source: _,
            historical: _,
            read_per_million,
            write_per_million,
            read_unit_bytes: _,
            write_unit_bytes: _,
            bandwidth_per_gb,
            included_gb_per_month,
            storage_per_gb_month,
            units,
            included,
            fixed_monthly_usd,
            included_storage_gb,
            max_operations_per_month,
            max_gb_per_month,
            max_storage_gb,
        } = self;
        let mut out: Vec<(String, f64)> = [
            ("read_per_million", *read_per_million),
            ("write_per_million", *write_per_million),
            ("bandwidth_per_gb", *bandwidth_per_gb),
            ("included_gb_per_month", *included_gb_per_month),
            ("storage_per_gb_month", *storage_per_gb_month),
            ("fixed_monthly_usd", *fixed_monthly_usd),
            ("included_storage_gb", *included_storage_gb),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (name, limit) in [
            ("max_operations_per_month", max_operations_per_month),
            ("max_gb_per_month", max_gb_per_month),
            ("max_storage_gb", max_storage_gb),
        ] {
            out.extend(limit.map(|v| (name.to_string(), v)));
        }
        out.extend(units.iter().map(|(u, v)| (format!("units.{u:?}"), *v)));
        out.extend(
            included
                .iter()
                .map(|(u, v)| (format!("included.{u:?}"), *v)),
        );
        out
    }
}

impl WorkerPrice {
    fn amounts(&self) -> [(&'static str, f64); 5] {
        [
            ("minimum_usd", self.minimum_usd),
            ("included_requests", self.included_requests),
            ("request_per_million", self.request_per_million),
            ("included_cpu_ms", self.included_cpu_ms),
            ("cpu_ms_per_million", self.cpu_ms_per_million),
        ]
    }
}

impl PriceTable {
    /// Parses a price table and checks that every price and amount in it is finite and not
    /// negative.
    pub fn parse(text: &str) -> Result<PriceTable, PriceError> {
        let table: PriceTable = toml::from_str(text)?;
        for (i, p) in table.price.iter().enumerate() {
            let at = format!("[[price]] {} ({} {})", i + 1, p.store, p.plan);
            for (field, value) in p.amounts() {
                amount(&at, &field, value)?;
            }
        }
        if let Some(w) = &table.worker {
            for (field, value) in w.amounts() {
                amount("[worker]", field, value)?;
            }
        }
        Ok(table)
    }

    /// The embedded table (it parses and passes the checks: tested).
    pub fn default_table() -> Result<PriceTable, PriceError> {
        PriceTable::parse(DEFAULT_PRICES)
    }

    /// `--prices FILE` or the embedded default.
    pub fn load(path: Option<&Path>) -> anyhow::Result<PriceTable> {
        match path {
            None => Ok(PriceTable::default_table().context("the embedded price table")?),
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("--prices: cannot read {}", p.display()))?;
                PriceTable::parse(&text)
                    .with_context(|| format!("--prices: {} is not a price table", p.display()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_table_parses_and_has_the_brief_prices() {
        let t = PriceTable::default_table().unwrap();
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
    fn every_priced_unit_is_one_the_descriptions_name() {
        for p in PriceTable::default_table().unwrap().price {
            let Some(id) = kvbench_spec::StoreId::parse(&p.store) else {
                panic!("prices.toml prices an unknown store {}", p.store);
            };
            let b = &id.spec().billing;
            let named: Vec<&str> = b
                .read
                .iter()
                .chain(b.write)
                .chain(b.per_connection)
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
