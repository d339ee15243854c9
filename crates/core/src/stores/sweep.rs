//! R2's expiry, which R2 lacks: the expiry sits in an object's custom metadata, an expired read
//! is a miss, and the cron deletes expired objects in sweeps of at most [`PAGES_PER_TICK`] ×
//! [`PAGE_OBJECTS`] per tick, in key order, resuming where the last tick stopped. Sans-IO (the
//! worker's `r2::sweep` lists and deletes), so the rules are native tests.

use crate::stores::store::StoreId;

/// The custom metadata field holding an object's expiry, epoch milliseconds.
pub const EXPIRES_AT: &str = "expires-at-ms";

/// Objects one list call asks for: R2's most.
pub const PAGE_OBJECTS: u32 = 1_000;

/// List calls one tick makes at most (each one Class A operation).
pub const PAGES_PER_TICK: u32 = 10;

/// The objects the sweep lists: the `r2` store's namespace. Nothing else in the bucket is
/// listed, and within it an object without [`EXPIRES_AT`] is never deleted.
pub fn prefix() -> &'static str {
    StoreId::R2.spec().key_namespace
}

/// An object's expiry from its [`EXPIRES_AT`] field (as stored: text), epoch ms. `None` —
/// it never expires — without the field, or with one that is not an integer: an object the
/// benchmark did not write is never taken for expired.
pub fn expires_at_ms(field: Option<&str>) -> Option<i64> {
    field.and_then(|v| v.trim().parse().ok())
}

/// Whether an object with this [`EXPIRES_AT`] field has expired at `now_ms` (the store's read
/// and the sweep decide with this one rule).
pub fn is_expired(field: Option<&str>, now_ms: f64) -> bool {
    expires_at_ms(field).is_some_and(|at| at as f64 <= now_ms)
}

/// One listed object: its key and its [`EXPIRES_AT`] field, if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub key: String,
    pub expires_at: Option<String>,
}

/// One page of a list, as R2 answered it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Page {
    pub objects: Vec<Listed>,
    /// More objects follow (R2 may return fewer than asked and still be truncated).
    pub truncated: bool,
    /// R2's cursor for the next page, when truncated.
    pub cursor: Option<String>,
}

/// What to ask R2 for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List<'a> {
    /// A tick's first page: the objects after this key (`None`: from the first).
    After(Option<&'a str>),
    /// A later page: R2's cursor from the page before.
    Cursor(&'a str),
}

/// One tick of the sweep: feed it each page it asks for ([`Sweep::next_list`],
/// [`Sweep::on_page`]), delete what it answers, then keep [`Sweep::resume_after`] for the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    /// Where this tick started (the key the previous one stopped after).
    started_after: Option<String>,
    pages: u32,
    cursor: Option<String>,
    last_key: Option<String>,
    /// The list reached the end of the namespace (or cannot go on).
    ended: bool,
    listed: u64,
    expired: u64,
}

impl Sweep {
    /// A tick that resumes after `after`, the key the previous tick stopped at (`None`: the
    /// first tick, or the previous one reached the end).
    pub fn resume(after: Option<String>) -> Sweep {
        Sweep {
            started_after: after,
            pages: 0,
            cursor: None,
            last_key: None,
            ended: false,
            listed: 0,
            expired: 0,
        }
    }

    /// The next list call, or `None` when this tick is done: the end of the namespace, or
    /// [`PAGES_PER_TICK`] pages.
    pub fn next_list(&self) -> Option<List<'_>> {
        if self.ended || self.pages >= PAGES_PER_TICK {
            return None;
        }
        match (self.pages, &self.cursor) {
            (0, _) => Some(List::After(self.started_after.as_deref())),
            (_, Some(cursor)) => Some(List::Cursor(cursor)),
            // Truncated without a cursor: no way on in this tick; the next resumes after the
            // last key listed.
            (_, None) => None,
        }
    }

    /// Takes the page that [`Sweep::next_list`] asked for; answers the keys to delete: those
    /// of its objects whose expiry is at or before `now_ms`.
    pub fn on_page(&mut self, page: Page, now_ms: f64) -> Vec<String> {
        self.pages += 1;
        self.listed += page.objects.len() as u64;
        if let Some(last) = page.objects.last() {
            self.last_key = Some(last.key.clone());
        }
        self.cursor = page.cursor.filter(|_| page.truncated);
        self.ended = !page.truncated;
        let expired: Vec<String> = page
            .objects
            .into_iter()
            .filter(|o| is_expired(o.expires_at.as_deref(), now_ms))
            .map(|o| o.key)
            .collect();
        self.expired += expired.len() as u64;
        expired
    }

    /// Where the next tick starts: after this one's last key, or from the first (`None`) at the
    /// end. A tick that listed nothing leaves the place where it was.
    pub fn resume_after(&self) -> Option<&str> {
        if self.ended {
            return None;
        }
        self.last_key.as_deref().or(self.started_after.as_deref())
    }

    /// Where this tick started.
    pub fn started_after(&self) -> Option<&str> {
        self.started_after.as_deref()
    }

    /// Objects listed and found expired so far, for the log.
    pub fn counts(&self) -> (u64, u64) {
        (self.listed, self.expired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(key: &str, expires_at: Option<&str>) -> Listed {
        Listed {
            key: key.into(),
            expires_at: expires_at.map(Into::into),
        }
    }

    fn page(objects: Vec<Listed>, cursor: Option<&str>) -> Page {
        Page {
            objects,
            truncated: cursor.is_some(),
            cursor: cursor.map(Into::into),
        }
    }

    #[test]
    fn expiry_is_the_field_and_nothing_else() {
        for (field, now, expired) in [
            (Some("1000"), 999.0, false),
            (Some("1000"), 1000.0, true),
            (Some("1000"), 1000.5, true),
            (Some(" 1000\n"), 2000.0, true),
            (Some("0"), 1.0, true),
            // Not the benchmark's, or not understood: never expired.
            (None, 1e15, false),
            (Some(""), 1e15, false),
            (Some("soon"), 1e15, false),
            (Some("1e3"), 1e15, false),
            (Some("1000.5"), 1e15, false),
        ] {
            assert_eq!(is_expired(field, now), expired, "{field:?} at {now}");
        }
        assert_eq!(prefix(), "kvbench:r2:");
    }

    #[test]
    fn a_page_answers_its_expired_keys_only() {
        let mut sweep = Sweep::resume(None);
        assert_eq!(sweep.next_list(), Some(List::After(None)));
        let delete = sweep.on_page(
            page(
                vec![
                    listed("kvbench:r2:a", Some("100")),
                    listed("kvbench:r2:b", Some("5000")),
                    listed("kvbench:r2:c", None),
                    listed("kvbench:r2:d", Some("junk")),
                    listed("kvbench:r2:e", Some("2000")),
                ],
                None,
            ),
            2000.0,
        );
        assert_eq!(delete, ["kvbench:r2:a", "kvbench:r2:e"]);
        assert_eq!(sweep.counts(), (5, 2));
        // The end of the namespace: the tick is over, the next one starts from the first key.
        assert_eq!(sweep.next_list(), None);
        assert_eq!(sweep.resume_after(), None);
    }

    #[test]
    fn a_tick_lists_at_most_its_pages_then_the_next_resumes_after_the_last_key() {
        let mut sweep = Sweep::resume(Some("kvbench:r2:k0".into()));
        assert_eq!(sweep.next_list(), Some(List::After(Some("kvbench:r2:k0"))));
        let mut lists = 0;
        while let Some(list) = sweep.next_list() {
            if lists > 0 {
                assert_eq!(list, List::Cursor(&format!("c{lists}")));
            }
            lists += 1;
            let key = format!("kvbench:r2:k{lists}");
            sweep.on_page(
                page(vec![listed(&key, Some("1"))], Some(&format!("c{lists}"))),
                10.0,
            );
        }
        assert_eq!(lists, PAGES_PER_TICK);
        assert_eq!(sweep.counts(), (10, 10));
        assert_eq!(sweep.resume_after(), Some("kvbench:r2:k10"));
        // The next tick starts there, and one that ends the namespace starts the next pass.
        let mut next = Sweep::resume(sweep.resume_after().map(Into::into));
        assert_eq!(next.next_list(), Some(List::After(Some("kvbench:r2:k10"))));
        next.on_page(page(vec![listed("kvbench:r2:k11", None)], None), 10.0);
        assert_eq!(next.next_list(), None);
        assert_eq!(next.resume_after(), None);
    }

    #[test]
    fn short_and_empty_pages_go_on_by_the_cursor_and_keep_the_place() {
        // R2 may answer fewer objects than asked, or none, and still be truncated.
        let mut sweep = Sweep::resume(Some("kvbench:r2:m".into()));
        sweep.on_page(page(vec![], Some("c1")), 0.0);
        assert_eq!(sweep.next_list(), Some(List::Cursor("c1")));
        assert_eq!(
            sweep.resume_after(),
            Some("kvbench:r2:m"),
            "nothing listed yet"
        );
        sweep.on_page(page(vec![listed("kvbench:r2:n", None)], Some("c2")), 0.0);
        assert_eq!(sweep.resume_after(), Some("kvbench:r2:n"));
        // Truncated but no cursor: no way on in this tick; the next resumes after it.
        sweep.on_page(
            Page {
                objects: vec![listed("kvbench:r2:o", None)],
                truncated: true,
                cursor: None,
            },
            0.0,
        );
        assert_eq!(sweep.next_list(), None);
        assert_eq!(sweep.resume_after(), Some("kvbench:r2:o"));
        // A tick that failed before its first page leaves the place where it was.
        let failed = Sweep::resume(Some("kvbench:r2:x".into()));
        assert_eq!(failed.resume_after(), Some("kvbench:r2:x"));
        assert_eq!(failed.started_after(), Some("kvbench:r2:x"));
    }

    /// Every expired object is deleted within one pass, whatever is live around it: a bucket of
    /// 25,000 objects, every third expired, swept tick after tick.
    #[test]
    fn one_pass_deletes_every_expired_object() {
        let mut bucket: std::collections::BTreeMap<String, Option<String>> = (0..25_000)
            .map(|i| {
                let expires = if i % 3 == 0 { "10" } else { "1000000" };
                (format!("kvbench:r2:{i:06}"), Some(expires.to_string()))
            })
            .collect();
        bucket.insert("kvbench:r2:zz-foreign".into(), None);
        let mut after: Option<String> = None;
        let mut ticks = 0;
        loop {
            ticks += 1;
            let mut sweep = Sweep::resume(after.clone());
            while let Some(list) = sweep.next_list() {
                // A model of R2's list: key order, PAGE_OBJECTS at most, the cursor being the
                // last key of the page.
                let from = match list {
                    List::After(None) => None,
                    List::After(Some(k)) | List::Cursor(k) => Some(k.to_string()),
                };
                let mut rest = bucket
                    .iter()
                    .filter(|(k, _)| from.as_ref().is_none_or(|f| *k > f))
                    .take(PAGE_OBJECTS as usize + 1)
                    .map(|(k, v)| listed(k, v.as_deref()))
                    .collect::<Vec<_>>();
                let truncated = rest.len() > PAGE_OBJECTS as usize;
                rest.truncate(PAGE_OBJECTS as usize);
                let cursor = rest.last().map(|o| o.key.clone()).filter(|_| truncated);
                let objects = rest;
                for key in sweep.on_page(
                    Page {
                        objects,
                        truncated,
                        cursor,
                    },
                    100.0,
                ) {
                    bucket.remove(&key);
                }
            }
            let (listed, _) = sweep.counts();
            assert!(listed <= u64::from(PAGES_PER_TICK * PAGE_OBJECTS));
            after = sweep.resume_after().map(Into::into);
            if after.is_none() {
                break;
            }
        }
        // 25,001 objects: a pass of ⌈25,001 / 10,000⌉ ticks, after which none expired is left.
        assert_eq!(ticks, 3);
        assert_eq!(bucket.len(), 25_001 - 8_334);
        assert!(bucket.values().all(|v| !is_expired(v.as_deref(), 100.0)));
        assert!(bucket.contains_key("kvbench:r2:zz-foreign"));
    }
}
