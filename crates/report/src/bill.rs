//! The probes' monthly bill: what running the probes (hint probes and fleet members) costs at
//! their interval, from what their kept answers measured. Each store at its cheapest current
//! plan (kvbench's cost model, [`crate::cost`]), plus what the probe objects bill themselves:
//! their requests (alarms and cron checks), the rows they write and read, their wall time and
//! the storage of the answers they keep. The report worker answers it at `POST /bill`; `GET
//! /probes` shows it and bounds a start by it.

use serde::Serialize;

use crate::cost::{CostLine, Deployment, SECONDS_PER_MONTH};
use crate::prices::PriceTable;
use crate::report::Report;

/// The cron checks every probe every five minutes (wrangler.toml's `crons`).
pub const CRON_EVERY_S: f64 = 300.0;

/// What the probes are: how many, how often, how long they keep, and what one kept line weighs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeUsage {
    /// Vantage points probed (hint probes and fleet members).
    pub points: f64,
    /// Seconds between a probe's wakes.
    pub every_s: f64,
    /// Seconds an answer is kept, plus the grace before it is deleted
    /// (`kvbench_spec::keep::expiry_after_ms`).
    pub stored_s: f64,
    /// Mean bytes of a kept line (the answer and its context), as the stream carried them.
    pub line_bytes: f64,
}

/// Rows a probe object writes per wake: its state saved, and the next alarm set.
pub const ROWS_WRITTEN_PER_WAKE: f64 = 2.0;
/// Rows it writes per kept answer: the answer's row, and its deletion once expired.
pub const ROWS_WRITTEN_PER_ANSWER: f64 = 2.0;
/// Rows it reads per wake: its state, loaded before and after measuring.
pub const ROWS_READ_PER_WAKE: f64 = 2.0;
/// Rows it reads per kept answer: the expiry's walk from the oldest row (the floor's check and
/// the delete's, each stopping at the first row kept, plus the row itself).
pub const ROWS_READ_PER_ANSWER: f64 = 3.0;
/// A Durable Object's SQLite database holding nothing still bills about this much (Cloudflare's
/// FAQ: ~12 KB for an empty database).
pub const EMPTY_DATABASE_BYTES: f64 = 12_000.0;
/// The probe object's billed memory while it runs (Durable Objects bill duration at 128 MB).
const BILLED_GB: f64 = 0.125;
/// Hours in the 30-day month: a member isolate asks its trace again at most once an hour.
const HOURS_PER_MONTH: f64 = SECONDS_PER_MONTH / 3600.0;

/// One store's month, at its cheapest plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreMonth {
    pub store: String,
    pub plan: String,
    pub as_of: String,
    /// The only prices the table has for this store are no longer offered.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub historical: bool,
    pub monthly_usd: f64,
}

/// What the probe objects bill themselves in a month.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OwnUsage {
    /// An alarm per wake and a cron check every five minutes, per probe.
    pub requests_per_month: f64,
    pub rows_written_per_month: f64,
    pub rows_read_per_month: f64,
    /// The measurements' wall time at 128 MB.
    pub gb_s_per_month: f64,
    /// Cloudflare's trace asked, at most: once per new instance (a hint probe's object, a
    /// member's isolate: the cold answers) plus once an hour per vantage point, never more than
    /// once a wake. A subrequest is not billed itself.
    pub trace_subrequests_per_month: f64,
    /// The wall time a probe object waits on those traces (its own, or its member's inside the
    /// call), at most: each at its whole deadline, at 128 MB.
    pub trace_gb_s_per_month: f64,
    pub mean_measurement_s: f64,
    /// The kept answers at rest once the keep window is full (plus each object's empty database).
    pub stored_gb: f64,
    pub storage_usd: f64,
    pub as_of: Option<String>,
    pub monthly_usd: f64,
}

/// The month of running the probes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bill {
    /// Answers a second over all probes: wakes a second × answers per wake.
    pub project_rps: f64,
    pub wakes_per_month: f64,
    /// Measured: a wake in a new instance keeps a cold answer and a warm one, else one.
    pub answers_per_wake: f64,
    pub answers_per_month: f64,
    /// Answers (and failure lines) the projection is made of.
    pub measured_answers: u64,
    pub stores: Vec<StoreMonth>,
    pub probes: OwnUsage,
    pub monthly_usd: f64,
    pub note: String,
}

/// What the bill prices and what it leaves out, for `keys` keys a store holds at most.
fn note(keys: u64) -> String {
    format!(
        "each store at its cheapest current plan that the month fits, from the operations the kept answers measured, with its own storage ({keys} keys of the mean value size measured, at most that many live at once); the probe objects' requests, rows, duration and storage are priced without the Workers plan's included amounts (which the do store may use up); the Workers plan itself (its monthly price, which includes requests and CPU time) is the deployment's, not the probes': the report's cost table has it"
    )
}

/// Answers per wake, measured from the kept lines: every wake keeps one warm answer or one
/// failure line, and a wake in a new instance a cold answer besides.
pub fn answers_per_wake(report: &Report) -> f64 {
    let (mut lines, mut wakes) = (0u64, 0u64);
    for v in report.vantages.values() {
        // A member's answers outside its region are kept (and billed) too, counted as a
        // wake each (cold or warm is not told apart for them).
        let outside = v.unplaced + v.elsewhere + v.trace_elsewhere;
        lines += v.cold + v.warm + v.failed + outside;
        wakes += v.warm + v.failed + outside;
    }
    if wakes == 0 {
        // Only cold answers so far (each wake's warm one failed to keep?): count them as wakes.
        return 1.0;
    }
    (lines as f64 / wakes as f64).max(1.0)
}

/// The bill of `probes`, from the answers in `report` (a kept report: one run per vantage point).
pub fn bill(report: &Report, table: &PriceTable, probes: ProbeUsage, keys: Option<u64>) -> Bill {
    let wakes_per_s = probes.points / probes.every_s;
    let per_wake = answers_per_wake(report);
    let rps = wakes_per_s * per_wake;
    // Every plan, withdrawn ones too: a store whose only price is withdrawn is still billed
    // (marked), though never at a withdrawn price while a current one exists.
    let everything = Deployment {
        historical: true,
        keys,
        ..Deployment::default()
    };
    let estimate = crate::cost::of(report, table, Some(rps), &everything);
    let stores = cheapest(&estimate.lines);
    let wakes_per_month = wakes_per_s * SECONDS_PER_MONTH;
    let answers_per_month = rps * SECONDS_PER_MONTH;
    let mean_s = report.total.latency_us.mean() / 1e6;
    let own = own_usage(table, probes, wakes_per_month, answers_per_month, mean_s);
    let stores_usd: f64 = stores.iter().map(|s| s.monthly_usd).sum();
    Bill {
        project_rps: rps,
        wakes_per_month: wakes_per_month.round(),
        answers_per_wake: (per_wake * 1000.0).round() / 1000.0,
        answers_per_month: answers_per_month.round(),
        measured_answers: report.total.answered,
        monthly_usd: round2(stores_usd + own.monthly_usd),
        stores,
        probes: own,
        note: note(estimate.keys),
    }
}

/// Each store at its cheapest current plan; a store the table prices only historically at the
/// cheapest of those, marked. Stores that did nothing (not configured, or not measurable from a
/// probe) bill nothing and are left out.
fn cheapest(lines: &[CostLine]) -> Vec<StoreMonth> {
    let mut best: std::collections::BTreeMap<&str, &CostLine> = Default::default();
    for line in lines
        .iter()
        .filter(|l| l.reads_per_request > 0.0 || l.writes_per_request > 0.0)
    {
        // A plan whose limits the month passes is not one it could run on.
        if line.over_limit.is_some() {
            continue;
        }
        // A current plan before any historical one, then the cheaper.
        let better = best
            .get(line.store.as_str())
            .is_none_or(|b| (line.historical, line.monthly_usd) < (b.historical, b.monthly_usd));
        if better {
            best.insert(&line.store, line);
        }
    }
    best.into_values()
        .map(|l| StoreMonth {
            store: l.store.clone(),
            plan: l.plan.clone(),
            as_of: l.as_of.clone(),
            historical: l.historical,
            monthly_usd: round2(l.monthly_usd),
        })
        .collect()
}

fn own_usage(
    table: &PriceTable,
    probes: ProbeUsage,
    wakes: f64,
    answers: f64,
    mean_s: f64,
) -> OwnUsage {
    let price = table
        .price
        .iter()
        .find(|p| p.store == "do" && !p.historical);
    let unit = |name: &str| {
        price
            .and_then(|p| p.units.get(name))
            .copied()
            .unwrap_or(0.0)
    };
    let cron_checks = probes.points * SECONDS_PER_MONTH / CRON_EVERY_S;
    let requests = wakes + cron_checks;
    let rows_written = wakes * ROWS_WRITTEN_PER_WAKE + answers * ROWS_WRITTEN_PER_ANSWER;
    let rows_read = wakes * ROWS_READ_PER_WAKE + answers * ROWS_READ_PER_ANSWER;
    let gb_s = answers * mean_s * BILLED_GB;
    let cold = (answers - wakes).max(0.0);
    let traces = (cold + probes.points * HOURS_PER_MONTH).min(wakes);
    let trace_s = kvbench_spec::trace::DEADLINE_MS as f64 / 1000.0;
    let trace_gb_s = traces * trace_s * BILLED_GB;
    let answers_per_s = answers / SECONDS_PER_MONTH;
    let stored_gb = (answers_per_s * probes.stored_s * probes.line_bytes
        + probes.points * EMPTY_DATABASE_BYTES)
        / 1e9;
    let storage_usd = stored_gb * price.map_or(0.0, |p| p.storage_per_gb_month);
    let usd = requests / 1e6 * unit("Durable Object request")
        + rows_written / 1e6 * unit("SQLite row written")
        + rows_read / 1e6 * unit("SQLite row read")
        + (gb_s + trace_gb_s) / 1e6 * unit("GB-s")
        + storage_usd;
    OwnUsage {
        requests_per_month: requests.round(),
        rows_written_per_month: rows_written.round(),
        rows_read_per_month: rows_read.round(),
        gb_s_per_month: (gb_s * 10.0).round() / 10.0,
        trace_subrequests_per_month: traces.round(),
        trace_gb_s_per_month: (trace_gb_s * 10.0).round() / 10.0,
        mean_measurement_s: (mean_s * 1000.0).round() / 1000.0,
        stored_gb: (stored_gb * 1e4).round() / 1e4,
        storage_usd: round2(storage_usd),
        as_of: price.map(|p| p.as_of.clone()),
        monthly_usd: round2(usd),
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kvbench_wire::kept::Kept;

    use super::*;
    use crate::kept::{Aggregate, Source};

    /// A kept line of `label` with a `kv` hit and a `redis` miss that wrote.
    fn line(seq: i64, t_ms: i64, label: &str, cold: bool) -> String {
        format!(
            r#"{{"seq":{seq},"t_ms":{t_ms},"label":"{label}","vantage":"hint","hint":"{label}","colo":"LHR","cold":{cold},"handler_ms":40,"answer":{{"key":"7","colo":"LHR","stores":{{"kv":{{"read_ms":2,"hit":true,"value_bytes":4096,"write_ms":null,"error":null}},"redis":{{"read_ms":3,"hit":false,"value_bytes":null,"write_ms":4,"error":null}}}}}}}}"#
        )
    }

    fn report(lines: &[String]) -> Report {
        let mut a = Aggregate::new(0, Duration::from_secs(300));
        for l in lines {
            a.push(&Kept::parse(l.as_bytes()).unwrap());
        }
        let source = Source {
            url: "https://w".into(),
            engine: "probes".into(),
            read_from: "https://w/probes/answers".into(),
        };
        a.finish(&source).unwrap().unwrap()
    }

    fn probes(points: f64) -> ProbeUsage {
        ProbeUsage {
            points,
            every_s: 300.0,
            stored_s: 7.0 * 86_400.0 + 3600.0,
            line_bytes: 1500.0,
        }
    }

    #[test]
    fn a_cold_wake_keeps_two_answers_and_the_bill_counts_both() {
        // weur: 4 wakes, the first in a new instance (cold + warm); apac: 4 warm wakes, one of
        // which failed (its failure line is the wake's one line).
        let mut lines = vec![line(1, 0, "weur", true)];
        for i in 0..4 {
            lines.push(line(2 + i, i * 300_000 + 50, "weur", false));
        }
        for i in 0..3 {
            lines.push(line(1 + i, i * 300_000, "apac", false));
        }
        lines.push(r#"{"seq":4,"t_ms":900000,"label":"apac","vantage":"hint","hint":"apac","failure":{"kind":"status","status":500,"detail":"x"}}"#.into());
        let r = report(&lines);
        assert_eq!(answers_per_wake(&r), 9.0 / 8.0);
        let b = bill(&r, &PriceTable::default_table().unwrap(), probes(2.0), None);
        // Two probes every 300 s: 17,280 wakes in 30 days, 9/8 answers each.
        assert_eq!(b.wakes_per_month, 17_280.0);
        assert_eq!(b.answers_per_month, 19_440.0);
        assert!((b.project_rps - 2.0 / 300.0 * 9.0 / 8.0).abs() < 1e-12);
        assert_eq!(b.probes.requests_per_month, 17_280.0 + 17_280.0);
        // The trace: the 2,160 cold answers (new instances) plus an hourly ask of each of the 2
        // probes (1,440), each waited on for at most its 2 s deadline at 128 MB.
        assert_eq!(b.probes.trace_subrequests_per_month, 2_160.0 + 1_440.0);
        assert_eq!(b.probes.trace_gb_s_per_month, 3_600.0 * 2.0 * 0.125);
        // Never more than one a wake: waking hourly, the hourly asks alone are one a wake.
        let often = bill(
            &r,
            &PriceTable::default_table().unwrap(),
            ProbeUsage {
                every_s: 3_600.0,
                ..probes(2.0)
            },
            None,
        );
        assert_eq!(
            often.probes.trace_subrequests_per_month,
            often.wakes_per_month
        );
        assert_eq!(
            b.probes.rows_written_per_month,
            17_280.0 * ROWS_WRITTEN_PER_WAKE + 19_440.0 * ROWS_WRITTEN_PER_ANSWER
        );
        assert_eq!(
            b.probes.rows_read_per_month,
            17_280.0 * ROWS_READ_PER_WAKE + 19_440.0 * ROWS_READ_PER_ANSWER
        );
        // At rest: the answers of a week and an hour at 1,500 bytes, plus two empty databases.
        let at_rest = 19_440.0 / SECONDS_PER_MONTH * (7.0 * 86_400.0 + 3600.0) * 1500.0;
        assert!(
            (b.probes.stored_gb - (at_rest + 24_000.0) / 1e9).abs() < 1e-4,
            "{b:?}"
        );
        assert!(b.probes.monthly_usd > 0.0);
        let stores: Vec<_> = b.stores.iter().map(|s| s.store.as_str()).collect();
        assert_eq!(stores, ["kv", "redis"]);
        let sum: f64 = b.stores.iter().map(|s| s.monthly_usd).sum::<f64>() + b.probes.monthly_usd;
        assert!((b.monthly_usd - sum).abs() < 0.011);
    }

    #[test]
    fn a_historical_price_is_never_the_cheapest_plan_while_a_current_one_exists() {
        let lines: Vec<String> = (0..4)
            .map(|i| {
                let mut l = line(1 + i, i * 300_000, "weur", false);
                // An upstash store besides: the table also has its 2023 price ($1/M, half).
                l = l.replace(r#""redis":"#, r#""upstash":{"read_ms":5,"hit":true,"value_bytes":4096,"write_ms":null,"error":null},"redis":"#);
                l
            })
            .collect();
        let r = report(&lines);
        let table = PriceTable::default_table().unwrap();
        assert!(table
            .price
            .iter()
            .any(|p| p.store == "upstash" && p.historical && p.read_per_million == 1.0));
        let b = bill(&r, &table, probes(11.0), None);
        let upstash = b.stores.iter().find(|s| s.store == "upstash").unwrap();
        assert!(!upstash.historical);
        // At 11 probes every 300 s the month fits Upstash's free plan.
        assert!(upstash.plan.contains("Free"), "{}", upstash.plan);
        assert_eq!(upstash.monthly_usd, 0.0);
        // With only the historical price, that one is used, and says so.
        let mut old = table.clone();
        old.price.retain(|p| p.store != "upstash" || p.historical);
        let b = bill(&r, &old, probes(11.0), None);
        let upstash = b.stores.iter().find(|s| s.store == "upstash").unwrap();
        assert!(upstash.historical);
        let json = serde_json::to_value(&b).unwrap();
        let listed = json["stores"].as_array().unwrap();
        let flags: Vec<_> = listed
            .iter()
            .map(|s| (s["store"].as_str(), s.get("historical")))
            .collect();
        assert_eq!(
            flags,
            [
                (Some("kv"), None),
                (Some("redis"), None),
                (Some("upstash"), Some(&serde_json::Value::Bool(true)))
            ]
        );
    }
}
