//! The open-loop schedule: when each request is *meant* to start (latency counts from there,
//! wrk2's correction for coordinated omission), released in batches by a task that wakes on a
//! precise [`crate::timer`] once per tick, not once per request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::batch::{self, RequestEnd};
use crate::pool::{Job, Queue};
use crate::timer::Timer;
use kvbench_report::hist::Hist;
use kvbench_report::sample::FailureKind;

/// Shortest wait between two releases (a wake costs CPU per request, docs/measured.md): every
/// request within half a millisecond of its intended start, at most 2,000 wakes a second.
pub const TICK: Duration = Duration::from_micros(500);
/// Longest single sleep, so Ctrl-C is seen promptly even at very low rates.
const NAP: Duration = Duration::from_millis(50);

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

/// Iterator over intended start offsets, `i / rate` below `duration`: computed from `i`, never
/// accumulated, so rounding does not drift.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: f64,
    duration: Duration,
    next: u64,
    /// 1, or the number of shards when this iterates one shard's share.
    step: u64,
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
            duration,
            next: 0,
            step: 1,
            total: total.max(1),
        })
    }

    /// Shard `index` of `count`: requests `index`, `index + count`, ... — interleaved, so every
    /// shard sends at the same pace and the union is exactly the whole schedule.
    pub fn shard(mut self, index: u64, count: u64) -> Pacer {
        self.next = index;
        self.step = count.max(1);
        self
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
        self.next += self.step;
        Some(at)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.total.saturating_sub(self.next).div_ceil(self.step) as usize;
        (left, Some(left))
    }
}

/// How late a request was released: zero when on time or early.
pub fn lag(intended: std::time::Instant, woke: std::time::Instant) -> Duration {
    woke.saturating_duration_since(intended)
}

/// What the pacer reports when the schedule ends.
pub struct Sent {
    /// How late each request was released, µs.
    pub lag_us: Hist,
    /// Stopped by Ctrl-C before the schedule ended.
    pub interrupted: bool,
    /// How long the schedule ran.
    pub send_window: Duration,
}

/// Releases the schedule from `start` into `queue`; what the queue refuses (`--max-in-flight`)
/// goes to `results` as `not_sent`. Ends with the schedule or at the first Ctrl-C.
pub async fn release(
    mut schedule: Pacer,
    start: Instant,
    queue: &Queue,
    results: &batch::Shared,
    sigints: &AtomicU64,
    max_in_flight: u64,
) -> std::io::Result<Sent> {
    let planned = schedule.duration;
    let mut timer = Timer::new()?;
    let mut lag_us = Hist::default();
    let mut due: Vec<Job> = Vec::new();
    let mut wake = Vec::new();
    let refused = format!("--max-in-flight {max_in_flight} reached");
    let mut interrupted = false;
    // The last wake-up aimed for: at high rates wake-ups follow a grid of ticks, so waking late
    // once does not push every later release back.
    let mut tick_at = start;
    let mut next = schedule.next();
    while let Some(offset) = next {
        if sigints.load(Ordering::Relaxed) > 0 {
            interrupted = true;
            break;
        }
        let now = Instant::now();
        if start + offset > now {
            timer.sleep_until((start + offset).min(now + NAP)).await?;
            continue;
        }
        let mut at = Some(offset);
        while let Some(offset) = at.filter(|o| start + *o <= now) {
            let intended = start + offset;
            lag_us.record(lag(intended, now).as_micros() as u64);
            due.push(Job {
                intended,
                intended_us: offset.as_micros() as u64,
            });
            at = schedule.next();
        }
        next = at;
        queue.offer(&mut due, &mut wake);
        if !due.is_empty() {
            let mut out = results.lock();
            for job in due.drain(..) {
                out.push(
                    job.intended_us,
                    0,
                    RequestEnd::Failed(FailureKind::NotSent),
                    refused.as_bytes(),
                );
            }
        }
        if let Some(offset) = next {
            // At high rates, let a few requests come due before the next release.
            tick_at = (start + offset).max(tick_at + TICK).min(now + NAP);
            timer.sleep_until(tick_at).await?;
        }
    }
    let elapsed = start.elapsed();
    Ok(Sent {
        lag_us,
        interrupted,
        send_window: if interrupted {
            elapsed
        } else {
            elapsed.max(planned)
        },
    })
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
    fn shards_interleave_into_the_whole_schedule() {
        let whole: Vec<Duration> = Pacer::new(1000.0, MS(10)).unwrap().collect();
        for count in [1, 2, 3] {
            let mut union: Vec<Duration> = (0..count)
                .flat_map(|i| {
                    let shard = Pacer::new(1000.0, MS(10)).unwrap().shard(i, count);
                    let n = shard.size_hint().0;
                    let offsets: Vec<Duration> = shard.collect();
                    assert_eq!(offsets.len(), n);
                    offsets
                })
                .collect();
            union.sort();
            assert_eq!(union, whole, "{count} shards");
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
