//! A Durable Object's kept answers (`kvbench_core::stores::sql::kept`), held by the probes and a
//! run's shards: pages, expiry, failed keeps, and one NDJSON stream over several objects.

use std::cell::Cell;

use kvbench_core::operations::probe::Count;
use kvbench_core::operations::window::{Window, PAGE_BYTES, PAGE_LINES};
use kvbench_core::stores::sql::kept::{
    ADD_FAILED, COUNT, CREATE, CREATE_FAILED, CREATE_FLOOR, DELETE_OLD, FAILED, FIRST, INSERT,
    INSERT_MANY, PAGE, RAISE_FLOOR,
};
use kvbench_wire::kept::with_seq;
use kvbench_wire::object::{ObjectCall, PageHead, ProbeCall};
use kvbench_wire::stream::Control;
use wasm_bindgen::JsValue;
use worker::durable::Stub;
use worker::{Response, SqlCursor, SqlStorage};

/// Origin of requests to the objects (`crate::bindings::OBJECT_ORIGIN`).
pub const ORIGIN: &str = crate::bindings::OBJECT_ORIGIN;

/// The kept answers of one object.
pub struct KeptTable {
    sql: SqlStorage,
    /// The tables exist (created by the first write of an instance; a read never writes).
    made: Cell<bool>,
}

impl KeptTable {
    pub fn new(sql: SqlStorage) -> KeptTable {
        KeptTable {
            sql,
            made: Cell::new(false),
        }
    }

    fn write(&self) -> worker::Result<&SqlStorage> {
        if !self.made.get() {
            for create in [CREATE, CREATE_FLOOR, CREATE_FAILED] {
                self.sql.exec(create, None)?;
            }
            self.made.set(true);
        }
        Ok(&self.sql)
    }

    /// Reads without creating the table (a read never writes): no table is nothing kept.
    fn read(&self, query: &str, args: Vec<JsValue>) -> worker::Result<Option<SqlCursor>> {
        match self.sql.exec_raw(query, args) {
            Ok(cursor) => Ok(Some(cursor)),
            Err(e) if kvbench_core::stores::sql::is_no_table(&e.to_string()) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The first row's `name` as a number.
    fn first_number(&self, query: &str, name: &str) -> worker::Result<Option<f64>> {
        let Some(mut cursor) = self.read(query, vec![])? else {
            return Ok(None);
        };
        match Iterator::next(&mut cursor) {
            Some(row) => Ok(js_sys::Reflect::get(&row?, &name.into())?.as_f64()),
            None => Ok(None),
        }
    }

    /// Keeps one line at `t_ms`.
    pub fn keep(&self, t_ms: i64, line: &str) -> worker::Result<()> {
        self.write()?
            .exec_raw(INSERT, vec![(t_ms as f64).into(), line.into()])?;
        Ok(())
    }

    /// Keeps `lines` (`t_ms`, line) in one statement: all of them, or none.
    pub fn keep_many(&self, lines: &[(i64, &str)]) -> worker::Result<()> {
        let many = serde_json::to_string(lines)?;
        self.write()?.exec_raw(INSERT_MANY, vec![many.into()])?;
        Ok(())
    }

    /// Records `n` keeps that failed (elsewhere: the answers are in no table).
    pub fn add_failed(&self, n: u64) -> worker::Result<()> {
        if n > 0 {
            self.write()?
                .exec_raw(ADD_FAILED, vec![(n as f64).into()])?;
        }
        Ok(())
    }

    /// The failed keeps recorded here.
    pub fn failed(&self) -> worker::Result<u64> {
        Ok(self.first_number(FAILED, "n")?.unwrap_or(0.0) as u64)
    }

    /// Kept answers, and the first and last one's time.
    pub fn count(&self) -> worker::Result<Count> {
        let mut count = Count {
            kept: 0,
            first_t_ms: None,
            last_t_ms: None,
        };
        let Some(mut cursor) = self.read(COUNT, vec![])? else {
            return Ok(count);
        };
        if let Some(row) = Iterator::next(&mut cursor) {
            let row = row?;
            let field = |name: &str| js_sys::Reflect::get(&row, &name.into());
            count.kept = field("n")?.as_f64().unwrap_or(0.0) as u64;
            count.first_t_ms = field("first")?.as_f64().map(|t| t as i64);
            count.last_t_ms = field("last")?.as_f64().map(|t| t as i64);
        }
        Ok(count)
    }

    /// Deletes the answers measured before `before_ms` (the machines' `Expire`: past their keep
    /// and the grace, so a read of the keep window never has a row deleted under it).
    pub fn expire_before(&self, before_ms: f64) -> worker::Result<()> {
        let sql = self.write()?;
        sql.exec_raw(RAISE_FLOOR, vec![before_ms.into()])?;
        sql.exec_raw(DELETE_OLD, vec![before_ms.into()])?;
        Ok(())
    }

    /// The time of the oldest answer kept (the machines' `ReadOldest`).
    pub fn oldest_t_ms(&self) -> worker::Result<Option<i64>> {
        Ok(self.first_number(FIRST, "first")?.map(|t| t as i64))
    }

    /// One page of lines after `after` within the window, each with its `seq` (plus `base`, a
    /// shard's place in its run); the last seq, whether more follow and the failed keeps go in
    /// headers.
    pub fn page(&self, url: &worker::Url, failed_elsewhere: u64) -> worker::Result<Response> {
        let get = |name: &str| {
            url.query_pairs()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.parse::<f64>().ok())
        };
        let after = get("after").unwrap_or(0.0);
        let since = get("since").unwrap_or(0.0);
        let until = get("until").unwrap_or(f64::MAX);
        let limit = get("limit").unwrap_or(f64::from(PAGE_LINES));
        let base = get("base").unwrap_or(0.0) as i64;
        let cursor = self.read(
            PAGE,
            vec![after.into(), since.into(), until.into(), limit.into()],
        )?;
        let mut body = String::new();
        let mut last = after as i64;
        let mut n = 0u32;
        let mut full = false;
        for row in cursor.into_iter().flatten() {
            // Bounded in bytes as well as lines: the rest is the next page's (the cursor reads
            // rows as they are asked for, so they are never loaded).
            if body.len() >= PAGE_BYTES {
                full = true;
                break;
            }
            let row = row?;
            let seq = js_sys::Reflect::get(&row, &"seq".into())?
                .as_f64()
                .unwrap_or(0.0) as i64;
            let line = js_sys::Reflect::get(&row, &"line".into())?
                .as_string()
                .unwrap_or_default();
            body.push_str(&with_seq(base + seq, &line));
            body.push('\n');
            last = seq;
            n += 1;
        }
        let failed = self.failed()? + failed_elsewhere;
        let head = PageHead {
            last_seq: last,
            more: full || f64::from(n) >= limit,
            keep_failed: failed,
        };
        let mut response = Response::ok(body)?;
        let headers = response.headers_mut();
        for (name, value) in head.headers() {
            headers.set(name, &value)?;
        }
        Ok(response)
    }
}

/// Where a stream of kept answers reads from: each source is one object, read page by page;
/// `seq_base` is added to its lines' `seq` (0 but for a run's shards).
pub struct Source {
    pub label: String,
    pub stub: Stub,
    pub seq_base: i64,
}

/// One page of a source's kept answers: its text, the last seq it holds, whether more follow,
/// and the failed keeps the source recorded.
async fn page(source: &Source, url: &str) -> Result<(String, i64, bool, u64), String> {
    let mut r = source
        .stub
        .fetch_with_str(url)
        .await
        .map_err(|e| e.to_string())?;
    if r.status_code() != 200 {
        return Err(format!("status {}", r.status_code()));
    }
    let head = PageHead::read(|name| r.headers().get(name).ok().flatten())?;
    let text = r.text().await.map_err(|e| e.to_string())?;
    Ok((text, head.last_seq, head.more, head.keep_failed))
}

/// The kept answers of `sources` within `window`, as a stream of NDJSON chunks (one page each)
/// ending with its end line (the lines, and the failed keeps the sources recorded), or with an
/// error line saying where it stopped (`Control`).
pub fn answers_stream(
    sources: Vec<Source>,
    window: Window,
) -> impl futures::Stream<Item = worker::Result<Vec<u8>>> {
    struct Cursor {
        sources: std::vec::IntoIter<Source>,
        current: Option<Source>,
        after: i64,
        lines: u64,
        keep_failed: u64,
        done: bool,
        /// The stream is a request in flight of the isolate until it ends.
        _visit: kvbench_core::measurement::in_flight::Visit<'static>,
    }
    let mut sources = sources.into_iter();
    let current = sources.next();
    let start = Cursor {
        sources,
        current,
        after: 0,
        lines: 0,
        keep_failed: 0,
        done: false,
        _visit: crate::in_flight().enter(),
    };
    futures::stream::unfold(start, move |mut c| async move {
        if c.done {
            return None;
        }
        let Some(source) = c.current.take() else {
            c.done = true;
            let end = format!("{}\n", Control::end_line(c.lines, c.keep_failed));
            return Some((Ok(end.into_bytes()), c));
        };
        // A probe's page and a shard's are the same call (`ShardCall::Answers`).
        let url = format!(
            "{ORIGIN}{}?after={}&since={}&until={}&limit={PAGE_LINES}&base={}",
            ProbeCall::Answers.path(),
            c.after,
            window.since_ms,
            window.until_ms,
            source.seq_base
        );
        let page = page(&source, &url).await;
        match page {
            Ok((text, last, more, failed)) => {
                c.lines += text.lines().count() as u64;
                if more {
                    c.after = last;
                    c.current = Some(source);
                } else {
                    // The count as the source's last page says it.
                    c.keep_failed += failed;
                    c.after = 0;
                    c.current = c.sources.next();
                }
                Some((Ok(text.into_bytes()), c))
            }
            Err(e) => {
                c.done = true;
                let line = Control::error_line(&format!(
                    "reading the kept answers of {} after seq {} failed: {e}",
                    source.label, c.after
                ));
                Some((Ok(format!("{line}\n").into_bytes()), c))
            }
        }
    })
}
