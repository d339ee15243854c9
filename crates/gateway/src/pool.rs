//! Redis connections: one per request in flight, never shared, so a slow command (a Lua busy
//! loop) holds only its own connection and a command that timed out cannot leave a reply behind
//! for the next one. Idle connections are kept for reuse and checked before each use (a
//! connection Redis closed, e.g. by `CLIENT KILL`, is replaced, not handed out); a connection
//! that failed or timed out is dropped, never returned.

use std::io;
use std::sync::Mutex;

use percent_encoding::percent_decode_str;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::resp::{self, Budget, Encoding, Reply};

/// Where Redis is and how to log in: parsed from `redis://[[user]:password@]host[:port][/db]`.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisAddr {
    pub host: String,
    pub port: u16,
    pub username: Option<String>,
    password: Option<String>,
    pub db: u32,
}

impl std::fmt::Debug for RedisAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never prints the password.
        f.debug_struct("RedisAddr")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

impl RedisAddr {
    /// Parses a `redis://` URL. TLS (`rediss://`) and unix sockets are not supported.
    pub fn parse(url: &str) -> Result<Self, String> {
        let rest = url.strip_prefix("redis://").ok_or(
            "the redis url must start with redis:// (TLS and unix sockets are not supported)",
        )?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        if path.contains('?') || authority.contains('?') {
            return Err("the redis url must not have query parameters".into());
        }
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        let decode = |s: &str| -> Result<String, String> {
            percent_decode_str(s)
                .decode_utf8()
                .map(|c| c.into_owned())
                .map_err(|_| "the redis url's credentials are not UTF-8".to_owned())
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(info) => match info.split_once(':') {
                Some((user, pass)) => (
                    Some(decode(user)?).filter(|u| !u.is_empty()),
                    Some(decode(pass)?),
                ),
                None => (Some(decode(info)?).filter(|u| !u.is_empty()), None),
            },
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or("unclosed [ in the redis url")?;
            (host, after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err("the redis url has no host".into());
        }
        let port = match port {
            None | Some("") => 6379,
            Some(p) => p
                .parse()
                .map_err(|_| format!("bad port {p:?} in the redis url"))?,
        };
        let db = match path {
            "" => 0,
            p => p
                .parse()
                .map_err(|_| format!("bad database {p:?} in the redis url"))?,
        };
        Ok(Self {
            host: host.to_owned(),
            port,
            username,
            password,
            db,
        })
    }
}

/// Why a connection could not be had. The command was not sent in either case.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("cannot connect to redis at {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("all {size} redis connections stayed busy")]
    Saturated { size: usize },
}

/// One Redis connection, used by one request at a time.
pub struct Conn {
    io: BufReader<TcpStream>,
}

/// The outcome of writing a request: how far it got matters, because bytes that reached
/// Redis may have run.
#[derive(Debug)]
pub struct SendError {
    pub written: usize,
    pub error: io::Error,
}

impl Conn {
    /// Connects and logs in (`AUTH`, `SELECT`), all before `deadline`.
    async fn open(addr: &RedisAddr, deadline: Instant) -> Result<Self, PoolError> {
        let fail = |reason: String| PoolError::Connect {
            addr: format!("{}:{}", addr.host, addr.port),
            reason,
        };
        let stream = tokio::time::timeout_at(
            deadline,
            TcpStream::connect((addr.host.as_str(), addr.port)),
        )
        .await
        .map_err(|_| fail("connect timed out".into()))?
        .map_err(|e| fail(e.to_string()))?;
        stream.set_nodelay(true).map_err(|e| fail(e.to_string()))?;
        let mut conn = Self {
            io: BufReader::with_capacity(64 * 1024, stream),
        };
        let mut hello = Vec::new();
        let mut expected = 0;
        if let Some(password) = &addr.password {
            let mut auth = vec![b"AUTH".to_vec()];
            auth.extend(addr.username.iter().map(|u| u.clone().into_bytes()));
            auth.push(password.clone().into_bytes());
            resp::encode_command(&mut hello, &auth);
            expected += 1;
        }
        if addr.db != 0 {
            resp::encode_command(
                &mut hello,
                &[b"SELECT".to_vec(), addr.db.to_string().into()],
            );
            expected += 1;
        }
        if expected > 0 {
            let login = async {
                conn.send(&hello, deadline)
                    .await
                    .map_err(|e| e.error.to_string())?;
                for _ in 0..expected {
                    match conn.read(Encoding::Utf8, &mut Budget::new(4096)).await {
                        Ok(Reply::Json(_)) => {}
                        Ok(Reply::Error(msg)) => return Err(msg),
                        Err(e) => return Err(e.to_string()),
                    }
                }
                Ok(())
            };
            tokio::time::timeout_at(deadline, login)
                .await
                .map_err(|_| fail("login timed out".into()))?
                .map_err(fail)?;
        }
        Ok(conn)
    }

    /// Whether an idle connection can be used: Redis has not closed it and sent nothing
    /// unasked. Does not wait.
    fn is_reusable(&self) -> bool {
        if !self.io.buffer().is_empty() {
            return false;
        }
        let mut probe = [0u8; 1];
        match self.io.get_ref().try_read(&mut probe) {
            Err(e) => e.kind() == io::ErrorKind::WouldBlock,
            // Ok(0) is end of stream; any byte is a reply nobody asked for.
            Ok(_) => false,
        }
    }

    /// Writes `wire` completely before `deadline` (Redis may stop reading, e.g. during a
    /// script), reporting how much was written if that fails: one `write` either writes or
    /// not, so the count is exact even on timeout. The loop makes progress on each turn or ends.
    pub async fn send(&mut self, wire: &[u8], deadline: Instant) -> Result<(), SendError> {
        let stream = self.io.get_mut();
        let mut written = 0;
        while written < wire.len() {
            let error =
                match tokio::time::timeout_at(deadline, stream.write(&wire[written..])).await {
                    Ok(Ok(n)) if n > 0 => {
                        written += n;
                        continue;
                    }
                    Ok(Ok(_)) => io::ErrorKind::WriteZero.into(),
                    Ok(Err(error)) => error,
                    Err(_) => io::Error::new(io::ErrorKind::TimedOut, "redis stopped reading"),
                };
            return Err(SendError { written, error });
        }
        Ok(())
    }

    /// Reads one reply.
    pub async fn read(
        &mut self,
        encoding: Encoding,
        budget: &mut Budget,
    ) -> Result<Reply, resp::ReadError> {
        resp::read_reply(&mut self.io, encoding, budget).await
    }

    /// Reads the reply to `EXEC`.
    pub async fn read_exec(
        &mut self,
        encoding: Encoding,
        budget: &mut Budget,
    ) -> Result<Result<Vec<Reply>, String>, resp::ReadError> {
        resp::read_exec_reply(&mut self.io, encoding, budget).await
    }
}

/// Connections to one Redis: at most `size` in use at once, idle ones kept for reuse.
pub struct Pool {
    addr: RedisAddr,
    size: usize,
    idle: Mutex<Vec<Conn>>,
    in_use: Semaphore,
}

/// A connection lent to one request. Dropped without [`Lease::release`], the connection is
/// closed: that is what happens to one that failed, timed out or was left mid-reply.
pub struct Lease<'a> {
    pool: &'a Pool,
    conn: Option<Conn>,
    _slot: SemaphorePermit<'a>,
}

impl Pool {
    pub fn new(addr: RedisAddr, size: usize) -> Self {
        let size = size.max(1);
        Self {
            addr,
            size,
            idle: Mutex::new(Vec::new()),
            in_use: Semaphore::new(size),
        }
    }

    pub fn addr(&self) -> &RedisAddr {
        &self.addr
    }

    /// A live connection, waiting until `deadline` for a free slot.
    pub async fn lease(&self, deadline: Instant) -> Result<Lease<'_>, PoolError> {
        let slot = tokio::time::timeout_at(deadline, self.in_use.acquire())
            .await
            .map_err(|_| PoolError::Saturated { size: self.size })?
            .expect("the pool's semaphore is never closed");
        let conn = match self.take_idle() {
            Some(conn) => conn,
            None => Conn::open(&self.addr, deadline).await?,
        };
        Ok(Lease {
            pool: self,
            conn: Some(conn),
            _slot: slot,
        })
    }

    /// A connection outside the pool's count, for `SCRIPT KILL` while the pool may be full.
    pub async fn connect_unpooled(&self, deadline: Instant) -> Result<Conn, PoolError> {
        Conn::open(&self.addr, deadline).await
    }

    /// An idle connection that is still usable; dead ones found on the way are dropped. Bounded
    /// by the number of idle connections.
    fn take_idle(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(conn) = idle.pop() {
            if conn.is_reusable() {
                return Some(conn);
            }
        }
        None
    }

    fn put_idle(&self, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.size {
            idle.push(conn);
        }
    }
}

impl Lease<'_> {
    pub fn conn(&mut self) -> &mut Conn {
        self.conn
            .as_mut()
            .expect("a lease holds a connection until released")
    }

    /// Replaces the connection with a new one (after a write that sent nothing failed).
    pub async fn reconnect(&mut self, deadline: Instant) -> Result<(), PoolError> {
        self.conn = None;
        self.conn = Some(Conn::open(&self.pool.addr, deadline).await?);
        Ok(())
    }

    /// Gives a connection whose every reply was read back to the pool.
    pub fn release(mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.put_idle(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_urls_parse() {
        let a = RedisAddr::parse("redis://127.0.0.1:6390").unwrap();
        assert_eq!((a.host.as_str(), a.port, a.db), ("127.0.0.1", 6390, 0));
        assert_eq!((a.username, a.password), (None, None));

        let a = RedisAddr::parse("redis://:p%40ss@localhost/3").unwrap();
        assert_eq!((a.host.as_str(), a.port, a.db), ("localhost", 6379, 3));
        assert_eq!((a.username, a.password.as_deref()), (None, Some("p@ss")));

        let a = RedisAddr::parse("redis://bob:secret@[::1]:7000/").unwrap();
        assert_eq!((a.host.as_str(), a.port), ("::1", 7000));
        assert_eq!(a.username.as_deref(), Some("bob"));
        assert!(!format!("{a:?}").contains("secret"));

        for bad in [
            "rediss://h:1",
            "http://h",
            "redis://",
            "redis://h:port",
            "redis://h/db",
            "redis://h?x=1",
            "redis://[::1",
        ] {
            assert!(RedisAddr::parse(bad).is_err(), "{bad}");
        }
    }
}
