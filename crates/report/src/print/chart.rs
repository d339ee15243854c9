//! Charts as SVG text (plotters, no font or system dependencies) that compare the stores on shared
//! axes, the way the published comparison does: one timeline per percentile (p90 and p99 first)
//! with every store as a line on a log latency axis (`timeline.svg` over warm reads,
//! `timeline-hits.svg` over warm hits only), and every store's latency-by-percentile curve on one
//! log-scaled percentile axis (`latency.svg`). Cold answers are in none of them (the latency
//! table's cold rows). A store keeps one colour in every chart.

use std::collections::BTreeMap;

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::hist::{Hist, Packed};
use crate::interval::{IntervalError, LEVEL};
use crate::report::{Interval, Report};

const WIDTH: u32 = 1000;
const PANEL_HEIGHT: u32 = 330;
/// Timelines with more intervals than this are drawn over wider bins (histograms added), so a
/// line stays readable; a percentile's panel widens its bins further until they hold the reads
/// it needs ([`reads_needed`]).
pub const MAX_POINTS: usize = 120;
/// In the order the panels are drawn: the published comparison's view (p90, p99) first.
const TIMELINE_QUANTILES: [(f64, &str); 3] = [(0.90, "p90"), (0.99, "p99"), (0.50, "p50")];
/// The end-to-end line in every timeline.
const E2E: &str = "end-to-end";

type Fallible = Result<(), Box<dyn std::error::Error>>;
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// One rendered chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// File name in the report directory.
    pub file: &'static str,
    /// What it shows, for the HTML page.
    pub title: &'static str,
    pub svg: String,
}

/// A store's colour: fixed for the stores the worker knows (so every report and chart agrees),
/// then a spare palette in name order for any other.
pub fn color(store: &str, others: &[&str]) -> RGBColor {
    const KNOWN: [(&str, RGBColor); 9] = [
        ("kv", RGBColor(243, 128, 32)),     // Cloudflare orange
        ("upstash", RGBColor(0, 163, 108)), // Upstash green
        ("denokv", RGBColor(40, 40, 40)),   // Deno black
        ("do", RGBColor(31, 119, 180)),     // blue
        ("d1", RGBColor(148, 103, 189)),    // purple
        ("r2", RGBColor(140, 86, 75)),      // brown
        ("cache", RGBColor(188, 189, 34)),  // olive
        ("redis", RGBColor(214, 39, 40)),   // red
        (E2E, RGBColor(150, 150, 150)),     // grey
    ];
    const SPARE: [RGBColor; 4] = [
        RGBColor(23, 190, 207),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(255, 187, 120),
    ];
    if let Some((_, c)) = KNOWN.iter().find(|(n, _)| *n == store) {
        return *c;
    }
    let i = others.iter().position(|o| *o == store).unwrap_or(0);
    #[allow(clippy::indexing_slicing)] // On the allowed list of tests/tests/panics.rs.
    SPARE[i % SPARE.len()]
}

/// Hex form of a store's colour, for the HTML page's legend and bars.
pub fn color_hex(store: &str, report: &Report) -> String {
    let c = color(store, &unknown_stores(report));
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

fn unknown_stores(report: &Report) -> Vec<&str> {
    let known = [
        "kv", "upstash", "denokv", "do", "d1", "r2", "cache", "redis",
    ];
    report
        .total
        .stores
        .keys()
        .map(String::as_str)
        .filter(|s| !known.contains(s))
        .collect()
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn no_data(area: &Area<'_>, title: &str) -> Fallible {
    say(area, title, "no data")
}

/// A panel with a sentence instead of a plot.
fn say(area: &Area<'_>, title: &str, what: &str) -> Fallible {
    area.titled(title, ("sans-serif", 20))?.draw(&Text::new(
        what.to_string(),
        (20, 20),
        ("sans-serif", 16).into_font(),
    ))?;
    Ok(())
}

/// One line: per bin, its reads and their [`TIMELINE_QUANTILES`] (`None`: no read in it). Each
/// bin's histogram lives only while its percentiles are read, so a long timeline of large
/// intervals never holds them all at once.
struct Series {
    name: String,
    bins: Vec<Option<(u64, [u64; 3])>>,
}

/// The fewest reads a point at percentile `q` needs: what every table needs to print it as a
/// number (its 95% interval exists: p50 6, p90 36, p99 368). A bin with fewer is not drawn.
fn reads_needed(q: f64) -> u64 {
    match crate::interval::ranks(1, q, LEVEL) {
        Err(IntervalError::TooFew { needed, .. }) => needed,
        _ => 1,
    }
}

/// Timeline intervals per bin for a line of `reads` reads at percentile `q`: at most
/// [`MAX_POINTS`] bins, and wide enough that an even spread of its reads gives each bin what
/// [`reads_needed`] asks (a 30-minute run at 10 reads a second, 60 intervals of 30 s: 60 bins for
/// p90, 30 of 600 reads for p99).
fn per_bin(report: &Report, reads: u64, q: f64) -> usize {
    let intervals = report.timeline.intervals.len().max(1);
    let fewest = intervals.div_ceil(MAX_POINTS).max(1);
    let needed = reads_needed(q) as f64;
    let even = (needed * intervals as f64 / reads.max(1) as f64).ceil() as usize;
    even.clamp(fewest, intervals)
}

fn bin_quantiles<'a>(parts: impl Iterator<Item = Option<&'a Packed>>) -> Option<(u64, [u64; 3])> {
    let mut h = Hist::default();
    for p in parts.flatten() {
        h.add(&p.unpack());
    }
    (!h.is_empty()).then(|| (h.len(), h.quantiles(&TIMELINE_QUANTILES.map(|(q, _)| q))))
}

/// One chart's lines, binned once for each bin width its panels ask for: the stores' (warm
/// reads, or hits only), or end-to-end's.
struct Binned<'a> {
    report: &'a Report,
    hits_only: bool,
    done: BTreeMap<(usize, bool), Vec<Series>>,
}

impl<'a> Binned<'a> {
    fn new(report: &'a Report, hits_only: bool) -> Binned<'a> {
        Binned {
            report,
            hits_only,
            done: BTreeMap::new(),
        }
    }

    /// Intervals per bin for the stores' panel of percentile `q`: sized for the busiest store.
    fn stores_per_bin(&self, q: f64) -> usize {
        let hits_only = self.hits_only;
        let busiest = self
            .report
            .total
            .stores
            .values()
            .map(|s| {
                if hits_only {
                    &s.read_hit_us
                } else {
                    &s.read_us
                }
                .len()
            })
            .max()
            .unwrap_or(0);
        per_bin(self.report, busiest, q)
    }

    /// The stores' lines (or end-to-end's, `e2e`) over bins of `per_bin` intervals.
    fn lines(&mut self, per_bin: usize, e2e: bool) -> &[Series] {
        let (report, hits_only) = (self.report, self.hits_only);
        self.done.entry((per_bin, e2e)).or_insert_with(|| {
            let line = |name: &str, part: &dyn Fn(&'a Interval) -> Option<&'a Packed>| Series {
                name: name.to_string(),
                bins: report
                    .timeline
                    .intervals
                    .chunks(per_bin.max(1))
                    .map(|c| bin_quantiles(c.iter().map(part)))
                    .collect(),
            };
            if e2e {
                return vec![line(E2E, &|iv| Some(&iv.latency_us))];
            }
            report
                .total
                .stores
                .keys()
                .map(|store| {
                    line(store, &|iv| {
                        if hits_only {
                            iv.read_hit_us.get(store)
                        } else {
                            iv.read_us.get(store)
                        }
                    })
                })
                .collect()
        })
    }
}

/// One line of a timeline panel: its legend name, colour and stroke, and its points.
struct Line {
    name: String,
    color: RGBColor,
    stroke: u32,
    points: Vec<(f64, f64)>,
}

/// The points of `s` at its `qi`th quantile, one per bin `width_s` wide with the reads that
/// percentile needs.
fn points(s: &Series, width_s: f64, qi: usize) -> Vec<(f64, f64)> {
    let Some((q, _)) = TIMELINE_QUANTILES.get(qi) else {
        return Vec::new();
    };
    let needed = reads_needed(*q);
    s.bins
        .iter()
        .enumerate()
        .filter_map(|(i, b)| {
            let (n, v) = (*b)?;
            let v = *v.get(qi)?;
            (n >= needed).then(|| ((i as f64 + 0.5) * width_s, ms(v)))
        })
        .collect()
}

/// Lines over time on shared axes, with the legend in a band of its own.
/// `empty` says why when no line has a point.
fn timeline_panel(
    area: &Area<'_>,
    title: &str,
    x_max: f64,
    lines: &[Line],
    empty: &str,
) -> Fallible {
    if lines.iter().all(|l| l.points.is_empty()) {
        return say(area, title, empty);
    }
    // A log latency axis: stores 100× apart (an in-colo cache at 0.5 ms, a cross-ocean
    // database at 150 ms) each keep their own shape instead of the faster lying flat on zero.
    let (y_min, y_max) = log_range(lines.iter().flat_map(|l| l.points.iter().map(|(_, y)| *y)));
    // Title, then a band for the legend row (so it never hides a point), then the plot.
    let body = area.titled(title, ("sans-serif", 20))?;
    let (band, plot) = body.split_vertically(LEGEND_BAND);
    let mut chart = ChartBuilder::on(&plot)
        .margin(10)
        .margin_right(20)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, log_axis(y_min, y_max))?;
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc("latency (ms, log scale)")
        .y_label_formatter(&|v| tick_label(*v))
        .y_max_light_lines(0)
        .x_max_light_lines(1)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 14))
        .draw()?;
    for l in lines.iter().filter(|l| !l.points.is_empty()) {
        let style = l.color.stroke_width(l.stroke);
        let points: Vec<(f64, f64)> = l.points.iter().map(|(x, y)| (*x, y.max(y_min))).collect();
        // A single bin is a point, not a line: mark every point so short runs still show.
        chart.draw_series(LineSeries::new(points.clone(), style))?;
        chart.draw_series(points.iter().map(|p| Circle::new(*p, 2, l.color.filled())))?;
    }
    let items: Vec<(&str, RGBColor)> = lines.iter().map(|l| (l.name.as_str(), l.color)).collect();
    legend_row(&band, &items)?;
    Ok(())
}

/// Height of the band above a timeline's plot that holds its legend.
const LEGEND_BAND: u32 = 26;

/// The legend as one row in the band under the caption: a coloured stroke and the name per
/// series, left to right.
fn legend_row(area: &Area<'_>, items: &[(&str, RGBColor)]) -> Fallible {
    let y = (LEGEND_BAND as i32) / 2;
    let mut x = 80;
    for (name, c) in items {
        area.draw(&PathElement::new(
            vec![(x, y), (x + 22, y)],
            c.stroke_width(3),
        ))?;
        area.draw(&Text::new(
            name.to_string(),
            (x + 28, y - 8),
            ("sans-serif", 15).into_font(),
        ))?;
        x += 28 + 9 * name.len() as i32 + 24;
    }
    Ok(())
}

/// The end-to-end panel's lines: one per percentile, in grey, each over bins sized for it; the
/// p50 line's bin width, s (the finest).
fn e2e_lines(binned: &mut Binned<'_>) -> (f64, Vec<Line>) {
    // Darker for a higher percentile, in TIMELINE_QUANTILES' order (p90, p99, p50).
    const GREYS: [RGBColor; 3] = [
        RGBColor(130, 130, 130),
        RGBColor(40, 40, 40),
        RGBColor(190, 190, 190),
    ];
    let report = binned.report;
    let answers = report.total.latency_us.len();
    let finest = report.timeline.interval_s * per_bin(report, answers, 0.50) as f64;
    let mut lines = Vec::with_capacity(3);
    for (qi, ((q, name), grey)) in TIMELINE_QUANTILES.iter().zip(GREYS).enumerate() {
        let per_bin = per_bin(report, answers, *q);
        let width_s = report.timeline.interval_s * per_bin as f64;
        lines.push(Line {
            name: format!("{E2E} {name}"),
            color: grey,
            stroke: 2,
            points: binned
                .lines(per_bin, true)
                .first()
                .map(|s| points(s, width_s, qi))
                .unwrap_or_default(),
        });
    }
    (finest, lines)
}

/// Why a stores' panel has no point: no read, or no bin with the reads its percentile needs.
fn no_point(series: &[Series], name: &str, q: f64) -> String {
    let most = series
        .iter()
        .flat_map(|s| s.bins.iter().flatten().map(|(n, _)| *n))
        .max()
        .unwrap_or(0);
    if most == 0 {
        return "no data".into();
    }
    format!(
        "too few reads for {name} over time: the fullest bin has {most}, a point needs {}",
        reads_needed(q)
    )
}

fn draw_timeline(report: &Report, hits_only: bool, svg: &mut String) -> Fallible {
    let others = unknown_stores(report);
    let x_max = (report.timeline.intervals.len().max(1)) as f64 * report.timeline.interval_s;
    let root = SVGBackend::with_string(svg, (WIDTH, PANEL_HEIGHT * 4)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((4, 1));
    let what = if hits_only {
        "warm reads that hit"
    } else {
        "warm reads"
    };
    let mut binned = Binned::new(report, hits_only);
    // One panel per percentile with every store on the same axes, each over bins wide enough
    // for its percentile; end-to-end (network, worker and queueing) gets a panel of its own,
    // so its larger scale does not flatten the stores.
    for (qi, (area, (q, name))) in areas.iter().zip(TIMELINE_QUANTILES).enumerate() {
        let per_bin = binned.stores_per_bin(q);
        let width_s = report.timeline.interval_s * per_bin as f64;
        let series = binned.lines(per_bin, false);
        let lines: Vec<Line> = series
            .iter()
            .map(|s| Line {
                name: s.name.clone(),
                color: color(&s.name, &others),
                stroke: 2,
                points: points(s, width_s, qi),
            })
            .collect();
        let title = format!(
            "{name} read latency, {what} (worker-timed), per {} s; a bin of fewer than {} reads is not drawn",
            fmt_s(width_s),
            reads_needed(q)
        );
        timeline_panel(area, &title, x_max, &lines, &no_point(series, name, q))?;
    }
    let (width_s, lines) = e2e_lines(&mut binned);
    let by = if report.runs.iter().all(|r| r.latency_from == "worker") {
        "the worker's own"
    } else {
        "the load generator's"
    };
    let title = format!(
        "end-to-end latency ({by}), p50 per {} s, p90 and p99 over wider bins",
        fmt_s(width_s)
    );
    if let Some(area) = areas.get(3) {
        timeline_panel(area, &title, x_max, &lines, "no data")?;
    }
    root.present()?;
    Ok(())
}

fn fmt_s(s: f64) -> String {
    if (s - s.round()).abs() < 1e-9 {
        format!("{}", s.round() as u64)
    } else {
        format!("{s:.1}")
    }
}

/// x = -log10(1 - q): 0 → p0, 1 → p90, 2 → p99, 3 → p99.9 — the tail gets room.
fn nines(q: f64) -> f64 {
    -(1.0 - q).log10()
}

fn percentile_label(x: &f64) -> String {
    let q = 1.0 - 10f64.powf(-x);
    format!("p{}", (q * 1000.0).round() / 10.0)
}

/// Latency by percentile: every store's curve of one operation on shared axes.
/// The latency axis of the distribution panel, log-scaled too: stores differ by orders of
/// magnitude (a KV cache miss against an in-region Redis hit), and a linear axis would flatten
/// the faster ones onto zero.
fn latency_range(curves: &[&(&str, &Hist)]) -> (f64, f64) {
    let floor = 0.05;
    let y_min = curves
        .iter()
        .map(|(_, h)| ms(h.quantile(0.0)))
        .fold(f64::INFINITY, f64::min)
        .max(floor)
        * 0.8;
    let y_max = curves
        .iter()
        .map(|(_, h)| ms(h.max()))
        .fold(0.0, f64::max)
        .max(y_min * 2.0)
        * 1.25;
    (y_min, y_max)
}

/// A histogram's percentile curve: 301 points from p0 to `x_max` nines, none below `y_min`.
fn percentile_curve(h: &Hist, x_max: f64, y_min: f64) -> impl Iterator<Item = (f64, f64)> + '_ {
    (0..=300).map(move |i| {
        let x = i as f64 * x_max / 300.0;
        let q = 1.0 - 10f64.powf(-x);
        (nines(q).min(x_max), ms(h.quantile(q)).max(y_min))
    })
}

fn distribution_panel(
    area: &Area<'_>,
    title: &str,
    curves: &[(&str, &Hist)],
    others: &[&str],
) -> Fallible {
    let curves: Vec<_> = curves.iter().filter(|(_, h)| !h.is_empty()).collect();
    if curves.is_empty() {
        return no_data(area, title);
    }
    let x_max = 3.0; // p99.9
    let (y_min, y_max) = latency_range(&curves);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .margin_right(40)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, log_axis(y_min, y_max))?;
    chart
        .configure_mesh()
        .x_desc("percentile (log scale of 1 - q)")
        .y_desc("latency (ms, log scale)")
        .x_label_formatter(&percentile_label)
        .y_label_formatter(&|v| tick_label(*v))
        .x_labels(4)
        .y_max_light_lines(0)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 14))
        .draw()?;
    for (name, h) in curves {
        let c = color(name, others);
        chart
            .draw_series(LineSeries::new(
                percentile_curve(h, x_max, y_min),
                c.stroke_width(2),
            ))?
            .label(format!("{name} (n={})", h.len()))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    // Percentile curves only rise: the lower right corner is always free.
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// The bounds of a log latency axis over `values` (ms): a little room below the lowest and above
/// the highest, never below 1 µs, at least a factor of 2 wide.
fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let lo = if lo.is_finite() { lo } else { 1.0 };
    let y_min = lo.max(0.001) * 0.8;
    let y_max = hi.max(y_min * 2.0) * 1.25;
    (y_min, y_max)
}

/// A log-scaled latency axis over [lo, hi] ms with its 1-2-5 ticks.
fn log_axis(
    lo: f64,
    hi: f64,
) -> plotters::coord::combinators::WithKeyPoints<plotters::coord::combinators::LogCoord<f64>> {
    (lo..hi).log_scale().with_key_points(log_ticks(lo, hi))
}

/// 1-2-5 ticks across [lo, hi] for a log axis, always including one at or below `lo`'s decade
/// so the low end is labelled.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let t = decade * m;
            if t >= lo && t <= hi {
                ticks.push(t);
            }
        }
        decade *= 10.0;
    }
    if ticks.len() < 2 {
        ticks = vec![lo, hi];
    }
    ticks
}

fn tick_label(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').to_string()
    }
}

fn draw_distribution(report: &Report, svg: &mut String) -> Fallible {
    let others = unknown_stores(report);
    let stores = &report.total.stores;
    let root = SVGBackend::with_string(svg, (WIDTH, PANEL_HEIGHT * 3)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((3, 1));
    type Pick = fn(&crate::report::StoreStats) -> &Hist;
    let panels: [(&str, Pick); 3] = [
        (
            "warm reads, all (worker-timed): latency by percentile",
            |s| &s.read_us,
        ),
        (
            "warm reads that hit (worker-timed): latency by percentile",
            |s| &s.read_hit_us,
        ),
        (
            "warm writes on a miss (worker-timed): latency by percentile",
            |s| &s.write_us,
        ),
    ];
    for (area, (title, pick)) in areas.iter().zip(panels) {
        let curves: Vec<(&str, &Hist)> =
            stores.iter().map(|(n, s)| (n.as_str(), pick(s))).collect();
        distribution_panel(area, title, &curves, &others)?;
    }
    root.present()?;
    Ok(())
}

/// Renders every chart of a report.
pub fn render_all(report: &Report) -> anyhow::Result<Vec<Chart>> {
    type Draw = fn(&Report, &mut String) -> Fallible;
    let charts: [(&'static str, &'static str, Draw); 3] = [
        (
            "timeline.svg",
            "Read latency over time, warm answers: p90, p99 and p50, every store on the same log axis; end-to-end in its own panel",
            |r, s| draw_timeline(r, false, s),
        ),
        (
            "timeline-hits.svg",
            "Read latency over time, warm reads that hit: p90, p99 and p50",
            |r, s| draw_timeline(r, true, s),
        ),
        (
            "latency.svg",
            "Latency by percentile: warm reads, hits and writes, every store on shared axes",
            draw_distribution,
        ),
    ];
    charts
        .into_iter()
        .map(|(file, title, draw)| {
            let mut svg = String::new();
            draw(report, &mut svg).map_err(|e| anyhow!("{file}: {e}"))?;
            Ok(Chart { file, title, svg })
        })
        .collect()
}

/// Per store, the points its line has in the timeline panel of percentile `q` (one of
/// [`TIMELINE_QUANTILES`]'s): bins with the reads `q` needs.
pub fn timeline_points(report: &Report, hits_only: bool, q: f64) -> BTreeMap<String, usize> {
    let qi = TIMELINE_QUANTILES
        .iter()
        .position(|(p, _)| *p == q)
        .unwrap_or(0);
    let mut binned = Binned::new(report, hits_only);
    let per_bin = binned.stores_per_bin(q);
    let width_s = report.timeline.interval_s * per_bin as f64;
    binned
        .lines(per_bin, false)
        .iter()
        .map(|s| (s.name.clone(), points(s, width_s, qi).len()))
        .collect()
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

    #[test]
    fn the_timeline_axis_spans_every_point_on_a_log_scale() {
        // 0.4 ms and 400 ms both inside, with room; a flat line still gets a factor of 2.
        let (lo, hi) = log_range([0.4, 12.0, 400.0].into_iter());
        assert!(
            lo < 0.4 && lo > 0.3 && hi > 400.0 && hi < 501.0,
            "{lo} {hi}"
        );
        let (lo, hi) = log_range([5.0, 5.0].into_iter());
        assert!(hi / lo >= 2.0);
        // Zero (a sub-microsecond bin) and nothing at all stay drawable.
        let (lo, _) = log_range([0.0, 3.0].into_iter());
        assert!(lo > 0.0);
        let (lo, hi) = log_range(std::iter::empty());
        assert!(lo > 0.0 && hi > lo);
    }

    #[test]
    fn log_ticks_are_one_two_five() {
        assert_eq!(log_ticks(0.4, 37.0), [0.5, 1.0, 2.0, 5.0, 10.0, 20.0]);
        assert_eq!(log_ticks(3.0, 4.0), [3.0, 4.0]);
        assert_eq!(tick_label(0.5), "0.5");
        assert_eq!(tick_label(20.0), "20");
    }

    /// `intervals` timeline intervals of 10 s, each with `reads(i)` kv reads.
    fn report_of_reads(intervals: u64, reads: impl Fn(u64) -> u64) -> Report {
        let mut r = Report::empty();
        r.timeline.interval_s = 10.0;
        let mut total = Hist::default();
        for i in 0..intervals {
            let mut h = Hist::default();
            (0..reads(i)).for_each(|k| h.record(1_000 + k));
            total.add(&h);
            r.timeline.intervals.push(Interval {
                start_s: i as f64 * 10.0,
                read_us: [("kv".to_string(), Packed::pack(&h))].into(),
                ..Interval::default()
            });
        }
        r.total.stores.entry("kv".into()).or_default().read_us = total;
        r
    }

    #[test]
    fn a_percentile_is_drawn_only_from_bins_with_the_reads_it_needs() {
        assert_eq!([0.50, 0.90, 0.99].map(reads_needed), [6, 36, 368]);
        // 120 intervals of 20 reads: p50 at every interval, p90 every 2 (40 reads a bin), p99
        // over bins of 19 intervals (380 reads) — the last bin's 5 intervals are not drawn.
        let r = report_of_reads(120, |_| 20);
        let drawn = |q| timeline_points(&r, false, q)["kv"];
        assert_eq!((drawn(0.50), drawn(0.90), drawn(0.99)), (120, 60, 6));
        // A sparse stretch (2 reads an interval for the second half): its p99 bins are left out
        // rather than drawn from a handful of reads.
        let r = report_of_reads(120, |i| if i < 60 { 40 } else { 2 });
        let mut binned = Binned::new(&r, false);
        let per_bin = binned.stores_per_bin(0.99);
        let width_s = r.timeline.interval_s * per_bin as f64;
        let kv = &binned.lines(per_bin, false)[0];
        let drawn: Vec<u64> = kv
            .bins
            .iter()
            .flatten()
            .map(|(n, _)| *n)
            .filter(|n| *n >= 368)
            .collect();
        assert_eq!(points(kv, width_s, 1).len(), drawn.len());
        assert!(
            kv.bins.iter().flatten().any(|(n, _)| *n < 368),
            "{:?}",
            kv.bins
        );
        assert!(!drawn.is_empty());
        // The panel says so.
        let svg = &render_all(&r).unwrap()[0].svg;
        assert!(
            svg.contains("a bin of fewer than 368 reads is not drawn"),
            "{svg:.300}"
        );
    }

    #[test]
    fn a_store_keeps_its_colour() {
        assert_eq!(color("kv", &[]), color("kv", &["zz"]));
        assert_ne!(color("kv", &[]), color("upstash", &[]));
        let others = ["aa", "bb"];
        assert_ne!(color("aa", &others), color("bb", &others));
    }
}
