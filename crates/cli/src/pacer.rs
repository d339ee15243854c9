//! The open-loop schedule: when each request is *meant* to start. Latency is measured from these
//! intended times (wrk2's correction for coordinated omission), so a slow target cannot slow the
//! schedule down and hide its own slowness.

use std::time::Duration;

/// Highest rate accepted: beyond this a single process cannot keep the schedule anyway.
pub const MAX_RATE: f64 = 1_000_000.0;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PacerError {
    #[error("rate must be a finite number above 0 requests/s, got {0}")]
    InvalidRate(f64),
    #[error("rate {0} requests/s is above the supported maximum of {MAX_RATE}")]
    TooFast(f64),
    #[error("duration must be longer than 0")]
    EmptyDuration,
}

/// Iterator over intended start offsets from the run start: `i / rate` for every `i` whose offset
/// falls before `duration`. Offsets are computed from `i`, never accumulated, so rounding does not
/// drift over an hour.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: f64,
    next: u64,
    total: u64,
}

impl Pacer {
    pub fn new(rate: f64, duration: Duration) -> Result<Pacer, PacerError> {
        if !rate.is_finite() || rate <= 0.0 {
            return Err(PacerError::InvalidRate(rate));
        }
        if rate > MAX_RATE {
            return Err(PacerError::TooFast(rate));
        }
        if duration.is_zero() {
            return Err(PacerError::EmptyDuration);
        }
        // Number of i >= 0 with i / rate < duration, i.e. ceil(duration * rate).
        let exact = duration.as_secs_f64() * rate;
        let mut total = exact.ceil() as u64;
        // Guard float noise at exact multiples (e.g. 0.3 s * 10/s = 3.0000000000000004).
        if total > 0 && (exact - (total - 1) as f64).abs() < 1e-9 {
            total -= 1;
        }
        Ok(Pacer {
            rate,
            next: 0,
            total: total.max(1),
        })
    }

    /// How many requests the whole schedule holds.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Intended offset of request `i`.
    pub fn offset(&self, i: u64) -> Duration {
        Duration::from_nanos((i as f64 * 1e9 / self.rate).round() as u64)
    }
}

impl Iterator for Pacer {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self.next >= self.total {
            return None;
        }
        let at = self.offset(self.next);
        self.next += 1;
        Some(at)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.total - self.next) as usize;
        (left, Some(left))
    }
}

/// How late the pacer woke for a request: zero when on time or early.
pub fn lag(intended: std::time::Instant, woke: std::time::Instant) -> Duration {
    woke.saturating_duration_since(intended)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn schedule_table() {
        // (rate, duration, total, first offsets, last offset)
        let cases: &[(f64, Duration, u64, &[Duration], Duration)] = &[
            (10.0, MS(1000), 10, &[MS(0), MS(100), MS(200)], MS(900)),
            (10.0, MS(300), 3, &[MS(0), MS(100)], MS(200)),
            (10.0, MS(250), 3, &[MS(0), MS(100)], MS(200)),
            (0.5, MS(5000), 3, &[MS(0), MS(2000)], MS(4000)),
            (1.0, MS(1), 1, &[MS(0)], MS(0)),
            (
                3.0,
                MS(1000),
                3,
                &[MS(0), Duration::from_nanos(333_333_333)],
                Duration::from_nanos(666_666_667),
            ),
            (
                2000.0,
                MS(2000),
                4000,
                &[MS(0), Duration::from_micros(500)],
                Duration::from_micros(1_999_500),
            ),
        ];
        for &(rate, duration, total, firsts, last) in cases {
            let p = Pacer::new(rate, duration).unwrap();
            assert_eq!(p.total(), total, "rate={rate} duration={duration:?}");
            let all: Vec<Duration> = p.collect();
            assert_eq!(all.len() as u64, total);
            assert_eq!(&all[..firsts.len()], firsts, "rate={rate}");
            assert_eq!(*all.last().unwrap(), last, "rate={rate}");
            assert!(all.windows(2).all(|w| w[0] < w[1]), "strictly increasing");
            assert!(all.iter().all(|o| *o < duration), "all before the end");
        }
    }

    #[test]
    fn no_drift_over_an_hour() {
        let p = Pacer::new(400.0, Duration::from_secs(3600)).unwrap();
        assert_eq!(p.total(), 1_440_000);
        assert_eq!(p.offset(1_439_999), Duration::from_nanos(3_599_997_500_000));
    }

    #[test]
    fn rejects_bad_input_table() {
        let cases = [
            (0.0, MS(1000), PacerError::InvalidRate(0.0)),
            (-5.0, MS(1000), PacerError::InvalidRate(-5.0)),
            (
                f64::INFINITY,
                MS(1000),
                PacerError::InvalidRate(f64::INFINITY),
            ),
            (2e6, MS(1000), PacerError::TooFast(2e6)),
            (10.0, MS(0), PacerError::EmptyDuration),
        ];
        for (rate, duration, want) in cases {
            assert_eq!(Pacer::new(rate, duration).unwrap_err(), want);
        }
        assert!(matches!(
            Pacer::new(f64::NAN, MS(1)).unwrap_err(),
            PacerError::InvalidRate(r) if r.is_nan()
        ));
    }

    #[test]
    fn lag_is_never_negative() {
        let now = std::time::Instant::now();
        assert_eq!(lag(now + MS(5), now), Duration::ZERO);
        assert_eq!(lag(now, now + MS(5)), MS(5));
    }
}
