//! The fleet directory (`FleetDirectory`, one object [`OBJECT`]): every member a start or the
//! cron armed, label → URL. Through it a member taken out of `FLEET` is still listed, stopped
//! and read until it keeps nothing, then forgotten.

use kvbench_core::operations::fleet::Member;
use kvbench_core::spec::env::DIRECTORY;
use kvbench_wire::object::{Directory, DirectoryChange};
use worker::durable::{State, Stub};
use worker::{durable_object, DurableObject, Env, Request, Response};

use crate::operations::object::{self, get_json, post};
use kvbench_wire::object::{DirectoryCall, ObjectCall};

/// The directory's one object.
pub const OBJECT: &str = "members";

/// Its storage key.
const KEY: &str = "members";

#[durable_object(fetch)]
pub struct FleetDirectory {
    state: State,
}

impl FleetDirectory {
    /// `POST /members` applies a [`DirectoryChange`] (written only when it changes something);
    /// `GET` and `POST` answer the [`Directory`].
    async fn serve(&self, call: DirectoryCall, mut req: Request) -> worker::Result<Response> {
        let storage = self.state.storage();
        let stored: Option<serde_json::Value> = object::load(&storage, KEY).await?;
        let mut directory = stored.as_ref().map(Directory::read).unwrap_or_default();
        if call == DirectoryCall::Change {
            let change: serde_json::Value = object::json_of(req.text().await)?;
            let change = DirectoryChange::read(&change);
            if directory.apply(change) {
                object::save(&storage, KEY, &directory).await?;
            }
        }
        crate::respond::message(&directory)
    }
}

impl DurableObject for FleetDirectory {
    fn new(state: State, env: Env) -> Self {
        crate::operations::object::call_log_from(&env);
        FleetDirectory { state }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        crate::operations::object::log_call("directory", &req);
        let _visit = crate::in_flight().enter();
        let answer = match DirectoryCall::of(req.method().as_ref(), &req.path()) {
            Some(call) => self.serve(call, req).await,
            None => Response::error("no such directory call", 404),
        };
        answer.or_else(|e| Response::error(format!("fleet directory: {e}"), 500))
    }
}

/// The worker's side: the directory's object.
pub struct Members(Stub);

impl Members {
    pub fn from_env(env: &Env) -> worker::Result<Members> {
        Ok(Members(env.durable_object(DIRECTORY)?.get_by_name(OBJECT)?))
    }

    /// Records `members` as armed (a start's or a tick's members).
    pub async fn record(&self, members: &[Member]) -> Result<(), String> {
        if members.is_empty() {
            return Ok(());
        }
        let mut change = DirectoryChange::default();
        for m in members {
            change.armed.insert(m.label.clone(), m.url.clone());
        }
        self.change(&change).await
    }

    /// Forgets `labels` (members that keep nothing and no longer run).
    pub async fn forget(&self, labels: Vec<String>) -> Result<(), String> {
        if labels.is_empty() {
            return Ok(());
        }
        let change = DirectoryChange {
            armed: Default::default(),
            forget: labels,
        };
        self.change(&change).await
    }

    async fn change(&self, change: &DirectoryChange) -> Result<(), String> {
        let body = serde_json::to_string(change).map_err(|e| e.to_string())?;
        post(&self.0, DirectoryCall::Change, &body).await.map(drop)
    }

    /// Every member the directory holds.
    pub async fn members(&self) -> Result<Vec<Member>, String> {
        let directory = Directory::read(&get_json(&self.0, DirectoryCall::Read).await?);
        Ok(directory
            .members
            .into_iter()
            .map(|(label, url)| Member { label, url })
            .collect())
    }
}
