//! Test helpers shared by the crate's unit tests: one deterministic generator (splitmix64), so
//! the synthetic latency of the interval, block and history tests comes from the same source.

/// splitmix64 with the three ranges the tests read uniforms in, and normals by Box–Muller.
pub struct Rng(pub u64);

impl Rng {
    /// The next 53 random bits.
    fn bits(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        z >> 11
    }

    /// A uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.bits() as f64 / (1u64 << 53) as f64
    }

    /// A uniform in (0, 1).
    pub fn open(&mut self) -> f64 {
        (self.bits() as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A uniform in (0, 1].
    pub fn open_closed(&mut self) -> f64 {
        (self.bits() + 1) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal (Box–Muller over two uniforms in (0, 1)).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.open(), self.open());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

thread_local! {
    /// Calls of [`crate::comparison::of`] (every interval of the answer) and
    /// [`crate::history::of`] (every day's interval) on this thread: what a render computes.
    pub static COMPUTED: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// Counts one computation of the comparison (`first`) or the history (`!first`).
pub fn computed(first: bool) {
    COMPUTED.with(|c| {
        let (a, b) = c.get();
        c.set(if first { (a + 1, b) } else { (a, b + 1) });
    });
}
