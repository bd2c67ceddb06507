//! The HTTP server: /metrics, /-/healthy, /-/ready, the JSON API under
//! /api/v1/ and the built-in web view at / ([`web`]).
//!
//! `serve(listener, ..., shutdown)`: the caller binds the socket and owns
//! shutdown, so tests bind 127.0.0.1:0 and talk real TCP. Connections are
//! bounded by a semaphore, headers by size and time, and every request by a
//! timeout. A scrape renders the latest snapshot; it never waits on NVML.
//!
//! With a web configuration ([`webconfig`], `--web-config`) the same server
//! speaks TLS and asks for basic auth on every path: [`serve_secured`].

mod alerts_api;
pub mod auth;
mod gpus;
mod history_api;
mod routes;
pub mod tls;
pub mod tls_reload;
pub mod web;
pub mod webconfig;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tracing::{debug, warn};

use crate::exporter::Exporter;
use crate::sampler::{Progress, SnapshotReceiver};

pub use routes::Readiness;
pub use webconfig::WebSecurity;

/// What the handlers read.
#[derive(Debug)]
pub struct HttpState {
    /// Encodes /metrics.
    pub exporter: Exporter,
    /// The latest snapshot, for readiness, the web view and the API.
    pub snapshots: SnapshotReceiver,
    /// Snapshot age beyond which the agent is not ready.
    pub stale_after: Duration,
    /// The sampler's tick progress, to explain a stall.
    pub progress: Arc<Progress>,
    /// The history database, when history is on (it may open after the
    /// agent started: a 503 until then).
    pub history: Option<HistoryApi>,
    /// The alert rules' latest state, when alerting runs.
    pub alerts: Option<crate::alerting::AlertsReceiver>,
    /// The silences, when history is on (they are stored there, so they
    /// arrive when the database opens).
    pub silences: Option<crate::history::attach::Slot<crate::alerting::Silences>>,
}

/// What the history endpoints read.
#[derive(Debug, Clone)]
pub struct HistoryApi {
    /// The database, once open.
    pub store: crate::history::attach::Slot<crate::history::Store>,
    /// Its retention, to pick the tier that covers a range.
    pub retention: crate::history::Retention,
}

/// Limits of the server.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Per-request time limit, header reading included.
    pub request_timeout: Duration,
}

/// Largest request head accepted (request line + headers).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Serves until `shutdown` turns true, then lets open requests finish (for at
/// most the request timeout).
pub async fn serve(
    listener: TcpListener,
    state: Arc<HttpState>,
    limits: ServerLimits,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    serve_secured(
        listener,
        state,
        limits,
        Arc::new(WebSecurity::none()),
        shutdown,
    )
    .await
}

/// [`serve`] with TLS, basic auth and response headers from a web
/// configuration. A TLS handshake holds a connection slot and must finish
/// within the request timeout; one that fails is logged at debug level.
/// With TLS, the certificate files are watched while it serves
/// ([`tls_reload`]).
pub async fn serve_secured(
    listener: TcpListener,
    state: Arc<HttpState>,
    limits: ServerLimits,
    security: Arc<WebSecurity>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    if let Some(reloader) = &security.tls {
        tokio::spawn(reloader.clone().watch(shutdown.clone()));
    }
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    loop {
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = shutdown.changed() => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait, don't spin.
                    warn!(error = %error, "Cannot accept a connection.");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        // Responses go out in one or two writes; don't let Nagle hold the
        // last one back for the peer's delayed ACK (~40 ms per scrape).
        if let Err(error) = stream.set_nodelay(true) {
            debug!(error = %error, "Cannot set TCP_NODELAY.");
        }
        let state = state.clone();
        let security = security.clone();
        let watcher = graceful.watcher();
        let timeout = limits.request_timeout;
        tokio::spawn(async move {
            match &security.tls {
                None => {
                    serve_connection(stream, peer, state, security.clone(), timeout, watcher).await
                }
                Some(reloader) => {
                    // The newest good certificate; this connection keeps it
                    // even if the files change meanwhile.
                    let acceptor = reloader.current();
                    match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            serve_connection(
                                stream,
                                peer,
                                state,
                                security.clone(),
                                timeout,
                                watcher,
                            )
                            .await
                        }
                        Ok(Err(error)) => {
                            debug!(peer = %peer, error = %error, "TLS handshake failed.");
                        }
                        Err(_) => {
                            debug!(peer = %peer, "TLS handshake timed out.");
                        }
                    }
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(limits.request_timeout) => {
            warn!("Some connections were still open at shutdown; closing them.");
        }
    }
    Ok(())
}

async fn serve_connection<S>(
    stream: S,
    peer: std::net::SocketAddr,
    state: Arc<HttpState>,
    security: Arc<WebSecurity>,
    timeout: Duration,
    watcher: Watcher,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| {
        let state = state.clone();
        let security = security.clone();
        async move {
            let handled = async {
                if let Some(auth) = &security.auth {
                    let given = request.headers().get(hyper::header::AUTHORIZATION);
                    if !auth.check(given).await {
                        debug!(peer = %peer, path = request.uri().path(), "Basic auth failed or missing.");
                        return routes::unauthorized();
                    }
                }
                routes::handle(&state, request).await
            };
            let mut response = match tokio::time::timeout(timeout, handled).await {
                Ok(response) => response,
                Err(_) => routes::text(
                    hyper::StatusCode::SERVICE_UNAVAILABLE,
                    "request timed out\n",
                ),
            };
            for (name, value) in &security.headers {
                response.headers_mut().insert(name.clone(), value.clone());
            }
            Ok::<_, Infallible>(response)
        }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(timeout)
        .max_buf_size(MAX_HEAD_BYTES)
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service);
    if let Err(error) = watcher.watch(connection).await {
        debug!(peer = %peer, error = %error, "Connection ended with an error.");
    }
}
