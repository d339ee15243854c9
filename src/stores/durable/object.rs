//! `BenchObject`, the `do` store's Durable Object: `(key, value, expires_at)` rows in its SQLite
//! and an alarm at the next expiry (main worker only, feature `main-worker`).

use std::cell::Cell;

use kvbench_core::stores::durable::{self, Call};
use kvbench_core::stores::sql;
use wasm_bindgen::{JsCast, JsValue};
use worker::durable::{ScheduledTime, State};
use worker::{durable_object, DurableObject, Env, Request, Response};

/// The Durable Object: one SQLite table per object, an alarm at the next expiry.
#[durable_object(alarm)]
pub struct BenchObject {
    state: State,
    /// Whether this instance has created its table (again, after an empty object deleted its
    /// storage).
    table: Cell<bool>,
}

fn now_ms() -> f64 {
    worker::js_sys::Date::now()
}

impl BenchObject {
    /// The database, with the table created: only the write path calls this (`CREATE TABLE`
    /// writes rows, and a read must not).
    fn sql_for_write(&self) -> worker::Result<worker::SqlStorage> {
        let sql = self.state.storage().sql();
        if !self.table.get() {
            sql.exec(sql::CREATE, None)?;
            self.table.set(true);
        }
        Ok(sql)
    }

    /// The value of `key` if unexpired, the stored `ArrayBuffer` as the body (no copy through
    /// wasm). Without the table (new, or emptied by its alarm): a miss.
    fn read(&self, key: String) -> worker::Result<Response> {
        let miss = || Ok(Response::empty()?.with_status(404));
        let sql = self.state.storage().sql();
        let mut cursor = match sql.exec_raw(sql::SELECT, vec![key.into(), now_ms().into()]) {
            Ok(cursor) => cursor,
            Err(e) if sql::is_no_table(&e.to_string()) => {
                self.table.set(false);
                return miss();
            }
            Err(e) => return Err(e),
        };
        let Some(row) = Iterator::next(&mut cursor) else {
            return miss();
        };
        let value = worker::js_sys::Reflect::get(&row?, &"value".into())?;
        let body = match value.dyn_ref::<worker::js_sys::ArrayBuffer>() {
            Some(buffer) => worker::js_sys::Uint8Array::new(buffer),
            None => worker::js_sys::Uint8Array::new(&value),
        };
        let response = worker::web_sys::Response::new_with_opt_buffer_source(Some(&body))?;
        Ok(Response::from(response))
    }

    async fn write(&self, key: String, ttl_s: u32, req: Request) -> worker::Result<Response> {
        let body =
            worker::wasm_bindgen_futures::JsFuture::from(req.inner().array_buffer()?).await?;
        let value = worker::js_sys::Uint8Array::new(&body);
        let expires_at = sql::expires_at_ms(now_ms(), ttl_s);
        self.sql_for_write()?.exec_raw(
            sql::UPSERT,
            vec![key.into(), value.into(), (expires_at as f64).into()],
        )?;
        // One alarm at a time, at the earliest expiry: it deletes what expired and re-arms.
        let storage = self.state.storage();
        let due = storage.get_alarm().await?;
        if due.is_none_or(|due| due > expires_at) {
            storage.set_alarm(at(expires_at)).await?;
        }
        Ok(Response::empty()?.with_status(204))
    }

    /// Rows, next expiry, the alarm and whether the table exists, read without writing.
    async fn stats(&self) -> worker::Result<Response> {
        let table = self.has_table()?;
        let (next, rows) = if table {
            self.next_expiry()?
        } else {
            (None, 0)
        };
        let alarm = self.state.storage().get_alarm().await?;
        Response::from_json(&serde_json::json!({
            "table": table,
            "rows": rows,
            "next_expiry_ms": next,
            "alarm_ms": alarm,
        }))
    }

    fn has_table(&self) -> worker::Result<bool> {
        let mut cursor = self
            .state
            .storage()
            .sql()
            .exec_raw(sql::TABLE_EXISTS, None)?;
        match Iterator::next(&mut cursor) {
            Some(row) => {
                let n = worker::js_sys::Reflect::get(&row?, &"n".into())?;
                Ok(n.as_f64().unwrap_or(0.0) > 0.0)
            }
            None => Ok(false),
        }
    }

    /// The next expiry (epoch ms) and the number of rows; the table must exist.
    fn next_expiry(&self) -> worker::Result<(Option<i64>, u64)> {
        let cursor = self
            .state
            .storage()
            .sql()
            .exec_raw(sql::NEXT_EXPIRY, None)?;
        let mut out = (None, 0);
        for row in cursor {
            let row = row?;
            let field = |name: &str| worker::js_sys::Reflect::get(&row, &name.into());
            out.0 = field("next")?.as_f64().map(|ms| ms as i64);
            out.1 = field("rows")?.as_f64().unwrap_or(0.0) as u64;
        }
        Ok(out)
    }
}

fn at(epoch_ms: i64) -> ScheduledTime {
    ScheduledTime::new(worker::js_sys::Date::new(&JsValue::from(epoch_ms as f64)))
}

impl DurableObject for BenchObject {
    fn new(state: State, _env: Env) -> Self {
        BenchObject {
            state,
            table: Cell::new(false),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        let url = req.url()?;
        let call = match durable::parse(req.method().as_ref(), url.path(), url.query()) {
            Ok(call) => call,
            Err(message) => return Response::error(message, 400),
        };
        let answer = match call {
            Call::Get { key } => self.read(key),
            Call::Put { key, ttl_s } => self.write(key, ttl_s, req).await,
            Call::Stats => self.stats().await,
        };
        // The object's failures reach the worker as a 500 with their text (an `http` error).
        answer.or_else(|e| Response::error(format!("Durable Object: {e}"), 500))
    }

    async fn alarm(&self) -> worker::Result<Response> {
        if !self.has_table()? {
            return Response::ok("");
        }
        self.state
            .storage()
            .sql()
            .exec_raw(sql::DELETE_EXPIRED, vec![now_ms().into()])?;
        match self.next_expiry()? {
            (Some(next), _) => self.state.storage().set_alarm(at(next)).await?,
            // Nothing left: drop the object's storage entirely (an empty table still bills).
            (None, _) => {
                self.state.storage().delete_all().await?;
                self.table.set(false);
            }
        }
        Response::ok("")
    }
}
