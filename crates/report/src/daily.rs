//! Each UTC day's warm reads per vantage point and store: what the History section reads to show
//! how a store at a place moved from day to day (a pooled window cannot say "KV got slower in
//! Frankfurt this week"). Measured only — one histogram per day × label × store, mergeable by
//! addition and bounded to [`DAYS_MAX`] days; the day rows and their marks are derived from it
//! at render time ([`crate::history`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::check::{plus_hist, AddError};
use crate::hist::{Hist, Packed};

/// Most days a report keeps: the probes keep answers up to 90 days, and a day's mark reads the
/// week before it. A merge past it keeps the newest days.
pub const DAYS_MAX: usize = 92;

/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;

/// Warm successful reads, µs: date (`2026-12-04`, UTC) → label → store → histogram.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Daily(pub BTreeMap<String, BTreeMap<String, BTreeMap<String, Hist>>>);

impl Daily {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds another report's days (histograms add exactly; a day, label or store new here is
    /// moved in, not copied), then keeps the newest [`DAYS_MAX`].
    pub fn add(&mut self, other: Daily) -> Result<(), AddError> {
        for (date, labels) in other.0 {
            let mine = self.0.entry(date.clone()).or_default();
            for (label, stores) in labels {
                let mine = mine.entry(label.clone()).or_default();
                for (store, h) in stores {
                    match mine.get_mut(&store) {
                        Some(m) => plus_hist(m, &h, &format!("{date}.{label}.{store}"))?,
                        None => {
                            mine.insert(store, h);
                        }
                    }
                }
            }
        }
        self.trim();
        Ok(())
    }

    /// Keeps the newest [`DAYS_MAX`] days.
    pub fn trim(&mut self) {
        while self.0.len() > DAYS_MAX {
            self.0.pop_first();
        }
    }

    /// Every histogram at rest ([`Hist::freeze`]).
    pub fn freeze(&mut self) {
        for h in self.0.values_mut().flat_map(|l| l.values_mut()) {
            h.values_mut().for_each(Hist::freeze);
        }
    }

    /// A run's days from its timeline: each window's warm reads dated by the window's start
    /// (`origin_ms` plus its `start_s`), so a window that crosses midnight counts on the day it
    /// began — at most one window (60 s for a run) off. Kept answers are dated one by one
    /// ([`DayReads`]) instead. `windows`: each timeline interval's `start_s` and `read_us`.
    pub fn of_timeline<'a>(
        origin_ms: i64,
        label: &str,
        windows: impl IntoIterator<Item = (f64, &'a BTreeMap<String, Packed>)>,
    ) -> Daily {
        let mut out = Daily::default();
        for (start_s, read_us) in windows.into_iter().filter(|(_, r)| !r.is_empty()) {
            let at = origin_ms.saturating_add((start_s * 1000.0) as i64);
            let stores = out
                .0
                .entry(date(day_of_ms(at)))
                .or_default()
                .entry(label.to_string())
                .or_default();
            for (store, p) in read_us {
                stores.entry(store.clone()).or_default().add(&p.unpack());
            }
        }
        out.trim();
        out
    }
}

/// One label's reads by day and store index, as a collector records them answer by answer.
#[derive(Debug, Clone, Default)]
pub struct DayReads {
    /// Epoch milliseconds of the collector's `intended_us` 0.
    pub origin_ms: i64,
    /// Day number (days since 1970-01-01) → reads by store index.
    days: BTreeMap<i64, Vec<Hist>>,
}

impl DayReads {
    pub fn new(origin_ms: i64) -> DayReads {
        DayReads {
            origin_ms,
            days: BTreeMap::new(),
        }
    }

    /// One warm read of store `id` at `intended_us` after the origin; the oldest day goes when
    /// a read opens a day past [`DAYS_MAX`].
    pub fn record(&mut self, intended_us: u64, id: usize, us: u64) {
        let at = self
            .origin_ms
            .saturating_add((intended_us / 1000).min(i64::MAX as u64) as i64);
        let stores = self.days.entry(day_of_ms(at)).or_default();
        if stores.len() <= id {
            stores.resize_with(id + 1, Hist::default);
        }
        if let Some(h) = stores.get_mut(id) {
            h.record(us);
        }
        if self.days.len() > DAYS_MAX {
            self.days.pop_first();
        }
    }

    /// Every histogram at rest.
    pub fn freeze(&mut self) {
        self.days.values_mut().flatten().for_each(Hist::freeze);
    }

    /// The days of `label`, stores named by `name`.
    pub fn finish(self, label: &str, name: impl Fn(usize) -> String) -> Daily {
        let mut out = Daily::default();
        for (day, stores) in self.days {
            let named: BTreeMap<String, Hist> = stores
                .into_iter()
                .enumerate()
                .filter(|(_, h)| !h.is_empty())
                .map(|(id, h)| (name(id), h))
                .collect();
            if !named.is_empty() {
                out.0
                    .entry(date(day))
                    .or_default()
                    .insert(label.to_string(), named);
            }
        }
        out
    }
}

/// The day number (days since 1970-01-01, UTC) of epoch milliseconds.
pub fn day_of_ms(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS)
}

/// `2026-12-04` of a day number (Hinnant's `civil_from_days`, proleptic Gregorian).
pub fn date(day: i64) -> String {
    let z = day + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The day number of `2026-12-04` (Hinnant's `days_from_civil`); `None` for anything else.
pub fn day_number(date: &str) -> Option<i64> {
    let mut parts = date.splitn(3, '-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let (y, m, d): (i64, i64, i64) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let y = y - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let day = era * 146_097 + doe - 719_468;
    // 2026-02-31 is no date: it must read back as itself.
    (self::date(day) == format!("{:04}-{:02}-{:02}", y + i64::from(m <= 2), m, d)).then_some(day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_agree_with_humantime_and_read_back() {
        for day in (-800..30_000).step_by(7).chain([0, 20_426, 2_932_896]) {
            let at = std::time::UNIX_EPOCH
                + std::time::Duration::from_secs((day.max(0) * 86_400) as u64);
            if (0..2_932_896).contains(&day) {
                let want = humantime::format_rfc3339_seconds(at).to_string();
                assert_eq!(date(day), want[..10], "day {day}");
            }
            assert_eq!(day_number(&date(day)), Some(day), "{}", date(day));
        }
        assert_eq!(date(day_of_ms(1_764_806_400_000)), "2025-12-04");
        assert_eq!(day_of_ms(-1), -1);
        for bad in [
            "2026-02-30",
            "2026-13-01",
            "2026-1-01",
            "yesterday",
            "",
            "2026-12-04x",
        ] {
            assert_eq!(day_number(bad), None, "{bad}");
        }
    }

    fn one(date: &str, label: &str, store: &str, values: &[u64]) -> Daily {
        let mut h = Hist::default();
        values.iter().for_each(|v| h.record(*v));
        let stores = BTreeMap::from([(store.to_string(), h)]);
        Daily(BTreeMap::from([(
            date.to_string(),
            BTreeMap::from([(label.to_string(), stores)]),
        )]))
    }

    #[test]
    fn days_add_and_stay_bounded() {
        let mut a = one("2026-12-01", "FRA", "kv", &[1, 2]);
        a.add(one("2026-12-01", "FRA", "kv", &[3])).unwrap();
        a.add(one("2026-12-01", "LHR", "kv", &[4])).unwrap();
        assert_eq!(a.0["2026-12-01"]["FRA"]["kv"].len(), 3);
        assert_eq!(a.0["2026-12-01"]["LHR"]["kv"].len(), 1);
        for day in 0..100 {
            a.add(one(&date(20_000 + day), "FRA", "kv", &[5])).unwrap();
        }
        // The newest 92 of 101 days: 2026-12-01 and the last 91 added.
        assert_eq!(a.0.len(), DAYS_MAX);
        assert_eq!(
            a.0.keys().next().map(String::as_str),
            Some(date(20_009).as_str())
        );
        assert!(a.0.contains_key("2026-12-01"));
        // Recorded answer by answer, the same bound holds.
        let mut r = DayReads::new(0);
        for day in 0..100u64 {
            r.record(day * 86_400_000_000 + 5, 1, 7);
        }
        let d = r.finish("x", |id| format!("s{id}"));
        assert_eq!(d.0.len(), DAYS_MAX);
        assert_eq!(
            d.0.values().next().unwrap()["x"].keys().collect::<Vec<_>>(),
            ["s1"]
        );
    }

    #[test]
    fn a_run_is_dated_by_its_windows_and_runs_of_two_days_merge() {
        use crate::report::Interval;
        let window = |start_s: f64, store: &str, us: u64| {
            let mut h = Hist::default();
            h.record(us);
            Interval {
                start_s,
                read_us: BTreeMap::from([(store.to_string(), Packed::pack(&h))]),
                ..Interval::default()
            }
        };
        // A run from 23:59 on 2026-12-03: its second minute is the next day's.
        let origin = day_number("2026-12-03").unwrap() * DAY_MS + DAY_MS - 60_000;
        let run = [
            window(0.0, "kv", 5),
            window(60.0, "kv", 7),
            Interval::default(),
        ];
        let windows = || run.iter().map(|iv| (iv.start_s, &iv.read_us));
        let mut d = Daily::of_timeline(origin, "FRA", windows());
        assert_eq!(d.0.keys().collect::<Vec<_>>(), ["2026-12-03", "2026-12-04"]);
        assert_eq!(d.0["2026-12-04"]["FRA"]["kv"].len(), 1);
        // Another run a day later, merged.
        d.add(Daily::of_timeline(origin + DAY_MS, "FRA", windows()))
            .unwrap();
        assert_eq!(d.0.len(), 3);
        assert_eq!(d.0["2026-12-04"]["FRA"]["kv"].len(), 2);
    }
}
