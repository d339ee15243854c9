//! The accept loop: TCP_NODELAY (a two-part response otherwise stalls ~40 ms on Nagle and
//! delayed ACK), keep-alive within the [`Limits`], and connections dropped when faults ask.

use std::future::Future;
use std::io;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tower::ServiceExt;

use crate::connection::{Connections, Expiry, Limits, Track, TrackedStream, CLOSE_GRACE};
use crate::fault::DropConnection;

/// Returned to hyper for a request whose connection must be dropped: hyper then closes the
/// connection without writing a response.
#[derive(Debug)]
struct ConnectionDropped;

impl std::fmt::Display for ConnectionDropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by fault injection")
    }
}

impl std::error::Error for ConnectionDropped {}

/// Serves `app` on `listener` with the default [`Limits`] until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_with(listener, app, Limits::default(), shutdown).await
}

/// Serves `app` on `listener` within `limits` until `shutdown` completes; connections in flight
/// are then abandoned.
pub async fn serve_with(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let connections = Connections::new(limits);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(err) => {
                    // Usually EMFILE: free a descriptor by shedding the longest-idle
                    // connection, and back off briefly instead of spinning.
                    let shed = connections.shed_one();
                    tracing::warn!(error = %err, shed, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let Some(admission) = connections.admit() else {
            // Every connection is in the middle of a request: none can be shed.
            tracing::debug!(%peer, "connection refused: at the cap and none idle");
            drop(stream);
            continue;
        };
        if let Err(err) = stream.set_nodelay(true) {
            tracing::warn!(error = %err, "could not set TCP_NODELAY");
        }
        let app = app.clone();
        let limits = connections.limits().clone();
        tokio::spawn(async move {
            serve_connection(stream, app, admission.track.clone(), &limits).await;
            tracing::debug!(%peer, "connection closed");
            drop(admission);
        });
    }
}

/// Runs one connection until it ends, times out or is shed; one asked to close gets
/// [`CLOSE_GRACE`] to finish a response.
async fn serve_connection(stream: TcpStream, app: Router, track: Arc<Track>, limits: &Limits) {
    let service_track = track.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let app = app.clone();
        let track = service_track.clone();
        async move {
            track.begin_request();
            let response = app
                .oneshot(req.map(Body::new))
                .await
                .unwrap_or_else(|never| match never {});
            track.end_request();
            if response.extensions().get::<DropConnection>().is_some() {
                Err(ConnectionDropped)
            } else {
                Ok(response)
            }
        }
    });
    let io = TokioIo::new(TrackedStream::new(stream, track.clone()));
    let conn = hyper::server::conn::http1::Builder::new()
        // Header and idle timeouts are this module's (hyper's own starts at idle, so it
        // cannot tell a quiet keep-alive connection from a slow head).
        .header_read_timeout(None)
        .serve_connection(io, service);
    tokio::pin!(conn);
    let mut closing_until: Option<Instant> = None;
    loop {
        let wake = match (closing_until, track.deadline(limits)) {
            (Some(until), _) => until,
            (None, Some((at, _))) => at,
            // Busy: the request has deadlines of its own; look again after an idle period.
            (None, None) => Instant::now() + limits.idle_timeout,
        };
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(error = %err, "connection ended");
                }
                return;
            }
            () = track.shed(), if closing_until.is_none() => {
                tracing::debug!("connection shed for a new one");
                conn.as_mut().graceful_shutdown();
                closing_until = Some(Instant::now() + CLOSE_GRACE);
            }
            () = tokio::time::sleep_until(wake) => {
                if closing_until.is_some() {
                    return;
                }
                match track.deadline(limits) {
                    Some((at, Expiry::SlowHead)) if at <= Instant::now() => {
                        tracing::debug!("request head too slow: closing");
                        // Nothing was answered on this head, so nothing is lost.
                        return;
                    }
                    Some((at, Expiry::Idle)) if at <= Instant::now() => {
                        tracing::debug!("idle: closing");
                        conn.as_mut().graceful_shutdown();
                        closing_until = Some(Instant::now() + CLOSE_GRACE);
                    }
                    // The phase moved on meanwhile: the next turn waits for its deadline.
                    _ => {}
                }
            }
        }
    }
}
