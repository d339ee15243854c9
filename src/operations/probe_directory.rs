//! The directory of fleet members: every member a start or the cron armed (its label and base
//! URL), kept by one `ProbeObject` named [`OBJECT`] in Durable Object storage (key `members`).
//! A member taken out of `FLEET` is no longer in the worker's configuration, but its probe
//! object still holds answers (and stops itself at its next wake); through the directory it is
//! still listed by `GET /probes`, stopped by `POST /probes/stop` and read by `/probes/answers`
//! and `/report` until it keeps nothing, when it is forgotten.

use std::collections::BTreeMap;

use kvbench_core::fleet::Member;
use serde::{Deserialize, Serialize};
use worker::durable::{State, Stub};
use worker::{Request, Response};

use crate::operations::kept_table::ORIGIN;
use crate::operations::probes::post;

/// The object's name (no probe's: those are `probe:<hint>` and `member:<label>`).
pub const OBJECT: &str = "directory:members";

/// The storage key of the map label → base URL.
const KEY: &str = "members";

/// A change to the directory: members armed (added, or their URL updated) and labels forgotten.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct Change {
    armed: BTreeMap<String, String>,
    forget: Vec<String>,
}

/// The object's side: `POST /directory` applies a [`Change`] (written only when it changes
/// something, so the cron's tick costs a row read, not a write), `GET /directory` answers the
/// map. Both answer the map after the call.
pub async fn serve(state: &State, mut req: Request) -> worker::Result<Response> {
    let storage = state.storage();
    let mut members: BTreeMap<String, String> =
        super::load(&storage, KEY).await?.unwrap_or_default();
    if req.method() == worker::Method::Post {
        let change: Change = super::json_of(req.text().await)?;
        let before = members.clone();
        members.extend(change.armed);
        for label in &change.forget {
            members.remove(label);
        }
        if members != before {
            super::save(&storage, KEY, &members).await?;
        }
    }
    Response::from_json(&members)
}

/// Records `members` as armed (a start's or a tick's members).
pub async fn record(stub: &Stub, members: &[Member]) -> Result<(), String> {
    if members.is_empty() {
        return Ok(());
    }
    let change = Change {
        armed: members
            .iter()
            .map(|m| (m.label.clone(), m.url.clone()))
            .collect(),
        forget: Vec::new(),
    };
    post(stub, "directory", &to_json(&change)).await.map(drop)
}

/// Forgets `labels` (members that keep nothing and no longer run).
pub async fn forget(stub: &Stub, labels: Vec<String>) -> Result<(), String> {
    if labels.is_empty() {
        return Ok(());
    }
    let change = Change {
        armed: BTreeMap::new(),
        forget: labels,
    };
    post(stub, "directory", &to_json(&change)).await.map(drop)
}

/// Every member the directory holds.
pub async fn members(stub: &Stub) -> Result<Vec<Member>, String> {
    let mut r = stub
        .fetch_with_str(&format!("{ORIGIN}/directory"))
        .await
        .map_err(|e| e.to_string())?;
    if r.status_code() != 200 {
        return Err(format!("directory: {}", r.status_code()));
    }
    let map: BTreeMap<String, String> =
        super::json_of(r.text().await).map_err(|e| e.to_string())?;
    Ok(map
        .into_iter()
        .map(|(label, url)| Member { label, url })
        .collect())
}

fn to_json(change: &Change) -> String {
    serde_json::to_string(change).unwrap_or_default()
}
