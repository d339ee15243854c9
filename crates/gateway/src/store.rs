//! The Redis side: single commands, non-atomic pipelines and MULTI/EXEC transactions, each on a
//! connection of its own from the [`Pool`], each with a deadline. Scripts get a shorter one: past
//! it the gateway stops the script from another connection (`SCRIPT KILL`, or `FUNCTION KILL`
//! for a function) and answers with Redis' error. Failures say whether the command reached Redis:
//! "not sent" (safe to retry) or "unknown outcome" (it may have run).
//!
//! While a script runs past Redis' `busy-reply-threshold` (5 s by default, about when the gateway
//! stops it), Redis answers every other command BUSY without running it. A request refused that
//! way waits for the script to end and is sent again (a pipeline from the refused command on:
//! nothing after it was sent), for at most the script limit plus [`BUSY_MARGIN`] — so a client
//! sees the script's limit, not Redis' BUSY.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::Notify;
use tokio::time::{timeout_at, Instant};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{RedisError, Value};

use crate::command::Command;
use crate::error::ApiError;
use crate::meter::Meter;
use crate::pool::{Pool, PoolError};
use crate::reply::{self, Budget, Encoding, RenderError, Reply};

/// Limits on how Redis is used; built from flags.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// How long to wait for a reply (and for a connection) before giving up.
    pub timeout: Duration,
    /// How long a request with `EVAL`/`EVALSHA`/`FCALL` may run before its script is stopped.
    pub script_timeout: Duration,
    /// Largest answer one request may get back (JSON bytes); larger is refused.
    pub max_response_bytes: usize,
    /// Redis connections in use at once.
    pub pool_size: usize,
}

/// Why a request got no answer from Redis.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Redis was not reached; nothing ran.
    #[error("ERR redis unavailable: {0} (the command was not sent)")]
    NotSent(String),
    /// Every connection stayed busy until the deadline; nothing was sent.
    #[error("ERR gateway busy: {0} (the command was not sent)")]
    Saturated(String),
    /// The command was sent but no complete answer came back: it may have run.
    #[error("ERR unknown outcome: {0}; the command may have run")]
    UnknownOutcome(String),
    /// The answer would be larger than allowed. The commands ran; their answers are withheld.
    #[error("ERR max response size exceeded: the reply is over {limit} bytes (--max-response-bytes); the commands ran")]
    TooLarge { limit: usize },
}

impl StoreError {
    /// A short, stable name for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotSent(_) => "not_sent",
            Self::Saturated(_) => "saturated",
            Self::UnknownOutcome(_) => "unknown_outcome",
            Self::TooLarge { .. } => "too_large",
        }
    }

    /// 502/503: not sent, safe to retry. 504: sent, no answer, outcome unknown (never 502, which
    /// clients and proxies take as "did not run"). 400: too large, like Upstash's size errors.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NotSent(_) => StatusCode::BAD_GATEWAY,
            Self::Saturated(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::UnknownOutcome(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::TooLarge { .. } => StatusCode::BAD_REQUEST,
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        if !matches!(err, StoreError::TooLarge { .. }) {
            tracing::warn!(kind = err.kind(), error = %err, "redis request failed");
        }
        ApiError {
            status: err.status(),
            message: err.to_string(),
        }
    }
}

impl From<PoolError> for StoreError {
    fn from(err: PoolError) -> Self {
        match err {
            PoolError::Saturated { .. } => Self::Saturated(err.to_string()),
            PoolError::Connect { .. } => Self::NotSent(err.to_string()),
        }
    }
}

/// Why a request's replies could not be had or given.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error("{0}")]
    Redis(#[from] RedisError),
    #[error("{0}")]
    Render(#[from] RenderError),
}

impl From<ReadError> for StoreError {
    fn from(err: ReadError) -> Self {
        match err {
            ReadError::Render(RenderError::TooLarge { limit }) => Self::TooLarge { limit },
            ReadError::Render(e @ RenderError::Protocol(_)) => Self::UnknownOutcome(e.to_string()),
            ReadError::Redis(e) if e.is_io_error() || e.is_connection_dropped() => {
                Self::UnknownOutcome(format!(
                    "the connection to redis failed before the reply: {e}"
                ))
            }
            ReadError::Redis(e) => {
                Self::UnknownOutcome(format!("unexpected reply from redis: {e}"))
            }
        }
    }
}

/// How long past the script limit a request refused BUSY may keep waiting for Redis to come
/// free: the stop (`SCRIPT KILL`) and the killed script's answer take milliseconds.
pub const BUSY_MARGIN: Duration = Duration::from_millis(1_000);

/// How often a request refused BUSY tries again when no script of the gateway's ends sooner
/// (the script may be another client's, straight to Redis).
const BUSY_POLL: Duration = Duration::from_millis(50);

/// A request as the `redis` crate sends it, and what it expects back.
enum Request {
    /// One command, one reply.
    One(redis::Cmd),
    /// Commands, one reply each.
    Pipeline(Vec<redis::Cmd>),
    /// `MULTI`, this many commands, `EXEC`, sent as a plain pipeline (not the crate's atomic
    /// one, which answers a transaction with a queueing error as its own error, not Redis'
    /// `EXECABORT` message): every reply is read, only `EXEC`'s is answered.
    Transaction(redis::Pipeline, usize),
}

/// A command with `args` as its words, exactly as the client sent them.
fn redis_cmd(args: &[Vec<u8>]) -> redis::Cmd {
    let mut cmd = redis::Cmd::new();
    for arg in args {
        cmd.arg(arg.as_slice());
    }
    cmd
}

enum Answer {
    Replies(Vec<Reply>),
    Transaction(Result<Vec<Reply>, String>),
}

/// Redis' refusal while a script or function runs too long; the command did not run.
fn is_busy(reply: &Reply) -> bool {
    matches!(reply, Reply::Error(msg) if msg.starts_with("BUSY"))
}

impl Answer {
    /// Where Redis refused the request as BUSY, so that nothing from there on ran: the first
    /// BUSY reply (a pipeline stops sending at it: [`send`]), or `0` for a transaction discarded
    /// because a command was refused BUSY. `None` when it all ran.
    fn refused_from(&self) -> Option<usize> {
        match self {
            Self::Replies(r) => r.iter().position(is_busy),
            Self::Transaction(Err(msg)) => {
                (msg.starts_with("EXECABORT") && msg.contains(": BUSY")).then_some(0)
            }
            Self::Transaction(Ok(_)) => None,
        }
    }

    /// This answer after the replies of the commands that ran before an earlier try was
    /// refused, with a reply for every command of the request (`commands`): one never sent,
    /// because one before it was refused, says so.
    fn after(self, mut ran: Vec<Reply>, commands: usize) -> Self {
        match self {
            Self::Replies(r) => {
                ran.extend(r);
                while ran.len() < commands {
                    ran.push(Reply::Error(
                        "BUSY not sent: a command before it in the pipeline was refused BUSY"
                            .to_owned(),
                    ));
                }
                Self::Replies(ran)
            }
            transaction => transaction,
        }
    }

    /// Adds to BUSY errors that the gateway waited for the script before giving up.
    fn explain_busy(self, note: &str) -> Self {
        let explain = |reply: Reply| match reply {
            Reply::Error(msg) if msg.starts_with("BUSY") => Reply::Error(msg + note),
            other => other,
        };
        match self {
            Self::Replies(r) => Self::Replies(r.into_iter().map(explain).collect()),
            Self::Transaction(Err(msg)) => Self::Transaction(Err(msg + note)),
            Self::Transaction(Ok(r)) => Self::Transaction(Ok(r)),
        }
    }

    /// Adds to the error of a script the gateway stopped why it was stopped.
    fn explain_kill(self, note: &str) -> Self {
        let explain = |reply: Reply| match reply {
            Reply::Error(msg) if msg.contains("killed by user") => Reply::Error(msg + note),
            other => other,
        };
        match self {
            Self::Replies(r) => Self::Replies(r.into_iter().map(explain).collect()),
            Self::Transaction(Ok(r)) => Self::Transaction(Ok(r.into_iter().map(explain).collect())),
            Self::Transaction(Err(msg)) => Self::Transaction(Err(msg)),
        }
    }
}

/// What `SCRIPT KILL` achieved.
enum Kill {
    Stopped,
    NotBusy,
    Refused(String),
    Failed(String),
}

/// A handle on Redis, shared by every request; clones share the pool.
#[derive(Clone)]
pub struct Store(Arc<Shared>);

struct Shared {
    pool: Pool,
    config: StoreConfig,
    /// Woken whenever a request that ran a script has its answer (the script ended or was
    /// stopped): requests refused BUSY try again then.
    script_ended: Notify,
}

impl Store {
    /// Prepares connections to `url`; nothing is connected until the first command.
    pub fn new(url: &str, config: StoreConfig) -> Result<Self, String> {
        Ok(Self(Arc::new(Shared {
            pool: Pool::new(url, config.pool_size)?,
            config,
            script_ended: Notify::new(),
        })))
    }

    /// Runs one command.
    pub async fn run(&self, command: &Command, encoding: Encoding) -> Result<Reply, StoreError> {
        let request = Request::One(redis_cmd(&command.args));
        let answer = self
            .exchange(request, command.is_script(), encoding)
            .await?;
        match answer {
            Answer::Replies(mut replies) if replies.len() == 1 => Ok(replies.remove(0)),
            _ => unreachable!("a plan of one reply yields one reply"),
        }
    }

    /// Runs commands in one round trip, not atomically: each gets its own reply or error.
    pub async fn pipeline(
        &self,
        commands: &[Command],
        encoding: Encoding,
    ) -> Result<Vec<Reply>, StoreError> {
        let request = Request::Pipeline(commands.iter().map(|c| redis_cmd(&c.args)).collect());
        let scripted = commands.iter().any(Command::is_script);
        match self.exchange(request, scripted, encoding).await? {
            Answer::Replies(replies) => Ok(replies),
            Answer::Transaction(_) => unreachable!("a pipeline plan yields replies"),
        }
    }

    /// Runs commands inside MULTI/EXEC. The inner `Err(msg)` is a transaction Redis refused as a
    /// whole (e.g. `EXECABORT` after a command failed to queue).
    pub async fn transaction(
        &self,
        commands: &[Command],
        encoding: Encoding,
    ) -> Result<Result<Vec<Reply>, String>, StoreError> {
        let mut pipeline = redis::Pipeline::with_capacity(commands.len() + 2);
        pipeline.add_command(redis::cmd("MULTI"));
        for command in commands {
            pipeline.add_command(redis_cmd(&command.args));
        }
        pipeline.add_command(redis::cmd("EXEC"));
        let request = Request::Transaction(pipeline, commands.len());
        let scripted = commands.iter().any(Command::is_script);
        match self.exchange(request, scripted, encoding).await? {
            Answer::Transaction(result) => Ok(result),
            Answer::Replies(_) => unreachable!("a transaction plan yields a transaction"),
        }
    }

    /// Sends `wire` and reads what `plan` expects; refused BUSY as a whole (a script holds
    /// Redis), waits for the script to end and sends it again, until the script limit plus
    /// [`BUSY_MARGIN`] has passed.
    async fn exchange(
        &self,
        request: Request,
        scripted: bool,
        encoding: Encoding,
    ) -> Result<Answer, StoreError> {
        let start = Instant::now();
        let give_up = start + self.0.config.script_timeout + BUSY_MARGIN;
        let commands = match &request {
            Request::Pipeline(cmds) => cmds.len(),
            _ => 1,
        };
        let mut request = Arc::new(request);
        // A pipeline's replies of the commands that ran before one was refused.
        let mut ran = Vec::new();
        loop {
            // Listening before the attempt: a script that ends during it is not missed.
            let ended = self.0.script_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            let answer = self.attempt(&request, scripted, encoding).await?;
            let Some(refused) = answer.refused_from() else {
                return Ok(answer.after(ran, commands));
            };
            let now = Instant::now();
            if now >= give_up {
                let note = format!(
                    " (the gateway waited {} ms for the script to stop: --script-timeout-ms)",
                    (now - start).as_millis()
                );
                return Ok(answer.explain_busy(&note).after(ran, commands));
            }
            // The refused command and those after it did not run (none was sent after it): the
            // next try starts there, so the pipeline still runs in the order it was sent.
            if let (Answer::Replies(replies), Request::Pipeline(cmds)) = (answer, &*request) {
                ran.extend(replies.into_iter().take(refused));
                request = Arc::new(Request::Pipeline(
                    cmds.iter().skip(refused).cloned().collect(),
                ));
            }
            let _ = timeout_at(give_up.min(now + BUSY_POLL), ended).await;
        }
    }

    /// One try of [`Store::exchange`]. A request that runs a script is carried out by a task of
    /// its own, so that if its client goes away (and this future is dropped) the script is still
    /// stopped at the limit instead of keeping Redis busy for everyone.
    async fn attempt(
        &self,
        request: &Arc<Request>,
        scripted: bool,
        encoding: Encoding,
    ) -> Result<Answer, StoreError> {
        if !scripted {
            return self.0.exchange(request, false, encoding).await;
        }
        let shared = self.0.clone();
        let request = request.clone();
        let task = tokio::spawn(async move {
            let answer = shared.exchange(&request, true, encoding).await;
            shared.script_ended.notify_waiters();
            answer
        });
        match task.await {
            Ok(answer) => answer,
            // Only a panic in the task gets here; whether the script ran is unknown.
            Err(err) => Err(StoreError::UnknownOutcome(format!(
                "the request failed: {err}"
            ))),
        }
    }
}

impl Shared {
    /// Sends `request` on a connection of its own and reads its replies, within the deadlines.
    /// The connection goes back to the pool only when every reply was read and answered.
    async fn exchange(
        &self,
        request: &Request,
        scripted: bool,
        encoding: Encoding,
    ) -> Result<Answer, StoreError> {
        let start = Instant::now();
        let deadline = start + self.config.timeout;
        let mut lease = self.pool.lease(deadline).await?;
        let limit = self.config.max_response_bytes;
        let mut budget = Budget::new(limit);
        let meter = lease.conn().meter();
        meter.reset(Meter::allowance(limit));
        let outcome = {
            let read = async {
                tokio::select! {
                    biased;
                    answer = send(lease.conn().redis(), request, encoding, &mut budget) => answer,
                    // The socket stopped reading: the answer would pass the cap.
                    () = meter.spent() => Err(RenderError::TooLarge { limit }.into()),
                }
            };
            tokio::pin!(read);
            if scripted {
                self.await_script(read, start).await
            } else {
                match timeout_at(deadline, read).await {
                    Ok(answer) => answer.map_err(StoreError::from),
                    Err(_) => Err(self.no_reply()),
                }
            }
        };
        // A socket that read its whole allowance reads no more: not for the next request.
        if outcome.is_ok() && !meter.is_spent() {
            lease.release();
        }
        outcome
    }

    /// Waits for a request that runs a script; past the script limit, stops the script and
    /// waits (bounded) for Redis' answer to the killed script.
    async fn await_script<F>(
        &self,
        mut read: Pin<&mut F>,
        start: Instant,
    ) -> Result<Answer, StoreError>
    where
        F: Future<Output = Result<Answer, ReadError>>,
    {
        let limit_ms = self.config.script_timeout.as_millis();
        if let Ok(answer) = timeout_at(start + self.config.script_timeout, read.as_mut()).await {
            return answer.map_err(StoreError::from);
        }
        // The read is paused, not dropped: what Redis sends meanwhile waits in the socket.
        let until = Instant::now() + self.config.timeout;
        match self.kill_script(until).await {
            Kill::Stopped => {
                tracing::warn!(limit_ms = %limit_ms, "stopped a script that ran past the limit");
                let note = format!(" (stopped by the gateway after {limit_ms} ms: --script-timeout-ms)");
                match timeout_at(Instant::now() + self.config.timeout, read).await {
                    Ok(answer) => Ok(answer?.explain_kill(&note)),
                    Err(_) => Err(self.no_reply()),
                }
            }
            // Finished meanwhile (its answer is on the way) or the wait is elsewhere.
            Kill::NotBusy => match timeout_at(until, read).await {
                Ok(answer) => answer.map_err(StoreError::from),
                Err(_) => Err(self.no_reply()),
            },
            Kill::Refused(msg) => Err(StoreError::UnknownOutcome(format!(
                "the script ran past the {limit_ms} ms limit (--script-timeout-ms) and redis refused to stop it ({msg}); it may still be running"
            ))),
            Kill::Failed(msg) => Err(StoreError::UnknownOutcome(format!(
                "the script ran past the {limit_ms} ms limit (--script-timeout-ms) and could not be stopped: {msg}"
            ))),
        }
    }

    /// `SCRIPT KILL` from a connection outside the pool; `FUNCTION KILL` when Redis says the
    /// busy script is a function. Redis only reads it once the script has run for its
    /// `busy-reply-threshold` (default 5 s). If another script started meanwhile, that one is
    /// stopped instead: Redis names no script in `SCRIPT KILL`.
    async fn kill_script(&self, deadline: Instant) -> Kill {
        let attempt = async {
            let mut conn = self
                .pool
                .connect_unpooled(deadline)
                .await
                .map_err(|e| e.to_string())?;
            for kind in ["SCRIPT", "FUNCTION"] {
                let kill = redis::cmd(kind).arg("KILL").to_owned();
                match conn
                    .redis()
                    .req_packed_command(&kill)
                    .await
                    .map_err(|e| e.to_string())?
                {
                    Value::ServerError(err) => {
                        let msg = reply::error_message(&err);
                        if msg.starts_with("NOTBUSY") {
                            return Ok(Kill::NotBusy);
                        }
                        // "BUSY ... You can only call FUNCTION KILL": the other kind is running.
                        if !msg.starts_with("BUSY") {
                            return Ok(Kill::Refused(msg));
                        }
                    }
                    _ => return Ok(Kill::Stopped),
                }
            }
            Err("redis answered BUSY to both SCRIPT KILL and FUNCTION KILL".to_owned())
        };
        match timeout_at(deadline, attempt).await {
            Ok(Ok(kill)) => kill,
            Ok(Err(msg)) => Kill::Failed(msg),
            Err(_) => Kill::Failed("no answer to SCRIPT KILL in time".to_owned()),
        }
    }

    fn no_reply(&self) -> StoreError {
        StoreError::UnknownOutcome(format!(
            "no reply from redis within {} ms (--redis-timeout-ms)",
            self.config.timeout.as_millis()
        ))
    }
}

/// Sends `request` and renders its replies. The crate reads each reply whole; the budget is
/// charged as they are rendered.
///
/// A pipeline's commands go out one after the other on the one connection, each sent once the
/// previous one answered: Redis runs them in the order they were sent, and each reply is
/// rendered as it arrives, so an answer that passes the budget stops early (and the connection
/// is closed) instead of first holding every reply — 60 `GET`s of 5 MB would hold 300 MB.
/// Started all at once, the crate's bounded queue (50 requests per connection) let later
/// commands overtake earlier ones under load (500 `RPUSH`es came back in reversed runs of ~20 in
/// a fresh clone's run); a round trip per command on loopback is the price of the order.
async fn send(
    conn: &mut MultiplexedConnection,
    request: &Request,
    encoding: Encoding,
    budget: &mut Budget,
) -> Result<Answer, ReadError> {
    match request {
        Request::One(cmd) => {
            let value = conn.req_packed_command(cmd).await?;
            Ok(Answer::Replies(vec![reply::render(
                &value, encoding, budget,
            )?]))
        }
        Request::Pipeline(cmds) => {
            let mut replies = Vec::with_capacity(cmds.len().min(4096));
            for cmd in cmds {
                let value = conn.send_packed_command(cmd).await?;
                let reply = reply::render(&value, encoding, budget)?;
                let refused = is_busy(&reply);
                replies.push(reply);
                // Refused BUSY (a script holds Redis): nothing after it is sent, so that the
                // wait for the script resumes from it in order ([`Store::exchange`]).
                if refused {
                    break;
                }
            }
            Ok(Answer::Replies(replies))
        }
        Request::Transaction(pipeline, n) => {
            // `+OK` to MULTI, then `+QUEUED` or an error per command (an error makes EXEC
            // answer EXECABORT, which is what the client gets), then EXEC's reply.
            let values = conn.req_packed_commands(pipeline, 0, n + 2).await?;
            let exec = values
                .last()
                .ok_or_else(|| RenderError::Protocol("no reply to EXEC".to_owned()))?;
            Ok(Answer::Transaction(reply::render_exec(
                exec, encoding, budget,
            )?))
        }
    }
}
