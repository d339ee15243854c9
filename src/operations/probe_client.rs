//! The worker's side of the probes: the probe objects of this deployment ([`Probes`]), one per
//! vantage point ([`Point`]), their calls and statuses, and a deploy check's call of one member
//! ([`check_member`]). The objects themselves are `crate::operations::probes`'s `ProbeObject`.

use kvbench_core::operations::fleet::Member;
use kvbench_core::operations::probe;
use kvbench_core::operations::probes::ProbeConfig;
use kvbench_core::operations::spend::ProbeNow;
use kvbench_core::spec::env::PROBES;
use kvbench_core::stores::durable::LocationHint;
use kvbench_wire::object::{Arm, ArmMember as MemberArm, Armed, ProbeCall, ProbeStatus, Stopped};
use worker::durable::{ObjectNamespace, Stub};
use worker::Env;

use crate::bindings::env_text;
use crate::operations::directory::Members;
use crate::operations::kept_table::Source;
use crate::operations::object::{get_json, json_of, now_ms, post};
use crate::operations::probes::call_member;

/// One member checked as a deploy check sees it (`POST /probes/check`): one call of its
/// `/test`, read by [`kvbench_core::operations::fleet::check`]; nothing is kept.
pub async fn check_member(
    member: &Member,
    token: Option<&str>,
) -> kvbench_core::operations::fleet::MemberCheck {
    let t_ms = now_ms();
    let called = call_member(&member.test_url(), token, CHECK_TIMEOUT_MS).await;
    let call_ms = kvbench_core::measurement::answer::round_ms(now_ms() - t_ms);
    let called = match &called {
        Ok(c) => Ok(c),
        Err((kind, detail)) => Err((*kind, detail.as_str())),
    };
    kvbench_core::operations::fleet::check(&member.label, called, call_ms)
}

/// How long a deploy check waits for one member (all are asked at once).
const CHECK_TIMEOUT_MS: u64 = 60_000;

/// The worker's side: the probe objects of this deployment.
pub struct Probes {
    namespace: ObjectNamespace,
    /// The fleet directory (`crate::operations::directory`).
    directory: Members,
    pub config: ProbeConfig,
}

impl Probes {
    pub fn from_env(env: &Env) -> Result<Self, String> {
        let namespace = env
            .durable_object(PROBES)
            .map_err(|_| format!("the Durable Object binding {PROBES} is missing"))?;
        let directory = Members::from_env(env).map_err(|_| {
            format!(
                "the Durable Object binding {} is missing",
                kvbench_core::spec::env::DIRECTORY
            )
        })?;
        let config = ProbeConfig::from_vars(|name| env_text(env, name))
            .map_err(|e| format!("{}: {}", e.parameter, e.message))?;
        Ok(Probes {
            namespace,
            directory,
            config,
        })
    }

    /// Every vantage point of this configuration: the hints, then the fleet's members.
    pub fn points(&self) -> Vec<Point> {
        let hints = self.config.hints.iter().map(|&h| Point::Hint(h));
        let members = self.config.members.iter().cloned().map(Point::Member);
        hints.chain(members).collect()
    }

    /// A vantage point's probe object, created with its hint, or a member's region's
    /// (`fleet-regions.json`) so its call to the member is short.
    pub fn stub(&self, point: &Point) -> worker::Result<Stub> {
        match point {
            Point::Hint(hint) => self
                .namespace
                .get_by_name_with_location_hint(&ProbeConfig::object_name(*hint), hint.as_str()),
            Point::Member(member) => match member.probe_hint() {
                Some(hint) => self
                    .namespace
                    .get_by_name_with_location_hint(&member.object_name(), hint.as_str()),
                None => self.namespace.get_by_name(&member.object_name()),
            },
        }
    }

    fn arm_body(&self, point: &Point) -> String {
        let (hint, member) = match point {
            Point::Hint(hint) => (Some(hint.as_str().to_string()), None),
            Point::Member(m) => (
                None,
                Some(MemberArm {
                    label: m.label.clone(),
                    url: m.url.clone(),
                }),
            ),
        };
        serde_json::to_string(&Arm {
            hint,
            member,
            every_s: self.config.every_s,
            keep_s: self.config.keep_s,
        })
        .unwrap_or_default()
    }

    /// `call` (`start`, `tick`, `stop`) to each probe at once; each answer or error by point,
    /// in order. A start or tick first records the members it arms in the directory (the second
    /// value: why that failed).
    pub async fn each(
        &self,
        call: ProbeCall,
    ) -> (Vec<(Point, Result<Reply, String>)>, Option<String>) {
        let directory = if call == ProbeCall::Stop {
            None
        } else {
            self.record_members().await.err()
        };
        // All at once, like [`Self::statuses`].
        let calls = self.points().into_iter().map(|point| async move {
            let result = async {
                let stub = self.stub(&point).map_err(|e| e.to_string())?;
                let mut response = post(&stub, call, &self.arm_body(&point)).await?;
                let v: serde_json::Value =
                    json_of(response.text().await).map_err(|e| e.to_string())?;
                Ok(match call {
                    ProbeCall::Stop => Reply::Stopped(Stopped::read(&v)),
                    _ => Reply::Armed(Armed::read(&v)),
                })
            }
            .await;
            (point, result)
        });
        (futures::future::join_all(calls).await, directory)
    }

    pub async fn status(&self, point: &Point) -> Result<StatusRead, String> {
        status_of(&self.stub(point).map_err(|e| e.to_string())?).await
    }

    /// [`Self::status`] of each point, asked all at once (the objects are spread over the
    /// world: one after the other, their round trips would add up), in the points' order.
    pub async fn statuses(&self, points: &[Point]) -> Vec<Result<StatusRead, String>> {
        futures::future::join_all(points.iter().map(|p| self.status(p))).await
    }

    /// Records this configuration's members in the directory.
    async fn record_members(&self) -> Result<(), String> {
        self.directory.record(&self.config.members).await
    }

    /// Every probe with its status, each object asked once and all at once: this
    /// configuration's, and [`Self::outside`]'s. Nothing is written (a read route's).
    pub async fn sweep(&self) -> Sweep {
        let points = self.points();
        let (statuses, outside) = futures::join!(self.statuses(&points), self.outside());
        Sweep {
            configured: points.into_iter().zip(statuses).collect(),
            outside,
        }
    }

    /// Every vantage point with a probe: this configuration's, then [`Self::outside`]'s.
    pub async fn all_points(&self) -> Vec<Point> {
        let mut points = self.points();
        points.extend(
            self.outside()
                .await
                .live
                .into_iter()
                .map(|(point, _)| point),
        );
        points
    }

    /// The probes outside this configuration (hints beyond `PROBE_HINTS`, directory members no
    /// longer in `FLEET`), listed and stopped like the others, never left running unseen. One
    /// that neither runs nor keeps is `gone`, to forget ([`Self::forget`]).
    pub async fn outside(&self) -> Outside {
        let mut candidates: Vec<Point> = LocationHint::ALL
            .into_iter()
            .filter(|hint| !self.config.hints.contains(hint))
            .map(Point::Hint)
            .collect();
        if let Ok(members) = self.directory.members().await {
            candidates.extend(
                members
                    .into_iter()
                    .filter(|m| self.config.members.iter().all(|c| c.label != m.label))
                    .map(Point::Member),
            );
        }
        let statuses = self.statuses(&candidates).await;
        let mut out = Outside::default();
        for (point, status) in candidates.into_iter().zip(statuses) {
            let Ok(status) = status else {
                continue;
            };
            if status.status.lives() {
                out.live.push((point, status));
            } else if let Point::Member(m) = point {
                out.gone.push(m.label);
            }
        }
        out
    }

    /// Forgets the directory members [`Self::outside`] found `gone` (a write: a start's, a
    /// stop's or the cron's, never a read's).
    pub async fn forget(&self, gone: Vec<String>) {
        if let Err(e) = self.directory.forget(gone).await {
            worker::console_error!("fleet directory: forgetting members failed: {e}");
        }
    }

    /// The stream sources of the probes of `sweep` that keep something, or whose status could
    /// not be read.
    pub fn sources_of(&self, sweep: &Sweep) -> worker::Result<Vec<Source>> {
        let mut sources = Vec::new();
        for (point, status) in sweep.every() {
            if status.is_some_and(|s| s.status.kept == 0 && s.status.keep_failed == 0) {
                continue;
            }
            sources.push(Source {
                label: point.label(),
                stub: self.stub(point)?,
                seq_base: 0,
            });
        }
        Ok(sources)
    }
}

/// A probe's answer to a control call ([`Probes::each`]): what a start or a tick did, or a
/// stop.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum Reply {
    Armed(Armed),
    Stopped(Stopped),
}

/// What [`Probes::outside`] found.
#[derive(Default)]
pub struct Outside {
    /// The probes outside the configuration that run or keep answers, with their status.
    pub live: Vec<(Point, StatusRead)>,
    /// Directory members whose probes neither run nor keep anything.
    pub gone: Vec<String>,
}

/// Every probe's status as one request read it ([`Probes::sweep`]).
pub struct Sweep {
    /// This configuration's points, each with its status or why it could not be read.
    pub configured: Vec<(Point, Result<StatusRead, String>)>,
    pub outside: Outside,
}

impl Sweep {
    /// Every probe, with its status where it could be read: the configuration's, then those
    /// outside it.
    pub fn every(&self) -> impl Iterator<Item = (&Point, Option<&StatusRead>)> {
        let configured = self.configured.iter().map(|(p, s)| (p, s.as_ref().ok()));
        let outside = self.outside.live.iter().map(|(p, s)| (p, Some(s)));
        configured.chain(outside)
    }

    /// Every probe as the budget counts it ([`ProbeNow`]): this configuration's — the ones a
    /// start or a tick arms — then those outside it, which keep running as they are.
    pub fn budget_view(&self) -> Vec<ProbeNow> {
        let configured = self.configured.len();
        self.every()
            .enumerate()
            .map(|(i, (_, read))| probe::probe_now(read.map(|r| &r.status), i < configured))
            .collect()
    }

    /// The time of the first answer any probe keeps.
    pub fn first_t_ms(&self) -> Option<i64> {
        self.every().filter_map(|(_, s)| s?.status.first_t_ms).min()
    }
}
/// A vantage point of the probes: a Durable Object location hint, or a placed fleet member.
#[derive(Debug, Clone)]
pub enum Point {
    Hint(LocationHint),
    Member(Member),
}

impl Point {
    /// Its label in kept answers and reports.
    pub fn label(&self) -> String {
        match self {
            Point::Hint(hint) => hint.as_str().to_string(),
            Point::Member(m) => m.label.clone(),
        }
    }

    /// The fields that name it in JSON (`/probes`, start and stop answers).
    pub fn describe(&self) -> serde_json::Value {
        match self {
            Point::Hint(hint) => {
                serde_json::json!({ "label": hint.as_str(), "vantage": "hint", "hint": hint.as_str() })
            }
            Point::Member(m) => serde_json::json!({
                "label": m.label,
                "vantage": "member",
                "hint": null,
                "region": kvbench_core::operations::fleet::region(&m.label).map(|r| serde_json::json!({ "metro": r.metro, "colo": r.colo(), "colos": r.colos, "continent": r.continent, "probe_hint": r.hint().map(|h| h.as_str()) })),
            }),
        }
    }
}

/// A probe object's `/status`.
pub async fn status_of(stub: &Stub) -> Result<StatusRead, String> {
    let shown = get_json(stub, ProbeCall::Status).await?;
    Ok(StatusRead {
        status: ProbeStatus::read(&shown),
        shown,
    })
}

/// A probe's status as the worker reads it, and as the object sent it (`GET /probes` shows
/// that, beside the probe's description).
pub struct StatusRead {
    pub status: ProbeStatus,
    pub shown: serde_json::Value,
}
