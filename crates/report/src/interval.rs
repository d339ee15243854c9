//! Distribution-free confidence intervals for percentiles, from order statistics: whether two
//! stores' p99 differ is a question about the sample, and latency is too skewed and too
//! multimodal for a normal approximation to answer it. The interval needs only the ranks of the
//! sorted sample, so it is read from a histogram — merged runs included — like any percentile.
//!
//! For a sample of `n` values and the `p`-quantile ξ, the sorted values `X(l) ≤ ξ ≤ X(u)` with
//! probability at least `P(l ≤ B < u)`, where `B ~ Binomial(n, p)` counts the values below ξ
//! (exactly that for a continuous distribution, at least that for a discrete one).
//!
//! These intervals treat every answer as an independent draw; [`crate::block`] widens them by
//! what the run's windows say about answers that move together in time.

use crate::hist::{Bucket, Hist};

/// The confidence level the report prints.
pub const LEVEL: f64 = 0.95;

/// Each tail of the binomial left out of the sums, as a share of α: small enough that no rank
/// moves unless a tail probability sits within this of α/2, where rounding decides anyway.
const TAIL: f64 = 1e-12;

/// Why a percentile has no interval.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum IntervalError {
    /// Even the smallest or the largest value of the sample is too likely to lie on the wrong
    /// side of the percentile: the sample cannot bound it at this level.
    #[error("n = {n}: too few for p{} (needs n ≥ {needed})", pct(*p))]
    TooFew {
        n: u64,
        p: f64,
        level: f64,
        /// The smallest sample that supports it (`u64::MAX` when none that size can).
        needed: u64,
    },
    #[error("quantile {0} is not strictly between 0 and 1")]
    Quantile(f64),
    #[error("confidence level {0} is not strictly between 0 and 1")]
    Level(f64),
}

impl IntervalError {
    /// A short, stable name for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TooFew { .. } => "too_few",
            Self::Quantile(_) => "quantile",
            Self::Level(_) => "level",
        }
    }
}

/// `0.99` as `99`, `0.999` as `99.9`.
fn pct(p: f64) -> f64 {
    (p * 100.0 * 1e6).round() / 1e6
}

/// One percentile of a histogram with its confidence interval. Values are the histogram's: the
/// middle of the bucket holding that rank (3 significant figures), so `low ≤ estimate ≤ high` are
/// figures the report already prints, and a true percentile inside the interval has its bucket
/// inside it too.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percentile {
    pub p: f64,
    pub level: f64,
    pub n: u64,
    /// The figure [`Hist::quantile`] gives: the value at rank `max(1, ⌈p·n⌉)`, HdrHistogram's
    /// `value_at_quantile` rank.
    pub estimate: u64,
    pub low: u64,
    pub high: u64,
    /// 1-based ranks of `low` and `high` in the sorted sample.
    pub low_rank: u64,
    pub high_rank: u64,
}

/// Whether two intervals share a value: the sample cannot tell the two apart at this percentile.
pub fn overlap(a: &Percentile, b: &Percentile) -> bool {
    a.low <= b.high && b.low <= a.high
}

/// The `p`-percentile of `h` with its interval at `level` (e.g. [`LEVEL`]).
pub fn percentile(h: &Hist, p: f64, level: f64) -> Result<Percentile, IntervalError> {
    let [one] = percentiles(h, [p], level);
    one
}

/// Several percentiles of one histogram, its buckets read once for all of them.
pub fn percentiles<const N: usize>(
    h: &Hist,
    ps: [f64; N],
    level: f64,
) -> [Result<Percentile, IntervalError>; N] {
    let buckets = h.buckets();
    ps.map(|p| read(&buckets, p, level))
}

/// One percentile read from a histogram's buckets.
pub(crate) fn read(buckets: &[Bucket], p: f64, level: f64) -> Result<Percentile, IntervalError> {
    // The buckets' own total, so every rank below is one of theirs.
    let n = buckets.iter().fold(0u64, |n, b| n.saturating_add(b.count));
    let (low_rank, high_rank) = ranks(n, p, level)?;
    Ok(Percentile {
        p,
        level,
        n,
        estimate: value_at_rank(buckets, estimate_rank(n, p)),
        low: value_at_rank(buckets, low_rank),
        high: value_at_rank(buckets, high_rank),
        low_rank,
        high_rank,
    })
}

/// The rank `Hist::quantile` reads, computed as HdrHistogram 7.5 does (in f64).
fn estimate_rank(n: u64, p: f64) -> u64 {
    ((p * n as f64).ceil() as u64).max(1)
}

/// The middle of the bucket holding the `rank`th smallest value (1-based); the last bucket's for
/// a rank past the end, 0 for no buckets.
pub(crate) fn value_at_rank(buckets: &[Bucket], rank: u64) -> u64 {
    let mut below = 0u64;
    for b in buckets {
        below = below.saturating_add(b.count);
        if below >= rank {
            return b.median;
        }
    }
    buckets.last().map_or(0, |b| b.median)
}

/// The 1-based ranks `(l, u)` of the equal-tailed interval for the `p`-quantile of `n` values:
/// `l` the largest rank with `P(B < l) ≤ α/2`, `u` the smallest with `P(B ≥ u) ≤ α/2`, with
/// `α = 1 - level`. Its coverage `1 - P(B < l) - P(B ≥ u)` is then at least `level` by
/// construction, so discreteness never needs widening; it only makes the interval conservative.
pub fn ranks(n: u64, p: f64, level: f64) -> Result<(u64, u64), IntervalError> {
    check(p, level)?;
    let half = (1.0 - level) / 2.0;
    bounds(n, p, half).ok_or_else(|| IntervalError::TooFew {
        n,
        p,
        level,
        needed: needed(p, half),
    })
}

fn check(p: f64, level: f64) -> Result<(), IntervalError> {
    if !(p > 0.0 && p < 1.0) {
        return Err(IntervalError::Quantile(p));
    }
    if !(level > 0.0 && level < 1.0) {
        return Err(IntervalError::Level(level));
    }
    Ok(())
}

/// The smallest `n` whose ranks exist. Both exist exactly when `max(p, 1-p)^n ≤ α/2` — the
/// sample's extremes must themselves fall outside the tails — so the closed form is within a
/// step of it; the steps settle it with [`tails`] itself, so that `needed` is `Ok` and
/// `needed - 1` is not.
fn needed(p: f64, half: f64) -> u64 {
    let estimate = (half.ln() / (-p.min(1.0 - p)).ln_1p()).ceil();
    if estimate.is_nan() || estimate >= 1e15 {
        return u64::MAX;
    }
    let mut n = (estimate as u64).max(1);
    let supported = |n: u64| bounds(n, p, half).is_some();
    for _ in 0..8 {
        if n > 1 && supported(n - 1) {
            n -= 1;
        } else if !supported(n) {
            n += 1;
        } else {
            break;
        }
    }
    n
}

/// Whether `n` values support an interval for the `p`-quantile at `level`: the rule every table
/// follows before it prints a percentile as a number.
pub fn supports(n: u64, p: f64, level: f64) -> bool {
    ranks(n, p, level).is_ok()
}

/// Past this binomial variance `npq` the ranks come from the normal approximation with its
/// skewness term ([`approximate`]): the exact walk takes `O(√(npq))` steps (a crafted count of
/// 10^16 took minutes), while the approximation is within a rank of it here and closer beyond
/// (its error shrinks like `1/√(npq)` relative to the interval's width).
pub const EXACT_VARIANCE_MAX: f64 = 1e8;

/// The ranks of [`ranks`] in bounded time for any `n`: exact up to [`EXACT_VARIANCE_MAX`],
/// approximate past it.
fn bounds(n: u64, p: f64, half: f64) -> Option<(u64, u64)> {
    if n as f64 * p * (1.0 - p) > EXACT_VARIANCE_MAX {
        approximate(n, p, half)
    } else {
        tails(n, p, half)
    }
}

/// [`tails`] from the normal approximation to the binomial with the Cornish–Fisher skewness
/// term: the `P`-quantile of `B` is about `μ + σ(z + γ(z² − 1)/6) − ½`, `γ = (q − p)/σ`.
fn approximate(n: u64, p: f64, half: f64) -> Option<(u64, u64)> {
    let (mean, q) = (n as f64 * p, 1.0 - p);
    let sd = (mean * q).sqrt();
    let skew = (q - p) / sd;
    let at = |z: f64| mean + sd * (z + skew * (z * z - 1.0) / 6.0) - 0.5;
    let z = normal_quantile(1.0 - half);
    // l: the first k with P(B ≤ k) > α/2; u: one past the last k with P(B ≥ k) > α/2.
    let low = at(-z).ceil().max(0.0) as u64;
    let high = (at(z).ceil() as u64).saturating_add(1);
    (low >= 1 && high <= n).then_some((low, high))
}

/// The standard normal quantile (Acklam's rational approximation, relative error below
/// 1.2·10⁻⁹), for `0 < prob < 1`.
pub fn normal_quantile(prob: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let poly = |c: &[f64], x: f64| c.iter().fold(0.0, |acc, k| acc * x + k);
    let tail = |q: f64| poly(&C, q) / (poly(&D, q) * q + 1.0);
    if prob < 0.02425 {
        tail((-2.0 * prob.ln()).sqrt())
    } else if prob > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - prob).ln()).sqrt())
    } else {
        let q = prob - 0.5;
        let r = q * q;
        poly(&A, r) * q / (poly(&B, r) * r + 1.0)
    }
}

/// `B ~ Binomial(n, p)`, its probabilities up to a common factor, walked from one count to the
/// next by their ratio — no factorials, nothing that overflows at any `n`.
struct Binomial {
    n: u64,
    /// `p / (1 - p)`.
    odds: f64,
}

impl Binomial {
    /// `P(B = k + 1)` from `P(B = k)`.
    fn up(&self, k: u64, pk: f64) -> f64 {
        // `n - k` in integers: exact where f64 would round both at n beyond 2^53.
        let rest = self.n.saturating_sub(k) as f64;
        pk * (rest / (k as f64 + 1.0)) * self.odds
    }

    /// `P(B = k - 1)` from `P(B = k)`.
    fn down(&self, k: u64, pk: f64) -> f64 {
        let rest = self.n.saturating_sub(k) as f64 + 1.0;
        pk * (k as f64 / rest) / self.odds
    }
}

/// The ranks of [`ranks`], `None` when `l < 1` or `u > n`; `half` is α/2.
///
/// Only counts within `t` of the mean are summed, `O(√n)` of them: by Bernstein's inequality
/// (Bernoulli terms bounded by 1, variance `npq`) each tail beyond `t` holds at most `e^-L` with
/// `t = L/3 + √(L²/9 + 2L·npq)`; `L` makes that `TAIL · α`, far below α/2.
fn tails(n: u64, p: f64, half: f64) -> Option<(u64, u64)> {
    if n == 0 {
        return None;
    }
    let q = 1.0 - p;
    let b = Binomial { n, odds: p / q };
    let mean = n as f64 * p;
    let ln_tail = -(TAIL * 2.0 * half).ln();
    let t = ln_tail / 3.0 + (ln_tail * ln_tail / 9.0 + 2.0 * ln_tail * mean * q).sqrt();
    let lo = (mean - t).max(0.0).floor() as u64;
    let hi = ((mean + t).ceil() as u64).min(n);
    let mode = (((n as f64 + 1.0) * p).floor() as u64).max(lo).min(hi);

    // Relative to P(B = mode) = 1, out to the window's edges (or to where they underflow).
    let mut total = 1.0;
    let (mut k, mut pk) = (mode, 1.0);
    while k > lo {
        let next = b.down(k, pk);
        if next <= 0.0 {
            break;
        }
        (k, pk) = (k - 1, next);
        total += pk;
    }
    let (lo, p_lo) = (k, pk);
    (k, pk) = (mode, 1.0);
    while k < hi {
        let next = b.up(k, pk);
        if next <= 0.0 {
            break;
        }
        (k, pk) = (k + 1, next);
        total += pk;
    }
    let (hi, p_hi) = (k, pk);
    let cut = half * total;

    // Lower: the first k with P(B ≤ k) > α/2 is the largest l with P(B < l) ≤ α/2.
    let (mut k, mut pk, mut below) = (lo, p_lo, p_lo);
    while below <= cut && k < hi {
        pk = b.up(k, pk);
        k += 1;
        below += pk;
    }
    let low = k;
    // Upper: the last k with P(B ≥ k) > α/2 is one below the smallest u with P(B ≥ u) ≤ α/2.
    let (mut k, mut pk, mut above) = (hi, p_hi, p_hi);
    while above <= cut && k > lo {
        pk = b.down(k, pk);
        k -= 1;
        above += pk;
    }
    if low >= 1 && k < n {
        Some((low, k + 1))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `P(B = k)`, summed directly from `C(n, k) p^k q^(n-k)` (fine for small `n`).
    fn pmf(n: u64, p: f64) -> Vec<f64> {
        let mut c = 1.0f64;
        (0..=n)
            .map(|k| {
                if k > 0 {
                    c = c * (n - k + 1) as f64 / k as f64;
                }
                c * p.powi(k as i32) * (1.0 - p).powi((n - k) as i32)
            })
            .collect()
    }

    fn brute_ranks(pmf: &[f64], level: f64) -> Option<(u64, u64)> {
        let half = (1.0 - level) / 2.0;
        let n = pmf.len() as u64 - 1;
        let below = |l: u64| pmf[..l as usize].iter().sum::<f64>();
        let at_or_above = |u: u64| pmf[u as usize..].iter().sum::<f64>();
        let l = (1..=n).rev().find(|&l| below(l) <= half)?;
        let u = (1..=n).find(|&u| at_or_above(u) <= half)?;
        Some((l, u))
    }

    const PS: [f64; 10] = [0.01, 0.1, 0.25, 0.3, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999];

    #[test]
    fn ranks_match_brute_force_order_statistics() {
        for level in [0.9, 0.95, 0.99] {
            for p in PS {
                for n in 1..=200 {
                    let pmf = pmf(n, p);
                    let want = brute_ranks(&pmf, level);
                    let got = ranks(n, p, level);
                    match (want, got) {
                        (Some(w), Ok(g)) => {
                            assert_eq!(g, w, "n={n} p={p} level={level}");
                            let (l, u) = g;
                            let coverage: f64 = pmf[l as usize..u as usize].iter().sum();
                            assert!(coverage >= level - 1e-12, "n={n} p={p}: {coverage}");
                            assert!(l <= estimate_rank(n, p) && estimate_rank(n, p) <= u);
                        }
                        (None, Err(IntervalError::TooFew { needed, .. })) => {
                            assert!(needed > n, "n={n} p={p} needed={needed}")
                        }
                        (w, g) => panic!("n={n} p={p} level={level}: {w:?} vs {g:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn too_few_says_how_many_would_do() {
        let err = ranks(40, 0.99, LEVEL).unwrap_err();
        assert_eq!(err.kind(), "too_few");
        assert_eq!(err.to_string(), "n = 40: too few for p99 (needs n ≥ 368)");
        // Closed form: 0.99^n ≤ 0.025 first at n = 368.
        assert!(0.99f64.powi(368) <= 0.025 && 0.99f64.powi(367) > 0.025);
        for (p, want) in [(0.5, 6), (0.9, 36), (0.99, 368), (0.999, 3688)] {
            let Err(IntervalError::TooFew { needed, .. }) = ranks(want - 1, p, LEVEL) else {
                panic!("p={p}: n={} supported", want - 1);
            };
            assert_eq!(needed, want, "p={p}");
            assert!(ranks(want, p, LEVEL).is_ok(), "p={p}");
            assert!(ranks(want * 10, p, LEVEL).is_ok(), "p={p}");
            assert!(ranks(1_000_000, p, LEVEL).is_ok(), "p={p}");
        }
        assert_eq!(
            ranks(0, 0.001, LEVEL)
                .unwrap_err()
                .to_string()
                .split(':')
                .next(),
            Some("n = 0")
        );
        let Err(IntervalError::TooFew { needed, .. }) = ranks(10, 1e-300, LEVEL) else {
            panic!("supported");
        };
        assert_eq!(needed, u64::MAX);
    }

    #[test]
    fn large_samples_are_fast_and_near_the_normal_approximation() {
        let start = std::time::Instant::now();
        for (n, p) in [
            (100_000_000u64, 0.99),
            (100_000_000, 0.5),
            (100_000_000, 0.9),
        ] {
            let (l, u) = ranks(n, p, LEVEL).unwrap();
            let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
            // l - 1 and u - 1 are the binomial's 2.5% and 97.5% points.
            let (want_l, want_u) = (mean - 1.96 * sd + 1.0, mean + 1.96 * sd + 1.0);
            assert!(
                (l as f64 - want_l).abs() <= 2.0,
                "n={n} p={p}: l={l} vs {want_l}"
            );
            assert!(
                (u as f64 - want_u).abs() <= 2.0,
                "n={n} p={p}: u={u} vs {want_u}"
            );
        }
        assert!(ranks(u64::MAX / 2, 1e-9, LEVEL).is_ok());
        // Both ends of the range of counts, where n and n - k are beyond f64's integers.
        for p in [1e-15, 1.0 - 1e-15] {
            let (l, u) = ranks(u64::MAX, p, LEVEL).unwrap();
            assert!(l < u, "p={p}");
        }
        assert!(ranks(1 << 40, 0.5, LEVEL).is_ok());
        println!("large n: {:?}", start.elapsed());
    }

    #[test]
    fn the_approximation_agrees_with_the_exact_ranks_at_the_boundary() {
        let half = (1.0 - LEVEL) / 2.0;
        for p in PS {
            // Variances from well below the switch to just past it, where the exact walk
            // still runs in a test.
            for variance in [1e4, 1e6, EXACT_VARIANCE_MAX, 4.0 * EXACT_VARIANCE_MAX] {
                let n = (variance / (p * (1.0 - p))).round() as u64;
                let (l, u) = tails(n, p, half).unwrap();
                let (al, au) = approximate(n, p, half).unwrap();
                assert!(
                    l.abs_diff(al) <= 1 && u.abs_diff(au) <= 1,
                    "n={n} p={p}: exact ({l}, {u}) vs approximate ({al}, {au})"
                );
            }
        }
        // The switch itself: ranks() is the exact walk up to it, the approximation past it.
        let p = 0.5;
        let n = (EXACT_VARIANCE_MAX / 0.25) as u64;
        assert_eq!(ranks(n, p, LEVEL).unwrap(), tails(n, p, half).unwrap());
        assert_eq!(
            ranks(n + 8, p, LEVEL).unwrap(),
            approximate(n + 8, p, half).unwrap()
        );
        assert!((normal_quantile(0.975) - 1.959_963_985).abs() < 1e-8);
        assert!((normal_quantile(0.001) + 3.090_232_306).abs() < 1e-8);
    }

    #[test]
    fn any_count_is_bounded_in_time() {
        let start = std::time::Instant::now();
        for n in [10u64.pow(16), 4 * 10u64.pow(18), u64::MAX] {
            for p in PS {
                let (l, u) = ranks(n, p, LEVEL).unwrap();
                assert!(1 <= l && l < u && u <= n, "n={n} p={p}: ({l}, {u})");
                let mean = n as f64 * p;
                let sd = (mean * (1.0 - p)).sqrt();
                assert!((l as f64 - (mean - 1.96 * sd)).abs() < 0.01 * sd + 2.0);
            }
            assert!(supports(n, 0.999, LEVEL));
        }
        let elapsed = start.elapsed();
        assert!(elapsed.as_secs_f64() < 1.0, "{elapsed:?}");
    }

    #[test]
    fn bad_arguments_are_errors() {
        for p in [0.0, 1.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
            assert_eq!(
                ranks(100, p, LEVEL).unwrap_err().kind(),
                "quantile",
                "p={p}"
            );
        }
        for level in [0.0, 1.0, -1.0, 2.0, f64::NAN] {
            assert_eq!(ranks(100, 0.5, level).unwrap_err().kind(), "level");
        }
        let empty = Hist::default();
        assert!(matches!(
            percentile(&empty, 0.5, LEVEL),
            Err(IntervalError::TooFew { n: 0, .. })
        ));
    }

    #[test]
    fn reads_the_values_at_the_ranks() {
        let mut h = Hist::default();
        // 1..=1000 twice, recorded out of order, then merged with a copy of itself.
        for v in (1..=1000u64).rev().chain(1..=1000) {
            h.record(v * 7);
        }
        let copy = h.clone();
        h.add(&copy);
        let got = percentiles(&h, [0.5, 0.9, 0.99], LEVEL);
        for (r, p) in got.iter().zip([0.5, 0.9, 0.99]) {
            let r = r.as_ref().unwrap();
            assert_eq!(r.n, 4000);
            assert_eq!(r.estimate, h.quantile(p), "p={p}");
            assert_eq!((r.low_rank, r.high_rank), ranks(4000, p, LEVEL).unwrap());
            // Rank r of 4 copies of 7, 14, ..., 7000 is the value 7·⌈r/4⌉, to 3 figures.
            let exact = |rank: u64| 7 * rank.div_ceil(4);
            let near = |got: u64, want: u64| got.abs_diff(want) * 1000 <= want;
            assert!(near(r.low, exact(r.low_rank)), "{r:?}");
            assert!(near(r.high, exact(r.high_rank)), "{r:?}");
            assert!(r.low <= r.estimate && r.estimate <= r.high, "{r:?}");
        }
        let (a, b) = (got[0].unwrap(), got[2].unwrap());
        assert!(overlap(&a, &a) && !overlap(&a, &b) && !overlap(&b, &a));
        // Every histogram form gives the same estimate as `Hist::quantile`.
        for n in [1u64, 2, 3, 10, 99, 100, 101, 1234] {
            let mut h = Hist::default();
            (0..n).for_each(|v| h.record(v * v + 5));
            for p in PS {
                if let Ok(r) = percentile(&h, p, 0.5) {
                    assert_eq!(r.estimate, h.quantile(p), "n={n} p={p}");
                }
            }
        }
    }

    use crate::testing::Rng;

    /// The bucket a value would be read back as.
    fn as_read(us: u64) -> u64 {
        let mut h = Hist::default();
        h.record(us);
        h.quantile(0.5)
    }

    #[test]
    fn covers_the_true_percentile_of_skewed_samples() {
        const PS: [f64; 3] = [0.5, 0.9, 0.99];
        const RUNS: usize = 1000;
        const N: usize = 1000;
        // Quantile functions, in microseconds: exponential and Pareto (α = 1.5), sampled by
        // inverse transform and floored to whole microseconds as the collector records them.
        let exponential = |u: f64| 2_000.0 - 5_000.0 * (1.0 - u).ln();
        let pareto = |u: f64| 1_000.0 * (1.0 - u).powf(-1.0 / 1.5);
        let dists: [(&str, &dyn Fn(f64) -> f64); 2] =
            [("exponential", &exponential), ("pareto", &pareto)];
        let mut rng = Rng(7);
        for (name, quantile) in dists {
            // The true percentile as the histogram would read it: bucketing is monotone, so a
            // sample interval that holds it holds its bucket.
            let truth = PS.map(|p| as_read(quantile(p).floor() as u64));
            let (mut hits, mut narrow_hits) = ([0usize; 3], [0usize; 3]);
            for _ in 0..RUNS {
                let mut h = Hist::default();
                for _ in 0..N {
                    // 1 - u is uniform on [0, 1) too; the quantile functions take u < 1.
                    h.record(quantile(1.0 - rng.open_closed()).floor() as u64);
                }
                // Buckets read once for both levels: reading them is most of this test's time.
                let buckets = h.buckets();
                for (i, p) in PS.into_iter().enumerate() {
                    let inside = |level: f64| {
                        let r = read(&buckets, p, level).unwrap();
                        usize::from(r.low <= truth[i] && truth[i] <= r.high)
                    };
                    hits[i] += inside(LEVEL);
                    narrow_hits[i] += inside(0.5);
                }
            }
            for i in 0..3 {
                let coverage = hits[i] as f64 / RUNS as f64;
                let narrow = narrow_hits[i] as f64 / RUNS as f64;
                println!(
                    "{name} p{}: 95% coverage {coverage:.4}, 50% coverage {narrow:.4}",
                    pct(PS[i])
                );
                assert!(coverage >= 0.93, "{name} p{}: {coverage}", PS[i]);
                // The check can fail: a 50% interval misses about half the time.
                assert!(narrow < 0.8, "{name} p{}: {narrow}", PS[i]);
            }
        }
    }
}
