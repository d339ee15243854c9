//! Fault injection for reliability tests and demos: added latency, a fraction of requests answered
//! with a chosen status, a fraction of connections dropped unanswered. Off by default; decisions
//! come from a seedable RNG so a run can be repeated.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What faults to inject; also the JSON body of `GET`/`PUT /admin/faults`.
/// Missing fields mean "off" (the status defaults to 503).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultConfig {
    /// Added latency is uniform in `delay_min_ms..=delay_max_ms`; equal bounds give a fixed delay.
    pub delay_min_ms: u64,
    pub delay_max_ms: u64,
    /// Fraction (0..=1) of requests answered with `status` instead of running the command.
    pub status_fraction: f64,
    pub status: u16,
    /// Fraction (0..=1) of requests whose connection is closed without an answer.
    pub drop_fraction: f64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        Self {
            delay_min_ms: 0,
            delay_max_ms: 0,
            status_fraction: 0.0,
            status: 503,
            drop_fraction: 0.0,
        }
    }
}

impl FaultConfig {
    /// Checks ranges so a bad admin request or flag is refused rather than half-applied.
    pub fn validate(&self) -> Result<(), String> {
        if self.delay_min_ms > self.delay_max_ms {
            return Err("delay_min_ms must not exceed delay_max_ms".into());
        }
        if self.delay_max_ms > 600_000 {
            return Err("delay_max_ms must be at most 600000 (10 minutes)".into());
        }
        for (name, f) in [
            ("status_fraction", self.status_fraction),
            ("drop_fraction", self.drop_fraction),
        ] {
            if !(0.0..=1.0).contains(&f) {
                return Err(format!("{name} must be between 0 and 1"));
            }
        }
        if !(200..=599).contains(&self.status) || matches!(self.status, 204 | 205 | 304) {
            // 1xx are not final answers, and 204/205/304 cannot carry the JSON error body.
            return Err(
                "status must be an HTTP status with a body: 200..=599 except 204, 205 and 304"
                    .into(),
            );
        }
        Ok(())
    }

    /// Parses a delay flag: `50` (fixed) or `20-80` (uniform range), in milliseconds.
    pub fn parse_delay_ms(text: &str) -> Result<(u64, u64), String> {
        let parse = |s: &str| {
            s.trim().parse::<u64>().map_err(|_| {
                format!("invalid delay {text:?}: expected MS or MIN-MAX in milliseconds")
            })
        };
        match text.split_once('-') {
            Some((min, max)) => Ok((parse(min)?, parse(max)?)),
            None => parse(text).map(|ms| (ms, ms)),
        }
    }
}

/// What happens to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Status(u16),
    Drop,
}

/// The decision for one request: wait `delay`, then `outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub delay: Duration,
    pub outcome: Outcome,
}

/// Marker put in a response's extensions to ask the server loop to close the connection instead
/// of answering.
#[derive(Debug, Clone, Copy)]
pub struct DropConnection;

/// The live fault settings and the RNG that draws against them.
pub struct FaultInjector {
    state: Mutex<(FaultConfig, SplitMix64)>,
}

impl FaultInjector {
    pub fn new(config: FaultConfig, seed: u64) -> Self {
        Self {
            state: Mutex::new((config, SplitMix64(seed))),
        }
    }

    pub fn config(&self) -> FaultConfig {
        self.lock().0.clone()
    }

    pub fn set_config(&self, config: FaultConfig) {
        self.lock().0 = config;
    }

    /// Draws the fate of one request. Drops are decided before statuses, so with both fractions
    /// set the status fraction applies to the requests that were not dropped.
    pub fn decide(&self) -> Decision {
        let mut guard = self.lock();
        let (config, rng) = &mut *guard;
        let span = config.delay_max_ms - config.delay_min_ms;
        let delay_ms = if span == 0 {
            config.delay_min_ms
        } else {
            config.delay_min_ms + rng.next_u64() % (span + 1)
        };
        let outcome = if hit(rng, config.drop_fraction) {
            Outcome::Drop
        } else if hit(rng, config.status_fraction) {
            Outcome::Status(config.status)
        } else {
            Outcome::Pass
        };
        Decision {
            delay: Duration::from_millis(delay_ms),
            outcome,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (FaultConfig, SplitMix64)> {
        // A panic while holding this lock cannot leave the plain-data state inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn hit(rng: &mut SplitMix64, fraction: f64) -> bool {
    if fraction <= 0.0 {
        return false;
    }
    if fraction >= 1.0 {
        return true;
    }
    rng.next_f64() < fraction
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, seedable, statistically fine for picking faults;
/// not for anything secret.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default() {
        let f = FaultInjector::new(FaultConfig::default(), 1);
        for _ in 0..1000 {
            assert_eq!(
                f.decide(),
                Decision {
                    delay: Duration::ZERO,
                    outcome: Outcome::Pass
                }
            );
        }
    }

    #[test]
    fn fractions_and_delays_follow_the_config() {
        let config = FaultConfig {
            delay_min_ms: 10,
            delay_max_ms: 20,
            status_fraction: 0.5,
            status: 500,
            drop_fraction: 0.0,
        };
        let f = FaultInjector::new(config, 42);
        let mut statuses = 0;
        for _ in 0..10_000 {
            let d = f.decide();
            assert!(d.delay >= Duration::from_millis(10) && d.delay <= Duration::from_millis(20));
            match d.outcome {
                Outcome::Status(500) => statuses += 1,
                Outcome::Pass => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!((4_000..6_000).contains(&statuses), "{statuses}");
    }

    #[test]
    fn same_seed_same_decisions() {
        let config = FaultConfig {
            drop_fraction: 0.3,
            status_fraction: 0.3,
            ..FaultConfig::default()
        };
        let a = FaultInjector::new(config.clone(), 7);
        let b = FaultInjector::new(config, 7);
        for _ in 0..100 {
            assert_eq!(a.decide(), b.decide());
        }
    }

    #[test]
    fn validation_and_delay_parsing() {
        assert!(FaultConfig::default().validate().is_ok());
        let bad = |c: FaultConfig| c.validate().is_err();
        assert!(bad(FaultConfig {
            delay_min_ms: 5,
            delay_max_ms: 1,
            ..Default::default()
        }));
        assert!(bad(FaultConfig {
            drop_fraction: 1.5,
            ..Default::default()
        }));
        assert!(bad(FaultConfig {
            status_fraction: -0.1,
            ..Default::default()
        }));
        for status in [42, 100, 101, 199, 204, 205, 304, 600] {
            assert!(
                bad(FaultConfig {
                    status,
                    ..Default::default()
                }),
                "{status}"
            );
        }
        for status in [200, 302, 400, 429, 500, 503, 599] {
            assert!(!bad(FaultConfig {
                status,
                ..Default::default()
            }));
        }
        assert_eq!(FaultConfig::parse_delay_ms("50"), Ok((50, 50)));
        assert_eq!(FaultConfig::parse_delay_ms("20-80"), Ok((20, 80)));
        assert!(FaultConfig::parse_delay_ms("fast").is_err());
    }
}
