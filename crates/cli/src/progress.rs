//! Live progress: an `indicatif` bar on a terminal, plain periodic lines otherwise (CI logs,
//! pipes), both fed from the collector's snapshot.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use kvbench_report::collect::Snapshot;
use kvbench_report::hist::fmt_ms;
use kvbench_report::print::text::tty;

pub struct Progress {
    bar: Option<ProgressBar>,
    planned: Duration,
    start: Instant,
    line_every: Duration,
    next_line: Duration,
}

/// One status line: elapsed/remaining, achieved rate, in flight, errors, p50/p99 per store.
pub fn status_line(
    snap: &Snapshot,
    in_flight: u64,
    elapsed: Duration,
    planned: Duration,
) -> String {
    let secs = elapsed.as_secs_f64().max(1e-3);
    let mut line = format!(
        "{:>4.0}s / {:.0}s left | {:.1} req/s | in flight {} | errors {}",
        elapsed.as_secs_f64(),
        planned.saturating_sub(elapsed).as_secs_f64(),
        snap.sent as f64 / secs,
        in_flight,
        snap.failed
    );
    for (store, p50, p99) in &snap.stores {
        line.push_str(&format!(
            " | {} p50 {} p99 {} ms",
            tty(store),
            fmt_ms(*p50),
            fmt_ms(*p99)
        ));
    }
    line
}

impl Progress {
    /// A bar when stdout is a terminal, plain lines every `line_every` otherwise.
    pub fn new(planned: Duration, line_every: Duration) -> Progress {
        let bar = std::io::stdout().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(
                Some(planned.as_secs().max(1)),
                ProgressDrawTarget::stdout(),
            );
            bar.set_style(
                ProgressStyle::with_template("{elapsed_precise} [{bar:25}] {msg}")
                    .expect("static template")
                    .progress_chars("=> "),
            );
            bar
        });
        Progress {
            bar,
            planned,
            start: Instant::now(),
            line_every,
            next_line: line_every,
        }
    }

    /// Printed once the Ctrl-C handler is in place (tests wait for this line).
    pub fn started(&mut self, text: &str) {
        self.start = Instant::now();
        self.println(text);
    }

    pub fn println(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{text}");
                let _ = out.flush();
            }
        }
    }

    pub fn update(&mut self, snap: &Snapshot, in_flight: u64) {
        let elapsed = self.start.elapsed();
        match &self.bar {
            Some(bar) => {
                bar.set_position(elapsed.as_secs().min(self.planned.as_secs()));
                bar.set_message(status_line(snap, in_flight, elapsed, self.planned));
            }
            None => {
                if elapsed >= self.next_line {
                    self.next_line += self.line_every;
                    self.println(&status_line(snap, in_flight, elapsed, self.planned));
                }
            }
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_names_from_answers_reach_the_terminal_escaped() {
        let snap = Snapshot {
            stores: vec![("kv\x1b[2J".into(), 1500, 9000)],
            ..Snapshot::default()
        };
        let line = status_line(&snap, 0, Duration::from_secs(1), Duration::from_secs(1));
        assert!(line.contains(r"kv\u{1b}[2J p50"), "{line}");
    }

    #[test]
    fn status_line_shows_every_figure() {
        let snap = Snapshot {
            scheduled: 100,
            sent: 100,
            answered: 98,
            failed: 2,
            stores: vec![("kv".into(), 1500, 9000)],
        };
        let line = status_line(&snap, 3, Duration::from_secs(10), Duration::from_secs(30));
        assert_eq!(
            line,
            "  10s / 20s left | 10.0 req/s | in flight 3 | errors 2 | kv p50 1.50 p99 9.00 ms"
        );
    }
}
