//! Request routing and the handlers.

use std::io::Write;
use std::time::SystemTime;

use flate2::write::GzEncoder;
use flate2::Compression;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, VARY};
use hyper::{Method, Request, Response, StatusCode};
use tracing::error;

use crate::exporter::self_metrics::snapshot_age;
use crate::exporter::Format;

use super::access::{self, Client};
use super::{alerts_api, gpus, history_api, web, HttpState};

/// Response type of every handler.
pub type HttpResponse = Response<Full<Bytes>>;

/// Routes one request from `client`.
pub async fn handle(
    state: &HttpState,
    request: Request<Incoming>,
    client: &Client,
) -> HttpResponse {
    let path = request.uri().path();
    if path == "/api/v1/silences" || path.starts_with("/api/v1/silences/") {
        if access::is_write(request.method()) && !access::may_change_alerting(client) {
            tracing::warn!(peer = %client.peer, method = %request.method(), path, "Refused a change of silences from a non-loopback address without basic auth.");
            return access::forbidden(client);
        }
        return alerts_api::silences(state, request).await;
    }
    let request = &request;
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET and HEAD are served\n",
        );
        response
            .headers_mut()
            .insert(hyper::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match request.uri().path() {
        "/metrics" => metrics(state, request),
        "/-/healthy" => text(StatusCode::OK, "OK\n"),
        "/-/ready" => ready(state),
        "/api/v1/snapshot" => snapshot_json(state),
        "/api/v1/history" => history_api::history(state, request.uri().query()).await,
        "/api/v1/events" => history_api::events(state, request.uri().query()).await,
        "/api/v1/alerts" => alerts_api::alerts(state),
        "/api/v1/alerts/history" => alerts_api::history(state, request.uri().query()).await,
        "/api/v1/gpus" => json_value(&gpus::document(state)),
        "/api/v1/health" => json_value(&super::health_api::document(state)),
        "/" => web::index(request),
        path => match path.strip_prefix("/assets/") {
            Some(name) => web::asset(name, request),
            None => text(
                StatusCode::NOT_FOUND,
                "not found: try / (the web view), /metrics, /-/healthy, /-/ready or /api/v1/gpus\n",
            ),
        },
    }
}

fn metrics(state: &HttpState, request: &Request<Incoming>) -> HttpResponse {
    let header = |name| {
        request
            .headers()
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let format = Format::from_accept(header(ACCEPT));
    let body = match state.exporter.render(format) {
        Ok(body) => body,
        Err(_) => {
            error!("Encoding the metrics failed.");
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "encoding the metrics failed\n",
            );
        }
    };
    let gzip = header(ACCEPT_ENCODING).is_some_and(accepts_gzip);
    let compressed = gzip
        .then(|| {
            let mut encoder =
                GzEncoder::new(Vec::with_capacity(body.len() / 4), Compression::fast());
            encoder
                .write_all(body.as_bytes())
                .and_then(|()| encoder.finish())
                .ok()
        })
        .flatten();
    let mut response = match compressed {
        Some(compressed) => {
            let mut response = respond(StatusCode::OK, format.content_type(), compressed);
            response
                .headers_mut()
                .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            response
        }
        None => respond(StatusCode::OK, format.content_type(), body),
    };
    response
        .headers_mut()
        .insert(VARY, HeaderValue::from_static("Accept, Accept-Encoding"));
    response
}

/// Whether an `Accept-Encoding` header accepts gzip.
pub fn accepts_gzip(accept_encoding: &str) -> bool {
    accept_encoding.split(',').any(|part| {
        let mut pieces = part.split(';');
        let coding = pieces.next().unwrap_or("").trim();
        let refused = pieces.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.parse::<f64>().ok())
                .is_some_and(|q| q == 0.0)
        });
        coding.eq_ignore_ascii_case("gzip") && !refused
    })
}

/// Why the agent is or is not ready.
#[derive(Debug, Clone, PartialEq)]
pub enum Readiness {
    /// A fresh snapshot with at least one GPU.
    Ready,
    /// Not yet, or not any more; the text says why.
    NotReady(String),
}

impl Readiness {
    /// Judges the latest snapshot.
    pub fn of(state: &HttpState) -> Readiness {
        let snapshot = state.snapshots.borrow().clone();
        let Some(snapshot) = snapshot else {
            return Readiness::NotReady("no sample has completed yet".into());
        };
        let age = snapshot_age(&snapshot, SystemTime::now());
        if age > state.stale_after {
            let busy = state
                .progress
                .busy_for()
                .map(|b| {
                    format!(
                        "; the current sample has been running for {:.1}s (NVML not answering?)",
                        b.as_secs_f64()
                    )
                })
                .unwrap_or_default();
            return Readiness::NotReady(format!(
                "the last sample is {:.1}s old (limit {:.1}s){busy}",
                age.as_secs_f64(),
                state.stale_after.as_secs_f64()
            ));
        }
        if snapshot.gpus.is_empty() {
            return Readiness::NotReady("NVML reports no GPU".into());
        }
        Readiness::Ready
    }
}

fn ready(state: &HttpState) -> HttpResponse {
    match Readiness::of(state) {
        Readiness::Ready => text(StatusCode::OK, "OK\n"),
        Readiness::NotReady(reason) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("not ready: {reason}\n"),
        ),
    }
}

fn snapshot_json(state: &HttpState) -> HttpResponse {
    let snapshot = state.snapshots.borrow().clone();
    let Some(snapshot) = snapshot else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "no sample has completed yet\n",
        );
    };
    match serde_json::to_vec(&*snapshot) {
        Ok(body) => respond(StatusCode::OK, "application/json", body),
        Err(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "encoding the snapshot failed\n",
        ),
    }
}

/// 401 with the basic-auth challenge.
pub fn unauthorized() -> HttpResponse {
    let mut response = text(
        StatusCode::UNAUTHORIZED,
        "authentication required: send the user and password configured in basic_auth_users\n",
    );
    response.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        HeaderValue::from_static(super::auth::CHALLENGE),
    );
    response
}

/// A plain-text response.
pub fn text(status: StatusCode, body: &str) -> HttpResponse {
    respond(status, "text/plain; charset=utf-8", body.to_string())
}

fn json_value(value: &serde_json::Value) -> HttpResponse {
    respond(StatusCode::OK, "application/json", value.to_string())
}

/// A response with a body and content type.
pub fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> HttpResponse {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

#[cfg(test)]
mod tests {
    use super::accepts_gzip;

    #[test]
    fn gzip_negotiation() {
        assert!(accepts_gzip("gzip"));
        assert!(accepts_gzip("deflate, GZIP;q=0.5"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip("identity"));
    }
}
