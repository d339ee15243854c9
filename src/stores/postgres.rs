//! The `postgres` and `hyperdrive` stores' glue: the `POSTGRES_URL` secret, or the
//! `BENCH_HYPERDRIVE` binding's connection string, over `connect()` sockets.

use kvbench_core::spec::env::{BENCH_HYPERDRIVE, POSTGRES_URL};
use kvbench_core::{ErrorKind, PgUrl, PostgresStore, StoreError};
use worker::Env;

use crate::bindings::env_text;
use crate::stores::socket::SocketConnector;

/// The Postgres store, or why it is not configured.
pub fn postgres_store(env: &Env) -> Result<PostgresStore<SocketConnector>, StoreError> {
    let url = env_text(env, POSTGRES_URL).ok_or_else(|| {
        StoreError::new(
            ErrorKind::NotConfigured,
            format!("{POSTGRES_URL} is not set"),
        )
    })?;
    let url = PgUrl::parse(&url, POSTGRES_URL)?;
    Ok(PostgresStore::new(url, SocketConnector, "Postgres", nfkc))
}

/// The same database through Hyperdrive, or why it is not configured.
pub fn hyperdrive_store(env: &Env) -> Result<PostgresStore<SocketConnector>, StoreError> {
    let binding = env.hyperdrive(BENCH_HYPERDRIVE).map_err(|_| {
        StoreError::new(
            ErrorKind::NotConfigured,
            format!(
                "{BENCH_HYPERDRIVE} is not bound (npm run deploy binds it when POSTGRES_URL is \
                 given)"
            ),
        )
    })?;
    let mut url = PgUrl::parse(&binding.connection_string(), BENCH_HYPERDRIVE)?;
    url.host = binding.host();
    url.port = binding.port();
    Ok(PostgresStore::new(url, SocketConnector, "Hyperdrive", nfkc))
}

/// Unicode NFKC by the runtime (`String.prototype.normalize`, its ICU tables), for SASLprep of
/// a non-ASCII password: the wasm carries no normalization tables of its own.
pub fn nfkc(s: &str) -> String {
    js_sys::JsString::from(s).normalize("NFKC").into()
}
