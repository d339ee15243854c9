//! Deno KV keys in KV Connect's tuple encoding (FoundationDB's): a string is 0x02, its UTF-8
//! with 0x00 escaped as 0x00 0xFF, then 0x00. The key `k` is `[k]`, as `kv.get([k])`.

const STRING: u8 = 0x02;
const ESCAPE: u8 = 0xff;

/// Encodes the tuple `[part, ...]` of strings.
pub fn encode(parts: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 2).sum());
    for part in parts {
        out.push(STRING);
        for &b in part.as_bytes() {
            out.push(b);
            if b == 0 {
                out.push(ESCAPE);
            }
        }
        out.push(0);
    }
    out
}

/// Length of `encode(&[key])` without building it: what Deno KV's key limit applies to.
pub fn encoded_len(key: &str) -> usize {
    2 + key.len() + key.bytes().filter(|b| *b == 0).count()
}

/// The end of the read range that holds exactly `key`: `key` followed by 0x00, the smallest key
/// greater than it (what Deno's own `get` sends).
pub fn range_end(encoded: &[u8]) -> Vec<u8> {
    let mut end = Vec::with_capacity(encoded.len() + 1);
    end.extend_from_slice(encoded);
    end.push(0);
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_tagged_escaped_and_terminated() {
        assert_eq!(encode(&["417"]), b"\x02417\x00");
        assert_eq!(encode(&[""]), b"\x02\x00");
        assert_eq!(encode(&["a\0b"]), b"\x02a\x00\xffb\x00");
        assert_eq!(encode(&["a", "b"]), b"\x02a\x00\x02b\x00");
        assert_eq!(encode(&["é"]), b"\x02\xc3\xa9\x00");
        for k in ["417", "", "a\0b", "\0\0", "é"] {
            assert_eq!(encoded_len(k), encode(&[k]).len(), "{k:?}");
        }
        assert_eq!(range_end(b"\x02k\x00"), b"\x02k\x00\x00");
    }
}
