//! The HTTP server: /metrics, /-/healthy, /-/ready, the JSON API under
//! /api/v1/ and the built-in web view at / ([`web`]).
//!
//! `serve(listener, ..., shutdown)`: the caller binds the socket and owns
//! shutdown, so tests bind 127.0.0.1:0 and talk real TCP. Connections hold
//! one of a bounded number of slots, and idle ones make room for new ones
//! ([`slots`]); request heads are bounded by size and time, every request
//! by a timeout, and a panicking handler answers 500 and is counted
//! ([`crate::panics`]). A scrape renders the latest snapshot; it never
//! waits on NVML. Writes to the silences need a loopback peer or basic
//! auth (`access`).
//!
//! With a web configuration ([`webconfig`], `--web-config`) the same server
//! speaks TLS and asks for basic auth on every path: [`serve_secured`].

mod access;
mod alerts_api;
pub mod auth;
mod connection;
mod gpus;
mod health_api;
mod history_api;
mod params;
pub mod pending;
mod readiness;
mod response;
mod routes;
pub mod slots;
pub mod tls;
pub mod tls_reload;
pub mod tls_settings;
pub mod web;
pub mod webconfig;
mod workloads_api;

#[cfg(test)]
mod health_agreement_tests;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, error, warn};

use crate::exporter::Exporter;
use crate::panics::Panics;
use crate::sampler::{Progress, SnapshotReceiver};

pub use readiness::Readiness;
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
    /// Where handler panics are counted (`subsystem="http"`).
    pub panics: Arc<Panics>,
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
    /// Connections holding a slot at once.
    pub max_connections: usize,
    /// Per-request time limit (handler, basic auth, request body), also the
    /// longest wait for a slot and for a TLS handshake.
    pub request_timeout: Duration,
    /// Longest a connection may take to send a complete request head, from
    /// its opening or from its previous response: bounds keep-alive idle
    /// time and slowly trickled heads alike.
    pub idle_timeout: Duration,
}

/// Largest request head accepted (request line + headers).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Connections that may wait for a slot, per slot; past that a newcomer is
/// refused at once (503) instead of queueing without bound.
const WAITING_PER_SLOT: usize = 4;

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
///
/// Every connection is accepted at once. Once it has sent its first bytes
/// (at most `WAITING_PER_SLOT` × `max_connections` wait for them,
/// [`pending`]) it is admitted to one of `max_connections` slots
/// ([`slots`]): idle connections make room for new ones, busy keep-alive
/// ones give way after a response, and at most `WAITING_PER_SLOT` ×
/// `max_connections` wait (at most the request timeout) before being
/// refused with 503.
pub async fn serve_secured(
    listener: TcpListener,
    state: Arc<HttpState>,
    limits: ServerLimits,
    security: Arc<WebSecurity>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    if let Some(reloader) = &security.tls {
        tokio::spawn(crate::panics::supervise(
            "http",
            state.panics.clone(),
            reloader.clone().watch(shutdown.clone()),
        ));
    }
    let slots_count = limits.max_connections.max(1);
    let shared = Arc::new(connection::Shared {
        state: state.clone(),
        security,
        limits,
        pending: pending::Pending::new(slots_count * WAITING_PER_SLOT),
        slots: slots::Slots::new(slots_count, slots_count * WAITING_PER_SLOT),
        refusals: Arc::new(Semaphore::new(slots_count)),
    });
    let mut connections = JoinSet::new();
    loop {
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
            Some(ended) = connections.join_next() => {
                count_panic(&state.panics, ended);
                continue;
            }
            _ = shutdown.changed() => break,
        };
        // Responses go out in one or two writes; don't let Nagle hold the
        // last one back for the peer's delayed ACK (~40 ms per scrape).
        if let Err(error) = stream.set_nodelay(true) {
            debug!(error = %error, "Cannot set TCP_NODELAY.");
        }
        connections.spawn(connection::run(
            stream,
            peer,
            shared.clone(),
            shutdown.clone(),
        ));
    }
    drop(listener);
    let drained = tokio::time::timeout(limits.request_timeout, async {
        while let Some(ended) = connections.join_next().await {
            count_panic(&state.panics, ended);
        }
    })
    .await;
    if drained.is_err() {
        warn!("Some connections were still open at shutdown; closing them.");
        connections.abort_all();
    }
    Ok(())
}

/// A connection task that panicked outside its request handlers (which
/// catch their own) is counted and logged too.
fn count_panic(panics: &Panics, ended: Result<(), tokio::task::JoinError>) {
    if let Err(error) = ended {
        if error.is_panic() {
            panics.record("http");
            error!(
                panic = crate::panics::message(&*error.into_panic()),
                "A connection task panicked; the connection was closed. This is a bug, please report it."
            );
        }
    }
}
