//! The deployed worker measuring itself. `ProbeObject` is the Durable Object class of the probes,
//! two kinds told apart by their state: `probe:<hint>` (created with that location hint) wakes on
//! its own alarm every `PROBE_EVERY` seconds and runs exactly what `/test` runs
//! (`kvbench_core::handle` over the same stores and vars), one measurement at a time, and keeps
//! the answer; `member:<label>` wakes the same way and calls a placed fleet member's `/test` over
//! HTTP (only a fetch handler is placed), keeping its answer — or, when it did not answer, why, as
//! a line of its own. Both keep NDJSON lines (`kvbench_wire::kept::Kept`) in their SQLite
//! database ([`KeptTable`]) and hand them out in pages, which the worker's routes stream; answers
//! older than `PROBE_KEEP` are deleted by the probe's alarm. A load run's answers are kept by a
//! class of their own (`crate::operations::run_archive`).

use std::cell::{Cell, RefCell};

use kvbench_core::operations::fleet::{Called, Member};
use kvbench_core::operations::probe::{
    self, Effect, HintReply, Measured, Probe, ProbeState, Target,
};
use kvbench_core::operations::probes::ProbeConfig;
use kvbench_core::operations::spend::ProbeNow;
use kvbench_core::spec::env::PROBES;
use kvbench_core::stores::durable::LocationHint;
use kvbench_core::{handle, Call, ErrorKind, Isolate, MetadataCache, Served};
use kvbench_core::{StoreError, ValueGen};
use kvbench_wire::kept::FailureKind;
use kvbench_wire::object::{Arm, ArmMember as MemberArm, ProbeStatus, Stopped};
use worker::durable::{ObjectNamespace, State, Stub};
use worker::{durable_object, DurableObject, Env, Method, Request, Response};

use crate::bindings::{env_text, seeded_gen, JsClock, JsTimer};
use crate::operations::directory::Members;
use crate::operations::kept_table::KeptTable;
use crate::operations::object::{self, at, get_json, now_ms, post};
use crate::stores::Stores;

/// How long a member's `/test` may take: its own stores' timeouts bound it (TIMEOUT_MS per call,
/// at most 60 s, a few calls per store); past this the member is reported as timed out.
const MEMBER_TIMEOUT_MS: u64 = 150_000;

#[durable_object(alarm)]
pub struct ProbeObject {
    state: State,
    env: Env,
    /// The probe's machine ([`Probe`]), over its state read once per instance: every event of
    /// the instance is fed to it, and this object only executes its effects.
    probe: RefCell<Option<Probe>>,
    /// The colo, asked once per instance (an object does not move while it runs).
    colo: RefCell<Option<String>>,
    kept: KeptTable,
    /// Measurements this instance ran (a hint probe's `/test`s): its answers' count of
    /// requests served.
    measured: Cell<u64>,
    gen: RefCell<ValueGen>,
    deno_meta: MetadataCache,
}

impl ProbeObject {
    /// Reads the machine's state from storage on the instance's first event (one copy of
    /// this await for every event, not one per caller).
    async fn ready(&self) -> worker::Result<()> {
        if self.probe.borrow().is_none() {
            let stored: Option<serde_json::Value> =
                object::load(&self.state.storage(), "probe").await?;
            let state = stored.as_ref().map(ProbeState::read).unwrap_or_default();
            // Another event may have read it meanwhile: the first machine stays.
            self.probe
                .borrow_mut()
                .get_or_insert_with(|| Probe::new(state));
        }
        Ok(())
    }

    /// Feeds an event to the machine ([`Self::ready`] first).
    fn feed<R>(&self, event: impl FnOnce(&mut Probe) -> R) -> worker::Result<R> {
        let mut machine = self.probe.borrow_mut();
        let machine = machine
            .as_mut()
            .ok_or_else(|| worker::Error::RustError("the probe's state is not read".into()))?;
        Ok(event(machine))
    }

    /// Feeds a result to the machine (read by then: it asked for the effect).
    fn fed(&self, result: impl FnOnce(&mut Probe)) {
        if let Some(machine) = self.probe.borrow_mut().as_mut() {
            result(machine);
        }
    }

    /// The state as the machine has it.
    async fn load(&self) -> worker::Result<ProbeState> {
        self.ready().await?;
        self.feed(|p| p.state().clone())
    }

    /// Executes the machine's effects until it has none. A save or an alarm that fails is fed
    /// back as a failure ([`Probe::handle_failed`]: the chain goes on, best effort) and its
    /// error returned. `own_visits`: each effect but a measurement is a request in flight of
    /// the isolate (an alarm's; a fetch is one already).
    async fn run(&self, own_visits: bool) -> worker::Result<()> {
        let Err(e) = self.execute(own_visits).await else {
            return Ok(());
        };
        self.fed(|p| p.handle_failed(&e.to_string(), now_ms()));
        // A second failure leaves what is still to do for the next event.
        let _ = self.execute(own_visits).await;
        Err(e)
    }

    async fn execute(&self, own_visits: bool) -> worker::Result<()> {
        loop {
            let Some(effect) = self.probe.borrow_mut().as_mut().and_then(Probe::poll) else {
                return Ok(());
            };
            if let Effect::Measure {
                target,
                last_colo,
                first,
            } = effect
            {
                let measured = self.measure_one(&target, last_colo.as_deref(), first).await;
                self.fed(|p| p.handle_measured(measured, now_ms()));
                continue;
            }
            let _visit = own_visits.then(|| crate::in_flight().enter());
            self.execute_one(effect).await?;
        }
    }

    /// One effect other than a measurement. A keep, an expiry or a read is answered at once:
    /// no await comes between it and its result, so no other event does.
    async fn execute_one(&self, effect: Effect) -> worker::Result<()> {
        let storage = self.state.storage();
        let text = |e: worker::Error| e.to_string();
        match effect {
            Effect::Save(state) => object::save(&storage, "probe", &state).await?,
            Effect::Keep { t_ms, line } => {
                let kept = self.kept.keep(t_ms, &line).map_err(text);
                self.fed(|p| p.handle_kept(kept, now_ms()));
            }
            Effect::Expire { before_ms } => {
                let expired = self.kept.expire_before(before_ms).map_err(text);
                self.fed(|p| p.handle_expired(expired, now_ms()));
            }
            Effect::ReadOldest => {
                let oldest = self.kept.oldest_t_ms().map_err(text);
                self.fed(|p| p.handle_oldest(oldest, now_ms()));
            }
            Effect::ArmAt(ms) => storage.set_alarm(at(ms)).await?,
            Effect::Disarm => storage.delete_alarm().await?,
            // Measured by [`Self::execute`].
            Effect::Measure { .. } => {}
        }
        Ok(())
    }

    /// `start` or `tick` ([`Probe::handle_start`], [`Probe::handle_tick`]).
    async fn arm(&self, arm: Arm, start: bool) -> worker::Result<Response> {
        // Only a tick asks whether an alarm is set.
        let alarm_set = !start && self.state.storage().get_alarm().await?.is_some();
        self.ready().await?;
        let armed = self.feed(|p| match start {
            true => p.handle_start(&arm, now_ms()),
            false => p.handle_tick(&arm, alarm_set, now_ms()),
        })?;
        self.run(false).await?;
        crate::respond::message(&armed)
    }

    /// [`Probe::handle_stop`].
    async fn stop(&self) -> worker::Result<Response> {
        self.ready().await?;
        self.feed(Probe::handle_stop)?;
        self.run(false).await?;
        crate::respond::message(&Stopped { stopped: true })
    }

    async fn status(&self) -> worker::Result<Response> {
        let count = self.kept.count()?;
        let alarm = self.state.storage().get_alarm().await?;
        self.ready().await?;
        let status = self.feed(|p| p.status(count, alarm))?;
        crate::respond::message(&status)
    }

    /// The colo this object runs in, from `PROBE_COLO_URL` (Cloudflare's trace), asked once
    /// per instance outside any measurement; "unknown" where it cannot be told.
    async fn colo(&self) -> String {
        if let Some(c) = self.colo.borrow().clone() {
            return c;
        }
        let colo = crate::trace::colo(&self.env)
            .await
            .unwrap_or_else(|| kvbench_wire::trace::UNKNOWN.to_string());
        *self.colo.borrow_mut() = Some(colo.clone());
        colo
    }

    async fn measure_one(&self, target: &Target, last_colo: Option<&str>, first: bool) -> Measured {
        match target {
            Target::Hint(hint) => self.measure_hint(hint, last_colo, first).await,
            Target::Member(member) => self.measure_member(member, last_colo).await,
        }
    }

    /// A hint probe's measurement: `/test` in this object's isolate ([`probe::hint_answer`]).
    async fn measure_hint(&self, hint: &str, last_colo: Option<&str>, first: bool) -> Measured {
        let colo = self.colo().await;
        self.measured.set(self.measured.get() + 1);
        let t_ms = now_ms();
        let reply = self.run_test(&colo, hint).await;
        let handler_ms = kvbench_core::measurement::answer::round_ms(now_ms() - t_ms);
        let reply = HintReply {
            hint,
            colo: &colo,
            last_colo,
            t_ms,
            handler_ms,
            status: reply.status,
            body: &reply.body,
        };
        probe::hint_answer(reply, first)
    }

    /// A member probe's measurement: the member's `/test` over HTTP, with `BENCH_TOKEN`
    /// ([`probe::member_answer`]).
    async fn measure_member(&self, member: &MemberArm, last_colo: Option<&str>) -> Measured {
        let url = probe::member_of(member).test_url();
        let token = env_text(&self.env, kvbench_core::operations::auth::TOKEN_VAR);
        let _visit = crate::in_flight().enter();
        let t_ms = now_ms();
        let called = call_member(&url, token.as_deref(), MEMBER_TIMEOUT_MS).await;
        let call_ms = kvbench_core::measurement::answer::round_ms(now_ms() - t_ms);
        let called = called
            .as_ref()
            .map_err(|(kind, detail)| (*kind, detail.as_str()));
        probe::member_answer(member, called, t_ms, call_ms, last_colo)
    }

    /// `/test` with no query: the deployment's defaults and stores. The Cache API is reported
    /// as not measurable here (an alarm has no request, so no custom-domain zone whose cache
    /// `caches.default` would be).
    async fn run_test(&self, colo: &str, hint: &str) -> kvbench_core::Reply {
        let env = &self.env;
        let cache = Err(StoreError::new(
            ErrorKind::NotConfigured,
            "not measured from a probe: a Durable Object alarm has no request, so no custom-domain zone for caches.default (measure cache with /test on a custom domain)",
        ));
        let stores = Stores::from_env(env, cache, &self.deno_meta);
        let isolate = Isolate {
            gen: &self.gen,
            clock: &JsClock,
            timer: &JsTimer,
            served: Served::Object(self.measured.get()),
            colo: colo.to_string(),
            // The isolate's own: a probe's measurement shares its memory budget with the
            // `/test`s and objects beside it, and its answer's `concurrent` sees them.
            budget: crate::budget(),
            in_flight: crate::in_flight(),
        };
        // `do` measured at an object of this probe's own hint (see `durable::object_name`).
        let query = format!("do_location={hint}");
        let call = Call {
            query: &query,
            authorization: None,
            token: None,
            defaults: crate::bindings::defaults(env),
            run_header: None,
            // The deployment's own call, not a stranger's: admitted without a token (its
            // query keeps nothing, so no run is opened by it).
            open: true,
            keeping: &|| Ok(()),
        };
        let reply = handle(call, &stores, &isolate).await;
        stores.finish().await;
        reply
    }
}

/// The most of a member's answer that is kept (a `/test` answer is a few KiB; the rest of a
/// longer body is dropped, not stored).
const MEMBER_BODY_MAX: usize = 1 << 20;

/// `GET url` with the token as a bearer header, within [`MEMBER_TIMEOUT_MS`]: the status, the
/// checked `cf-placement` and the body. A failure is its kind (`timeout`, `connect`,
/// `transport`) and what happened.
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

/// One call of a member's `/test`: its status, `cf-placement` (shape-checked), handler time from
/// its `Server-Timing`, and body (or what a redirect said) — or why there is none.
async fn call_member(
    url: &str,
    token: Option<&str>,
    timeout_ms: u64,
) -> std::result::Result<Called, (FailureKind, String)> {
    let authorization = token
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|token| format!("Bearer {token}"));
    let headers: Vec<(&str, &str)> = authorization
        .as_deref()
        .map(|a| ("Authorization", a))
        .into_iter()
        .collect();
    // A redirect is never followed: another site's answer would be kept as the member's, and
    // a redirect loop costs a request per hop.
    let request = crate::bindings::js_request("GET", url, &headers, None, true)
        .map_err(|e| (FailureKind::Connect, e))?;
    let call = async {
        let mut response = worker::Fetch::Request(request)
            .send()
            .await
            .map_err(|e| (FailureKind::Connect, e.to_string()))?;
        let status = response.status_code();
        let header = |name: &str| response.headers().get(name).ok().flatten();
        let placement =
            kvbench_core::operations::fleet::placement(header("cf-placement").as_deref());
        let handler_ms =
            kvbench_core::operations::fleet::server_timing_ms(header("server-timing").as_deref());
        let trace_colo =
            kvbench_wire::trace::read_header(header(kvbench_wire::trace::HEADER).as_deref());
        if (300..400).contains(&status) {
            let to = header("location").unwrap_or_default();
            let body =
                format!("a redirect to {to:?}: not followed (a member answers /test itself)");
            return Ok(Called {
                status,
                placement,
                handler_ms,
                trace_colo,
                body,
            });
        }
        let length = header("content-length");
        let body = read_member_body(&mut response, length.as_deref()).await?;
        Ok(Called {
            status,
            placement,
            handler_ms,
            trace_colo,
            body,
        })
    };
    let sleep = worker::Delay::from(std::time::Duration::from_millis(timeout_ms));
    match futures::future::select(std::pin::pin!(call), std::pin::pin!(sleep)).await {
        futures::future::Either::Left((reply, _)) => reply,
        futures::future::Either::Right(_) => Err((
            FailureKind::Timeout,
            format!("no answer within {} s", timeout_ms / 1000),
        )),
    }
}

/// A member's body, read up to [`MEMBER_BODY_MAX`] and no further: a longer announced length is
/// refused unread, and a body without one stops being read at the limit (an endless body would
/// otherwise be buffered until the member timeout, past a Durable Object's 128 MB).
async fn read_member_body(
    response: &mut Response,
    content_length: Option<&str>,
) -> std::result::Result<String, (FailureKind, String)> {
    use futures::StreamExt;
    let over = |n: String| {
        Err((
            FailureKind::Malformed,
            format!(
                "a body of {n}: over the {} KiB a member's answer may take (the rest not read)",
                MEMBER_BODY_MAX >> 10
            ),
        ))
    };
    if let Some(n) = content_length.and_then(|v| v.trim().parse::<u64>().ok()) {
        if n > MEMBER_BODY_MAX as u64 {
            return over(format!("{n} bytes"));
        }
    }
    let mut stream = response
        .stream()
        .map_err(|e| (FailureKind::Transport, e.to_string()))?;
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| (FailureKind::Transport, e.to_string()))?;
        if bytes.len() + chunk.len() > MEMBER_BODY_MAX {
            return over(format!("more than {MEMBER_BODY_MAX} bytes"));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

impl DurableObject for ProbeObject {
    fn new(state: State, env: Env) -> Self {
        let kept = KeptTable::new(state.storage().sql());
        ProbeObject {
            state,
            env,
            probe: RefCell::new(None),
            colo: RefCell::new(None),
            kept,
            measured: Cell::new(0),
            gen: RefCell::new(seeded_gen()),
            deno_meta: MetadataCache::default(),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        // A request in flight of the isolate: a measurement under way counts it in its
        // answer's `concurrent`.
        let _visit = crate::in_flight().enter();
        let url = req.url()?;
        let answer = match (req.method(), url.path()) {
            (Method::Post, "/start") => self.arm(object::json_of(req.text().await)?, true).await,
            (Method::Post, "/tick") => self.arm(object::json_of(req.text().await)?, false).await,
            (Method::Post, "/stop") => self.stop().await,
            (Method::Get, "/status") => self.status().await,
            (Method::Get, "/answers") => match self.load().await {
                Ok(s) => self.kept.page(&url, s.keep_failed),
                Err(e) => Err(e),
            },
            _ => Response::error("no such probe call", 404),
        };
        answer.or_else(|e| Response::error(format!("probe object: {e}"), 500))
    }

    /// A wake ([`Probe::handle_alarm`]): measured until warm and kept, or only expired; the
    /// effects executed, a failure fed back so the chain goes on. A state that cannot be read
    /// is not saved over: the wake is tried again.
    async fn alarm(&self) -> worker::Result<Response> {
        let fleet = env_text(&self.env, kvbench_core::operations::fleet::FLEET_VAR);
        let fed = {
            let _visit = crate::in_flight().enter();
            match self.ready().await {
                Ok(()) => self.feed(|p| p.handle_alarm(fleet.as_deref(), now_ms())),
                Err(e) => Err(e),
            }
        };
        match fed {
            // Said in GET /probes ([`Probe::handle_failed`]).
            Ok(()) => {
                let _ = self.run(true).await;
            }
            Err(_) => {
                let _visit = crate::in_flight().enter();
                let retry = at(now_ms() + probe::UNREAD_RETRY_MS);
                let _ = self.state.storage().set_alarm(retry).await;
            }
        }
        Response::ok("")
    }
}

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

    /// A vantage point's probe object: a hint's is created with that location hint; a
    /// member's with its region's (`fleet-regions.json`), so its call to the member is short
    /// and stable — a member whose label is no known region's, wherever it is first asked for.
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

    /// `POST <call>` to each probe (`start`, `tick`, `stop`), all at once; each probe's JSON
    /// answer, or its error as text, by vantage point, in the points' order. A start or tick
    /// first records the members it arms in the directory (`crate::operations::directory`); the
    /// second value says why that failed.
    pub async fn each(
        &self,
        call: &str,
    ) -> (
        Vec<(Point, Result<serde_json::Value, String>)>,
        Option<String>,
    ) {
        let directory = if call == "stop" {
            None
        } else {
            self.record_members().await.err()
        };
        // All at once, like [`Self::statuses`].
        let calls = self.points().into_iter().map(|point| async move {
            let result = async {
                let stub = self.stub(&point).map_err(|e| e.to_string())?;
                let mut response = post(&stub, call, &self.arm_body(&point)).await?;
                response
                    .json::<serde_json::Value>()
                    .await
                    .map_err(|e| e.to_string())
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

    /// Every probe with its status: this configuration's (asked now), then
    /// [`Self::outside`]'s (the status that found them: each object is asked once).
    pub async fn every_status(&self) -> Vec<(Point, Result<StatusRead, String>)> {
        let points = self.points();
        let statuses = self.statuses(&points).await;
        let mut all: Vec<_> = points.into_iter().zip(statuses).collect();
        all.extend(self.outside().await.into_iter().map(|(p, s)| (p, Ok(s))));
        all
    }

    /// Every probe as the budget counts it ([`probes::ProbeNow`]): this configuration's — the
    /// ones a start or a tick arms — then those outside it, which keep running as they are.
    pub async fn budget_view(&self) -> Vec<ProbeNow> {
        let configured = self.points().len();
        self.every_status()
            .await
            .into_iter()
            .enumerate()
            .map(|(i, (_, read))| {
                probe::probe_now(read.as_ref().ok().map(|r| &r.status), i < configured)
            })
            .collect()
    }

    /// Every vantage point with a probe: this configuration's, then [`Self::outside`]'s.
    pub async fn all_points(&self) -> Vec<Point> {
        let mut points = self.points();
        points.extend(self.outside().await.into_iter().map(|(point, _)| point));
        points
    }

    /// The probes outside this configuration that run or keep answers, with their status:
    /// hint probes started by a `POST /probes/start?hints=` beyond `PROBE_HINTS`, and members
    /// of the directory no longer in `FLEET` — listed, stopped and read like the others, never
    /// left re-arming unseen or keeping answers no route shows. A directory member whose probe
    /// neither runs nor keeps anything is forgotten.
    pub async fn outside(&self) -> Vec<(Point, StatusRead)> {
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
        let mut out = Vec::new();
        let mut forget = Vec::new();
        for (point, status) in candidates.into_iter().zip(statuses) {
            let Ok(status) = status else {
                continue;
            };
            if status.status.lives() {
                out.push((point, status));
            } else if let Point::Member(m) = point {
                forget.push(m.label);
            }
        }
        if let Err(e) = self.directory.forget(forget).await {
            worker::console_error!("fleet directory: forgetting members failed: {e}");
        }
        out
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
    let shown = get_json(stub, "status").await?;
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
