//! Printers over the report schema: the terminal text, the SVG charts and the self-contained
//! `report.html`. Each is a pure function of a [`Report`]; nothing here changes the model.

pub mod chart;
pub mod html;
pub mod text;
pub mod vantage;

use std::fmt::Write as _;
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

/// The page's second line: where it ran, when, over which window.
pub fn where_line(report: &Report, p: &crate::report::Provenance) -> String {
    let stack = match p.stack.as_str() {
        "local" => "the local stack (this machine)".to_string(),
        "deployed" => "deployed on Cloudflare".to_string(),
        other => other.to_string(),
    };
    // The local stack's worker answers as colo `local`: no place to name.
    let mut colos: Vec<(&String, u64)> = report
        .colos
        .iter()
        .filter(|(c, _)| !matches!(c.as_str(), "local" | "unknown"))
        .map(|(c, s)| (c, s.answered))
        .collect();
    colos.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let shown: Vec<&str> = colos.iter().take(8).map(|(c, _)| c.as_str()).collect();
    let more = colos.len().saturating_sub(shown.len());
    let mut line = format!("Measured on {stack}");
    if !shown.is_empty() {
        let _ = write!(line, ", in {}", shown.join(", "));
        if more > 0 {
            let _ = write!(line, " and {more} more colo(s)");
        }
    }
    if let Some((from, to)) = &p.window {
        let _ = write!(line, " · answers from {from} to {to}");
    }
    let _ = write!(line, " · updated {}", p.updated_at);
    if let Some(commit) = p.build.get("commit") {
        let _ = write!(line, " · kvbench {commit}");
    }
    line
}
