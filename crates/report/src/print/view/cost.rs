//! The cost table as plain data: each priced line's figures at the precision both printers show,
//! its units, the worker's line, the month a deployer pays and the notes under the table — built
//! once from the [`Estimate`], laid out by the text and the HTML printers.

use std::collections::BTreeSet;

use crate::cost::Month;
use crate::cost::{CostLine, Estimate, UnitLine, WorkerLine};

/// The whole cost section.
#[derive(Debug, Clone, PartialEq)]
pub struct Cost<'a> {
    /// The projected rate, `{:.2}` req/s, and where it comes from.
    pub rps: String,
    pub rps_source: &'a str,
    /// The keys live at once that storage is priced for.
    pub keys: u64,
    /// Whether withdrawn plans are listed (as asked).
    pub withdrawn: bool,
    pub month: Option<Month>,
    pub lines: Vec<Line<'a>>,
    pub worker: Option<Worker<'a>>,
    /// Failed operations per request by store, not priced: each distinct `(store, reads, writes)`.
    pub failed: Vec<(&'a str, String, String)>,
    /// The Redis database selected per connection (a SELECT counted), 0 for none.
    pub redis_db: u32,
}

/// One store at one plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a> {
    /// Its names, plan, dates, source, limits and exact `monthly_usd`.
    pub line: &'a CostLine,
    pub read_units: String,
    pub write_units: String,
    /// Failed reads and writes per request, together.
    pub failed_ops: String,
    pub read_per_million: String,
    pub write_per_million: String,
    /// Priced per unit of its description: the units below the line hold the prices.
    pub per_unit: bool,
    pub monthly_gb: String,
    pub bandwidth_usd: String,
    pub stored_gb: String,
    pub storage_usd: String,
    pub monthly_usd: String,
    pub units: Vec<Unit<'a>>,
}

/// A billing unit of a line: how many per request, its price, what the plan includes.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit<'a> {
    pub per_request: String,
    pub unit: &'a str,
    /// Per million units, `None` when the price table has no price for it (priced at 0).
    pub per_million: Option<f64>,
    /// ` beyond N a month included (B of M billed)`, empty when nothing is included.
    pub included: String,
}

/// The worker's line: requests and CPU time a month and their price.
#[derive(Debug, Clone, PartialEq)]
pub struct Worker<'a> {
    /// Its plan, dates, source, includes and exact `monthly_usd`.
    pub line: &'a WorkerLine,
    pub requests_m: String,
    pub requests_usd: String,
    pub cpu_ms_m: String,
    pub cpu_usd: String,
    pub minimum_usd: String,
    pub monthly_usd: String,
}

/// The view of an estimate.
pub fn of(e: &Estimate) -> Cost<'_> {
    Cost {
        rps: format!("{:.2}", e.project_rps),
        rps_source: &e.rps_source,
        keys: e.keys,
        withdrawn: e.lines.iter().any(|l| l.historical),
        month: crate::cost::cheapest_month(e),
        lines: e.lines.iter().map(line).collect(),
        worker: e.worker.as_ref().map(worker),
        failed: failed(e),
        redis_db: e.redis_db,
    }
}

fn line(l: &CostLine) -> Line<'_> {
    Line {
        line: l,
        read_units: format!("{:.3}", l.read_units_per_request),
        write_units: format!("{:.3}", l.write_units_per_request),
        failed_ops: format!(
            "{:.4}",
            l.failed_reads_per_request + l.failed_writes_per_request
        ),
        read_per_million: format!("{:.2}", l.read_per_million),
        write_per_million: format!("{:.2}", l.write_per_million),
        per_unit: !l.units.is_empty(),
        monthly_gb: format!("{:.1}", l.monthly_gb),
        bandwidth_usd: format!("{:.2}", l.bandwidth_usd),
        stored_gb: format!("{:.4}", l.stored_gb),
        storage_usd: format!("{:.2}", l.storage_usd),
        monthly_usd: format!("{:.2}", l.monthly_usd),
        units: l.units.iter().map(unit).collect(),
    }
}

fn unit(u: &UnitLine) -> Unit<'_> {
    let included = if u.included_per_month > 0.0 {
        format!(
            " beyond {} a month included ({:.0} of {:.0} billed)",
            u.included_per_month, u.billed_units, u.monthly_units
        )
    } else {
        String::new()
    };
    Unit {
        per_request: format!("{:.3}", u.per_request),
        unit: &u.unit,
        per_million: u.per_million,
        included,
    }
}

fn worker(w: &WorkerLine) -> Worker<'_> {
    Worker {
        line: w,
        requests_m: format!("{:.1}", w.requests_per_month / 1e6),
        requests_usd: format!("{:.2}", w.requests_usd),
        cpu_ms_m: format!("{:.1}", w.cpu_ms_per_month / 1e6),
        cpu_usd: format!("{:.2}", w.cpu_usd),
        minimum_usd: format!("{:.2}", w.minimum_usd),
        monthly_usd: format!("{:.2}", w.monthly_usd),
    }
}

/// Each store's failed operations per request, once per distinct figure, in order.
fn failed(e: &Estimate) -> Vec<(&str, String, String)> {
    e.lines
        .iter()
        .filter(|l| l.failed_reads_per_request > 0.0 || l.failed_writes_per_request > 0.0)
        .map(|l| {
            (
                l.store.as_str(),
                format!("{:.4}", l.failed_reads_per_request),
                format!("{:.4}", l.failed_writes_per_request),
            )
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}
