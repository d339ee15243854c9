//! The `d1` store: one prepared read, one batch per write (the upsert and up to 16 expired rows
//! of other keys deleted: D1 has no TTL), optionally in one Sessions API session per request.
//! The value is bound as a JS string built before the first span (a BLOB goes as a JSON array
//! of numbers), and the runtime's `all()`/`batch()` are used for D1's `meta`, which workers-rs's
//! `D1ResultMeta` drops; each `meta` is read only after every span.

use std::cell::RefCell;

use async_trait::async_trait;
use kvbench_core::spec::env::BENCH_D1;
use kvbench_core::stores::meta::{self, Reported};
use kvbench_core::stores::sql;
use kvbench_core::stores::store::{Deferred, Fetched, Options};
use kvbench_core::{ErrorKind, Store, StoreError, Value};
use wasm_bindgen::{JsCast, JsValue};
use worker::js_sys::{Array, Reflect, JSON};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{D1Database, D1DatabaseSession, D1PreparedStatement, Env};

use crate::bindings::{js_text, missing_binding, runtime, JsClock};
use crate::js_copy::JsCopy;
use crate::js_strings::name;

pub struct D1Binding {
    db: D1Database,
    /// This request's session, once its first query ran (read and write share it).
    session: RefCell<Option<std::rc::Rc<D1DatabaseSession>>>,
    /// This request's read result and write results, as the runtime gave them: their `meta` is
    /// read after every span (`Store::reported`).
    results: RefCell<Results>,
}

/// The runtime's results of this request's calls, kept unread.
#[derive(Default)]
struct Results {
    /// The read's `D1Result`.
    read: Option<JsValue>,
    /// The write's batch: one `D1Result` per statement.
    write: Option<Array>,
}

impl D1Binding {
    pub fn from_env(env: &Env) -> Result<Self, StoreError> {
        let db = env
            .d1(BENCH_D1)
            .map_err(|_| missing_binding("D1 database", BENCH_D1))?;
        Ok(D1Binding {
            db,
            session: RefCell::new(None),
            results: RefCell::default(),
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
    /// there is one: the runtime's array of `D1Result`s, one per statement.
    async fn batch(
        &self,
        statements: Vec<D1PreparedStatement>,
        options: &Options,
    ) -> Result<Array, StoreError> {
        let statements: Array = statements.iter().map(|s| s.inner().clone()).collect();
        let promise = match self.session(options)? {
            Some(session) => session
                .as_ref()
                .unchecked_ref::<worker::worker_sys::D1DatabaseSession>()
                .session_batch(statements),
            None => self
                .db
                .as_ref()
                .unchecked_ref::<worker::worker_sys::D1Database>()
                .batch(statements),
        }
        .map_err(d1_js_error)?;
        let results = JsFuture::from(promise).await.map_err(d1_js_error)?;
        Ok(results.unchecked_into())
    }
}

/// A D1 failure the runtime raised: its message (D1 errors carry their cause in the text, as
/// `D1_ERROR: no such table: …`).
fn d1_js_error(e: JsValue) -> StoreError {
    let text = js_text(&e);
    StoreError::new(kvbench_core::error::classify_binding_error(&text), text)
}

/// A `D1Result`'s `meta` as JSON text (empty when it has none: nothing reported), for
/// [`kvbench_core::stores::meta`].
fn meta_json(result: &JsValue) -> String {
    Reflect::get(result, &name("meta"))
        .ok()
        .and_then(|meta| JSON::stringify(&meta).ok())
        .and_then(|text| text.as_string())
        .unwrap_or_default()
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
    /// The value as a JS string, converted before the first span.
    type Prepared = JsValue;

    async fn get(&self, key: &str, options: &Options) -> Result<Fetched, StoreError> {
        self.results.borrow_mut().read = None;
        let now = kvbench_core::Clock::now_ms(&JsClock);
        let statement = self
            .statement(sql::SELECT, options)?
            .bind(&[key.into(), now.into()])
            .map_err(runtime)?;
        let promise = statement.inner().all().map_err(d1_js_error)?;
        let result = JsFuture::from(promise).await.map_err(d1_js_error)?;
        let rows: Array = Reflect::get(&result, &name("results"))
            .map_err(d1_js_error)?
            .dyn_into()
            .map_err(|_| StoreError::new(ErrorKind::Decode, "D1 answered no rows array"))?;
        self.results.borrow_mut().read = Some(result);
        if rows.length() == 0 {
            return Ok(Fetched::Miss);
        }
        // Sizing the text reads it into wasm: deferred until every span is over.
        Ok(Fetched::Hit(Deferred::later(move || {
            let value = Reflect::get(&rows.get(0), &name("value")).map_err(d1_js_error)?;
            stored_len(&value)
        })))
    }

    fn reported(&self) -> Reported {
        let results = std::mem::take(&mut *self.results.borrow_mut());
        Reported {
            read: results.read.map(|result| meta::d1(&meta_json(&result))),
            write: results.write.map(|batch| {
                let metas: Vec<String> = batch.iter().map(|r| meta_json(&r)).collect();
                meta::d1_batch(metas.iter().map(String::as_str))
            }),
        }
    }

    /// The value as a JS string.
    fn prepare(&self, _key: &str, value: &Value, _ttl_s: u32) -> Result<JsValue, StoreError> {
        JsCopy::of(value).text(|| {
            let text = match value.plain_str() {
                Some(text) => text,
                None => std::str::from_utf8(value.bytes())
                    .map_err(|_| StoreError::new(ErrorKind::Runtime, "value is not UTF-8 text"))?,
            };
            Ok(JsValue::from_str(text))
        })
    }

    async fn put(
        &self,
        key: &str,
        ttl_s: u32,
        value: JsValue,
        options: &Options,
    ) -> Result<(), StoreError> {
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
        self.results.borrow_mut().write = None;
        let results = self.batch(vec![upsert, sweep], options).await?;
        for result in results.iter() {
            let result = result.unchecked_into::<worker::worker_sys::D1Result>();
            if let Some(e) = result.error().ok().flatten() {
                if !result.success().unwrap_or(false) {
                    return Err(StoreError::new(ErrorKind::Http, e));
                }
            }
        }
        self.results.borrow_mut().write = Some(results);
        Ok(())
    }
}
