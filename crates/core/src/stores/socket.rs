//! The byte streams the TCP stores (`redis`, `postgres`) talk over: a [`Connector`] opens a
//! [`Connection`] — `cloudflare:sockets` in the worker, TCP or a scripted server in tests — so
//! the protocol clients are the same code on both.

use async_trait::async_trait;

use crate::error::{ErrorKind, StoreError};

/// Opens byte streams: `connect()` (`cloudflare:sockets`) in the worker, TCP or a scripted
/// server in tests.
#[async_trait(?Send)]
pub trait Connector {
    type Conn: Connection;
    /// Opens a connection to `host:port` (TLS when `tls`) and waits until it is established.
    async fn connect(&self, host: &str, port: u16, tls: bool) -> Result<Self::Conn, StoreError>;
    /// Opens a plain connection that [`Connection::start_tls`] can upgrade later, for a
    /// protocol that asks the server first (Postgres's `SSLRequest`).
    async fn connect_upgradable(&self, host: &str, port: u16) -> Result<Self::Conn, StoreError> {
        self.connect(host, port, false).await
    }
}

/// One open byte stream. Dropping a pending call abandons it (that is how timeouts cancel).
#[async_trait(?Send)]
pub trait Connection {
    async fn write_all(&mut self, bytes: &[u8]) -> Result<(), StoreError>;
    /// Reads what is available into `buf`; `Ok(0)` means the peer closed the connection.
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, StoreError>;
    /// Closes the connection; errors are of no interest once the measurement is over.
    async fn close(&mut self);
    /// Upgrades a connection from [`Connector::connect_upgradable`] to TLS, once the server
    /// agreed to it.
    async fn start_tls(&mut self) -> Result<(), StoreError> {
        Err(StoreError::new(
            ErrorKind::Connect,
            "this connection cannot be upgraded to TLS",
        ))
    }
}
