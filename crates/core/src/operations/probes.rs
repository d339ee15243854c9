//! The probes' configuration: vantage points (`PROBE_HINTS`, the fleet), `PROBE_EVERY`,
//! `PROBE_KEEP` (within `spec::keep`), the budget var, and a start's query.

use crate::error::ParamError;
use crate::operations::spend::{
    after_arming, project, Arming, ProbeNow, Projection, BUDGET_VAR, DEFAULT_BUDGET_USD,
    MAX_BUDGET_USD,
};
use crate::operations::window::parse_seconds;
use crate::spec::keep::{DEFAULT_KEEP_S, KEEP_VAR, MAX_KEEP_S, MIN_KEEP_S};
/// The keep policy (`spec::keep`), which the probes' configuration and the probe machine read.
use crate::stores::durable::LocationHint;

/// Var: the location hints to probe from, a comma list (default: all eleven).
pub const HINTS_VAR: &str = "PROBE_HINTS";
/// Var: seconds between two answers of one probe.
pub const EVERY_VAR: &str = "PROBE_EVERY";

/// Five minutes: 9 probes x 8,640 answers a month (see docs/cost.md, "What the probes cost").
pub const DEFAULT_EVERY_S: u32 = 300;
/// Shortest interval (the local stack and tests use a few seconds).
pub const MIN_EVERY_S: u32 = 1;
pub const MAX_EVERY_S: u32 = 86_400;

/// The probes of this deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeConfig {
    pub hints: Vec<LocationHint>,
    /// The fleet's placed members (`FLEET`), each called by a probe object of its own.
    pub members: Vec<crate::operations::fleet::Member>,
    pub every_s: u32,
    pub keep_s: u32,
    /// `PROBE_BUDGET_USD`: a start projected to cost more a month is refused.
    pub budget_usd: f64,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            hints: LocationHint::ALL.to_vec(),
            members: Vec::new(),
            every_s: DEFAULT_EVERY_S,
            keep_s: DEFAULT_KEEP_S,
            budget_usd: DEFAULT_BUDGET_USD,
        }
    }
}

impl ProbeConfig {
    /// From the vars; an invalid var is an error naming it.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ParamError> {
        let mut cfg = ProbeConfig::default();
        if let Some(v) = lookup(HINTS_VAR) {
            cfg.hints = parse_hints(HINTS_VAR, &v)?;
        }
        if let Some(v) = lookup(crate::operations::fleet::FLEET_VAR) {
            cfg.members =
                crate::operations::fleet::parse_members(crate::operations::fleet::FLEET_VAR, &v)?;
            // One label, one vantage point: a member named like a location hint would merge
            // with that hint's answers in every report (whether or not PROBE_HINTS lists it now).
            if let Some(m) = cfg
                .members
                .iter()
                .find(|m| LocationHint::ALL.iter().any(|h| h.as_str() == m.label))
            {
                return Err(ParamError::new(
                    crate::operations::fleet::FLEET_VAR,
                    format!(
                        "member {} has the label of a location hint's probe: choose another \
                         (the regions' own ids, e.g. aws:eu-west-1, never clash)",
                        m.label
                    ),
                ));
            }
        }
        if let Some(v) = lookup(EVERY_VAR) {
            cfg.every_s = parse_seconds(EVERY_VAR, &v, MIN_EVERY_S, MAX_EVERY_S)?;
        }
        if let Some(v) = lookup(KEEP_VAR) {
            cfg.keep_s = parse_seconds(KEEP_VAR, &v, MIN_KEEP_S, MAX_KEEP_S)?;
        }
        if let Some(v) = lookup(BUDGET_VAR) {
            cfg.budget_usd = v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|b| b.is_finite() && *b > 0.0 && *b <= MAX_BUDGET_USD)
                .ok_or_else(|| {
                    ParamError::new(
                        BUDGET_VAR,
                        format!("expected USD a month, more than 0 and at most {MAX_BUDGET_USD}, got {v:?}"),
                    )
                })?;
        }
        Ok(cfg)
    }

    /// The month this configuration is projected to cost, from a measured cost per answer
    /// (the last day's answers, priced) or, before any, [`ANSWER_USD_CEILING`].
    pub fn projection(&self, measured_per_answer_usd: Option<f64>) -> Projection {
        project(
            std::iter::repeat_n(self.every_s, self.vantage_points()),
            self.budget_usd,
            measured_per_answer_usd,
        )
    }

    /// The budget rule for every arming: what would run after it (the running probes it does not
    /// re-arm and those it arms, [`after_arming`]) projected, and refused over
    /// `PROBE_BUDGET_USD`, naming `every` and the var.
    pub fn check_arming(
        &self,
        probes: &[ProbeNow],
        arming: Arming,
        measured_per_answer_usd: Option<f64>,
    ) -> Result<Projection, ParamError> {
        let after = after_arming(probes, arming, self.every_s);
        let p = project(
            after.iter().copied(),
            self.budget_usd,
            measured_per_answer_usd,
        );
        if p.monthly_usd <= self.budget_usd {
            return Ok(p);
        }
        let already = probes.iter().filter(|q| !q.armed_here && q.running).count();
        let armed = after.len() - already;
        Err(ParamError::new(
            "every",
            format!(
                "{} would run after this {}: {armed} {} and {already} already running, about ${:.2} a month ({:.0} answers a month, every wake taken as cold, x ${} an answer, {}), more than {BUDGET_VAR} = ${}: stop some (POST /probes/stop?hints=..), probe less often, or raise {BUDGET_VAR}",
                after.len(),
                arming.as_str(),
                match arming {
                    Arming::Start => format!("started at every={} s", self.every_s),
                    Arming::Tick => "armed by the cron".to_string(),
                },
                p.monthly_usd,
                p.answers_per_month,
                p.per_answer_usd,
                match p.per_answer_from {
                    "measured" => "as the last day's answers cost",
                    _ => "a ceiling before any answer was measured",
                },
                self.budget_usd
            ),
        ))
    }

    /// The same, overridden by `POST /probes/start?hints=..&every=..` (already decoded pairs).
    pub fn with_query(mut self, pairs: &[(String, String)]) -> Result<Self, ParamError> {
        for (i, (name, value)) in pairs.iter().enumerate() {
            if pairs.iter().take(i).any(|(n, _)| n == name) {
                return Err(ParamError::new(name, "given more than once"));
            }
            match name.as_str() {
                "hints" => self.hints = parse_hints("hints", value)?,
                "every" => self.every_s = parse_seconds("every", value, MIN_EVERY_S, MAX_EVERY_S)?,
                "keep" => self.keep_s = parse_seconds("keep", value, MIN_KEEP_S, MAX_KEEP_S)?,
                other => {
                    return Err(ParamError::new(
                        other,
                        "unknown parameter; expected one of hints, every, keep",
                    ))
                }
            }
        }
        Ok(self)
    }

    /// Probe objects this configuration runs: one per hint, one per member.
    pub fn vantage_points(&self) -> usize {
        self.hints.len() + self.members.len()
    }

    /// The name of a hint's probe object.
    pub fn object_name(hint: LocationHint) -> String {
        format!("probe:{}", hint.as_str())
    }
}

/// A comma list of location hints, each once.
pub fn parse_hints(parameter: &str, text: &str) -> Result<Vec<LocationHint>, ParamError> {
    let mut hints = Vec::new();
    for part in text.split(',').map(str::trim) {
        let hint = LocationHint::parse(part).ok_or_else(|| {
            let known: Vec<_> = LocationHint::ALL.iter().map(|h| h.as_str()).collect();
            ParamError::new(
                parameter,
                format!(
                    "unknown location hint {part:?}; expected a comma list of {}",
                    known.join(", ")
                ),
            )
        })?;
        if hints.contains(&hint) {
            return Err(ParamError::new(parameter, format!("{part} is given twice")));
        }
        hints.push(hint);
    }
    Ok(hints)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measurement::params::pairs;

    #[test]
    fn config_from_vars_and_query() {
        let cfg = ProbeConfig::from_vars(|_| None).unwrap();
        assert_eq!(cfg.hints.len(), 11);
        assert_eq!(cfg.every_s, 300);
        let vars = |name: &str| match name {
            "PROBE_HINTS" => Some("weur, enam".to_string()),
            "PROBE_EVERY" => Some("2".to_string()),
            "PROBE_KEEP" => Some("7d".to_string()),
            _ => None,
        };
        let cfg = ProbeConfig::from_vars(vars).unwrap();
        assert_eq!(cfg.hints, vec![LocationHint::Weur, LocationHint::Enam]);
        assert_eq!((cfg.every_s, cfg.keep_s), (2, 604_800));
        let fleet = ProbeConfig::from_vars(|n| {
            (n == "FLEET").then(|| "a=http://127.0.0.1:1,b=http://127.0.0.1:2".into())
        })
        .unwrap();
        assert_eq!(fleet.members.len(), 2);
        assert_eq!(fleet.vantage_points(), 13);
        let e = ProbeConfig::from_vars(|n| (n == "FLEET").then(|| "a".into())).unwrap_err();
        assert_eq!(e.parameter, "FLEET");
        // A member may not take a hint's label, listed in PROBE_HINTS or not.
        for label in ["weur", "apac-ne"] {
            let e = ProbeConfig::from_vars(|n| match n {
                "FLEET" => Some(format!("{label}=http://127.0.0.1:1")),
                "PROBE_HINTS" => Some("enam".into()),
                _ => None,
            })
            .unwrap_err();
            assert_eq!(e.parameter, "FLEET");
            assert!(e.message.contains(label), "{}", e.message);
        }
        let e = ProbeConfig::from_vars(|n| (n == "PROBE_HINTS").then(|| "eu".into())).unwrap_err();
        assert_eq!(e.parameter, "PROBE_HINTS");
        let e = ProbeConfig::from_vars(|n| (n == "PROBE_EVERY").then(|| "0".into())).unwrap_err();
        assert_eq!(e.parameter, "PROBE_EVERY");
        let e = ProbeConfig::from_vars(|n| (n == "PROBE_KEEP").then(|| "1e9".into())).unwrap_err();
        assert_eq!(e.parameter, "PROBE_KEEP");
        let q = cfg
            .clone()
            .with_query(&pairs(&[("every", "5m"), ("hints", "apac")]))
            .unwrap();
        assert_eq!(
            (q.every_s, q.hints.clone()),
            (300, vec![LocationHint::Apac])
        );
        for (name, value) in [
            ("every", "-1"),
            ("every", "99999999999"),
            ("hints", "weur,weur"),
            ("hints", ""),
            ("keep", "1s"),
            ("bogus", "1"),
        ] {
            let e = cfg
                .clone()
                .with_query(&pairs(&[(name, value)]))
                .unwrap_err();
            assert_eq!(e.parameter, name, "{name}={value}");
        }
        // A parameter given twice is refused, not last-one-wins.
        let e = cfg
            .clone()
            .with_query(&pairs(&[("every", "1"), ("every", "2")]))
            .unwrap_err();
        assert_eq!(e.parameter, "every");
        assert!(e.message.contains("more than once"), "{}", e.message);
    }

    #[test]
    fn a_start_over_budget_is_refused_with_its_figure() {
        let vars = |every: &'static str, budget: Option<&'static str>| {
            ProbeConfig::from_vars(move |name| match name {
                EVERY_VAR => Some(every.to_string()),
                BUDGET_VAR => budget.map(str::to_string),
                _ => None,
            })
            .unwrap()
        };
        // The defaults: 11 hints at 300 s, 190,080 answers at most: $9.50 at the ceiling.
        let fresh = |cfg: &ProbeConfig| {
            vec![
                ProbeNow {
                    armed_here: true,
                    running: false,
                    stopped: false,
                    every_s: 0
                };
                cfg.vantage_points()
            ]
        };
        let cfg = vars("300", None);
        let p = cfg.projection(None);
        assert_eq!((p.answers_per_month, p.monthly_usd), (190_080.0, 9.5));
        assert_eq!(cfg.check_arming(&fresh(&cfg), Arming::Start, None), Ok(p));
        // Every second: 300 times as much.
        let fast = vars("1", None);
        let e = fast
            .check_arming(&fresh(&fast), Arming::Start, None)
            .unwrap_err();
        assert_eq!(e.parameter, "every");
        assert!(e.message.contains("$2851.20 a month"), "{}", e.message);
        assert!(
            e.message.contains("PROBE_BUDGET_USD = $50"),
            "{}",
            e.message
        );
        // A measured cost per answer is used when there is one; a budget var raises the bound.
        let p = fast.projection(Some(0.000_001));
        assert_eq!((p.per_answer_from, p.monthly_usd), ("measured", 57.02));
        let check = |budget| {
            let cfg = vars("1", Some(budget));
            cfg.check_arming(&fresh(&cfg), Arming::Start, Some(0.000_001))
        };
        assert!(check("100").is_ok());
        assert!(check("50").is_err());
        // What runs: two probes at 300 s and one at 60 s.
        let running = project([300, 300, 60], 50.0, None);
        assert_eq!(running.answers_per_month, 2.0 * 17_280.0 + 86_400.0);
        assert!((running.wakes_per_s() - (2.0 / 300.0 + 1.0 / 60.0)).abs() < 1e-12);
        let none = project([], 50.0, None);
        assert!(none.answers_per_month == 0.0 && none.answers_per_month.is_sign_positive());
        for bad in ["0", "-1", "lots", "NaN", "2000000"] {
            let e = ProbeConfig::from_vars(|n| (n == BUDGET_VAR).then(|| bad.to_string()));
            assert_eq!(e.unwrap_err().parameter, BUDGET_VAR, "{bad}");
        }
    }

    #[test]
    fn the_budget_counts_what_already_runs_on_every_path_that_arms() {
        // $50 a month; at the ceiling one probe every 20 s costs 129,600 x 2 x $0.00005 =
        // $12.96 (three $38.88, four $51.84), one every 60 s $4.32.
        let cfg = |hints: &str, every: &str| {
            ProbeConfig::from_vars(|n| match n {
                "PROBE_HINTS" => Some(hints.to_string()),
                "PROBE_EVERY" => Some(every.to_string()),
                "PROBE_BUDGET_USD" => Some("50".to_string()),
                _ => None,
            })
            .unwrap()
        };
        let running = |every_s| ProbeNow {
            armed_here: false,
            running: true,
            stopped: false,
            every_s,
        };
        let idle = ProbeNow {
            armed_here: true,
            running: false,
            stopped: true,
            every_s: 0,
        };
        // The case: hints started one at a time, each alone within budget, together not.
        let one = cfg("weur", "20");
        let mut now = vec![];
        for k in 0..4 {
            let r = one.check_arming(
                &[now.clone(), vec![idle.clone()]].concat(),
                Arming::Start,
                None,
            );
            if k < 3 {
                let p = r.unwrap_or_else(|e| panic!("start {k}: {}", e.message));
                assert!(p.monthly_usd <= 50.0);
                now.push(running(20));
            } else {
                let e = r.unwrap_err();
                assert_eq!(e.parameter, "every");
                assert!(e.message.contains("4 would run after this start: 1 started at every=20 s and 3 already running"), "{}", e.message);
                assert!(
                    e.message.contains("PROBE_BUDGET_USD = $50"),
                    "{}",
                    e.message
                );
            }
        }
        // Re-arming a running probe counts it once, at its new interval.
        let again = ProbeNow {
            armed_here: true,
            ..running(5)
        };
        assert_eq!(
            after_arming(std::slice::from_ref(&again), Arming::Start, 60),
            vec![60]
        );
        assert!(cfg("weur", "60")
            .check_arming(&[again], Arming::Start, None)
            .is_ok());
        // The cron: every configured probe not stopped, at its own interval or the vars'.
        let fresh = ProbeNow {
            armed_here: true,
            running: false,
            stopped: false,
            every_s: 0,
        };
        let tick = cfg("weur,enam,apac", "1");
        let e = tick
            .check_arming(
                &[fresh.clone(), fresh.clone(), fresh.clone()],
                Arming::Tick,
                None,
            )
            .unwrap_err();
        assert!(
            e.message
                .contains("3 would run after this tick: 3 armed by the cron"),
            "{}",
            e.message
        );
        // What the tick would arm: a configured probe neither stopped nor running.
        assert!(fresh.tick_arms() && !idle.tick_arms() && !running(5).tick_arms());
        assert!(!ProbeNow {
            running: true,
            ..fresh.clone()
        }
        .tick_arms());
        // Stopped ones stay stopped, so they cost nothing; one that ran keeps its own interval.
        let own = ProbeNow {
            every_s: 3600,
            ..fresh.clone()
        };
        assert_eq!(
            after_arming(&[idle.clone(), own, fresh.clone()], Arming::Tick, 1),
            vec![3600, 1]
        );
        assert!(tick
            .check_arming(
                &[
                    idle.clone(),
                    idle.clone(),
                    ProbeNow {
                        every_s: 60,
                        ..fresh
                    }
                ],
                Arming::Tick,
                None
            )
            .is_ok());
        // An unreadable status counts as running, and what runs outside the arming counts too.
        assert_eq!(
            after_arming(&[ProbeNow::unknown(), running(10)], Arming::Tick, 300),
            vec![300, 10]
        );
        let not_running = ProbeNow {
            running: false,
            ..running(1)
        };
        assert_eq!(
            after_arming(&[not_running], Arming::Start, 5),
            Vec::<u32>::new()
        );
    }
}
