//! The accept loop: TCP_NODELAY on every connection (a response written in two parts otherwise
//! stalls ~40 ms on Nagle + delayed ACK), HTTP/1.1 keep-alive, and connections closed unanswered
//! when fault injection asks for it.

use std::future::Future;
use std::io;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tower::ServiceExt;

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

/// Serves `app` on `listener` until `shutdown` completes; connections in flight are then abandoned.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(err) => {
                    // Usually EMFILE: back off briefly instead of spinning.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        if let Err(err) = stream.set_nodelay(true) {
            tracing::warn!(error = %err, "could not set TCP_NODELAY");
        }
        let app = app.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let app = app.clone();
                async move {
                    let response = app
                        .oneshot(req.map(Body::new))
                        .await
                        .unwrap_or_else(|never| match never {});
                    if response.extensions().get::<DropConnection>().is_some() {
                        Err(ConnectionDropped)
                    } else {
                        Ok(response)
                    }
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            if let Err(err) = conn.await {
                tracing::debug!(%peer, error = %err, "connection ended");
            }
        });
    }
}
