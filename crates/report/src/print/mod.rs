//! Printers over the report schema: the terminal text, the SVG charts and the self-contained
//! `report.html`. Each is a pure function of a [`Report`]; nothing here changes the model.

pub mod chart;
pub mod html;
pub mod text;
pub mod vantage;

use std::path::Path;

use anyhow::Context as _;

use crate::report::Report;

/// `report.html` with its charts inline: what `kvbench` writes and `GET /report` serves.
pub fn page(report: &Report) -> anyhow::Result<String> {
    let charts = chart::render_all(report)?;
    Ok(html::render(report, &charts))
}

/// Every file a report directory holds besides report.json: the charts and report.html.
pub fn write_files(report: &Report, dir: &Path) -> anyhow::Result<()> {
    let charts = chart::render_all(report)?;
    for c in &charts {
        let path = dir.join(c.file);
        std::fs::write(&path, &c.svg)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let path = dir.join("report.html");
    std::fs::write(&path, html::render(report, &charts))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
