//! The terminal report: a pure function of the report over `impl Write`, showing the derived
//! [`Summary`] so the terminal, `report.html` and `report.json` agree to the digit.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::comparison::{Comparison, Row};
use crate::cost::Estimate;
use crate::derived::Derived;
use crate::print::view::cell::{ms_cell, percent, quantile_cell, FEW_NOTE};
use crate::print::view::{
    self,
    cost::Cost,
    errors::Errors,
    grid::Pair,
    runs::{Import, Run},
    totals::Totals,
};
use crate::report::Report;
use crate::summary::{Quantiles, Summary};
use crate::trouble::Trouble;

/// A string from the data (store, colo, label, URL, error text) as the terminal may show it:
/// control characters (C0 with tab, CR and LF, DEL, C1 with CSI `\u{9b}`) and bidirectional
/// overrides are written as Rust escapes (`\u{1b}`), so a label cannot clear or retitle the
/// terminal, forge a line or reorder one. HTML and SVG escape for their own syntax instead.
pub fn tty(text: &str) -> Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        c.is_control()
            || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `p50 p90 p95 p99 max mean` columns, ms.
fn quantile_cells(q: &Quantiles) -> String {
    let cell = |ms| quantile_cell(q.count, ms);
    format!(
        "{:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        cell(q.p50_ms),
        cell(q.p90_ms),
        cell(q.p95_ms),
        cell(q.p99_ms),
        ms_cell(q.max_ms),
        ms_cell(q.mean_ms)
    )
}

fn p50_p99(q: &Quantiles) -> String {
    let cell = |ms| quantile_cell(q.count, ms);
    format!("{:>8} {:>8}", cell(q.p50_ms), cell(q.p99_ms))
}

/// Renders the terminal report of `report` and what derives from it.
pub fn render(report: &Report, derived: &Derived, out: &mut impl Write) -> io::Result<()> {
    let summary = &derived.summary;
    render_runs(report, out)?;
    if let Some(c) = &summary.comparison {
        comparison_table(c, out)?;
    }
    if !report.freshness.is_empty() {
        freshness_table(&crate::freshness::rows(&report.freshness), out)?;
    }
    if !summary.trouble.is_empty() {
        trouble_list(&summary.trouble, out)?;
    }
    render_totals(&view::totals::of(report), out)?;
    if let Some(p) = &report.provenance {
        render_provenance(report, p, out)?;
    }
    writeln!(out)?;
    latency_table(summary, out)?;
    render_errors(&view::errors::of(&report.total), out)?;
    if summary.labels.len() > 1 {
        label_table(summary, out)?;
    }
    if !report.vantages.is_empty() {
        vantage_table(report, summary, out)?;
    }
    if !derived.history.series.is_empty() {
        crate::print::history::text(&derived.history, out)?;
    }
    if !summary.colos.is_empty() {
        colo_table(report, summary, out)?;
    }
    if let Some(cost) = &derived.cost {
        writeln!(out)?;
        render_cost(cost, out)?;
    }
    Ok(())
}

/// The report's first lines: its runs, each with its pacer lag and what it imported.
fn render_runs(report: &Report, out: &mut impl Write) -> io::Result<()> {
    let labels: Vec<Cow<str>> = report.labels.keys().map(|l| tty(l)).collect();
    writeln!(
        out,
        "kvbench report ({} run(s); labels: {})",
        report.runs.len(),
        labels.join(", ")
    )?;
    for r in view::runs::of(report) {
        run_lines(&r, out)?;
    }
    Ok(())
}

/// One run: its line, its pacer lag, what it imported.
fn run_lines(r: &Run, out: &mut impl Write) -> io::Result<()> {
    let run = r.run;
    writeln!(
        out,
        "  run {:<12} {} started {}: {} req/s requested for {}, sent for {} s{}{}",
        tty(&run.label),
        tty(&run.url),
        tty(&run.started_at),
        r.rate,
        humantime::format_duration(std::time::Duration::from_secs_f64(run.planned_duration_s)),
        r.sent_s,
        if run.engine == "kvbench" {
            String::new()
        } else {
            format!(" (engine {})", tty(&run.engine))
        },
        if run.interrupted {
            " (INTERRUPTED: partial report)"
        } else {
            ""
        }
    )?;
    if r.has_lag {
        writeln!(
            out,
            "      pacer lag ms: p50 {} p99 {} max {}",
            r.lag_p50, r.lag_p99, r.lag_max
        )?;
    }
    if let Some(i) = &r.import {
        import_line(i, out)?;
    }
    Ok(())
}

/// What a run imported: its lines, its files, and the lines it could not use.
fn import_line(i: &Import, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "      imported {} line(s) from {}; malformed lines {}{}, incomplete requests {}{}{}",
        i.info.lines,
        tty(&i.files),
        i.info.malformed_lines,
        tty(&i.refused),
        i.info.incomplete_requests,
        if i.info.truncated {
            " (file cut short)"
        } else {
            ""
        },
        match i.info.keep_failed {
            Some(n) => format!(", measured but not kept {n}"),
            None => String::new(),
        }
    )
}

/// The whole report's counts, its failures by side, what the latency includes, and the answers
/// by requests in flight.
fn render_totals(t: &Totals, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "achieved rate {} req/s over {} s; scheduled {}, sent {}, answered {} (cold {}), failed {} (not sent {}){}",
        t.achieved_rate_text,
        t.send_window_s,
        t.scheduled,
        t.sent,
        t.answered,
        t.cold,
        t.failed,
        t.not_sent,
        match t.keep_failed {
            Some(n) => format!("; measured but not kept {n}"),
            None => String::new(),
        }
    )?;
    if t.failed > 0 || t.retried > 0 {
        writeln!(
            out,
            "failed on the client's side {} (no byte of an answer reached kvbench), the worker's {} \
             (it answered, not with a /test answer); retried on a new connection {}",
            t.client_failed, t.worker_failed, t.retried
        )?;
    }
    writeln!(out, "end-to-end latency: {}", t.latency_origin)?;
    if !t.concurrent.is_empty() || t.excluded_concurrent > 0 {
        writeln!(
            out,
            "answers by other requests in flight in their isolate: {}{}",
            t.concurrent.join(", "),
            if t.excluded_concurrent > 0 {
                format!("; {} left out (--max-concurrent)", t.excluded_concurrent)
            } else {
                String::new()
            }
        )?;
    }
    Ok(())
}

/// Where and when it ran, the builds, the settings and the raw data.
fn render_provenance(
    report: &Report,
    p: &crate::report::Provenance,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(out, "{}", tty(&super::where_line(report, p)))?;
    let pairs = |m: &BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !p.build.is_empty() {
        writeln!(out, "  build: {}", tty(&pairs(&p.build)))?;
    }
    if !p.settings.is_empty() {
        writeln!(out, "  settings: {}", tty(&pairs(&p.settings)))?;
    }
    if let Some(e) = &p.worker_error {
        writeln!(out, "  not known: {}", tty(e))?;
    }
    if !p.raw.is_empty() {
        let raw: Vec<String> = p
            .raw
            .iter()
            .map(|r| format!("{} {}", r.what, r.href))
            .collect();
        writeln!(out, "  raw data: {}", tty(&raw.join(", ")))?;
    }
    Ok(())
}

/// The answer first: each store ranked by its read p50, every percentile with its interval,
/// each row followed by how steady the store was across the run.
fn comparison_table(c: &Comparison, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "\nthe answer: successful reads of warm answers, ms, each with its {:.0}% interval (order statistics, \
         widened by the spread across the run's timeline windows); ranked by p50, \"tie\": the row above's \
         and its p50 are not told apart — paired, by the ratio of theirs span by span; unpaired, by whether \
         their intervals overlap",
        c.level * 100.0
    )?;
    writeln!(
        out,
        "  {} cold answer(s) left out (the latency table's \"cold\" rows); cold = {}",
        c.cold_answers,
        c.cold_means.join("; ")
    )?;
    let mut vantage = None;
    for row in &c.rows {
        if row.vantage != vantage {
            vantage.clone_from(&row.vantage);
            if let Some(v) = &row.vantage {
                writeln!(out, "vantage point {}:", tty(v))?;
            }
        }
        comparison_row(row, out)?;
    }
    writeln!(out)
}

/// The freshness table ([`crate::freshness`]), columns as wide as their widest cell.
fn freshness_table(rows: &[crate::freshness::Row], out: &mut impl Write) -> io::Result<()> {
    use crate::freshness::{cells, COLUMNS, NOTE, TITLE};
    writeln!(out, "\n{}\n  {NOTE}", TITLE.to_lowercase())?;
    let lines: Vec<[String; 10]> = std::iter::once(COLUMNS.map(String::from))
        .chain(rows.iter().map(cells))
        .collect();
    let width = |i: usize| {
        lines
            .iter()
            .map(|l| l.get(i).map_or(0, |c| c.chars().count()))
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..COLUMNS.len()).map(width).collect();
    for line in &lines {
        let padded: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{:<w$}", tty(c)))
            .collect();
        writeln!(out, "  {}", padded.join("  ").trim_end())?;
    }
    Ok(())
}

/// One row of the answer and the line under it (its stability, or why its intervals are the
/// within-run ones alone), then its flag when its spans disagree.
fn comparison_row(row: &Row, out: &mut impl Write) -> io::Result<()> {
    let rank = if row.tie {
        format!("{} tie", row.rank)
    } else {
        row.rank.to_string()
    };
    writeln!(
        out,
        "  {:<6} {:<10} {:>7} reads  p50 {:<23} p90 {:<23} p99 {:<23} {}{}",
        rank,
        tty(&row.store),
        row.reads,
        row.p50.text(),
        row.p90.text(),
        row.p99.text(),
        row.error_rate
            .map(|r| format!("errors {}  ", percent(r)))
            .unwrap_or_default(),
        // The plan is named in the cost table below.
        row.monthly_usd
            .map(|usd| format!("${usd:.2}/month"))
            .unwrap_or_default()
    )?;
    writeln!(out, "         {}", row.note())?;
    if let Some(flag) = row.flag() {
        writeln!(out, "         {flag}")?;
    }
    if let Some(v) = &row.versus {
        writeln!(out, "         {}", tty(&v.text(&row.store)))?;
    }
    Ok(())
}

/// What went wrong, explained (`crate::trouble`).
fn trouble_list(trouble: &[Trouble], out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "what went wrong (more than {} of their requests or operations):",
        percent(crate::trouble::THRESHOLD)
    )?;
    for t in trouble {
        writeln!(
            out,
            "  {} {}: {} of {} ({}): {}",
            tty(&t.source),
            tty(&t.kind),
            t.count,
            t.of,
            percent(t.share),
            t.cause
        )?;
    }
    writeln!(out)
}

/// The latency table: end to end, then each store's spans.
fn latency_table(summary: &Summary, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "{:<22} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7}",
        "latency (ms)", "count", "p50", "p90", "p95", "p99", "max", "mean", "errors"
    )?;
    for row in &summary.latency {
        writeln!(
            out,
            "{:<22} {:>8} {} {:>7}",
            tty(&row.name),
            row.quantiles.count,
            quantile_cells(&row.quantiles),
            row.errors.map(|e| e.to_string()).unwrap_or_default()
        )?;
    }
    // The legend of every table below too.
    writeln!(out, "({FEW_NOTE})")
}

/// Errors by kind: the requests' (the client's side, then the worker's), then the stores' errors
/// in answers and their timed-out calls.
fn render_errors(e: &Errors, out: &mut impl Write) -> io::Result<()> {
    if e.is_empty() {
        return writeln!(out, "\nno errors");
    }
    writeln!(
        out,
        "\nerrors by kind (requests: the client's, then the worker's; then the stores' errors in answers):"
    )?;
    for r in &e.requests {
        let (side, kind, n) = (r.side.name(), tty(r.kind), r.count);
        if r.example.is_empty() {
            writeln!(out, "  {side:<7} {kind:<16} {n:>8}")?;
        } else {
            writeln!(
                out,
                "  {side:<7} {kind:<16} {n:>8}  e.g. {}",
                tty(r.example)
            )?;
        }
    }
    for s in &e.stores {
        let store = tty(s.store);
        for (kind, n) in &s.errors {
            writeln!(out, "  {store:<7} {:<16} {n:>8}", tty(kind))?;
        }
        if let Some((finished, running)) = s.abandoned {
            writeln!(
                out,
                "  {store:<7} timed-out calls waited for before the next store: {finished} finished, {running} still running",
            )?;
        }
    }
    Ok(())
}

/// One row per label (when the report has more than one).
fn label_table(summary: &Summary, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "\n{:<16} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>8} {:>8}",
        "label",
        "sent",
        "answered",
        "failed",
        "client",
        "worker",
        "retried",
        "rate/s",
        "e2e p50",
        "e2e p99"
    )?;
    for (label, s) in &summary.labels {
        writeln!(
            out,
            "{:<16} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10.2} {}",
            tty(label),
            s.sent,
            s.answered,
            s.failed,
            s.client_failed,
            s.worker_failed,
            s.retried,
            s.achieved_rate,
            p50_p99(&s.latency)
        )?;
    }
    Ok(())
}

/// One row per colo: its answers, end-to-end and each store's read p50/p99.
fn colo_table(report: &Report, summary: &Summary, out: &mut impl Write) -> io::Result<()> {
    let stores: Vec<&str> = report.total.stores.keys().map(String::as_str).collect();
    write!(
        out,
        "\n{:<8} {:>8} {:>17}",
        "colo", "answered", "e2e p50/p99 ms"
    )?;
    for s in &stores {
        write!(out, " {:>17}", format!("{} p50/p99", tty(s)))?;
    }
    writeln!(out)?;
    let rows = view::grid::of(
        &stores,
        summary
            .colos
            .iter()
            .map(|(k, c)| (k, c.answered, &c.latency, &c.read)),
    );
    for row in rows {
        write!(
            out,
            "{:<8} {:>8} {}",
            tty(row.name),
            row.answered,
            pair(&row.e2e)
        )?;
        for c in &row.stores {
            write!(out, " {}", pair(&c.reads))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// A p50 and a p99 in two columns.
fn pair(p: &Pair) -> String {
    format!("{:>8} {:>8}", p.p50, p.p99)
}

/// The vantage × store table ([`view::vantage`]): `*` marks each row's fastest store.
fn vantage_table(report: &Report, summary: &Summary, out: &mut impl Write) -> io::Result<()> {
    write!(
        out,
        "\n{:<20} {:<7} {:<22} {:>6} {:>5} {:>6}",
        "vantage point", "kind", "ran in", "warm", "cold", "failed"
    )?;
    for s in report.total.stores.keys() {
        write!(out, " {:>23}", format!("{} p50/p90/p99", tty(s)))?;
    }
    writeln!(out)?;
    for row in view::vantage::rows(report, summary) {
        vantage_row(&row, out)?;
    }
    writeln!(
        out,
        "(successful reads of the warm answers, ms; ° a row with no warm answer, over its cold ones; * the row's lowest p50; not counted: a member's answers that ran outside its region; {FEW_NOTE})"
    )
}

/// A vantage point's line: where it ran (and the witnesses of it), its counts, its cells.
fn vantage_row(row: &view::vantage::Row, out: &mut impl Write) -> io::Result<()> {
    let p = row.point;
    let kind = if row.warm {
        p.vantage.clone()
    } else {
        format!("{}°", p.vantage)
    };
    let mut ran_in = row.ran_in.clone();
    if !row.placed.is_empty() {
        ran_in = format!("{ran_in} ({})", row.placed);
    }
    if !row.traced.is_empty() {
        ran_in = format!("{ran_in} (trace {})", row.traced);
    }
    if !row.not_placed.is_empty() {
        ran_in = format!("{ran_in} [not counted: {}]", row.not_placed);
    }
    write!(
        out,
        "{:<20} {:<7} {:<22} {:>6} {:>5} {:>6}",
        tty(row.label),
        tty(&kind),
        tty(&ran_in),
        p.warm,
        p.cold,
        p.failed
    )?;
    for c in &row.cells {
        let mark = if c.fastest { "*" } else { " " };
        write!(out, " {:>7} {:>7} {:>6}{mark}", c.p50, c.p90, c.p99)?;
    }
    writeln!(out)
}

/// The cost projection as a table, with every input and the date of every price.
pub fn render_cost(e: &Estimate, out: &mut impl Write) -> io::Result<()> {
    let c = view::cost::of(e);
    writeln!(
        out,
        "cost per 30-day month at {} req/s ({}), USD; units/request measured in this run (successful operations only):",
        c.rps, c.rps_source
    )?;
    writeln!(
        out,
        "{:<8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8} {:>12}  plan (prices as of)",
        "store",
        "rd u/req",
        "wr u/req",
        "$/M rd",
        "$/M wr",
        "GB/month",
        "bandwidth",
        "stored GB",
        "storage",
        "$/month"
    )?;
    for l in &c.lines {
        cost_line(l, out)?;
    }
    if let Some(w) = &c.worker {
        worker_line(w, out)?;
    }
    cost_notes(&c, out)
}

/// A store at a plan, whether it fits, and its billing units.
fn cost_line(l: &view::cost::Line, out: &mut impl Write) -> io::Result<()> {
    let c = l.line;
    writeln!(
        out,
        "{:<8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8} {:>12}  {}{} ({})",
        tty(&c.store),
        l.read_units,
        l.write_units,
        l.read_per_million,
        l.write_per_million,
        l.monthly_gb,
        l.bandwidth_usd,
        l.stored_gb,
        l.storage_usd,
        l.monthly_usd,
        if c.historical { "[withdrawn] " } else { "" },
        tty(&c.plan),
        tty(&c.as_of)
    )?;
    if let Some(why) = &c.over_limit {
        writeln!(out, "         does not fit this plan: {}", tty(why))?;
    }
    for u in &l.units {
        writeln!(
            out,
            "         {} {}/req {}{}",
            u.per_request,
            tty(u.unit),
            u.per_million.map_or(
                "(not in the price table: priced at 0)".to_string(),
                |p| format!("x ${p} per million")
            ),
            u.included
        )?;
    }
    Ok(())
}

/// The worker's plan: its requests and CPU time a month.
fn worker_line(w: &view::cost::Worker, out: &mut impl Write) -> io::Result<()> {
    let l = w.line;
    writeln!(
        out,
        "worker   {}M requests ({} beyond the included), {}M CPU-ms at {} ms a request ({}; {} beyond the included): {} a month  {} ({})",
        w.requests_m,
        w.requests_usd,
        w.cpu_ms_m,
        l.cpu_ms_per_request,
        if l.cpu_given { "given" } else { "assumed: --worker-cpu-ms sets it" },
        w.cpu_usd,
        w.monthly_usd,
        tty(&l.plan),
        tty(&l.as_of)
    )
}

/// Under the cost table: the month at the cheapest plans, what storage assumes, what is not
/// priced.
fn cost_notes(c: &Cost, out: &mut impl Write) -> io::Result<()> {
    if let Some(total) = &c.month {
        writeln!(
            out,
            "the month at each store's cheapest plan that fits, with the worker: {:.2} USD ({})",
            total.usd,
            tty(&total.parts.join(" + "))
        )?;
    }
    writeln!(
        out,
        "stored GB: {} keys × each store's mean value size (at most that many live at once, each for its TTL)",
        c.keys
    )?;
    if !c.failed.is_empty() {
        let failed: Vec<String> = c
            .failed
            .iter()
            .map(|(store, r, w)| format!("{} {r} reads + {w} writes", tty(store)))
            .collect();
        writeln!(
            out,
            "failed operations per request, not priced above (a store may still bill them): {}",
            failed.join("; ")
        )?;
    }
    if c.redis_db != 0 {
        writeln!(
            out,
            "redis: --redis-db {}: a SELECT per connection set up is counted as a command",
            c.redis_db
        )?;
    }
    if c.lines.is_empty() {
        writeln!(out, "  (no priced store in this report)")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::tty;

    #[test]
    fn control_characters_are_escaped_and_text_is_not() {
        let cases = [
            ("fra-1 é 東京", "fra-1 é 東京"),
            ("\x1b[2J\x1b]0;x\x07", r"\u{1b}[2J\u{1b}]0;x\u{7}"),
            ("a\nb\tc\rd\0", r"a\nb\tc\rd\0"),
            ("\u{7f}\u{9b}31m", r"\u{7f}\u{9b}31m"),
            ("abc\u{202e}fed", r"abc\u{202e}fed"),
            (r"back\slash and 'quotes'", r"back\slash and 'quotes'"),
        ];
        for (raw, shown) in cases {
            assert_eq!(tty(raw), shown, "{raw:?}");
        }
        assert!(matches!(tty("plain"), std::borrow::Cow::Borrowed(_)));
    }

    /// An import's refusals by reason are in both printers (report.json's `import.refused`).
    #[test]
    fn import_refusals_are_shown_by_reason() {
        use crate::collect::Collector;
        use crate::report::{ImportInfo, RunInfo};
        use std::time::Duration;

        let refused = [("line_too_long", 2), ("time_outside_run", 1)]
            .map(|(r, n)| (r.to_string(), n))
            .into();
        let report =
            Collector::new(Duration::from_secs(1), Duration::from_secs(1)).finish(RunInfo {
                label: "k6".into(),
                url: String::new(),
                started_at: String::new(),
                requested_rate: 1.0,
                planned_duration_s: 1.0,
                send_window_s: 1.0,
                elapsed_s: 1.0,
                timeout_s: 1.0,
                max_in_flight: 1,
                engine: "k6".into(),
                latency_from: "sent".into(),
                import: Some(ImportInfo {
                    files: vec!["k6.json".into()],
                    lines: 10,
                    malformed_lines: 3,
                    refused,
                    ..ImportInfo::default()
                }),
                ..RunInfo::empty()
            });
        let derived = crate::derived::Derived::of(&report, None);
        let mut text = Vec::new();
        super::render(&report, &derived, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("malformed lines 3 (line_too_long 2, time_outside_run 1), incomplete"),
            "{text}"
        );
        let html = crate::print::html::render(&report, &derived, &[]);
        assert!(
            html.contains(
                "3 malformed line(s) (line_too_long 2, time_outside_run 1), 0 incomplete"
            ),
            "{html}"
        );
    }
}
