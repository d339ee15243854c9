//! The `d1` store: the table of `migrations/` through the D1 binding, one prepared statement per
//! read, one batch per write (the upsert and the deletion of up to 16 expired rows of other keys,
//! in one round trip: D1 has no TTL), optionally inside one Sessions API session per request
//! (`d1_session`). The value is bound as a JS string, built before the first span: D1 carries a
//! BLOB parameter as a JSON array of numbers, several times the bytes and CPU inside the timed
//! call.

use std::cell::RefCell;

use async_trait::async_trait;
use kvbench_core::spec::env::BENCH_D1;
use kvbench_core::stores::sql;
use kvbench_core::stores::store::{Deferred, Fetched, Options};
use kvbench_core::{ErrorKind, Store, StoreError, Value};
use wasm_bindgen::{JsCast, JsValue};
use worker::{D1Database, D1DatabaseSession, D1PreparedStatement, Env};

use crate::bindings::{missing_binding, runtime, JsClock};
use crate::stores::prepared::PreparedWrite;

pub struct D1Binding {
    db: D1Database,
    /// This request's session, once its first query ran (read and write share it).
    session: RefCell<Option<std::rc::Rc<D1DatabaseSession>>>,
    /// The value as a JS string, converted before the first span.
    value: PreparedWrite<JsValue>,
}

impl D1Binding {
    pub fn from_env(env: &Env) -> Result<Self, StoreError> {
        let db = env
            .d1(BENCH_D1)
            .map_err(|_| missing_binding("D1 database", BENCH_D1))?;
        Ok(D1Binding {
            db,
            session: RefCell::new(None),
            value: PreparedWrite::default(),
        })
    }

    fn statement(&self, sql: &str, options: &Options) -> Result<D1PreparedStatement, StoreError> {
        Ok(match self.session(options)? {
            Some(session) => session.prepare(sql),
            None => self.db.prepare(sql),
        })
    }

    /// This request's session (`d1_session`), started by its first query; `None` without one.
    fn session(
        &self,
        options: &Options,
    ) -> Result<Option<std::rc::Rc<D1DatabaseSession>>, StoreError> {
        let Some(constraint) = options.d1_session else {
            return Ok(None);
        };
        let existing = self.session.borrow().clone();
        let session = match existing {
            Some(session) => session,
            None => {
                let session = std::rc::Rc::new(
                    self.db
                        .with_session(Some(constraint.as_str()))
                        .map_err(d1_error)?,
                );
                *self.session.borrow_mut() = Some(session.clone());
                session
            }
        };
        Ok(Some(session))
    }

    /// Runs `statements` as one batch (one round trip, one transaction), in the session when
    /// there is one.
    async fn batch(
        &self,
        statements: Vec<D1PreparedStatement>,
        options: &Options,
    ) -> Result<Vec<worker::D1Result>, StoreError> {
        match self.session(options)? {
            Some(session) => session.batch(statements).await,
            None => self.db.batch(statements).await,
        }
        .map_err(d1_error)
    }
}

/// A D1 failure: the binding's message (D1 errors carry their cause in the text).
fn d1_error(e: worker::Error) -> StoreError {
    let text = e.to_string();
    StoreError::new(kvbench_core::error::classify_binding_error(&text), text)
}

/// The stored size of a `value` D1 returned: text (how this worker writes) or a BLOB another
/// client wrote, which D1 returns as an array of byte values.
pub(crate) fn stored_len(value: &JsValue) -> Result<u64, StoreError> {
    if let Some(text) = value.as_string() {
        return Ok(text.len() as u64);
    }
    if let Some(array) = value.dyn_ref::<worker::js_sys::Array>() {
        return Ok(u64::from(array.length()));
    }
    if let Some(buffer) = value.dyn_ref::<worker::js_sys::ArrayBuffer>() {
        return Ok(u64::from(buffer.byte_length()));
    }
    Err(StoreError::new(
        ErrorKind::Decode,
        "the value column is neither text nor a BLOB",
    ))
}

#[async_trait(?Send)]
impl Store for D1Binding {
    async fn get(&self, key: &str, options: &Options) -> Result<Fetched, StoreError> {
        let now = kvbench_core::Clock::now_ms(&JsClock);
        let statement = self
            .statement(sql::SELECT, options)?
            .bind(&[key.into(), now.into()])
            .map_err(runtime)?;
        let rows = statement.raw_js_value().await.map_err(d1_error)?;
        let Some(row) = rows.into_iter().next() else {
            return Ok(Fetched::Miss);
        };
        // Sizing the text reads it into wasm: deferred until every span is over.
        let value = worker::js_sys::Array::from(&row).get(0);
        Ok(Fetched::Hit(Deferred::later(move || stored_len(&value))))
    }

    fn encode_put(&self, _key: &str, value: &Value, _ttl_s: u32) -> Result<Vec<u8>, StoreError> {
        let text = crate::stores::prepared::JsCopy::of(value).text(|| {
            let text = match value.plain_str() {
                Some(text) => text,
                None => std::str::from_utf8(value.bytes())
                    .map_err(|_| StoreError::new(ErrorKind::Runtime, "value is not UTF-8 text"))?,
            };
            Ok(JsValue::from_str(text))
        })?;
        self.value.set(text);
        Ok(Vec::new())
    }

    async fn put(
        &self,
        key: &str,
        value: &[u8],
        ttl_s: u32,
        _body: Vec<u8>,
        options: &Options,
    ) -> Result<(), StoreError> {
        let value = self
            .value
            .take_or(|| Ok::<_, StoreError>(JsValue::from_str(&String::from_utf8_lossy(value))))?;
        let now_ms = kvbench_core::Clock::now_ms(&JsClock);
        let expires_at = sql::expires_at_ms(now_ms, ttl_s);
        let upsert = self
            .statement(sql::UPSERT, options)?
            .bind(&[key.into(), value, (expires_at as f64).into()])
            .map_err(runtime)?;
        // D1 has no TTL: each write deletes a few expired rows of other keys, so the table holds
        // no more than what the last TTL wrote (sql::DELETE_EXPIRED_OTHERS).
        let sweep = self
            .statement(sql::DELETE_EXPIRED_OTHERS, options)?
            .bind(&[now_ms.floor().into(), key.into()])
            .map_err(runtime)?;
        for result in self.batch(vec![upsert, sweep], options).await? {
            if let Some(e) = result.error().filter(|_| !result.success()) {
                return Err(StoreError::new(ErrorKind::Http, e));
            }
        }
        Ok(())
    }
}
