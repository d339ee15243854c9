//! Reading kept answers: a query's window (`since`, `until`), `/report`'s windows, durations
//! (`90s`, `5m`, `24h`, `7d`) and the pages an object streams.

use crate::error::ParamError;

/// Lines per page an object hands the worker while it streams.
pub const PAGE_LINES: u32 = 500;
/// Bytes per page, beyond which a page ends early (after one line at least): a page is at most
/// this plus a 1 MiB line, held at most twice, far under 128 MB (500 lines of 1 MiB made 500 MB).
pub const PAGE_BYTES: usize = 4 << 20;

/// The windows `GET /report` renders (1 h, 6 h, 24 h, 7 d, 30 d): one asked for is widened to the
/// next, so similar viewers share one render (else anyone could make it render at will).
pub const REPORT_WINDOWS_S: [u32; 5] = [3_600, 21_600, 86_400, 604_800, 2_592_000];

/// The window a report over `requested_s` seconds is made of: the next of [`REPORT_WINDOWS_S`],
/// or everything kept (`keep_s`) when that is less.
pub fn report_window(requested_s: u32, keep_s: u32) -> u32 {
    REPORT_WINDOWS_S
        .iter()
        .copied()
        .find(|w| *w >= requested_s)
        .unwrap_or(u32::MAX)
        .min(keep_s)
}

/// Whole seconds in `min..=max`; `5m`, `24h`, `7d` are accepted too.
pub fn parse_seconds(parameter: &str, text: &str, min: u32, max: u32) -> Result<u32, ParamError> {
    let s = duration_s(text.trim()).ok_or_else(|| {
        ParamError::new(
            parameter,
            format!("expected seconds (or 30s, 5m, 24h, 7d), got {text:?}"),
        )
    })?;
    if s < u64::from(min) || s > u64::from(max) {
        return Err(ParamError::new(
            parameter,
            format!("must be between {min} and {max} seconds, got {s}"),
        ));
    }
    Ok(s as u32)
}

/// `90`, `90s`, `5m`, `24h`, `7d` as seconds.
fn duration_s(text: &str) -> Option<u64> {
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    if digits.is_empty() || digits.len() > 9 {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return None,
    };
    Some(n * scale)
}

/// The time window of an answers query: `since` and `until`, epoch milliseconds, either given
/// as epoch ms or as a duration before now (`24h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub since_ms: i64,
    pub until_ms: i64,
}

impl Window {
    /// `since` defaults to everything kept, `until` to now.
    pub fn parse(pairs: &[(String, String)], now_ms: i64) -> Result<Window, ParamError> {
        let mut window = Window {
            since_ms: 0,
            until_ms: now_ms + 1,
        };
        let mut seen = Vec::new();
        for (name, value) in pairs {
            if seen.contains(name) {
                return Err(ParamError::new(name, "given more than once"));
            }
            seen.push(name.clone());
            match name.as_str() {
                "since" => window.since_ms = instant(name, value, now_ms)?,
                "until" => window.until_ms = instant(name, value, now_ms)?,
                other => {
                    return Err(ParamError::new(
                        other,
                        "unknown parameter; expected since, until",
                    ))
                }
            }
        }
        if window.since_ms >= window.until_ms {
            return Err(ParamError::new("until", "must be after since"));
        }
        Ok(window)
    }
}

/// Epoch milliseconds (13 digits or fewer), or a duration ago (`90s`, `30m`, `24h`, `7d`).
fn instant(parameter: &str, text: &str, now_ms: i64) -> Result<i64, ParamError> {
    let bad = || {
        ParamError::new(
            parameter,
            format!(
                "expected epoch milliseconds or a duration ago (90s, 30m, 24h, 7d), got {text:?}"
            ),
        )
    };
    let text = text.trim();
    if !text.is_empty() && text.len() <= 13 && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().map_err(|_| bad());
    }
    if text.ends_with(['s', 'm', 'h', 'd']) {
        let ago = duration_s(text).ok_or_else(bad)?;
        return Ok(now_ms - (ago as i64) * 1000);
    }
    Err(bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measurement::params::pairs;

    #[test]
    fn windows() {
        let now = 1_800_000_000_000;
        assert_eq!(
            Window::parse(&[], now).unwrap(),
            Window {
                since_ms: 0,
                until_ms: now + 1
            }
        );
        let w = Window::parse(&pairs(&[("since", "24h")]), now).unwrap();
        assert_eq!(w.since_ms, now - 86_400_000);
        let w = Window::parse(&pairs(&[("since", "1000"), ("until", "2000")]), now).unwrap();
        assert_eq!(
            w,
            Window {
                since_ms: 1000,
                until_ms: 2000
            }
        );
        for (name, value) in [
            ("since", "yesterday"),
            ("until", "1e3"),
            ("since", "99999999999999"),
            ("since", ""),
            ("until", "-5"),
            ("limit", "3"),
        ] {
            let e = Window::parse(&pairs(&[(name, value)]), now).unwrap_err();
            assert_eq!(e.parameter, name, "{name}={value}");
        }
        let e = Window::parse(&pairs(&[("since", "2000"), ("until", "1000")]), now).unwrap_err();
        assert_eq!(e.parameter, "until");
        let e = Window::parse(&pairs(&[("since", "1"), ("since", "2")]), now).unwrap_err();
        assert_eq!(e.parameter, "since");
        // Seconds ago, as `every`, `keep` and `window` take them.
        let w = Window::parse(&pairs(&[("since", "5s")]), now).unwrap();
        assert_eq!(w.since_ms, now - 5_000);
    }

    #[test]
    fn report_windows_snap_to_a_few() {
        let week = 7 * 86_400;
        let cases = [
            (60, week, 3_600),
            (3_600, week, 3_600),
            (3_601, week, 21_600),
            (86_400, week, 86_400),
            (90_000, week, week),
            (week, week, week),
            (86_400, 7_200, 7_200),
            (3_000_000, 40 * 86_400, 40 * 86_400),
        ];
        for (asked, keep, want) in cases {
            assert_eq!(report_window(asked, keep), want, "{asked} s kept {keep} s");
        }
    }
}
