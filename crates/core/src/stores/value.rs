//! Random keys, orders and values. Values are printable ASCII so "N bytes" is N bytes in every
//! encoding; a fast PRNG seeded once per isolate keeps a 64 KiB value cheap next to the I/O.

use rand::rngs::Xoshiro256PlusPlus;
use rand::seq::SliceRandom;
use rand::{Rng, RngExt, SeedableRng};

/// 64 printable, URL- and JSON-safe characters: one random byte's low 6 bits pick one, unbiased.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A value to write, of `A–Z a–z 0–9 - _` only: `plain` lets encoders copy it unscanned.
#[derive(Clone)]
pub struct Value {
    bytes: Vec<u8>,
    plain: bool,
    /// The platform's copy of the bytes, made when a store first needs it and kept with the
    /// value, so an unused value goes back to the pool with its copy.
    outside: std::cell::OnceCell<std::rc::Rc<dyn std::any::Any>>,
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.bytes == other.bytes && self.plain == other.plain
    }
}

impl Eq for Value {}

impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Value")
            .field("len", &self.bytes.len())
            .field("plain", &self.plain)
            .finish()
    }
}

impl Value {
    /// Any bytes (not known to be plain).
    pub fn from_bytes(bytes: Vec<u8>) -> Value {
        Value {
            bytes,
            plain: false,
            outside: std::cell::OnceCell::new(),
        }
    }

    /// The platform's copy of this value, made by `make` from the bytes on first use and kept
    /// with the value from then on (for every store, and every request that reuses the value).
    pub fn outside<T: Clone + 'static>(&self, make: impl Fn(&[u8]) -> T) -> T {
        let copy = self
            .outside
            .get_or_init(|| std::rc::Rc::new(make(&self.bytes)));
        match copy.downcast_ref::<T>() {
            Some(copy) => copy.clone(),
            // One platform, one type: a second kind of copy is never kept.
            None => make(&self.bytes),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes as text that needs no escaping, when they are known to be.
    pub fn plain_str(&self) -> Option<&str> {
        if self.plain {
            std::str::from_utf8(&self.bytes).ok()
        } else {
            None
        }
    }
}

/// The per-isolate random source.
pub struct ValueGen {
    rng: Xoshiro256PlusPlus,
    /// Values for the next writes, made when no span is open: `(min, max, values)`. Several, so
    /// concurrent requests find one instead of making it in another's span.
    ready: Option<(u32, u32, Vec<Value>)>,
}

/// At most this many values are kept ready.
pub const READY_MAX: usize = 8;
/// Nor more than this many bytes of them.
pub const READY_MAX_BYTES: usize = 4 << 20;

impl ValueGen {
    /// `seed` should come from the platform CSPRNG (`crypto.getRandomValues` in the worker).
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self {
            rng: Xoshiro256PlusPlus::from_seed(seed),
            ready: None,
        }
    }

    /// The value a write on a miss gets: one prepared for this range, else a fresh one; its size
    /// uniform in `[min, max]` either way.
    pub fn take_value(&mut self, min: u32, max: u32) -> Value {
        match &mut self.ready {
            Some((lo, hi, values)) if (*lo, *hi) == (min, max) => match values.pop() {
                Some(v) => v,
                None => self.sized_value(min, max),
            },
            _ => self.sized_value(min, max),
        }
    }

    /// Values ready for this range.
    pub fn ready(&self, min: u32, max: u32) -> usize {
        match &self.ready {
            Some((lo, hi, values)) if (*lo, *hi) == (min, max) => values.len(),
            _ => 0,
        }
    }

    fn sized_value(&mut self, min: u32, max: u32) -> Value {
        let size = self.size(min, max);
        Value {
            bytes: self.value(size as usize),
            plain: true,
            outside: std::cell::OnceCell::new(),
        }
    }

    fn slot(&mut self, min: u32, max: u32) -> &mut Vec<Value> {
        if !matches!(&self.ready, Some((lo, hi, _)) if (*lo, *hi) == (min, max)) {
            self.ready = None;
        }
        &mut self.ready.get_or_insert_with(|| (min, max, Vec::new())).2
    }

    /// Gives back a value no write used, for the next request with the same range.
    pub fn keep(&mut self, min: u32, max: u32, value: Value) {
        let slot = self.slot(min, max);
        if slot.len() < READY_MAX {
            slot.push(value);
        }
    }

    /// Prepares values while no span is timed, until `want` are ready (bounded by [`READY_MAX`]
    /// and [`READY_MAX_BYTES`]).
    pub fn prepare(&mut self, min: u32, max: u32, want: usize) {
        let want = want
            .min(READY_MAX)
            .min((READY_MAX_BYTES / (max.max(1) as usize)).max(1));
        while self.ready(min, max) < want {
            let value = self.sized_value(min, max);
            self.slot(min, max).push(value);
        }
    }

    /// A uniform key in `[0, keys)`, as a decimal string.
    pub fn key(&mut self, keys: u32) -> String {
        self.rng.random_range(0..keys.max(1)).to_string()
    }

    /// A uniform size in `[min, max]` bytes.
    pub fn size(&mut self, min: u32, max: u32) -> u32 {
        self.rng.random_range(min..=max.max(min))
    }

    /// Exactly `len` bytes of printable ASCII.
    pub fn value(&mut self, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        for chunk in out.chunks_mut(8) {
            let word = self.rng.next_u64().to_le_bytes();
            for (b, r) in chunk.iter_mut().zip(word) {
                #[allow(clippy::indexing_slicing)] // r & 63 < 64 = ALPHABET.len()
                {
                    *b = ALPHABET[usize::from(r & 63)];
                }
            }
        }
        out
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        items.shuffle(&mut self.rng);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepared_values_match_their_range_and_are_used_once() {
        let mut g = ValueGen::from_seed([3; 32]);
        g.prepare(10, 20, 1);
        let a = g.take_value(10, 20);
        assert!((10..=20).contains(&a.len()));
        assert_eq!(a.plain_str().map(str::len), Some(a.len()));
        assert_eq!(Value::from_bytes(b"x".to_vec()).plain_str(), None);
        // Taken: the next one is fresh, and a different range never reuses a prepared value.
        g.prepare(10, 20, 1);
        let b = g.take_value(5, 5);
        assert_eq!(b.len(), 5);
        g.keep(5, 5, b.clone());
        assert_eq!(g.take_value(5, 5), b);
        assert_ne!(g.take_value(5, 5), b, "a kept value is handed out once");
    }

    #[test]
    fn several_values_are_kept_ready_within_bounds() {
        let mut g = ValueGen::from_seed([4; 32]);
        g.prepare(100, 200, 3);
        assert_eq!(g.ready(100, 200), 3);
        let taken: Vec<_> = (0..3).map(|_| g.take_value(100, 200)).collect();
        assert_eq!(g.ready(100, 200), 0);
        assert_ne!(taken[0], taken[1], "each request gets its own value");
        g.prepare(100, 200, 100);
        assert_eq!(g.ready(100, 200), READY_MAX, "at most READY_MAX");
        g.prepare(1 << 20, 1 << 20, 8);
        assert_eq!(
            g.ready(1 << 20, 1 << 20),
            4,
            "at most READY_MAX_BYTES of values"
        );
    }

    #[test]
    fn values_have_exact_length_and_are_printable_ascii() {
        let mut g = ValueGen::from_seed([7; 32]);
        for len in [0, 1, 7, 8, 9, 4096, 65_536, 65_537, 1_048_576] {
            let v = g.value(len);
            assert_eq!(v.len(), len);
            assert!(v.iter().all(|b| b.is_ascii_graphic()));
            assert_eq!(std::str::from_utf8(&v).unwrap().len(), len);
        }
    }

    #[test]
    fn values_use_the_whole_alphabet_and_differ() {
        let mut g = ValueGen::from_seed([1; 32]);
        let a = g.value(4096);
        let b = g.value(4096);
        assert_ne!(a, b);
        let distinct: std::collections::HashSet<u8> = a.iter().copied().collect();
        assert_eq!(distinct.len(), 64);
    }

    #[test]
    fn sizes_and_keys_stay_in_bounds_and_reach_both_ends() {
        let mut g = ValueGen::from_seed([3; 32]);
        let sizes: Vec<u32> = (0..2000).map(|_| g.size(10, 13)).collect();
        assert!(sizes.iter().all(|s| (10..=13).contains(s)));
        assert!(sizes.contains(&10) && sizes.contains(&13));
        assert_eq!(g.size(5, 5), 5);
        let keys: Vec<u32> = (0..2000).map(|_| g.key(3).parse().unwrap()).collect();
        assert!(keys.iter().all(|k| *k < 3));
        assert!(keys.contains(&0) && keys.contains(&2));
    }
}
