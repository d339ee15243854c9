//! A histogram's text form read from a file someone else may have written (a shared
//! report.json): its HdrHistogram V2 headers are parsed and checked against what kvbench itself
//! writes — 3 significant figures, lowest trackable value 1, a payload no longer than the declared
//! range can need — *before* anything is allocated from them, and only then handed to
//! hdrhistogram's deserializer. Without this, a 48-character histogram declaring a 4 GiB payload
//! makes the deserializer allocate 4 GiB, and one at 5 significant figures over 2^62 holds 48 MB
//! of counts.

use flate2::read::ZlibDecoder;

/// Three significant figures: 0.1% relative precision at any magnitude — what kvbench's
/// histograms ([`crate::hist`]) record and the only precision a file's may declare.
pub const SIGFIG: u8 = 3;

/// The cookie of V2 wrapped in deflate: the only form kvbench writes.
pub const COMPRESSED_COOKIE: u32 = 0x1c84_9314;
/// The cookie of plain V2 (inside the deflate stream).
pub const COOKIE: u32 = 0x1c84_9313;
/// Bytes of a V2 header: cookie, payload length, normalizing offset, significant figures,
/// lowest and highest trackable value, integer-to-double ratio.
pub const HEADER: usize = 40;
/// The lowest trackable value of every histogram kvbench creates (`Histogram::new`).
pub const LOWEST: u64 = 1;
/// Counts of the widest histogram kvbench can write (3 significant figures, 1..=u64::MAX, as
/// the auto-resizing histogram grows): 55 buckets × 1024 sub-buckets. Its dense form is 8 bytes a
/// count, [`MAX_DENSE_BYTES`].
pub const MAX_COUNTS: usize = counts_len(u64::MAX);
/// The most memory one histogram read from a file holds while a figure is read from it.
pub const MAX_DENSE_BYTES: usize = MAX_COUNTS * 8;
/// Most payload bytes any histogram kvbench reads may declare: 9 bytes (the longest varint) per
/// count of the widest range.
pub const MAX_PAYLOAD: usize = MAX_COUNTS * 9;

/// What is wrong with a histogram's serialized form, found before it is decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HeaderError {
    #[error("is {0} bytes, shorter than its {1}-byte header")]
    Short(usize, usize),
    #[error("starts with cookie {0:#010x}, not V2 with deflate ({COMPRESSED_COOKIE:#010x})")]
    Cookie(u32),
    #[error("declares {declared} bytes of compressed data, but {actual} follow")]
    CompressedLength { declared: u64, actual: usize },
    #[error("its deflate stream is broken: {0}")]
    Inflate(String),
    #[error("inside the deflate stream, cookie {0:#010x}, not V2 ({COOKIE:#010x})")]
    InnerCookie(u32),
    #[error(
        "declares {sigfig} significant figures; kvbench writes {SIGFIG} (more would hold up to \
         100× the counts)"
    )]
    Precision { sigfig: u32 },
    #[error("declares lowest trackable value {lowest} and highest {highest}; kvbench writes lowest {LOWEST} and a highest of at least 2")]
    Range { lowest: u64, highest: u64 },
    #[error(
        "declares {declared} bytes of payload, more than the {most} its range (highest \
         trackable value {highest}) can need"
    )]
    Payload {
        declared: u64,
        most: usize,
        highest: u64,
    },
    #[error("declares {declared} bytes of payload, but {actual} follow")]
    Truncated { declared: usize, actual: usize },
    #[error("declares {0} bytes of payload, but more follow")]
    Longer(usize),
    #[error("uses a normalizing offset ({0}), which kvbench never writes")]
    Offset(u32),
    #[error("declares an integer-to-double ratio of {0}; kvbench writes 1")]
    Ratio(f64),
}

/// Counts in a histogram of 3 significant figures and lowest value 1 tracking up to `highest`
/// (hdrhistogram's `buckets_to_cover` and `num_bins`, without allocating them; tested against it).
pub const fn counts_len(highest: u64) -> usize {
    // 3 significant figures: 2 × 10^3 rounded up to a power of two.
    const SUB_BUCKETS: u64 = 2048;
    let mut untrackable = SUB_BUCKETS;
    let mut buckets: usize = 1;
    while untrackable <= highest {
        if untrackable > u64::MAX / 2 {
            buckets += 1;
            break;
        }
        untrackable <<= 1;
        buckets += 1;
    }
    (buckets + 1) * (SUB_BUCKETS as usize / 2)
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_be_bytes(b))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let b: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_be_bytes(b))
}

/// The checked fields of a V2 header.
struct Header {
    payload: usize,
}

/// Checks a plain V2 header (the first [`HEADER`] bytes of `bytes`) against what kvbench writes.
fn check_header(bytes: &[u8]) -> Result<Header, HeaderError> {
    let short = || HeaderError::Short(bytes.len(), HEADER);
    let field32 = |at| u32_at(bytes, at).ok_or_else(short);
    let field64 = |at| u64_at(bytes, at).ok_or_else(short);
    let cookie = field32(0)?;
    if cookie != COOKIE {
        return Err(HeaderError::InnerCookie(cookie));
    }
    let declared = field32(4)?;
    let offset = field32(8)?;
    let sigfig = field32(12)?;
    let (lowest, highest) = (field64(16)?, field64(24)?);
    let ratio = f64::from_bits(field64(32)?);
    if sigfig != u32::from(SIGFIG) {
        return Err(HeaderError::Precision { sigfig });
    }
    if lowest != LOWEST || highest < 2 {
        return Err(HeaderError::Range { lowest, highest });
    }
    let most = counts_len(highest) * 9;
    let payload = usize::try_from(declared)
        .ok()
        .filter(|p| *p <= most)
        .ok_or(HeaderError::Payload {
            declared: u64::from(declared),
            most,
            highest,
        })?;
    if offset != 0 {
        return Err(HeaderError::Offset(offset));
    }
    if ratio != 1.0 {
        return Err(HeaderError::Ratio(ratio));
    }
    Ok(Header { payload })
}

/// The plain V2 bytes (header and payload) inside `bytes`, a V2-deflate histogram as kvbench
/// writes it, every header field checked before the payload is read: at most
/// [`HEADER`] + [`MAX_PAYLOAD`] bytes are ever inflated, whatever the stream declares.
pub fn inflate_checked(bytes: &[u8]) -> Result<Vec<u8>, HeaderError> {
    let cookie = u32_at(bytes, 0).ok_or(HeaderError::Short(bytes.len(), 8))?;
    if cookie != COMPRESSED_COOKIE {
        return Err(HeaderError::Cookie(cookie));
    }
    let declared = u32_at(bytes, 4).ok_or(HeaderError::Short(bytes.len(), 8))?;
    let compressed = bytes.get(8..).unwrap_or_default();
    if u64::from(declared) != compressed.len() as u64 {
        return Err(HeaderError::CompressedLength {
            declared: u64::from(declared),
            actual: compressed.len(),
        });
    }
    let inflate = |e: std::io::Error| HeaderError::Inflate(e.to_string());
    let mut stream = ZlibDecoder::new(compressed);
    let mut v2 = vec![0; HEADER];
    let got = read_up_to(&mut stream, &mut v2).map_err(inflate)?;
    if got < HEADER {
        return Err(HeaderError::Short(got, HEADER));
    }
    let header = check_header(&v2)?;
    // The payload, and one byte more to tell a longer stream from an exact one.
    v2.resize(HEADER + header.payload + 1, 0);
    let got = read_up_to(&mut stream, v2.get_mut(HEADER..).unwrap_or_default()).map_err(inflate)?;
    if got > header.payload {
        return Err(HeaderError::Longer(header.payload));
    }
    if got < header.payload {
        return Err(HeaderError::Truncated {
            declared: header.payload,
            actual: got,
        });
    }
    v2.truncate(HEADER + got);
    Ok(v2)
}

/// Reads until `buf` is full or the stream ends; how many bytes were read.
fn read_up_to(stream: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while let Some(rest) = buf.get_mut(filled..).filter(|r| !r.is_empty()) {
        match stream.read(rest) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Hostile histograms for the tests: the text form of a V2-deflate histogram with these header
/// fields and this payload (declared as `declared` bytes when given).
#[cfg(test)]
pub(crate) fn craft(sigfig: u32, highest: u64, payload: &[u8], declared: Option<u32>) -> String {
    use base64::Engine as _;
    use std::io::Write as _;
    let mut v2 = Vec::new();
    v2.extend(COOKIE.to_be_bytes());
    v2.extend(declared.unwrap_or(payload.len() as u32).to_be_bytes());
    v2.extend(0u32.to_be_bytes());
    v2.extend(sigfig.to_be_bytes());
    v2.extend(LOWEST.to_be_bytes());
    v2.extend(highest.to_be_bytes());
    v2.extend(1f64.to_bits().to_be_bytes());
    v2.extend(payload);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(&v2).unwrap();
    let z = z.finish().unwrap();
    let mut out = Vec::new();
    out.extend(COMPRESSED_COOKIE.to_be_bytes());
    out.extend((z.len() as u32).to_be_bytes());
    out.extend(z);
    base64::engine::general_purpose::STANDARD.encode(out)
}

/// A count or a run of `-n` zero counts as V2 writes it (zig-zag, then LEB128; 9 bytes at most).
#[cfg(test)]
pub(crate) fn varint(n: i64) -> Vec<u8> {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    let mut out = Vec::new();
    for _ in 0..8 {
        if z < 0x80 {
            out.push(z as u8);
            return out;
        }
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::Histogram;

    /// The count of counts agrees with hdrhistogram's own, from the narrowest range to the widest.
    #[test]
    fn counts_len_is_hdrhistogram_s() {
        let mut highest = 2u64;
        loop {
            for h in [highest - 1, highest, highest.saturating_add(1)] {
                if h < 2 {
                    continue;
                }
                let real = Histogram::<u64>::new_with_bounds(1, h, 3).unwrap();
                assert_eq!(counts_len(h), real.distinct_values(), "highest {h}");
            }
            if highest > u64::MAX / 2 {
                break;
            }
            highest *= 2;
        }
        let widest = Histogram::<u64>::new_with_bounds(1, u64::MAX, 3).unwrap();
        assert_eq!(MAX_COUNTS, widest.distinct_values());
        assert_eq!(MAX_COUNTS, 56_320);
    }

    fn header(sigfig: u32, lowest: u64, highest: u64, payload: u32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(COOKIE.to_be_bytes());
        v.extend(payload.to_be_bytes());
        v.extend(0u32.to_be_bytes());
        v.extend(sigfig.to_be_bytes());
        v.extend(lowest.to_be_bytes());
        v.extend(highest.to_be_bytes());
        v.extend(1f64.to_bits().to_be_bytes());
        v
    }

    #[test]
    fn headers_unlike_kvbench_s_are_refused() {
        assert!(check_header(&header(3, 1, 1 << 40, 10)).is_ok());
        assert!(check_header(&header(3, 1, u64::MAX, MAX_PAYLOAD as u32)).is_ok());
        let cases = [
            (header(5, 1, 1 << 62, 10), "significant figures"),
            (header(2, 1, 1 << 62, 10), "significant figures"),
            (header(3, 0, 1 << 62, 10), "lowest trackable value 0"),
            (header(3, 1000, 1 << 62, 10), "lowest trackable value 1000"),
            (header(3, 1, 1, 10), "highest 1"),
            (
                header(3, 1, u64::MAX, u32::MAX),
                "4294967295 bytes of payload",
            ),
            (header(3, 1, 2, 2049 * 9), "more than the 18432"),
            (
                header(3, 1, 2, 1)[..39].to_vec(),
                "shorter than its 40-byte header",
            ),
        ];
        for (bytes, want) in cases {
            let e = check_header(&bytes).err().map(|e| e.to_string());
            assert!(
                e.as_deref().is_some_and(|e| e.contains(want)),
                "{want}: {e:?}"
            );
        }
    }
}
