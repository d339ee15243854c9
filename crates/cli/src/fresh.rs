//! `kvbench fresh`: freshness rounds. A writer writes a new version of a key of its own in every
//! store (`/fresh?op=write`: the version is the value's size); every reader, the writer too, reads
//! it every interval (`/fresh?op=read`) until the version appears or the limit passes. Each
//! store × reader × case becomes a [`Round`]; every time is this process's clock.

use std::time::{Duration, Instant};

use futures::future::join_all;
use hyper::header::{HeaderName, HeaderValue};
use hyper::Uri;
use kvbench_report::freshness::{Case, Round};

use crate::describe::get_json;

/// A vantage point: its label and its worker's origin.
#[derive(Debug, Clone)]
pub struct Member {
    pub label: String,
    pub url: Uri,
}

/// A row's store: the store and the query options its row is named by (`kv cache_ttl=30`).
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub name: String,
    pub store: &'static str,
    pub query: &'static str,
}

/// The stores that keep copies only where they were written (the Cache API, per data centre).
const PER_LOCATION: &[&str] = &["cache"];
/// Reads of a per-location store at another reader: enough to show it never arrives.
const PER_LOCATION_READS: u32 = 5;
/// Reads after the new version is first seen, to catch a reader going back to an older one.
const READS_AFTER: u32 = 3;
/// The smallest version (value size in bytes); two consecutive versions per round.
const VERSION_BASE: u32 = 1_000;

/// The rows each store brings: itself, and each consistency option worth its own row.
pub fn variants(stores: &[&'static str]) -> Vec<Variant> {
    let mut out = Vec::new();
    for &store in stores {
        out.push(Variant {
            name: store.into(),
            store,
            query: "",
        });
        // (the query, what the row adds to the store's name)
        let option = match store {
            "kv" => Some(("cache_ttl=30", "cache_ttl=30")),
            "denokv" => Some(("consistency=eventual", "eventual")),
            "d1" => Some(("d1_session=first-unconstrained", "first-unconstrained")),
            _ => None,
        };
        if let Some((query, shown)) = option {
            out.push(Variant {
                name: format!("{store} {shown}"),
                store,
                query,
            });
        }
    }
    out
}

pub struct FreshConfig {
    pub writer: Member,
    pub readers: Vec<Member>,
    pub variants: Vec<Variant>,
    pub rounds: u32,
    pub interval: Duration,
    pub limit: Duration,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Tells this run's keys apart from any other's.
    pub session: String,
}

/// Runs `rounds` rounds of each case, one after the other, after a write and a read of a key of
/// their own at every member (unmeasured: an isolate's first calls compile and connect).
pub async fn run(cfg: &FreshConfig) -> Vec<Round> {
    let warm = format!("fresh-{}-warm", cfg.session);
    let clock = Instant::now();
    let now = || clock.elapsed().as_secs_f64() * 1e3;
    write(cfg, &warm, VERSION_BASE - 1).await;
    let members = std::iter::once(&cfg.writer).chain(&cfg.readers);
    join_all(members.map(|m| read(cfg, m, &warm, VERSION_BASE - 1, &now))).await;
    let mut out = Vec::new();
    for i in 0..cfg.rounds {
        for case in [Case::Cold, Case::Primed] {
            out.extend(round(cfg, i, case).await);
        }
    }
    out
}

/// What one read returned for one store.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Seen {
    New,
    Old,
    Failed,
}

/// One read: when it was sent and answered (ms on the round's clock) and what each variant saw.
struct Read {
    sent: f64,
    answered: f64,
    seen: Vec<Seen>,
}

async fn round(cfg: &FreshConfig, i: u32, case: Case) -> Vec<Round> {
    let key = format!("fresh-{}-{i}-{}", cfg.session, case.as_str());
    let (old, new) = (VERSION_BASE + 2 * i, VERSION_BASE + 2 * i + 1);
    let clock = Instant::now();
    let now = || clock.elapsed().as_secs_f64() * 1e3;
    let readers: Vec<&Member> = std::iter::once(&cfg.writer)
        .chain(cfg.readers.iter().filter(|r| r.label != cfg.writer.label))
        .collect();
    if case == Case::Primed {
        write(cfg, &key, old).await;
        join_all(readers.iter().map(|r| poll(cfg, r, &key, old, now, None))).await;
    }
    let sent = now();
    let acked = write(cfg, &key, new).await;
    let ack = (sent, now());
    let polls = join_all(
        readers
            .iter()
            .map(|r| poll(cfg, r, &key, new, now, Some(ack))),
    )
    .await;
    let mut out = Vec::new();
    for (reader, reads) in readers.iter().zip(polls) {
        for (v, variant) in cfg.variants.iter().enumerate() {
            let mut r = outcome(&reads, v, ack, acked.contains(&variant.store));
            r.store.clone_from(&variant.name);
            r.writer.clone_from(&cfg.writer.label);
            r.reader.clone_from(&reader.label);
            r.case = case;
            r.interval_ms = cfg.interval.as_millis() as u32;
            r.limit_ms = cfg.limit.as_millis() as u32;
            r.per_location = PER_LOCATION.contains(&variant.store);
            out.push(r);
        }
    }
    out
}

/// Writes `version` to every store at the writer; the stores whose write succeeded.
async fn write(cfg: &FreshConfig, key: &str, version: u32) -> Vec<&'static str> {
    let mut stores: Vec<&'static str> = cfg.variants.iter().map(|v| v.store).collect();
    stores.dedup();
    let ttl = cfg.limit.as_secs().max(30) + 60;
    let q = format!(
        "/fresh?op=write&stores={}&key={key}&min_bytes={version}&max_bytes={version}&ttl={ttl}",
        stores.join(",")
    );
    match get_json(&cfg.writer.url, &q, &cfg.headers, cfg.limit).await {
        Ok((200, Some(answer))) => stores
            .into_iter()
            .filter(|s| answer["stores"][s]["error"].is_null())
            .collect(),
        _ => Vec::new(),
    }
}

/// Reads `key` at `reader` every interval until every variant returned `version` (and
/// [`READS_AFTER`] more reads), or the limit passes. Per-location stores at another reader count
/// as done after [`PER_LOCATION_READS`]. `ack`: the write's call, `None` while priming.
async fn poll(
    cfg: &FreshConfig,
    reader: &Member,
    key: &str,
    version: u32,
    now: impl Fn() -> f64,
    ack: Option<(f64, f64)>,
) -> Vec<Read> {
    let started = now();
    let elsewhere = reader.label != cfg.writer.label;
    let mut reads: Vec<Read> = Vec::new();
    let limit_ms = cfg.limit.as_secs_f64() * 1e3;
    for n in 0u32.. {
        let done = cfg.variants.iter().enumerate().all(|(v, variant)| {
            if elsewhere && PER_LOCATION.contains(&variant.store) {
                return n >= PER_LOCATION_READS;
            }
            let first = reads.iter().position(|r| r.seen[v] == Seen::New);
            first.is_some_and(|f| ack.is_none() || reads.len() - f > READS_AFTER as usize)
        });
        if done || now() - started > limit_ms {
            break;
        }
        let due = started + f64::from(n) * cfg.interval.as_secs_f64() * 1e3;
        let wait = (due - now()).max(0.0);
        tokio::time::sleep(Duration::from_secs_f64(wait / 1e3)).await;
        reads.push(read(cfg, reader, key, version, &now).await);
    }
    reads
}

/// One read of every variant at `reader`: one request per distinct query, sent together.
async fn read(
    cfg: &FreshConfig,
    reader: &Member,
    key: &str,
    version: u32,
    now: &impl Fn() -> f64,
) -> Read {
    let sent = now();
    let mut queries: Vec<&str> = cfg.variants.iter().map(|v| v.query).collect();
    queries.sort_unstable();
    queries.dedup();
    let answers = join_all(queries.iter().map(|&query| {
        let stores: Vec<&str> = cfg
            .variants
            .iter()
            .filter(|v| v.query == query)
            .map(|v| v.store)
            .collect();
        let q = format!(
            "/fresh?op=read&stores={}&key={key}&min_bytes=1&max_bytes=1{}{query}",
            stores.join(","),
            if query.is_empty() { "" } else { "&" }
        );
        async move { get_json(&reader.url, &q, &cfg.headers, cfg.limit).await }
    }))
    .await;
    let seen = cfg
        .variants
        .iter()
        .map(|variant| {
            let at = queries.iter().position(|q| *q == variant.query);
            let Some(Ok((200, Some(answer)))) = at.map(|i| &answers[i]) else {
                return Seen::Failed;
            };
            let s = &answer["stores"][variant.store];
            if !s["error"].is_null() {
                Seen::Failed
            } else if s["hit"] == true && s["value_bytes"] == version {
                Seen::New
            } else {
                Seen::Old
            }
        })
        .collect();
    Read {
        sent,
        answered: now(),
        seen,
    }
}

/// Variant `v`'s round from its reads after the acknowledgement `ack` (`[sent, answered]`).
/// A write that failed (`acked` false) is a round whose version never appeared, its reads
/// counted as failed.
fn outcome(reads: &[Read], v: usize, (sent, answered): (f64, f64), acked: bool) -> Round {
    let first_new = reads.iter().position(|r| r.seen[v] == Seen::New && acked);
    let visible_ms = first_new.map(|f| {
        let last_old = reads[..f].iter().rev().find(|r| r.seen[v] == Seen::Old);
        let low = last_old.map_or(0.0, |r| (r.sent - answered).max(0.0));
        (low, reads[f].answered - sent)
    });
    let after: Vec<&Read> = reads.iter().filter(|r| r.sent >= answered).collect();
    let count = |f: &dyn Fn(&&Read) -> bool| after.iter().filter(|r| f(r)).count() as u32;
    let went_back = first_new.map_or(0, |f| {
        reads[f..].iter().filter(|r| r.seen[v] == Seen::Old).count() as u32
    });
    Round {
        store: String::new(),
        writer: String::new(),
        reader: String::new(),
        case: Case::Cold,
        interval_ms: 0,
        limit_ms: 0,
        visible_ms,
        reads: count(&|r| r.seen[v] != Seen::Failed),
        stale: count(&|r| r.seen[v] == Seen::Old),
        went_back,
        errors: count(&|r| r.seen[v] == Seen::Failed) + u32::from(!acked),
        per_location: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(sent: f64, answered: f64, seen: Seen) -> Read {
        Read {
            sent,
            answered,
            seen: vec![seen],
        }
    }

    #[test]
    fn a_round_is_bounded_by_the_last_stale_read_and_the_first_fresh_one() {
        // Acknowledged in [0, 10]; stale reads at 20 and 120, fresh from 220 (answered 230).
        let reads = [
            r(5.0, 8.0, Seen::Old),
            r(20.0, 30.0, Seen::Old),
            r(120.0, 130.0, Seen::Old),
            r(220.0, 230.0, Seen::New),
            r(320.0, 330.0, Seen::Old),
            r(420.0, 430.0, Seen::New),
        ];
        let round = outcome(&reads, 0, (0.0, 10.0), true);
        assert_eq!(round.visible_ms, Some((110.0, 230.0)));
        // The read sent before the acknowledgement arrived is not counted.
        assert_eq!((round.reads, round.stale, round.went_back), (5, 3, 1));
        let never = outcome(&reads[..3], 0, (0.0, 10.0), true);
        assert_eq!((never.visible_ms, never.stale), (None, 2));
        let unwritten = outcome(&reads, 0, (0.0, 10.0), false);
        assert_eq!((unwritten.visible_ms, unwritten.errors), (None, 1));
    }

    #[test]
    fn each_consistency_option_is_a_row_of_its_own() {
        let names: Vec<String> = variants(&["kv", "denokv", "d1", "upstash"])
            .into_iter()
            .map(|v| v.name)
            .collect();
        assert_eq!(
            names,
            [
                "kv",
                "kv cache_ttl=30",
                "denokv",
                "denokv eventual",
                "d1",
                "d1 first-unconstrained",
                "upstash"
            ]
        );
    }
}
