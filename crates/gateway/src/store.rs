//! The Redis side: one reconnecting, multiplexed connection that runs single commands,
//! non-atomic pipelines and MULTI/EXEC transactions, keeping Redis error replies as data.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Value};

use crate::command::Command;
use crate::error::ApiError;
use crate::resp::server_error_message;

/// The answer to one command: a reply, or the message of a Redis error reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Value(Value),
    Error(String),
}

impl Reply {
    fn from_value(value: Value) -> Self {
        match value {
            Value::ServerError(err) => Self::Error(server_error_message(&err)),
            other => Self::Value(other),
        }
    }
}

/// A handle on Redis; cheap to clone, all clones share one connection.
#[derive(Clone)]
pub struct Store {
    conn: ConnectionManager,
}

impl Store {
    /// Prepares a connection to `url` without connecting: the first command connects, and a lost
    /// connection is re-established in the background (the commands in flight fail).
    pub fn new(url: &str, response_timeout: Duration) -> Result<Self, RedisError> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(response_timeout))
            .set_number_of_retries(3);
        Ok(Self {
            conn: client.get_connection_manager_lazy(config)?,
        })
    }

    /// Runs one command. `Err` only when Redis could not be asked or did not answer.
    pub async fn run(&self, command: &Command) -> Result<Reply, ApiError> {
        let mut conn = self.conn.clone();
        match to_cmd(command).query_async::<Value>(&mut conn).await {
            Ok(value) => Ok(Reply::from_value(value)),
            Err(err) => server_reply(err),
        }
    }

    /// Runs commands in one round trip, not atomically: each gets its own reply or error.
    pub async fn pipeline(&self, commands: &[Command]) -> Result<Vec<Reply>, ApiError> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for command in commands {
            pipe.add_command(to_cmd(command));
        }
        let values = self.query_pipe(&pipe).await?;
        Ok(values.into_iter().map(Reply::from_value).collect())
    }

    /// Runs commands inside MULTI/EXEC. The outer `Ok(Err(msg))` is a transaction Redis refused
    /// as a whole (e.g. `EXECABORT` after a command failed to queue).
    pub async fn transaction(
        &self,
        commands: &[Command],
    ) -> Result<Result<Vec<Reply>, String>, ApiError> {
        // MULTI, the commands and EXEC go out as one pipeline: the multiplexed connection writes a
        // pipeline contiguously, so no other request's command can land inside the transaction.
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        pipe.cmd("MULTI");
        for command in commands {
            pipe.add_command(to_cmd(command));
        }
        pipe.cmd("EXEC");
        let mut values = self.query_pipe(&pipe).await?;
        match values.pop() {
            Some(Value::Array(results)) => {
                Ok(Ok(results.into_iter().map(Reply::from_value).collect()))
            }
            Some(Value::ServerError(err)) => Ok(Err(server_error_message(&err))),
            Some(Value::Nil) => Ok(Err("EXECABORT Transaction discarded".to_owned())),
            other => Err(ApiError::bad_gateway(format!(
                "ERR unexpected EXEC reply from redis: {other:?}"
            ))),
        }
    }

    async fn query_pipe(&self, pipe: &redis::Pipeline) -> Result<Vec<Value>, ApiError> {
        let mut conn = self.conn.clone();
        pipe.query_async::<Vec<Value>>(&mut conn)
            .await
            .map_err(unavailable)
    }
}

fn to_cmd(command: &Command) -> redis::Cmd {
    let mut cmd = redis::Cmd::new();
    for arg in &command.args {
        cmd.arg(arg.as_slice());
    }
    cmd
}

/// A Redis error reply is an answer (400 upstream of here); anything else means Redis is unreachable.
fn server_reply(err: RedisError) -> Result<Reply, ApiError> {
    match err.code() {
        Some(code) => Ok(Reply::Error(match err.detail() {
            Some(detail) => format!("{code} {detail}"),
            None => code.to_owned(),
        })),
        None => Err(unavailable(err)),
    }
}

fn unavailable(err: RedisError) -> ApiError {
    tracing::warn!(error = %err, "redis request failed");
    ApiError::bad_gateway(format!("ERR redis unavailable: {err}"))
}
