//! What the probes may spend: a configuration's month projected, and the rule every arming (a
//! start, the cron's tick) is checked by, over what would run after it.

/// Var: the most a start of the probes may project to cost a month, in USD.
pub const BUDGET_VAR: &str = "PROBE_BUDGET_USD";
/// Room for the default fleet (11 hints and 31 members) at 300 s, projected before any answer
/// was measured ([`ANSWER_USD_CEILING`]) and after (docs/measured.md).
pub const DEFAULT_BUDGET_USD: f64 = 50.0;
pub const MAX_BUDGET_USD: f64 = 1_000_000.0;
/// What one answer is taken to cost before any was measured: about twice what one costs with
/// every store configured (docs/measured.md).
pub const ANSWER_USD_CEILING: f64 = 0.00005;
/// Seconds in the 30-day month every bill is projected over.
const MONTH_S: f64 = 2_592_000.0;

/// What a configuration of the probes is projected to cost a month: the figure a start is
/// checked against [`ProbeConfig::budget_usd`] with.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Projection {
    pub monthly_usd: f64,
    /// Vantage points × wakes a month × 2: every wake taken to be cold (a cold answer, then a
    /// warm one).
    pub answers_per_month: f64,
    pub per_answer_usd: f64,
    /// `measured` (the last day's answers, priced) or `ceiling` ([`ANSWER_USD_CEILING`]).
    pub per_answer_from: &'static str,
    pub budget_usd: f64,
}

impl Projection {
    /// Wakes a second of the probes projected (two answers each).
    pub fn wakes_per_s(&self) -> f64 {
        self.answers_per_month / 2.0 / MONTH_S
    }
}

/// The month of probes waking every `every_s` seconds, against `budget_usd`: each wake cold (two
/// answers), each answer at its measured cost or [`ANSWER_USD_CEILING`].
pub fn project(
    every_s: impl IntoIterator<Item = u32>,
    budget_usd: f64,
    measured_per_answer_usd: Option<f64>,
) -> Projection {
    let (per_answer_usd, per_answer_from) = match measured_per_answer_usd {
        Some(usd) if usd.is_finite() && usd > 0.0 => (usd, "measured"),
        _ => (ANSWER_USD_CEILING, "ceiling"),
    };
    let answers_per_month: f64 = every_s
        .into_iter()
        .map(|e| MONTH_S / f64::from(e.max(1)) * 2.0)
        // Not `sum()`: an empty f64 sum is -0.0, which JSON writes as `-0.0`.
        .fold(0.0, |a, b| a + b);
    Projection {
        monthly_usd: (answers_per_month * per_answer_usd * 100.0).round() / 100.0,
        answers_per_month,
        per_answer_usd,
        per_answer_from,
        budget_usd,
    }
}

/// What arms probes: a start (its probes, at its interval) or the cron's tick (each not stopped,
/// at its own interval).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arming {
    Start,
    Tick,
}

impl Arming {
    pub fn as_str(self) -> &'static str {
        match self {
            Arming::Start => "start",
            Arming::Tick => "tick",
        }
    }
}

/// A probe as the budget counts it, from its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeNow {
    /// One of the probes the arming is for (a start's points, or the configuration's for the
    /// cron); else a probe outside them, which it leaves as it is.
    pub armed_here: bool,
    pub running: bool,
    pub stopped: bool,
    /// Its own interval; 0 when it never ran.
    pub every_s: u32,
}

impl ProbeNow {
    /// The cron's tick would arm it: one of the configuration's, neither stopped nor running
    /// (no alarm: its chain died, or it never started).
    pub fn tick_arms(&self) -> bool {
        self.armed_here && !self.stopped && !self.running
    }

    /// A probe of the arming whose status could not be read: counted as if it would run.
    pub fn unknown() -> ProbeNow {
        ProbeNow {
            armed_here: true,
            running: true,
            stopped: false,
            every_s: 0,
        }
    }
}

/// The interval of each probe that would run after `arming` at `every_s` (the start's, or the
/// vars' for the cron).
pub fn after_arming(probes: &[ProbeNow], arming: Arming, every_s: u32) -> Vec<u32> {
    probes
        .iter()
        .filter_map(|p| match (p.armed_here, arming) {
            (false, _) => p.running.then_some(p.every_s.max(1)),
            (true, Arming::Start) => Some(every_s),
            (true, Arming::Tick) if p.stopped => None,
            (true, Arming::Tick) => Some(if p.every_s > 0 { p.every_s } else { every_s }),
        })
        .collect()
}
