//! Redis connections of the `redis` crate in a `deadpool` pool, one per request in flight and
//! never shared (a slow command holds only its own; a timed-out one leaves no reply behind). An
//! idle connection is checked without a round trip (the crate's driver task ends when Redis
//! closes it) and a failed one dropped. Not `deadpool-redis`/`bb8-redis`: their `PING` per
//! checkout doubles a request's round trips, and `bb8` retries a refused connect.

use std::sync::Arc;
use std::time::Duration;

use deadpool::managed::{self, Metrics, RecycleError, RecycleResult, Timeouts};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo};
use redis::{ProtocolVersion, RedisConnectionInfo};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::meter::{Meter, Metered};

/// Why a connection could not be had. The command was not sent in either case.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("cannot connect to redis at {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("all {size} redis connections stayed busy")]
    Saturated { size: usize },
}

/// Where Redis is and how to log in, from a `redis://` URL parsed by the `redis` crate.
#[derive(Clone)]
struct Target {
    host: String,
    port: u16,
    login: RedisConnectionInfo,
}

impl Target {
    /// Parses `url`. Only plain TCP and RESP2: the JSON mapping is RESP2's (see `reply`).
    fn parse(url: &str) -> Result<Self, String> {
        let info: ConnectionInfo = url
            .into_connection_info()
            .map_err(|e| format!("bad redis url: {e}"))?;
        let (host, port) = match info.addr() {
            ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
            _ => return Err("the redis url must be redis://host[:port] (TLS and unix sockets are not supported)".into()),
        };
        if info.redis_settings().protocol() != ProtocolVersion::RESP2 {
            return Err("the redis url must not ask for RESP3: the gateway speaks RESP2".into());
        }
        // CLIENT SETINFO is a command of the crate's, not a client's.
        let login = info.redis_settings().clone().set_skip_set_lib_name();
        Ok(Self { host, port, login })
    }

    fn shown(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Connects and logs in (`AUTH`, `SELECT`).
    async fn connect(&self) -> Result<Conn, String> {
        let stream = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        // The gateway keeps its own deadlines (the crate's default answers in 500 ms or fails).
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(None)
            .set_response_timeout(None);
        let meter = Meter::unlimited();
        let stream = Metered::new(stream, meter.clone());
        let (redis, driver) = MultiplexedConnection::new_with_config(&self.login, stream, config)
            .await
            .map_err(|e| e.to_string())?;
        let driver = tokio::spawn(driver).abort_handle();
        Ok(Conn {
            redis,
            driver,
            meter,
        })
    }
}

/// One Redis connection, used by one request at a time. Dropping it closes the socket.
pub struct Conn {
    redis: MultiplexedConnection,
    /// The crate's task that writes and reads the socket; it ends when the socket does.
    driver: tokio::task::AbortHandle,
    /// What the current request may still read from the socket.
    meter: Arc<Meter>,
}

impl Conn {
    pub fn meter(&self) -> Arc<Meter> {
        self.meter.clone()
    }

    pub fn redis(&mut self) -> &mut MultiplexedConnection {
        &mut self.redis
    }

    /// Whether Redis closed the connection or its socket failed: the driver ends on either.
    fn is_closed(&self) -> bool {
        self.driver.is_finished()
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // The crate's driver task owns the socket; a connection with a reply still due must not
        // linger in it.
        self.driver.abort();
    }
}

/// Creates connections for the pool and checks idle ones before reuse.
struct Manager(Target);

impl managed::Manager for Manager {
    type Type = Conn;
    type Error = String;

    async fn create(&self) -> Result<Conn, String> {
        self.0.connect().await
    }

    async fn recycle(&self, conn: &mut Conn, _: &Metrics) -> RecycleResult<String> {
        if conn.is_closed() {
            return Err(RecycleError::message("closed by redis"));
        }
        Ok(())
    }
}

/// Connections to one Redis: at most `size` in use at once, idle ones kept for reuse.
pub struct Pool {
    pool: managed::Pool<Manager>,
    target: Target,
    size: usize,
}

/// A connection lent to one request. Dropped without [`Lease::release`], the connection is
/// closed: that is what happens to one that failed, timed out or was left mid-reply.
pub struct Lease {
    object: Option<managed::Object<Manager>>,
}

impl Pool {
    /// Parses `url`; nothing is connected until the first lease.
    pub fn new(url: &str, size: usize) -> Result<Self, String> {
        let size = size.max(1);
        let target = Target::parse(url)?;
        let pool = managed::Pool::builder(Manager(target.clone()))
            .max_size(size)
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self { pool, target, size })
    }

    /// A live connection, waiting until `deadline` for a free slot.
    pub async fn lease(&self, deadline: Instant) -> Result<Lease, PoolError> {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let timeouts = Timeouts {
            wait: Some(left),
            create: Some(left),
            recycle: Some(left),
        };
        let connect = |reason: String| PoolError::Connect {
            addr: self.target.shown(),
            reason,
        };
        match self.pool.timeout_get(&timeouts).await {
            Ok(object) => Ok(Lease {
                object: Some(object),
            }),
            Err(managed::PoolError::Timeout(managed::TimeoutType::Wait)) => {
                Err(PoolError::Saturated { size: self.size })
            }
            Err(managed::PoolError::Timeout(_)) => Err(connect("connect timed out".into())),
            Err(managed::PoolError::Backend(reason)) => Err(connect(reason)),
            Err(other) => Err(connect(other.to_string())),
        }
    }

    /// A connection outside the pool's count, for `SCRIPT KILL` while the pool may be full.
    pub async fn connect_unpooled(&self, deadline: Instant) -> Result<Conn, PoolError> {
        let fail = |reason: String| PoolError::Connect {
            addr: self.target.shown(),
            reason,
        };
        tokio::time::timeout_at(deadline, self.target.connect())
            .await
            .map_err(|_| fail("connect timed out".into()))?
            .map_err(fail)
    }
}

impl Lease {
    pub fn conn(&mut self) -> &mut Conn {
        self.object
            .as_mut()
            .expect("a lease holds a connection until released")
    }

    /// Gives a connection whose every reply was read back to the pool.
    pub fn release(mut self) {
        // Dropping the object returns it to the pool.
        self.object.take();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(object) = self.object.take() {
            // Taken out of the pool and dropped: the socket closes.
            drop(managed::Object::take(object));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_urls_parse_through_the_crate() {
        let t = Target::parse("redis://127.0.0.1:6390").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.login.db()),
            ("127.0.0.1", 6390, 0)
        );
        assert_eq!((t.login.username(), t.login.password()), (None, None));

        let t = Target::parse("redis://:p%40ss@localhost/3").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.login.db()),
            ("localhost", 6379, 3)
        );
        assert_eq!(t.login.password(), Some("p@ss"));

        let t = Target::parse("redis://bob:secret@[::1]:7000/").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 7000));
        assert_eq!(t.login.username(), Some("bob"));
        assert!(t.login.skip_set_lib_name());

        for bad in [
            "rediss://h:1",
            "http://h",
            "redis://h:port",
            "redis://h/db",
            "redis+unix:///tmp/redis.sock",
            "redis://h/?protocol=resp3",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }
}
