//! One connection, from admission to close: it waits for its first bytes
//! ([`super::pending`]), then for a slot ([`super::slots`]), does the TLS
//! handshake when configured, serves
//! HTTP/1.1 requests with keep-alive, and closes when asked (to make room
//! for another connection, or at shutdown) or when it sends no complete
//! request head within the idle timeout.
//!
//! Every request runs under the request timeout, with panics caught
//! ([`caught`]): a panicking handler answers 500, is logged at ERROR with
//! method and path, and counted in `gpuwatch_panics_total{subsystem="http"}`.

use std::convert::Infallible;
use std::fmt::Display;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, AUTHORIZATION, CONNECTION};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;
use tracing::{debug, error};

use super::access::Client;
use super::pending::Pending;
use super::response::{self, HttpResponse};
use super::routes;
use super::slots::{Refused, Slot, Slots};
use super::{HttpState, ServerLimits, WebSecurity, MAX_HEAD_BYTES};
use crate::panics::{catch_unwind, message, Panics};

/// How long a keep-alive connection asked to close while idle may take to
/// close on its own (flushing a response it wrote) before it is dropped.
const EVICTION_GRACE: Duration = Duration::from_millis(500);

/// How long writing a refusal (503) may take.
const REFUSAL_TIME: Duration = Duration::from_secs(1);

/// What every connection shares.
pub(super) struct Shared {
    /// What the handlers read.
    pub state: Arc<HttpState>,
    /// TLS, basic auth and response headers.
    pub security: Arc<WebSecurity>,
    /// Timeouts and counts.
    pub limits: ServerLimits,
    /// Connections that have sent nothing yet.
    pub pending: Arc<Pending>,
    /// The connection slots.
    pub slots: Arc<Slots>,
    /// Refusals being written at once; past this a refused connection is
    /// just closed, so a flood of connections costs no more than that.
    pub refusals: Arc<Semaphore>,
}

/// Resolves once the server shuts down (or its shutdown sender is gone).
pub(super) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    loop {
        if *shutdown.borrow_and_update() {
            return;
        }
        if shutdown.changed().await.is_err() {
            return;
        }
    }
}

/// Serves one accepted connection to its end.
pub(super) async fn run(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    // No slot until it has sent something (a request head, a TLS hello).
    // (A peek, not `readable()`: that may report a new socket ready before
    // anything arrived.)
    let spoke = {
        let waiting = shared.pending.enter();
        let mut first = [0u8; 1];
        tokio::select! {
            peeked = tokio::time::timeout(shared.limits.idle_timeout, stream.peek(&mut first)) => {
                matches!(peeked, Ok(Ok(read)) if read > 0)
            }
            () = waiting.pushed_out() => false,
            () = stopped(&mut shutdown) => false,
        }
    };
    if !spoke {
        debug!(peer = %peer, "Closing a connection that sent nothing.");
        return;
    }
    let admitted = tokio::select! {
        admitted = shared.slots.admit(shared.limits.request_timeout) => admitted,
        () = stopped(&mut shutdown) => return,
    };
    let slot = match admitted {
        Ok(slot) => Arc::new(slot),
        Err(refused) => {
            debug!(peer = %peer, reason = %refused, "Connection refused.");
            // Plain text cannot answer a TLS client: it is just closed.
            if shared.security.tls.is_none() {
                if let Ok(_permit) = shared.refusals.clone().try_acquire_owned() {
                    refuse(stream, &refused).await;
                }
            }
            return;
        }
    };
    let Some(reloader) = &shared.security.tls else {
        return serve(stream, peer, &shared, slot, shutdown).await;
    };
    // The newest good certificate; this connection keeps it even if the
    // files change meanwhile. A handshake is idle time: it may be evicted.
    let acceptor = reloader.current();
    let handshake = tokio::time::timeout(shared.limits.request_timeout, acceptor.accept(stream));
    let stream = tokio::select! {
        done = handshake => match done {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                debug!(peer = %peer, error = %error, "TLS handshake failed.");
                return;
            }
            Err(_) => {
                debug!(peer = %peer, "TLS handshake timed out.");
                return;
            }
        },
        () = slot.evicted() => {
            debug!(peer = %peer, "Closing a connection in its TLS handshake to make room for a new one.");
            return;
        }
        () = stopped(&mut shutdown) => return,
    };
    serve(stream, peer, &shared, slot, shutdown).await
}

/// HTTP/1.1 on an admitted connection.
async fn serve<S>(
    stream: S,
    peer: SocketAddr,
    shared: &Arc<Shared>,
    slot: Arc<Slot>,
    mut shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = {
        let shared = shared.clone();
        let slot = slot.clone();
        service_fn(move |request| {
            let shared = shared.clone();
            let slot = slot.clone();
            async move { Ok::<_, Infallible>(respond(&shared, &slot, peer, request).await) }
        })
    };
    // hyper's header-read timer starts when it begins to read a request
    // head: at connect, and again right after each response. So it bounds
    // the first request head, every later one on a keep-alive connection,
    // and the idle time between them.
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(shared.limits.idle_timeout)
        .max_buf_size(MAX_HEAD_BYTES)
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service);
    close_when_asked(
        connection,
        &slot,
        &mut shutdown,
        peer,
        shared.limits.request_timeout,
    )
    .await;
}

/// Drives `connection` until it ends. Asked to make room while idle, or at
/// shutdown, it is shut down gracefully (a response being written is
/// finished), and dropped if that takes longer than its grace.
async fn close_when_asked<C>(
    connection: C,
    slot: &Slot,
    shutdown: &mut watch::Receiver<bool>,
    peer: SocketAddr,
    shutdown_grace: Duration,
) where
    C: GracefulConnection,
    C::Error: Display,
{
    let mut connection = std::pin::pin!(connection);
    let mut deadline: Option<Instant> = None;
    loop {
        tokio::select! {
            ended = connection.as_mut() => {
                if let Err(error) = ended {
                    debug!(peer = %peer, error = %error, "Connection ended with an error.");
                }
                return;
            }
            () = stopped(shutdown), if deadline.is_none() => {
                connection.as_mut().graceful_shutdown();
                deadline = Some(Instant::now() + shutdown_grace);
            }
            () = slot.evicted(), if deadline.is_none() => {
                // Asked while idle; a request that began meanwhile is
                // answered with `Connection: close` instead.
                if !slot.serving() {
                    debug!(peer = %peer, "Closing an idle connection to make room for a new one.");
                    if !slot.answered() {
                        // Nothing to flush, and hyper would go on reading a
                        // first head that trickles in: drop it now.
                        return;
                    }
                    connection.as_mut().graceful_shutdown();
                    deadline = Some(Instant::now() + EVICTION_GRACE);
                }
            }
            () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                debug!(peer = %peer, "Dropping a connection that did not close in time.");
                return;
            }
        }
    }
}

/// Answers one request: basic auth, routing, the request timeout, panics
/// caught, the configured response headers, and `Connection: close` when
/// the slot is wanted by a waiting connection.
async fn respond(
    shared: &Shared,
    slot: &Arc<Slot>,
    peer: SocketAddr,
    request: Request<Incoming>,
) -> HttpResponse {
    let busy = slot.begin_request();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let timeout = shared.limits.request_timeout;
    let handled = async {
        let mut client = Client {
            peer,
            authenticated: false,
        };
        if let Some(auth) = &shared.security.auth {
            if !auth.check(request.headers().get(AUTHORIZATION)).await {
                debug!(peer = %peer, path = %path, "Basic auth failed or missing.");
                return response::unauthorized();
            }
            client.authenticated = true;
        }
        match tokio::time::timeout(timeout, routes::handle(&shared.state, request, &client)).await {
            Ok(response) => response,
            Err(_) => response::text(StatusCode::SERVICE_UNAVAILABLE, "request timed out\n"),
        }
    };
    let mut response = caught(&shared.state.panics, &method, &path, handled).await;
    for (name, value) in &shared.security.headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    if busy.finish() {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Runs a request handler; a panic in it answers 500, is logged at ERROR
/// with the method and path (never headers or the query, which may carry
/// secrets) and counted under `subsystem="http"`.
pub(super) async fn caught(
    panics: &Panics,
    method: &Method,
    path: &str,
    handler: impl Future<Output = HttpResponse>,
) -> HttpResponse {
    match catch_unwind(handler).await {
        Ok(response) => response,
        Err(payload) => {
            panics.record("http");
            error!(
                method = %method,
                path,
                panic = message(&*payload),
                "A request handler panicked; answered 500. This is a bug, please report it."
            );
            response::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error: the request handler failed (logged at ERROR and counted in gpuwatch_panics_total); this is a bug, please report it\n",
            )
        }
    }
}

/// Answers 503 on a connection that gets no slot, then closes it.
async fn refuse(mut stream: TcpStream, refused: &Refused) {
    let body = format!("service unavailable: {refused}; try again shortly\n");
    let message = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        stream.write_all(message.as_bytes()).await?;
        stream.shutdown().await?;
        // Read (a little of) what the client sent, so that closing sends a
        // FIN rather than a reset, which could discard the answer.
        let mut buffer = [0u8; 4096];
        let mut total = 0;
        while total < MAX_HEAD_BYTES {
            let read = stream.read(&mut buffer).await?;
            if read == 0 {
                break;
            }
            total += read;
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn body(response: HttpResponse) -> String {
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_500_and_is_counted() {
        let panics = Panics::default();
        let response = caught(&panics, &Method::GET, "/api/v1/gpus", async {
            tokio::task::yield_now().await;
            panic!("a handler bug");
        })
        .await;
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(body(response).await.contains("gpuwatch_panics_total"));
        assert_eq!(panics.count("http"), 1);
        let response = caught(&panics, &Method::GET, "/-/healthy", async {
            response::text(StatusCode::OK, "OK\n")
        })
        .await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(body(response).await, "OK\n");
        assert_eq!(panics.count("http"), 1, "only panics count");
    }
}
