//! The cron's sweep of expired R2 objects: each tick lists the namespace (at most
//! `PAGES_PER_TICK` pages), deletes what `kvbench_core::stores::sweep` says expired, and keeps its
//! place in an object outside the namespace. A failure ends the tick, never the probes'.

use kvbench_core::stores::sweep::{self, List, Listed, Page, Sweep};
use kvbench_core::{Clock, StoreError};
use wasm_bindgen::{JsCast, JsValue};
use worker::js_sys::{Array, Object, Reflect};
use worker::wasm_bindgen_futures::JsFuture;
use worker::worker_sys::{R2Bucket, R2Object, R2Objects};
use worker::Env;

use super::{expires_at_field, r2_error};
use crate::bindings::JsClock;

/// The object that keeps the sweep's place: outside the `r2` store's namespace, no expiry.
pub const PLACE: &str = "kvbench-sweep/r2";

/// Its custom metadata field: the key the next tick lists after.
const AFTER: &str = "after";

/// One tick: nothing to do without the bucket; a failure is logged.
pub async fn run(env: &Env) {
    let Ok(bucket) = super::bucket(env) else {
        return;
    };
    match tick(&bucket).await {
        Ok((listed, deleted)) if deleted > 0 => {
            worker::console_log!("r2 sweep: listed {listed}, deleted {deleted} expired");
        }
        Ok(_) => {}
        Err(e) => worker::console_error!("r2 sweep: {e}"),
    }
}

/// Lists, deletes and keeps the place; answers the objects listed and deleted. On a failure
/// the place is left where it was: the next tick does this one's pages again.
async fn tick(bucket: &R2Bucket) -> Result<(u64, u64), StoreError> {
    let mut sweep = Sweep::resume(place(bucket).await?);
    while let Some(list) = sweep.next_list() {
        let page = list_page(bucket, list).await?;
        // R2 has no conditional delete: an object rewritten since the list loses its value and
        // its next read misses and writes again, as after an eviction.
        let expired = sweep.on_page(page, JsClock.now_ms());
        if !expired.is_empty() {
            let keys: Vec<JsValue> = expired.into_iter().map(JsValue::from).collect();
            let promise = bucket.delete_multiple(keys).map_err(r2_error)?;
            JsFuture::from(promise).await.map_err(r2_error)?;
        }
    }
    keep_place(bucket, sweep.started_after(), sweep.resume_after()).await?;
    Ok(sweep.counts())
}

/// Where the last tick stopped (`None`: start from the first object).
async fn place(bucket: &R2Bucket) -> Result<Option<String>, StoreError> {
    let object = JsFuture::from(bucket.head(PLACE.into()).map_err(r2_error)?)
        .await
        .map_err(r2_error)?;
    if object.is_null() || object.is_undefined() {
        return Ok(None);
    }
    let after = object
        .unchecked_into::<R2Object>()
        .custom_metadata()
        .ok()
        .and_then(|m| Reflect::get(&m, &AFTER.into()).ok())
        .and_then(|v| v.as_string());
    Ok(after)
}

/// Writes the place only when it moved; deletes it when the next tick starts from the first.
async fn keep_place(
    bucket: &R2Bucket,
    was: Option<&str>,
    next: Option<&str>,
) -> Result<(), StoreError> {
    if was == next {
        return Ok(());
    }
    let promise = match next {
        None => bucket.delete(PLACE.into()),
        Some(after) => {
            let metadata = Object::new();
            Reflect::set(&metadata, &AFTER.into(), &after.into()).map_err(r2_error)?;
            let options = Object::new();
            Reflect::set(&options, &"customMetadata".into(), &metadata).map_err(r2_error)?;
            bucket.put(PLACE.into(), JsValue::from_str(""), options.into())
        }
    }
    .map_err(r2_error)?;
    JsFuture::from(promise).await.map_err(r2_error)?;
    Ok(())
}

/// One list call: the namespace, a page of objects with their custom metadata.
async fn list_page(bucket: &R2Bucket, list: List<'_>) -> Result<Page, StoreError> {
    let options = Object::new();
    let set = |name: &str, value: JsValue| {
        Reflect::set(&options, &name.into(), &value)
            .map(|_| ())
            .map_err(r2_error)
    };
    set("prefix", sweep::prefix().into())?;
    set("limit", sweep::PAGE_OBJECTS.into())?;
    set("include", Array::of1(&"customMetadata".into()).into())?;
    match list {
        List::After(Some(key)) => set("startAfter", key.into())?,
        List::After(None) => {}
        List::Cursor(cursor) => set("cursor", cursor.into())?,
    }
    let answer = JsFuture::from(bucket.list(options.into()).map_err(r2_error)?)
        .await
        .map_err(r2_error)?
        .unchecked_into::<R2Objects>();
    let objects = answer
        .objects()
        .map_err(r2_error)?
        .iter()
        .filter_map(|object| {
            Some(Listed {
                key: object.key().ok()?,
                expires_at: expires_at_field(object),
            })
        })
        .collect();
    Ok(Page {
        objects,
        truncated: answer.truncated().map_err(r2_error)?,
        cursor: answer.cursor().map_err(r2_error)?,
    })
}
