//! Request routing and the handlers.

use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, VARY};
use hyper::{Method, Request, StatusCode};
use tracing::error;

use crate::exporter::Format;

use super::access::{self, Client};
use super::readiness::Readiness;
use super::response::{accepts_gzip, json_value, respond, text, HttpResponse};
use super::{alerts_api, gpus, history_api, web, workloads_api, HttpState};

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
        "/api/v1/workloads" => workloads_api::workloads(state, request.uri().query()).await,
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
    let gzip = header(ACCEPT_ENCODING).is_some_and(accepts_gzip);
    // The per-GPU part is encoded (and gzipped) once per snapshot and shared.
    let Ok(body) = state.exporter.body(format, gzip) else {
        error!("Encoding the metrics failed.");
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "encoding the metrics failed\n",
        );
    };
    let mut response = respond(StatusCode::OK, format.content_type(), body.bytes);
    if body.gzip {
        response
            .headers_mut()
            .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    response
        .headers_mut()
        .insert(VARY, HeaderValue::from_static("Accept, Accept-Encoding"));
    response
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
