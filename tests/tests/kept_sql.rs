//! The probe and run objects' SQL (`kvbench_core::stores::sql::kept`) against a real SQLite, as a
//! Durable Object runs it: `seq` never repeats, even after every row expired; expiry deletes
//! only rows older than its cutoff (never a newer one, even when answers were kept out of time
//! order, as a run's `waitUntil` keeps do); pages read every row once.

use kvbench_core::stores::sql::kept::{
    ADD_FAILED, COUNT, CREATE, CREATE_FAILED, CREATE_FLOOR, DELETE_OLD, FAILED, FIRST, INSERT,
    INSERT_MANY, PAGE, RAISE_FLOOR,
};
use rusqlite::{params, Connection};

fn object() -> Connection {
    let c = Connection::open_in_memory().unwrap();
    c.execute(CREATE, []).unwrap();
    c.execute(CREATE_FLOOR, []).unwrap();
    c.execute(CREATE_FAILED, []).unwrap();
    c
}

fn keep(c: &Connection, t_ms: i64) {
    c.execute(INSERT, params![t_ms, format!("{{\"t_ms\":{t_ms}}}")])
        .unwrap();
}

fn expire(c: &Connection, cutoff: i64) {
    c.execute(RAISE_FLOOR, params![cutoff]).unwrap();
    c.execute(DELETE_OLD, params![cutoff]).unwrap();
}

fn rows(c: &Connection) -> Vec<(i64, i64)> {
    let mut q = c
        .prepare("SELECT seq, t_ms FROM kept ORDER BY seq")
        .unwrap();
    q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn seq_never_repeats_after_everything_expired() {
    let c = object();
    expire(&c, 1_000); // an empty object: nothing to raise, nothing written
    for t in 0..5 {
        keep(&c, t);
    }
    expire(&c, 3);
    assert_eq!(rows(&c), [(4, 3), (5, 4)]);
    expire(&c, 100);
    assert_eq!(rows(&c), []);
    keep(&c, 200);
    assert_eq!(
        rows(&c),
        [(6, 200)],
        "the next seq follows the last one ever kept"
    );
    for _ in 0..3 {
        expire(&c, 1_000);
    }
    keep(&c, 2_000);
    assert_eq!(rows(&c), [(7, 2_000)]);
}

#[test]
fn expiry_never_deletes_a_newer_row_even_out_of_order() {
    let c = object();
    // Kept out of time order (a slow request's keep lands after a faster later one).
    for t in [10, 30, 20, 50, 40, 60] {
        keep(&c, t);
    }
    expire(&c, 35);
    let left: Vec<i64> = rows(&c).into_iter().map(|(_, t)| t).collect();
    assert!(left.iter().all(|t| [50, 40, 60].contains(t) || *t < 35));
    for t in [50, 40, 60] {
        assert!(left.contains(&t), "{t} was deleted: {left:?}");
    }
    let first: i64 = c.query_row(FIRST, [], |r| r.get(0)).unwrap();
    assert_eq!(first, left[0]);
    let (n, lo, hi): (i64, i64, i64) = c
        .query_row(COUNT, [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    assert_eq!((n as usize, hi), (left.len(), 60));
    assert!(lo <= 40);
}

#[test]
fn pages_read_every_row_in_the_window_once() {
    let c = object();
    for t in 0..1_234 {
        keep(&c, t);
    }
    let (mut after, mut seen) = (0i64, Vec::new());
    loop {
        let mut q = c.prepare(PAGE).unwrap();
        let page: Vec<(i64, String)> = q
            .query_map(params![after, 100, 1_200, 500], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let Some(last) = page.last() else { break };
        after = last.0;
        seen.extend(page.into_iter().map(|(seq, _)| seq));
    }
    assert_eq!(seen, (101..=1_200).collect::<Vec<i64>>());
}

#[test]
fn failed_keeps_add_up_and_survive_expiry() {
    let c = object();
    let failed = |c: &Connection| -> Option<i64> { c.query_row(FAILED, [], |r| r.get(0)).ok() };
    assert_eq!(failed(&c), None, "no row: nothing failed");
    c.execute(ADD_FAILED, params![3]).unwrap();
    keep(&c, 10);
    c.execute(ADD_FAILED, params![0]).unwrap();
    c.execute(ADD_FAILED, params![2]).unwrap();
    assert_eq!(failed(&c), Some(5));
    expire(&c, 1_000);
    assert_eq!(rows(&c), []);
    assert_eq!(
        failed(&c),
        Some(5),
        "a count is not an answer: expiry keeps it"
    );
}

#[test]
fn many_lines_in_one_statement_are_numbered_in_order_after_the_floor() {
    let c = object();
    keep(&c, 1);
    expire(&c, 100);
    let many = serde_json::json!([[200, "{\"a\":1}"], [201, "{\"b\":\"\\n\"}"], [199, "x"]]);
    c.execute(INSERT_MANY, params![many.to_string()]).unwrap();
    keep(&c, 300);
    assert_eq!(rows(&c), [(2, 200), (3, 201), (4, 199), (5, 300)]);
    let line: String = c
        .query_row("SELECT line FROM kept WHERE seq = 3", [], |r| r.get(0))
        .unwrap();
    assert_eq!(line, "{\"b\":\"\\n\"}", "the line as it was sent");
    // A malformed batch keeps nothing.
    assert!(c
        .execute(INSERT_MANY, params!["[[1, \"ok\"], oops]"])
        .is_err());
    assert_eq!(rows(&c).len(), 4);
}

/// A stopped probe's alarm (`ProbeObject::arm_expiry`): set for when the oldest answer is due,
/// it deletes what is due and re-arms for the next, at least a second later. Played here at the
/// worst moment (the alarm runs at exactly its time): every answer goes within a second after
/// `keep` plus the grace, the chain ends once nothing is kept, and no answer goes early.
#[test]
fn a_stopped_probes_alarms_delete_every_answer_when_due_and_end() {
    use kvbench_core::spec::keep::expiry_after_ms;
    let keep_s = 60;
    let after = expiry_after_ms(keep_s) as i64;
    let c = object();
    let kept = [0, 1, 300_000, 600_000];
    for t in kept {
        keep(&c, t);
    }
    let first = |c: &Connection| -> Option<i64> { c.query_row(FIRST, [], |r| r.get(0)).ok() };
    let mut alarm = first(&c).map(|t| t + after);
    let mut gone_at = Vec::new();
    let mut alarms = 0;
    while let Some(now) = alarm {
        alarms += 1;
        assert!(alarms <= 2 * kept.len(), "the chain ends");
        let before: Vec<i64> = rows(&c).into_iter().map(|(_, t)| t).collect();
        expire(&c, now - after);
        let left: Vec<i64> = rows(&c).into_iter().map(|(_, t)| t).collect();
        gone_at.extend(
            before
                .iter()
                .filter(|t| !left.contains(t))
                .map(|t| (*t, now)),
        );
        alarm = first(&c).map(|t| (t + after).max(now + 1000));
    }
    assert_eq!(rows(&c), []);
    assert_eq!(gone_at.len(), kept.len());
    for (t, at) in gone_at {
        assert!(
            at >= t + after && at <= t + after + 1000,
            "{t} deleted at {at}"
        );
    }
}
