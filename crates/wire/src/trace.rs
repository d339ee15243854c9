//! Where a fleet member's isolate runs, by Cloudflare's trace, sent in a header of its own
//! ([`HEADER`]) beside `cf-placement`: two witnesses, and `/test`'s answer bytes unchanged.

/// The header a member's `/test` answer carries its trace colo in: a colo code (`FRA`), or
/// [`UNKNOWN`] when the member could not tell (no trace asked yet, or it failed).
pub const HEADER: &str = "kvbench-trace-colo";
/// What a member that cannot tell its trace colo says, and a kept line keeps.
pub const UNKNOWN: &str = "unknown";

/// `text` when it is a colo code as Cloudflare writes one: 2 to 8 ASCII letters or digits (a
/// member's or a trace's text never reaches a kept line or a report unchecked).
pub fn colo_code(text: &str) -> Option<&str> {
    let text = text.trim();
    ((2..=8).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then_some(text)
}

/// The header's value for what the member knows: the colo, or [`UNKNOWN`].
pub fn header_value(colo: Option<&str>) -> &str {
    colo.and_then(colo_code).unwrap_or(UNKNOWN)
}

/// The colo a member's header names; `None` when it is absent, says [`UNKNOWN`], or is not a
/// colo code.
pub fn read_header(value: Option<&str>) -> Option<String> {
    value
        .and_then(colo_code)
        .filter(|c| *c != UNKNOWN)
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_names_a_colo_or_nothing() {
        assert_eq!(header_value(Some("FRA")), "FRA");
        assert_eq!(header_value(None), "unknown");
        assert_eq!(header_value(Some("<b>")), "unknown");
        assert_eq!(read_header(Some(" IAD ")).as_deref(), Some("IAD"));
        for bad in [
            None,
            Some(""),
            Some("unknown"),
            Some("X"),
            Some("ABCDEFGHI"),
            Some("F-RA"),
        ] {
            assert_eq!(read_header(bad), None, "{bad:?}");
        }
        // What a member writes, a prober reads back.
        assert_eq!(
            read_header(Some(header_value(Some("NRT")))).as_deref(),
            Some("NRT")
        );
        assert_eq!(read_header(Some(header_value(None))), None);
    }
}
