//! What derives from the measured model, computed once per render and carried beside it: the
//! summary every printer shows (with the comparison and trouble), the cost estimate over a price
//! table, and the history of the report's days. The model never holds any of it, so a merge has
//! nothing to clear and a printer nothing to compute.

use crate::cost::{self, Deployment, Estimate};
use crate::history::{self, History};
use crate::prices::PriceTable;
use crate::report::Report;
use crate::summary::Summary;

/// Everything derived from one report.
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    /// The cost projection (absent where no price table was given).
    pub cost: Option<Estimate>,
    pub summary: Summary,
    /// The History section, from the report's days (not written into report.json).
    pub history: History,
}

impl Derived {
    /// What derives from `report` with `cost` already estimated (or none).
    pub fn of(report: &Report, cost: Option<Estimate>) -> Derived {
        let summary = Summary::of(report, cost.as_ref());
        Derived {
            summary,
            history: history::of(report),
            cost,
        }
    }
}

/// A report as it is written and printed: what was measured, and what derives from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysed {
    pub report: Report,
    pub derived: Derived,
}

/// What every printed report carries besides its measurements: the cost projection (at the
/// measured rate, or `project_rps`), the summary and the history the printers read.
pub fn derive(
    report: Report,
    table: &PriceTable,
    project_rps: Option<f64>,
    deployment: &Deployment,
) -> Analysed {
    let estimate = cost::of(&report, table, project_rps, deployment);
    let derived = Derived::of(&report, Some(estimate));
    Analysed { report, derived }
}
