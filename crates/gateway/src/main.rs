//! The `upstash-gateway` binary: parse flags, log to stderr, serve until Ctrl-C or SIGTERM.

use anyhow::Context;
use clap::Parser;
use tracing_subscriber::EnvFilter;
use upstash_gateway::config::Args;
use upstash_gateway::{app, server, AppState};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let listen = args.listen;
    let settings = args
        .into_settings()
        .map_err(anyhow::Error::msg)
        .context("invalid flags")?;
    let redis_url = redacted(&settings.redis_url);
    let read_region = settings.read_url.as_deref().map(redacted);
    let admin = settings.admin_token.is_some();
    let faults = settings.faults.clone();
    let limits = settings.connections.clone();
    let state = AppState::new(settings).context("invalid redis url")?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    tracing::info!(
        listen = %listener.local_addr()?,
        redis = %redis_url,
        ?read_region,
        admin_route = admin,
        ?faults,
        ?limits,
        "upstash-gateway ready"
    );
    server::serve_with(listener, app(state), limits, shutdown_signal()).await?;
    tracing::info!("upstash-gateway stopped");
    Ok(())
}

/// The Redis URL without its password, for logs.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***{}", &url[..scheme], &url[at..])
        }
        _ => url.to_owned(),
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
