//! Latency/size histograms (integer microseconds or bytes) and their portable text form:
//! HdrHistogram V2 + deflate, base64 — the format other HdrHistogram ports read.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hdrhistogram::serialization::{
    Deserializer, Serializer as _, V2DeflateSerializer, V2Serializer,
};
use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer as SerdeDeserializer, Serialize, Serializer};

pub use crate::v2::SIGFIG;

/// Most samples one histogram counts, read or added: 2^53, exact in a double (what JavaScript
/// reads a count as) and far beyond a run (285 years at a million requests a second). Every sum
/// of two such counts fits an `i64`, which is what V2 can serialize a count as.
pub const MAX_COUNT: u64 = 1 << 53;

/// Failure to read a serialized histogram back, or to add or write one.
#[derive(Debug, thiserror::Error)]
pub enum HistError {
    #[error("histogram is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram {0}")]
    Header(#[from] crate::v2::HeaderError),
    #[error("histogram is not valid HdrHistogram V2: {0}")]
    Decode(hdrhistogram::serialization::DeserializeError),
    #[error("histogram counts {0} samples or more, beyond the {MAX_COUNT} one may count")]
    TooMany(u64),
    #[error("histograms of {0} and {1} samples add past the {MAX_COUNT} one may count")]
    Overflow(u64, u64),
    #[error("histogram cannot be added: {0:?}")]
    Add(hdrhistogram::AdditionError),
    #[error("histogram cannot be written: {0}")]
    Encode(String),
}

/// A latency or size histogram with HdrHistogram's semantics (3 significant figures, auto-resizing)
/// that serializes as a base64 V2-deflate string.
///
/// A histogram of few values keeps the values themselves (4 bytes each, at most [`FEW`]) and
/// becomes an HdrHistogram (16–160 KB of counts) only when it outgrows them: a report of many
/// small groups — a fleet's vantage points × stores × timeline intervals — costs memory in
/// proportion to its samples. Every figure is read from an HdrHistogram built from the values in
/// the order they were recorded, so it is the same figure either way.
#[derive(Clone)]
pub struct Hist(Repr);

#[derive(Clone)]
enum Repr {
    /// Values as recorded, in order.
    Few(Vec<u32>),
    Dense(Box<Histogram<u64>>),
    /// An HdrHistogram at rest ([`Hist::freeze`], or as read from a file by [`Hist::decode`]):
    /// its V2 bytes, a few KB however many samples; read back for each figure, made dense again
    /// by the next change.
    Frozen {
        bytes: Box<[u8]>,
        len: u64,
    },
}

/// One bucket of a [`Hist`] (see [`Hist::buckets`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub lowest: u64,
    pub median: u64,
    pub count: u64,
}

/// Most values a histogram keeps as values (16 KB, the size of an empty HdrHistogram's counts).
pub const FEW: usize = 4096;

fn dense_empty() -> Histogram<u64> {
    #[allow(clippy::expect_used)] // On the allowed list of tests/tests/panics.rs, with why.
    Histogram::new(SIGFIG).expect("3 significant figures is valid")
}

fn record_into(h: &mut Histogram<u64>, value: u64) {
    // `record` grows the auto-resizing histogram; `saturating_record` would clamp instead.
    if h.record(value).is_err() {
        h.saturating_record(value);
    }
}

impl Default for Hist {
    fn default() -> Self {
        Hist(Repr::Few(Vec::new()))
    }
}

impl PartialEq for Hist {
    fn eq(&self, other: &Hist) -> bool {
        match (&self.0, &other.0) {
            (Repr::Few(a), Repr::Few(b)) if a == b => true,
            _ => self.len() == other.len() && *self.dense() == *other.dense(),
        }
    }
}

impl fmt::Debug for Hist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hist(n={}, max={})", self.len(), self.max())
    }
}

impl Hist {
    /// The HdrHistogram of these values (built for the call when only the values are kept).
    fn dense(&self) -> std::borrow::Cow<'_, Histogram<u64>> {
        match &self.0 {
            Repr::Dense(h) => std::borrow::Cow::Borrowed(h),
            Repr::Frozen { bytes, .. } => {
                #[allow(clippy::expect_used)] // On the allowed list of tests/tests/panics.rs.
                let mut h: Histogram<u64> = Deserializer::new()
                    .deserialize(&mut &**bytes)
                    .expect("bytes this type serialized, or checked and decoded once, itself");
                h.auto(true);
                std::borrow::Cow::Owned(h)
            }
            Repr::Few(values) => {
                let mut h = dense_empty();
                for v in values {
                    record_into(&mut h, u64::from(*v));
                }
                std::borrow::Cow::Owned(h)
            }
        }
    }

    /// This histogram in the form fastest to read many figures from (an HdrHistogram, built
    /// once for all of them when it is kept otherwise).
    pub fn for_reading(&self) -> std::borrow::Cow<'_, Hist> {
        match &self.0 {
            Repr::Dense(_) => std::borrow::Cow::Borrowed(self),
            _ => std::borrow::Cow::Owned(Hist(Repr::Dense(Box::new(self.dense().into_owned())))),
        }
    }

    /// Puts a histogram of more than [`PACKED_VALUES`] at rest: compressed until it next changes
    /// (a few KB instead of 16–160 KB, or 4 bytes a value). Its figures stay exactly the same.
    pub fn freeze(&mut self) {
        let large = match &self.0 {
            Repr::Few(values) => values.len() > PACKED_VALUES,
            Repr::Dense(_) => true,
            Repr::Frozen { .. } => false,
        };
        if large {
            let h = self.dense();
            let mut bytes = Vec::new();
            // Plain V2 (zero runs and variable-length counts): a compressor's setup would cost
            // more than it saves at this size. A histogram that cannot be serialized (a count
            // past i64::MAX) stays as it is.
            if V2Serializer::new().serialize(&*h, &mut bytes).is_err() {
                return;
            }
            let len = h.len();
            drop(h);
            self.0 = Repr::Frozen {
                bytes: bytes.into_boxed_slice(),
                len,
            };
        }
    }

    /// Takes this histogram out as an HdrHistogram, leaving it empty: the caller changes it and
    /// puts it back (`self.0 = Repr::Dense(h)`).
    fn take_dense(&mut self) -> Box<Histogram<u64>> {
        match std::mem::replace(&mut self.0, Repr::Few(Vec::new())) {
            Repr::Dense(h) => h,
            other => Box::new(Hist(other).dense().into_owned()),
        }
    }

    /// Records one value; values beyond the trackable range are clamped rather than dropped.
    pub fn record(&mut self, value: u64) {
        if let Repr::Few(values) = &mut self.0 {
            if values.len() < FEW {
                if let Ok(v) = u32::try_from(value) {
                    values.push(v);
                    return;
                }
            }
        }
        let mut h = self.take_dense();
        record_into(&mut h, value);
        self.0 = Repr::Dense(h);
    }

    /// Histogram addition: the merge of two runs is exactly a run over the union of samples.
    /// Counts saturate at `u64::MAX` (hdrhistogram's `add`): for histograms read from a file,
    /// [`Hist::try_add`] refuses a sum past [`MAX_COUNT`] instead.
    pub fn add(&mut self, other: &Hist) {
        // Fails only on what auto-resizing histograms of one precision never meet (a fixed range,
        // a counts array past usize), and then leaves `self` as it was.
        let _ = self.add_unchecked(other);
    }

    /// [`Hist::add`], refused when the sum would count more than [`MAX_COUNT`] samples (then
    /// every count fits the V2 form, and every sum of two figures fits a u64).
    pub fn try_add(&mut self, other: &Hist) -> Result<(), HistError> {
        let (mine, theirs) = (self.len(), other.len());
        if mine.checked_add(theirs).is_none_or(|n| n > MAX_COUNT) {
            return Err(HistError::Overflow(mine, theirs));
        }
        self.add_unchecked(other)
    }

    fn add_unchecked(&mut self, other: &Hist) -> Result<(), HistError> {
        if self.is_empty() {
            // Into an empty histogram: a copy, in whatever form the other is in (at rest stays
            // at rest).
            *self = other.clone();
            return Ok(());
        }
        if let (Repr::Few(mine), Repr::Few(theirs)) = (&mut self.0, &other.0) {
            if mine.len() + theirs.len() <= FEW {
                mine.extend_from_slice(theirs);
                return Ok(());
            }
        }
        let mut h = self.take_dense();
        let added = match &other.0 {
            Repr::Few(theirs) => {
                theirs
                    .iter()
                    .for_each(|v| record_into(&mut h, u64::from(*v)));
                Ok(())
            }
            Repr::Dense(theirs) => h.add(&**theirs),
            Repr::Frozen { .. } => h.add(&*other.dense()),
        };
        self.0 = Repr::Dense(h);
        added.map_err(HistError::Add)
    }

    pub fn len(&self) -> u64 {
        match &self.0 {
            Repr::Few(values) => values.len() as u64,
            Repr::Dense(h) => h.len(),
            Repr::Frozen { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value at quantile `q` (0..=1); 0 for an empty histogram. Reported as the middle of its
    /// bucket (within 0.05% of any value recorded there), so 10 ms reads as 10.00, not 10.01.
    pub fn quantile(&self, q: f64) -> u64 {
        let [value] = self.quantiles(&[q]);
        value
    }

    /// Values at several quantiles at once (one HdrHistogram built for all of them).
    pub fn quantiles<const N: usize>(&self, qs: &[f64; N]) -> [u64; N] {
        if self.is_empty() {
            return [0; N];
        }
        let h = self.dense();
        qs.map(|q| h.median_equivalent(h.value_at_quantile(q)))
    }

    /// Largest recorded value (middle of its bucket); 0 for an empty histogram.
    pub fn max(&self) -> u64 {
        if self.is_empty() {
            return 0;
        }
        match &self.0 {
            // The bucket of the largest value is the same in any histogram of these settings.
            Repr::Few(values) => {
                let max = u64::from(values.iter().copied().max().unwrap_or(0));
                let mut h = dense_empty();
                record_into(&mut h, max);
                h.median_equivalent(h.max())
            }
            Repr::Dense(_) | Repr::Frozen { .. } => {
                let h = self.dense();
                h.median_equivalent(h.max())
            }
        }
    }

    pub fn mean(&self) -> f64 {
        if self.is_empty() {
            0.0
        } else {
            self.dense().mean()
        }
    }

    /// Each bucket with a value recorded, in order: its lowest value, its middle and its count.
    pub fn buckets(&self) -> Vec<Bucket> {
        let h = self.dense();
        h.iter_recorded()
            .map(|v| Bucket {
                lowest: h.lowest_equivalent(v.value_iterated_to()),
                median: h.median_equivalent(v.value_iterated_to()),
                count: v.count_at_value(),
            })
            .collect()
    }

    /// base64(V2 + deflate) text form; an error for a count V2 cannot hold (past `i64::MAX`).
    pub fn encode(&self) -> Result<String, HistError> {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&*self.dense(), &mut bytes)
            .map_err(|e| HistError::Encode(format!("{e:?}")))?;
        Ok(STANDARD.encode(bytes))
    }

    /// Reads the text form of a histogram from anywhere (a shared report.json): its headers are
    /// checked before anything is allocated from them ([`crate::v2`]), its counts must add up to
    /// at most [`MAX_COUNT`], and it is kept at rest (its V2 bytes, no larger than what the text
    /// inflates to): memory in proportion to the file, however wide a range it declares.
    pub fn decode(text: &str) -> Result<Hist, HistError> {
        let bytes = STANDARD.decode(text)?;
        let v2 = crate::v2::inflate_checked(&bytes)?;
        drop(bytes);
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut v2.as_slice())
            .map_err(HistError::Decode)?;
        // hdrhistogram's own total saturates: summed again, checked.
        let mut len: u64 = 0;
        for v in h.iter_recorded() {
            len = len
                .checked_add(v.count_at_value())
                .filter(|n| *n <= MAX_COUNT)
                .ok_or(HistError::TooMany(len.saturating_add(v.count_at_value())))?;
        }
        Ok(Hist(Repr::Frozen {
            bytes: v2.into_boxed_slice(),
            len,
        }))
    }
}

impl Serialize for Hist {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.encode().map_err(serde::ser::Error::custom)?)
    }
}

impl<'de> Deserialize<'de> for Hist {
    fn deserialize<D: SerdeDeserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Hist::decode(&text).map_err(serde::de::Error::custom)
    }
}

/// A histogram at rest — a closed timeline interval: a few values stay values (at most
/// [`PACKED_VALUES`], a kilobyte), a larger one is kept in its text form (a few hundred bytes
/// however many samples), so memory stays flat over an hour-long run. Serializes exactly like
/// [`Hist`].
#[derive(Clone, Default)]
pub struct Packed(PackedRepr);

/// Equal when they hold the same histogram, whichever form each is in.
impl PartialEq for Packed {
    fn eq(&self, other: &Packed) -> bool {
        match (&self.0, &other.0) {
            (PackedRepr::Text(a), PackedRepr::Text(b)) if a == b => true,
            _ => self.unpack() == other.unpack(),
        }
    }
}

#[derive(Clone)]
enum PackedRepr {
    Values(Hist),
    Text(String),
}

impl Default for PackedRepr {
    fn default() -> Self {
        PackedRepr::Values(Hist::default())
    }
}

/// Most values a [`Packed`] keeps as values rather than compressing them.
pub const PACKED_VALUES: usize = 256;

impl fmt::Debug for Packed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            PackedRepr::Values(h) => write!(f, "Packed({} values)", h.len()),
            PackedRepr::Text(t) => write!(f, "Packed({} chars)", t.len()),
        }
    }
}

impl Packed {
    pub fn pack(h: &Hist) -> Packed {
        match &h.0 {
            Repr::Few(values) if values.len() <= PACKED_VALUES => {
                Packed(PackedRepr::Values(h.clone()))
            }
            // One that cannot be written stays as it is (its write is the error).
            _ => match h.encode() {
                Ok(text) => Packed(PackedRepr::Text(text)),
                Err(_) => Packed(PackedRepr::Values(h.clone())),
            },
        }
    }

    /// Decodes; validated when read, so this only fails on a value built by hand.
    pub fn unpack(&self) -> Hist {
        match &self.0 {
            PackedRepr::Values(h) => h.clone(),
            PackedRepr::Text(t) => Hist::decode(t).unwrap_or_default(),
        }
    }
}

impl Serialize for Packed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            PackedRepr::Values(h) => h.serialize(s),
            PackedRepr::Text(t) => s.serialize_str(t),
        }
    }
}

impl<'de> Deserialize<'de> for Packed {
    fn deserialize<D: SerdeDeserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Hist::decode(&text).map_err(serde::de::Error::custom)?;
        Ok(Packed(PackedRepr::Text(text)))
    }
}

/// Milliseconds (as the worker reports them) to whole microseconds; `None` for values that
/// cannot be a duration.
pub fn ms_to_us(ms: f64) -> Option<u64> {
    if ms.is_finite() && ms >= 0.0 {
        Some((ms * 1000.0).round() as u64)
    } else {
        None
    }
}

/// Microseconds as milliseconds with two decimals, for tables.
pub fn fmt_ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_text() {
        let mut h = Hist::default();
        for v in [1, 10, 100, 1_000, 10_000, 1_000_000] {
            h.record(v);
        }
        let back = Hist::decode(&h.encode().unwrap()).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.len(), 6);
        assert_eq!(back.max(), h.max());
        assert!(back.max() >= 1_000_000);
    }

    /// A reference HdrHistogram and the figures every form must agree on.
    fn figures(h: &Hist) -> (u64, Vec<u64>, u64, String, String) {
        let qs = [0.0, 0.5, 0.9, 0.99, 0.999, 1.0];
        (
            h.len(),
            qs.iter().map(|q| h.quantile(*q)).collect(),
            h.max(),
            format!("{:.6}", h.mean()),
            h.encode().unwrap(),
        )
    }

    fn values(n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Microseconds from 50 µs to ~2 s, and now and then one beyond u32.
                if x.is_multiple_of(997) {
                    5_000_000_000 + x % 1000
                } else {
                    50 + x % 2_000_000
                }
            })
            .collect()
    }

    #[test]
    fn every_form_gives_the_figures_of_one_hdr_histogram() {
        for n in [0, 1, 7, PACKED_VALUES + 1, FEW - 1, FEW, FEW + 1, 3 * FEW] {
            let vs = values(n, n as u64 + 1);
            let mut reference = Histogram::<u64>::new(SIGFIG).unwrap();
            let mut h = Hist::default();
            for v in &vs {
                reference.record(*v).unwrap();
                h.record(*v);
            }
            let want = figures(&Hist(Repr::Dense(Box::new(reference))));
            assert_eq!(figures(&h), want, "recorded, n={n}");
            let mut frozen = h.clone();
            frozen.freeze();
            assert_eq!(figures(&frozen), want, "frozen, n={n}");
            assert_eq!(frozen, h, "frozen equals recorded, n={n}");
            assert_eq!(figures(&Packed::pack(&h).unpack()), want, "packed, n={n}");
            assert_eq!(
                figures(&Hist::decode(&h.encode().unwrap()).unwrap()),
                want,
                "decoded, n={n}"
            );
            // Added in two halves, in each form.
            let (a, b) = vs.split_at(n / 2);
            let half = |part: &[u64], freeze: bool| {
                let mut h = Hist::default();
                part.iter().for_each(|v| h.record(*v));
                if freeze {
                    h.freeze();
                }
                h
            };
            for (fa, fb) in [(false, false), (true, false), (false, true), (true, true)] {
                let mut sum = half(a, fa);
                sum.add(&half(b, fb));
                assert_eq!(figures(&sum), want, "added, n={n}, frozen {fa}/{fb}");
            }
        }
    }

    #[test]
    fn a_histogram_at_rest_is_smaller() {
        let mut h = Hist::default();
        values(20_000, 3).into_iter().for_each(|v| h.record(v));
        assert!(matches!(h.0, Repr::Dense(_)));
        h.freeze();
        let Repr::Frozen { bytes, len } = &h.0 else {
            panic!("frozen");
        };
        assert_eq!(*len, 20_000);
        assert!(bytes.len() < 40_000, "{} bytes at rest", bytes.len());
        let mut few = Hist::default();
        values(100, 4).into_iter().for_each(|v| few.record(v));
        few.freeze();
        assert!(matches!(few.0, Repr::Few(_)), "a few values stay values");
    }

    #[test]
    fn empty_round_trips_and_has_zero_quantiles() {
        let h = Hist::default();
        let back = Hist::decode(&h.encode().unwrap()).unwrap();
        assert!(back.is_empty());
        assert_eq!(back.quantile(0.99), 0);
    }

    #[test]
    fn rejects_garbage() {
        assert!(matches!(Hist::decode("%%%"), Err(HistError::Base64(_))));
        assert!(matches!(Hist::decode("AAAA"), Err(HistError::Header(_))));
    }

    /// What kvbench writes, crafted by hand, decodes; every header unlike it is refused before
    /// its payload is inflated or its counts allocated.
    #[test]
    fn hostile_headers_are_refused_before_anything_is_allocated() {
        use crate::v2::{craft, varint};
        // 100 zero counts, then 7 at value 100.
        let payload = [varint(-100), varint(7)].concat();
        let h = Hist::decode(&craft(3, 2048, &payload, None)).unwrap();
        assert_eq!((h.len(), h.max()), (7, 100));
        let cases = [
            (
                craft(3, 2048, &[], Some(u32::MAX)),
                "declares 4294967295 bytes of payload, more than the 27648",
            ),
            (
                craft(3, 2048, &[], Some(1 << 30)),
                "declares 1073741824 bytes of payload, more than the 27648",
            ),
            (
                craft(5, 1 << 62, &payload, None),
                "declares 5 significant figures",
            ),
            (craft(3, 1, &payload, None), "highest 1"),
            (
                craft(3, 2048, &payload, Some(payload.len() as u32 + 5)),
                "8 bytes of payload, but 3 follow",
            ),
            (
                craft(3, 2048, &[payload.clone(), vec![0; 9]].concat(), Some(4)),
                "4 bytes of payload, but more follow",
            ),
        ];
        for (text, want) in cases {
            let e = Hist::decode(&text).err().map(|e| e.to_string());
            assert!(
                e.as_deref().is_some_and(|e| e.contains(want)),
                "{want}: {e:?}"
            );
        }
    }

    /// Counts past [`MAX_COUNT`] are refused when read, and a sum past it when added: never a
    /// count V2 cannot write (the panic `encode`'s `expect` was), never a wrap.
    #[test]
    fn counts_past_the_limit_are_errors_read_or_added() {
        use crate::v2::{craft, varint};
        let over = [varint(-10), varint(MAX_COUNT as i64 + 1)].concat();
        let e = Hist::decode(&craft(3, 2048, &over, None))
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("9007199254740993 samples")));
        let half = [varint(-10), varint(MAX_COUNT as i64 / 2 + 1)].concat();
        let half = Hist::decode(&craft(3, 2048, &half, None)).unwrap();
        let mut sum = half.clone();
        let e = sum.try_add(&half).err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("add past")), "{sum:?}");
        assert_eq!(sum, half, "a refused sum leaves the histogram as it was");
        assert!(sum.encode().is_ok());
        let mut fits =
            Hist::decode(&craft(3, 2048, &[varint(-10), varint(3)].concat(), None)).unwrap();
        fits.try_add(&half).unwrap();
        assert_eq!(fits.len(), MAX_COUNT / 2 + 4);
    }

    #[test]
    fn ms_conversion_table() {
        let cases = [
            (0.0, Some(0)),
            (1.0, Some(1000)),
            (0.0004, Some(0)),
            (12.3456, Some(12346)),
            (-1.0, None),
            (f64::NAN, None),
            (f64::INFINITY, None),
        ];
        for (ms, want) in cases {
            assert_eq!(ms_to_us(ms), want, "ms={ms}");
        }
    }
}
