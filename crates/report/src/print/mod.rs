//! Printers over the report schema: the terminal text, the SVG charts and the self-contained
//! `report.html`. Each is a pure function of a [`Report`] and what derives from it
//! ([`Analysed`], computed once before printing); nothing here changes the model.

pub mod chart;
pub mod history;
pub mod html;
pub mod text;
pub mod view;

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;

use crate::derived::Analysed;
use crate::report::Report;

/// `report.html` with its charts inline: what `kvbench` writes and `GET /report` serves.
pub fn page(a: &Analysed) -> anyhow::Result<String> {
    let charts = chart::render_all(&a.report)?;
    Ok(html::render(&a.report, &a.derived, &charts))
}

/// Every file a report directory holds besides report.json: the charts and report.html.
pub fn write_files(a: &Analysed, dir: &Path) -> anyhow::Result<()> {
    let charts = chart::render_all(&a.report)?;
    for c in &charts {
        let path = dir.join(c.file);
        std::fs::write(&path, &c.svg)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let path = dir.join("report.html");
    std::fs::write(&path, html::render(&a.report, &a.derived, &charts))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The page's second line: where it ran, when, over which window.
pub fn where_line(report: &Report, p: &crate::report::Provenance) -> String {
    let stack = match p.stack.as_str() {
        "local" => "the local stack (this machine)".to_string(),
        "deployed" => "Cloudflare (deployed)".to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{ColoStats, Provenance};

    #[test]
    fn the_where_line_names_the_stack_colos_window_update_and_commit() {
        let mut r = Report::empty();
        for (colo, n) in [("LHR", 9), ("AMS", 3), ("local", 50), ("unknown", 1)] {
            let stats = ColoStats {
                answered: n,
                ..ColoStats::default()
            };
            r.colos.insert(colo.into(), stats);
        }
        let p = Provenance {
            stack: "deployed".into(),
            updated_at: "2026-12-06T01:00:00Z".into(),
            window: Some(("2026-12-05T01:00:00Z".into(), "2026-12-06T01:00:00Z".into())),
            build: [("commit".to_string(), "0123abc".to_string())].into(),
            ..Provenance::default()
        };
        assert_eq!(
            where_line(&r, &p),
            "Measured on Cloudflare (deployed), in LHR, AMS · answers from 2026-12-05T01:00:00Z to 2026-12-06T01:00:00Z · updated 2026-12-06T01:00:00Z · kvbench 0123abc"
        );
        let local = Provenance {
            stack: "local".into(),
            updated_at: "t".into(),
            ..Provenance::default()
        };
        assert_eq!(
            where_line(&r, &local),
            "Measured on the local stack (this machine), in LHR, AMS · updated t"
        );
    }
}
