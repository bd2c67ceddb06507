//! The alerting endpoints: `GET /api/v1/alerts` (the alerts now, marked
//! silenced or inhibited), `GET /api/v1/alerts/history` (stored
//! transitions), and the silences: `GET`/`POST /api/v1/silences`,
//! `GET`/`DELETE /api/v1/silences/{id}`. Errors are JSON naming the
//! parameter or field.

use std::time::SystemTime;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW};
use hyper::{Method, Request, StatusCode};
use serde_json::json;

use crate::alerting::history::{transitions, Filter};
use crate::alerting::silence::parse_new;
use crate::history::timespec::parse_time;

use super::history_api::{bad, json_response, params, unavailable};
use super::routes::HttpResponse;
use super::HttpState;
use crate::gpu::now_ms;

/// The largest silence body accepted.
const MAX_BODY: usize = 64 * 1024;

fn error(status: StatusCode, message: &str) -> HttpResponse {
    json_response(status, &json!({ "error": message }))
}

fn field_error(field: &str, message: &str) -> HttpResponse {
    json_response(
        StatusCode::BAD_REQUEST,
        &json!({ "error": format!("{field}: {message}"), "field": field }),
    )
}

fn no_alerting() -> HttpResponse {
    error(
        StatusCode::NOT_FOUND,
        "alerting is off on this agent: no rules",
    )
}

fn no_history() -> HttpResponse {
    error(
        StatusCode::NOT_FOUND,
        "history is disabled on this agent ([history] enabled = false, or --no-history): silences and the alert history are kept in the history database",
    )
}

fn database_error(e: &sqlx::Error) -> HttpResponse {
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        &format!("the history database failed: {e}"),
    )
}

/// `GET /api/v1/alerts`: pending, firing and recently resolved alerts.
pub fn alerts(state: &HttpState) -> HttpResponse {
    let Some(alerts) = &state.alerts else {
        return no_alerting();
    };
    let current = alerts.borrow().clone();
    let silences = state
        .silences
        .as_ref()
        .and_then(|s| s.get().ok())
        .map(|s| s.current())
        .unwrap_or_default();
    let list = crate::alerting::view::alerts_json(&current, &silences, SystemTime::now());
    json_response(StatusCode::OK, &json!({ "alerts": list }))
}

/// `GET /api/v1/alerts/history?from=-1d&to=now&alertname=&gpu=&limit=200`:
/// stored transitions, newest first.
pub async fn history(state: &HttpState, query: Option<&str>) -> HttpResponse {
    let Some(api) = &state.history else {
        return no_history();
    };
    let store = match api.store.get() {
        Ok(store) => store,
        Err(reason) => return unavailable(&reason),
    };
    let p = params(query);
    let now = now_ms();
    let from_ms = match parse_time(p.get("from").map_or("-1d", String::as_str), now) {
        Ok(t) => t,
        Err(message) => return bad("from", &message),
    };
    let to_ms = match parse_time(p.get("to").map_or("now", String::as_str), now) {
        Ok(t) => t + 1,
        Err(message) => return bad("to", &message),
    };
    let limit = match p.get("limit").map(|l| l.parse::<i64>()) {
        None => 200,
        Some(Ok(l)) if (1..=10_000).contains(&l) => l,
        Some(_) => return bad("limit", "must be a number from 1 to 10000"),
    };
    for name in p.keys() {
        if !["from", "to", "alertname", "gpu", "limit"].contains(&name.as_str()) {
            return bad(
                name,
                "unknown parameter: use from, to, alertname, gpu, limit",
            );
        }
    }
    let filter = Filter {
        from_ms,
        to_ms,
        alertname: p.get("alertname").cloned(),
        gpu: p.get("gpu").cloned(),
        limit,
    };
    match transitions(&store.pool, &filter).await {
        Ok(records) => json_response(StatusCode::OK, &json!({ "transitions": records })),
        Err(e) => database_error(&e),
    }
}

fn not_allowed(allow: &'static str) -> HttpResponse {
    let mut response = error(
        StatusCode::METHOD_NOT_ALLOWED,
        &format!("method not allowed here: use {allow}"),
    );
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}

/// `/api/v1/silences` and `/api/v1/silences/{id}`, any method.
pub async fn silences(state: &HttpState, request: Request<Incoming>) -> HttpResponse {
    let path = request.uri().path().to_string();
    let id = path
        .strip_prefix("/api/v1/silences")
        .unwrap_or("")
        .trim_matches('/')
        .to_string();
    let Some(silences) = &state.silences else {
        return no_history();
    };
    let silences = match silences.get() {
        Ok(silences) => silences,
        Err(reason) => return unavailable(&reason),
    };
    let now = now_ms();
    if id.is_empty() {
        return match *request.method() {
            Method::GET | Method::HEAD => match silences.list().await {
                Ok(list) => {
                    let list: Vec<_> = list.iter().map(|s| s.to_json(now)).collect();
                    json_response(StatusCode::OK, &json!({ "silences": list }))
                }
                Err(e) => database_error(&e),
            },
            Method::POST => {
                let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
                    Ok(body) => body.to_bytes(),
                    Err(_) => {
                        return error(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            &format!("the body is larger than {MAX_BODY} bytes or was cut off"),
                        )
                    }
                };
                let new = match parse_new(&body, now) {
                    Ok(new) => new,
                    Err(e) => return field_error(&e.field, &e.message),
                };
                match silences.add(&new, now).await {
                    Ok(id) => {
                        tracing::info!(silence = id, matchers = %new.matchers.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
                            created_by = %new.created_by, "Silence added.");
                        json_response(StatusCode::OK, &json!({ "silenceID": id }))
                    }
                    Err(e) => database_error(&e),
                }
            }
            _ => not_allowed("GET, HEAD, POST"),
        };
    }
    let Ok(id) = id.parse::<i64>() else {
        return bad("id", &format!("\"{id}\" is not a silence id (a number)"));
    };
    match *request.method() {
        Method::GET | Method::HEAD => match silences.list().await {
            Ok(list) => match list.iter().find(|s| s.id == id) {
                Some(s) => json_response(StatusCode::OK, &s.to_json(now)),
                None => error(StatusCode::NOT_FOUND, &format!("no silence {id}")),
            },
            Err(e) => database_error(&e),
        },
        Method::DELETE => match silences.expire(id, now).await {
            Ok(Some(s)) => {
                tracing::info!(silence = id, "Silence expired.");
                json_response(StatusCode::OK, &s.to_json(now))
            }
            Ok(None) => error(StatusCode::NOT_FOUND, &format!("no silence {id}")),
            Err(e) => database_error(&e),
        },
        _ => not_allowed("GET, HEAD, DELETE"),
    }
}
