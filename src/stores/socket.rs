//! The TCP stores' byte streams: `connect()` (`worker::Socket`), TLS for `rediss://` or after
//! Postgres's `SSLRequest`.

use std::future::{poll_fn, Future as _};
use std::pin::Pin;

use async_trait::async_trait;
use kvbench_core::spec::env::REDIS_URL;
use kvbench_core::{Connection, Connector, ErrorKind, RedisStore, RedisUrl, StoreError};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use worker::{Env, SecureTransport, Socket};

use crate::bindings::env_text;

/// The Redis store, or why it is not configured.
pub fn redis_store(env: &Env) -> Result<RedisStore<SocketConnector>, StoreError> {
    let url = env_text(env, REDIS_URL).ok_or_else(|| {
        StoreError::new(ErrorKind::NotConfigured, format!("{REDIS_URL} is not set"))
    })?;
    Ok(RedisStore::new(RedisUrl::parse(&url)?, SocketConnector))
}

fn io_error(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::new(ErrorKind::Runtime, format!("{what}: {e}"))
}

pub struct SocketConnector;

/// `connect()` of `cloudflare:sockets` (the wasm tests run inside workerd too, so there is no
/// stand-in).
fn open(host: &str, port: u16, transport: SecureTransport) -> worker::Result<Socket> {
    Socket::builder()
        .secure_transport(transport)
        .connect(host, port)
}

#[async_trait(?Send)]
impl Connector for SocketConnector {
    type Conn = SocketConnection;

    async fn connect(
        &self,
        host: &str,
        port: u16,
        tls: bool,
    ) -> Result<SocketConnection, StoreError> {
        let transport = if tls {
            SecureTransport::On
        } else {
            SecureTransport::Off
        };
        opened(open(host, port, transport).map_err(|e| io_error("connect", e))?).await
    }

    async fn connect_upgradable(
        &self,
        host: &str,
        port: u16,
    ) -> Result<SocketConnection, StoreError> {
        let socket = open(host, port, SecureTransport::StartTls);
        opened(socket.map_err(|e| io_error("connect", e))?).await
    }
}

/// Resolves once the TCP (and TLS) handshake is done: the setup is all in connect_ms.
async fn opened(socket: Socket) -> Result<SocketConnection, StoreError> {
    let socket = SocketConnection(Some(socket));
    if let Some(open) = &socket.0 {
        open.opened().await.map_err(|e| io_error("connect", e))?;
    }
    Ok(socket)
}

/// An open socket, closed when dropped: a call abandoned by a timeout (or a failed one) must not
/// leave the connection open until the runtime collects it.
pub struct SocketConnection(Option<Socket>);

impl SocketConnection {
    fn socket(&mut self) -> Result<&mut Socket, StoreError> {
        self.0.as_mut().ok_or_else(|| io_error("socket", "closed"))
    }

    /// Starts closing the socket without waiting for it: `close()` is issued on the first poll.
    fn start_close(&mut self) {
        if let Some(mut socket) = self.0.take() {
            let mut close = std::pin::pin!(socket.close());
            let waker = futures::task::noop_waker();
            let _ = close
                .as_mut()
                .poll(&mut std::task::Context::from_waker(&waker));
        }
    }
}

impl Drop for SocketConnection {
    fn drop(&mut self) {
        self.start_close();
    }
}

#[async_trait(?Send)]
impl Connection for SocketConnection {
    async fn write_all(&mut self, mut bytes: &[u8]) -> Result<(), StoreError> {
        let socket = self.socket()?;
        while !bytes.is_empty() {
            let n = poll_fn(|cx| Pin::new(&mut *socket).poll_write(cx, bytes))
                .await
                .map_err(|e| io_error("write", e))?;
            bytes = bytes.get(n..).unwrap_or_default();
        }
        poll_fn(|cx| Pin::new(&mut *socket).poll_flush(cx))
            .await
            .map_err(|e| io_error("write", e))
    }

    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, StoreError> {
        let socket = self.socket()?;
        let mut read = ReadBuf::new(buf);
        poll_fn(|cx| Pin::new(&mut *socket).poll_read(cx, &mut read))
            .await
            .map_err(|e| io_error("read", e))?;
        Ok(read.filled().len())
    }

    async fn close(&mut self) {
        self.start_close();
    }

    /// `startTls()` of a socket opened by `connect_upgradable` (with `secureTransport:
    /// "starttls"`, the one kind of socket that accepts it), awaited to its handshake.
    async fn start_tls(&mut self) -> Result<(), StoreError> {
        let plain = self.0.take().ok_or_else(|| io_error("socket", "closed"))?;
        let tls = plain.start_tls();
        tls.opened().await.map_err(|e| io_error("TLS", e))?;
        self.0 = Some(tls);
        Ok(())
    }
}
