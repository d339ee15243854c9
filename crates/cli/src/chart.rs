//! Charts as SVG (plotters, no font or system dependencies): `timeline.svg` shows p50/p90/p99 per
//! store over time like the published comparison; `latency.svg` the latency distribution per store,
//! hit vs miss.

use std::path::Path;

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::hist::Hist;
use crate::report::Report;

const WIDTH: u32 = 1000;
const PANEL_HEIGHT: u32 = 320;
const QUANTILES: [(f64, &str, RGBColor); 3] = [
    (0.50, "p50", RGBColor(31, 119, 180)),
    (0.90, "p90", RGBColor(255, 127, 14)),
    (0.99, "p99", RGBColor(214, 39, 40)),
];

type Fallible = Result<(), Box<dyn std::error::Error>>;

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn no_data(area: &DrawingArea<SVGBackend<'_>, Shift>, title: &str) -> Fallible {
    area.titled(title, ("sans-serif", 20))?.draw(&Text::new(
        "no data",
        (20, 20),
        ("sans-serif", 16).into_font(),
    ))?;
    Ok(())
}

/// One timeline panel: p50/p90/p99 of `series` (one histogram per interval) against time.
fn timeline_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    interval_s: f64,
    series: &[Hist],
) -> Fallible {
    if series.iter().all(Hist::is_empty) {
        return no_data(area, title);
    }
    let x_max = (series.len() as f64 * interval_s).max(interval_s);
    let y_max = series
        .iter()
        .map(|h| ms(h.quantile(0.99)))
        .fold(0.0, f64::max)
        .max(0.001)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc("latency (ms)")
        .draw()?;
    for (q, name, color) in QUANTILES {
        let points = series
            .iter()
            .enumerate()
            .filter(|(_, h)| !h.is_empty())
            .map(|(i, h)| ((i as f64 + 0.5) * interval_s, ms(h.quantile(q))));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn draw_timeline(report: &Report, path: &Path) -> Fallible {
    let stores: Vec<&String> = report.total.stores.keys().collect();
    let panels = stores.len() as u32 + 1;
    let root = SVGBackend::new(path, (WIDTH, PANEL_HEIGHT * panels)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((panels as usize, 1));
    let tl = &report.timeline;
    let e2e: Vec<Hist> = tl
        .intervals
        .iter()
        .map(|iv| iv.latency_us.unpack())
        .collect();
    timeline_panel(
        &areas[0],
        "end-to-end latency from intended start: p50 / p90 / p99",
        tl.interval_s,
        &e2e,
    )?;
    for (area, store) in areas[1..].iter().zip(stores) {
        let reads: Vec<Hist> = tl
            .intervals
            .iter()
            .map(|iv| {
                iv.read_us
                    .get(store)
                    .map(|p| p.unpack())
                    .unwrap_or_default()
            })
            .collect();
        timeline_panel(
            area,
            &format!("{store}: read latency (worker-timed) p50 / p90 / p99"),
            tl.interval_s,
            &reads,
        )?;
    }
    root.present()?;
    Ok(())
}

/// x = -log10(1 - q): 0 → p0, 1 → p90, 2 → p99, 3 → p99.9 — the tail gets room.
fn nines(q: f64) -> f64 {
    -(1.0 - q).log10()
}

fn percentile_label(x: &f64) -> String {
    let q = 1.0 - 10f64.powf(-x);
    format!("p{}", (q * 1000.0).round() / 10.0)
}

fn draw_distribution(report: &Report, path: &Path) -> Fallible {
    let stores: Vec<(&String, &crate::report::StoreStats)> = report.total.stores.iter().collect();
    let panels = stores.len().max(1) as u32;
    let root = SVGBackend::new(path, (WIDTH, PANEL_HEIGHT * panels)).into_drawing_area();
    root.fill(&WHITE)?;
    if stores.is_empty() {
        no_data(&root, "read latency distribution")?;
        root.present()?;
        return Ok(());
    }
    let areas = root.split_evenly((panels as usize, 1));
    for (area, (store, s)) in areas.iter().zip(stores) {
        let sets: [(&str, &Hist, RGBColor); 4] = [
            ("read hit", &s.read_hit_us, RGBColor(44, 160, 44)),
            ("read miss", &s.read_miss_us, RGBColor(214, 39, 40)),
            ("read all", &s.read_us, RGBColor(127, 127, 127)),
            ("write", &s.write_us, RGBColor(31, 119, 180)),
        ];
        let title = format!("{store}: latency by percentile (worker-timed)");
        if sets.iter().all(|(_, h, _)| h.is_empty()) {
            no_data(area, &title)?;
            continue;
        }
        let x_max = 3.0; // p99.9
        let y_max = sets
            .iter()
            .map(|(_, h, _)| ms(h.quantile(0.999)))
            .fold(0.0, f64::max)
            .max(0.001)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(&title, ("sans-serif", 20))
            .margin(10)
            .margin_right(40)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
        chart
            .configure_mesh()
            .x_desc("percentile (log scale of 1 - q)")
            .y_desc("latency (ms)")
            .x_label_formatter(&percentile_label)
            .x_labels(4)
            .draw()?;
        for (name, h, color) in sets {
            if h.is_empty() {
                continue;
            }
            let points = (0..=300).map(|i| {
                let x = i as f64 * x_max / 300.0;
                let q = 1.0 - 10f64.powf(-x);
                (nines(q).min(x_max), ms(h.quantile(q)))
            });
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))?
                .label(format!("{name} (n={})", h.len()))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Writes `timeline.svg` and `latency.svg` into `dir`.
pub fn write_all(report: &Report, dir: &Path) -> anyhow::Result<()> {
    draw_timeline(report, &dir.join("timeline.svg")).map_err(|e| anyhow!("timeline.svg: {e}"))?;
    draw_distribution(report, &dir.join("latency.svg")).map_err(|e| anyhow!("latency.svg: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nines_axis_table() {
        for (q, x, label) in [
            (0.0, 0.0, "p0"),
            (0.9, 1.0, "p90"),
            (0.99, 2.0, "p99"),
            (0.999, 3.0, "p99.9"),
        ] {
            assert!((nines(q) - x).abs() < 1e-9, "q={q}");
            assert_eq!(percentile_label(&x), label);
        }
    }
}
