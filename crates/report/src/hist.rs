//! Latency/size histograms (integer microseconds or bytes) and their portable text form:
//! HdrHistogram V2 + deflate, base64 — the format other HdrHistogram ports read.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer as SerdeDeserializer, Serialize, Serializer};

/// Three significant figures: 0.1% relative precision at any magnitude.
pub const SIGFIG: u8 = 3;

/// Failure to read a serialized histogram back.
#[derive(Debug, thiserror::Error)]
pub enum HistError {
    #[error("histogram is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram is not valid HdrHistogram V2: {0:?}")]
    Decode(hdrhistogram::serialization::DeserializeError),
}

/// An auto-resizing `Histogram<u64>` that serializes as a base64 V2-deflate string.
#[derive(Clone, PartialEq)]
pub struct Hist(pub Histogram<u64>);

impl Default for Hist {
    fn default() -> Self {
        Hist(Histogram::new(SIGFIG).expect("3 significant figures is valid"))
    }
}

impl fmt::Debug for Hist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hist(n={}, max={})", self.0.len(), self.0.max())
    }
}

impl Hist {
    /// Records one value; values beyond the trackable range are clamped rather than dropped.
    pub fn record(&mut self, value: u64) {
        // `record` grows the auto-resizing histogram; `saturating_record` would clamp instead.
        if self.0.record(value).is_err() {
            self.0.saturating_record(value);
        }
    }

    /// Histogram addition: the merge of two runs is exactly a run over the union of samples.
    pub fn add(&mut self, other: &Hist) {
        self.0
            .add(&other.0)
            .expect("auto-resizing histograms always accept another histogram");
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Value at quantile `q` (0..=1); 0 for an empty histogram. Reported as the middle of its
    /// bucket (within 0.05% of any value recorded there), so 10 ms reads as 10.00, not 10.01.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.0.is_empty() {
            0
        } else {
            self.0.median_equivalent(self.0.value_at_quantile(q))
        }
    }

    /// Largest recorded value (middle of its bucket); 0 for an empty histogram.
    pub fn max(&self) -> u64 {
        if self.0.is_empty() {
            0
        } else {
            self.0.median_equivalent(self.0.max())
        }
    }

    pub fn mean(&self) -> f64 {
        if self.0.is_empty() {
            0.0
        } else {
            self.0.mean()
        }
    }

    /// base64(V2 + deflate) text form.
    pub fn encode(&self) -> String {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.0, &mut bytes)
            .expect("serializing into a Vec cannot fail");
        STANDARD.encode(bytes)
    }

    pub fn decode(text: &str) -> Result<Hist, HistError> {
        let bytes = STANDARD.decode(text)?;
        let mut h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(HistError::Decode)?;
        h.auto(true);
        Ok(Hist(h))
    }
}

impl Serialize for Hist {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.encode())
    }
}

impl<'de> Deserialize<'de> for Hist {
    fn deserialize<D: SerdeDeserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Hist::decode(&text).map_err(serde::de::Error::custom)
    }
}

/// A histogram kept in its text form: closed timeline intervals stay a few hundred bytes each, so
/// memory stays flat over an hour-long run. Serializes exactly like [`Hist`].
#[derive(Clone, PartialEq, Default)]
pub struct Packed(String);

impl fmt::Debug for Packed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Packed({} chars)", self.0.len())
    }
}

impl Packed {
    pub fn pack(h: &Hist) -> Packed {
        Packed(h.encode())
    }

    /// Decodes; validated when read, so this only fails on a value built by hand.
    pub fn unpack(&self) -> Hist {
        if self.0.is_empty() {
            return Hist::default();
        }
        Hist::decode(&self.0).unwrap_or_default()
    }
}

impl Serialize for Packed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.is_empty() {
            s.serialize_str(&Hist::default().encode())
        } else {
            s.serialize_str(&self.0)
        }
    }
}

impl<'de> Deserialize<'de> for Packed {
    fn deserialize<D: SerdeDeserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Hist::decode(&text).map_err(serde::de::Error::custom)?;
        Ok(Packed(text))
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
        let back = Hist::decode(&h.encode()).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.len(), 6);
        assert_eq!(back.max(), h.max());
        assert!(back.max() >= 1_000_000);
    }

    #[test]
    fn empty_round_trips_and_has_zero_quantiles() {
        let h = Hist::default();
        let back = Hist::decode(&h.encode()).unwrap();
        assert!(back.is_empty());
        assert_eq!(back.quantile(0.99), 0);
    }

    #[test]
    fn rejects_garbage() {
        assert!(matches!(Hist::decode("%%%"), Err(HistError::Base64(_))));
        assert!(matches!(Hist::decode("AAAA"), Err(HistError::Decode(_))));
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
