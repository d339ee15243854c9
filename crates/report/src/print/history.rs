//! The History section, text and HTML: the changed days in plain words, then one table with a
//! row per store × vantage point × day — its p50 and p99 with their intervals beside the week
//! before's, and the mark. The table's cells are built once ([`rows`]) and printed twice.

use std::fmt::Write as _;
use std::io::{self, Write};

use maud::{html, Markup, Render};

use crate::block::Widened;
use crate::history::{Change, Changed, Day, History, WEEK_DAYS, WEEK_DAYS_MIN};
use crate::interval::{IntervalError, Percentile};
use crate::print::html::Esc;
use crate::print::text::tty;
use crate::print::view::cell::FEW_NOTE;

/// Most changed days listed in words; the table marks every one.
pub const CHANGES_SHOWN: usize = 20;

/// What the section is, under its title.
fn lead() -> String {
    format!(
        "Each store at each vantage point, day by day (UTC): successful reads of warm answers, ms, \
         p50 and p99 each with its 95% interval (order statistics over the day's reads). \
         \"week before\": the {WEEK_DAYS} days before pooled, its interval widened by the spread \
         between those days. ▲ / ▼: the day's interval lies wholly above / below the week \
         before's — compared when at least {WEEK_DAYS_MIN} of those days have reads."
    )
}

/// A figure cell: the value and its interval (`12.34`, `11.90–12.80`), or `few` / `-` alone.
pub struct Figure {
    pub value: String,
    pub interval: Option<String>,
}

impl Figure {
    /// `12.34 (11.90–12.80)`.
    pub fn text(&self) -> String {
        match &self.interval {
            Some(i) => format!("{} ({i})", self.value),
            None => self.value.clone(),
        }
    }

    /// The value, its interval under it.
    fn html(&self) -> Markup {
        html! {
            (Esc(&self.value))
            @if let Some(i) = &self.interval { small class="sub" { (Esc(i)) } }
        }
    }
}

/// One row of the table, as text cells.
pub struct Cells {
    /// Store and vantage point: on the first row of a series only (the rest blank).
    pub store: String,
    pub label: String,
    pub date: String,
    pub reads: String,
    /// The day's p50 and p99.
    pub day: [Figure; 2],
    /// `7 days` (`1 day`), or `-` when no day before has reads.
    pub week: String,
    /// The week before's p50 and p99.
    pub before: [Figure; 2],
    /// `▲ p50 p99`, `▼ p99`, or empty.
    pub change: String,
    /// Which of the day's percentiles moved.
    pub moved: [bool; 2],
}

fn day_figure(f: &Result<Percentile, IntervalError>) -> Figure {
    let ms = |us: u64| us as f64 / 1000.0;
    let alone = |v: &str| Figure {
        value: v.into(),
        interval: None,
    };
    match f {
        Ok(p) => Figure {
            value: format!("{:.2}", ms(p.estimate)),
            interval: Some(format!("{:.2}–{:.2}", ms(p.low), ms(p.high))),
        },
        Err(IntervalError::TooFew { .. }) => alone("few"),
        Err(_) => alone("-"),
    }
}

fn week_figure(f: Option<&Result<Widened, IntervalError>>) -> Figure {
    match f {
        Some(Ok(w)) => day_figure(&Ok(Percentile {
            low: w.low,
            high: w.high,
            ..w.within
        })),
        Some(Err(e)) => day_figure(&Err(*e)),
        None => Figure {
            value: "-".into(),
            interval: None,
        },
    }
}

fn change_text(day: &Day) -> String {
    let mut out = String::new();
    for change in [Change::Above, Change::Below] {
        let ps: Vec<&str> = ["p50", "p99"]
            .into_iter()
            .zip(day.change)
            .filter(|(_, c)| *c == Some(change))
            .map(|(p, _)| p)
            .collect();
        if !ps.is_empty() {
            let _ = write!(
                out,
                "{}{} {}",
                if out.is_empty() { "" } else { " " },
                change.arrow(),
                ps.join(" ")
            );
        }
    }
    out
}

/// The table's rows: every series' days, oldest first — made one at a time as they are
/// printed (a month of a fleet is 10,000 rows).
pub fn rows(h: &History) -> impl Iterator<Item = Cells> + '_ {
    h.series.iter().flat_map(|s| {
        s.days.iter().enumerate().map(move |(i, day)| {
            let first = |name: &str| {
                if i == 0 {
                    name.to_string()
                } else {
                    String::new()
                }
            };
            let week = day.week.as_ref();
            Cells {
                store: first(&s.store),
                label: first(&s.label),
                date: day.date.clone(),
                reads: day.reads.to_string(),
                day: day.figures.each_ref().map(day_figure),
                week: week.map_or("-".into(), |w| match w.days {
                    1 => "1 day".into(),
                    n => format!("{n} days"),
                }),
                before: [0, 1].map(|i| week_figure(week.and_then(|w| w.figures.get(i)))),
                change: change_text(day),
                moved: day.change.map(|c| c.is_some()),
            }
        })
    })
}

/// The changed days in words: at most [`CHANGES_SHOWN`], then how many more.
fn change_lines(changes: &[Changed<'_>]) -> Vec<String> {
    if changes.is_empty() {
        return vec!["no day changed against the week before it".into()];
    }
    let mut out: Vec<String> = changes
        .iter()
        .take(CHANGES_SHOWN)
        .map(Changed::text)
        .collect();
    if changes.len() > CHANGES_SHOWN {
        out.push(format!(
            "… and {} more, marked in the table",
            changes.len() - CHANGES_SHOWN
        ));
    }
    out
}

/// The section in the terminal.
pub fn text(h: &History, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "\nhistory: {}", lead())?;
    for line in change_lines(&h.changes()) {
        writeln!(out, "  {}", tty(&line))?;
    }
    writeln!(
        out,
        "  {:<10} {:<18} {:<10} {:>6}  {:<27} {:<27} {:<7}  {:<27} {:<27} change",
        "store", "vantage", "day", "reads", "p50", "p99", "week", "week p50", "week p99"
    )?;
    for r in rows(h) {
        let ([p50, p99], [week50, week99]) = (&r.day, &r.before);
        let line = format!(
            "  {:<10} {:<18} {:<10} {:>6}  {:<27} {:<27} {:<7}  {:<27} {:<27} {}",
            tty(&r.store),
            tty(&r.label),
            r.date,
            r.reads,
            p50.text(),
            p99.text(),
            r.week,
            week50.text(),
            week99.text(),
            r.change
        );
        writeln!(out, "{}", line.trim_end())?;
    }
    writeln!(out, "  ({FEW_NOTE})")
}

/// The table's head, before its rows: no value from the data in it.
const TABLE_OPEN: &str = "<table class=\"history\"><thead><tr><th>store</th><th>vantage point</th>\
    <th>day</th><th>reads</th><th>p50</th><th>p99</th><th>week before</th>\
    <th>week p50</th><th>week p99</th><th>change</th></tr></thead><tbody>";

/// The section on the page, a row at a time into it (a month of a fleet is 3 MB of rows).
pub fn html(h: &History, out: &mut String) {
    // About 280 bytes a row: grown once, not by doubling.
    out.reserve(h.series.iter().map(|s| s.days.len()).sum::<usize>() * 300);
    html! {
        h2 id="history" { "History" }
        p class="lead" { (Esc(&lead())) }
        ul class="changes" { @for line in change_lines(&h.changes()) { li { (Esc(&line)) } } }
    }
    .render_to(out);
    out.push_str(TABLE_OPEN);
    for r in rows(h) {
        html! {
            tr class=[r.moved.contains(&true).then_some("changed")] {
                @for cell in [&r.store, &r.label, &r.date] { td class="where" { (Esc(cell)) } }
                td { (Esc(&r.reads)) }
                @for (f, moved) in r.day.iter().zip(r.moved) {
                    td class=[moved.then_some("moved")] { (f.html()) }
                }
                td { (Esc(&r.week)) }
                @for f in &r.before { td { (f.html()) } }
                td class="where mark" { (Esc(&r.change)) }
            }
        }
        .render_to(out);
    }
    out.push_str("</tbody></table>");
    html! { p class="note" { (Esc(FEW_NOTE)) } }.render_to(out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::tests::{lines, report, slower_on_day_8};

    fn text_of(h: &History) -> String {
        let mut out = Vec::new();
        text(h, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_changed_day_is_said_first_and_marked_in_the_table() {
        let h = crate::history::of(&slower_on_day_8());
        let t = text_of(&h);
        let mut lines = t.lines().skip(2);
        let said = lines.next().unwrap();
        assert!(said.starts_with("  kv @ FRA: p"), "{t}");
        assert!(said.contains(", above the week before ("), "{said}");
        let marked: Vec<&str> = t
            .lines()
            .filter(|l| l.contains('▲') || l.contains('▼'))
            .collect();
        assert!(
            marked
                .iter()
                .any(|l| l.contains("2026-12-02") && l.ends_with("▲ p50 p99")),
            "{t}"
        );
        // The table's rows: 4 series × 12 days, under its header.
        assert_eq!(rows(&h).count(), 48);
        let page = {
            let mut s = String::new();
            html(&h, &mut s);
            s
        };
        assert!(page.contains("<li>kv @ FRA: p"), "{page}");
        assert_eq!(
            page.matches("<tr class=\"changed\">").count(),
            rows(&h).filter(|r| r.moved.contains(&true)).count()
        );
    }

    #[test]
    fn a_day_of_too_few_reads_prints_few_never_a_number() {
        let per_day = |label: &str, day: i64| {
            if label == "LHR" && day == 10 {
                100
            } else {
                400
            }
        };
        let h = crate::history::of(&report(&lines(11, per_day, |_, _, _| 1.0)));
        let t = text_of(&h);
        let row = t
            .lines()
            .find(|l| l.contains("2026-12-05") && l.contains(" 100 "))
            .unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        // day, reads, p50 and its interval, then p99: `few`.
        let at = cells.iter().position(|c| *c == "100").unwrap();
        assert_eq!(cells[at + 3], "few", "{row}");
    }
}
