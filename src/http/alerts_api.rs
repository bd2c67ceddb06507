//! The alerting endpoints: `GET /api/v1/alerts` (the alerts now, marked
//! silenced or inhibited), `GET /api/v1/alerts/history` (stored
//! transitions), and the silences: `GET`/`POST /api/v1/silences`,
//! `GET`/`DELETE /api/v1/silences/{id}`. Errors are JSON naming the
//! parameter or field (400); a silence over the limits of
//! [`crate::alerting::silence_set`] is a 409 saying which.

use std::time::SystemTime;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW};
use hyper::{Method, Request, StatusCode};
use serde_json::json;

use crate::alerting::silence::parse_new;
use crate::alerting::silence_store::AddError;
use crate::alerting::transition_log::{transitions, Filter};
use crate::timespec::{quote, Timestamp};

use super::params::{bad, limit_param, params, time_param, unavailable, ParamError};
use super::response::{json_response, HttpResponse};
use super::HttpState;

/// The most transitions one `/api/v1/alerts/history` answer lists.
const MAX_TRANSITIONS: u32 = 10_000;

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

/// Parses `?from=-1d&to=now&alertname=&gpu=&limit=200` into a filter;
/// an unknown parameter is refused.
pub(super) fn history_filter(query: Option<&str>, now: Timestamp) -> Result<Filter, ParamError> {
    let p = params(query);
    for name in p.keys() {
        if !["from", "to", "alertname", "gpu", "limit"].contains(&name.as_str()) {
            return Err(ParamError::new(
                &quote(name),
                "unknown parameter: use from, to, alertname, gpu, limit",
            ));
        }
    }
    let from = time_param(&p, "from", "-1d", now)?;
    let to = time_param(&p, "to", "now", now)?;
    Ok(Filter {
        from_ms: from.as_ms(),
        // `to` is inclusive; the filter's end is not. In range, so no overflow.
        to_ms: to.as_ms().saturating_add(1),
        alertname: p.get("alertname").cloned(),
        gpu: p.get("gpu").cloned(),
        limit: i64::from(limit_param(&p, 200, MAX_TRANSITIONS)?),
    })
}

/// `GET /api/v1/alerts/history?from=-1d&to=now&alertname=&gpu=&limit=200`:
/// stored transitions, newest first.
pub async fn history(state: &HttpState, query: Option<&str>) -> HttpResponse {
    let Some(api) = &state.history else {
        return no_history();
    };
    let store = match api.store.get() {
        Ok(store) => store,
        Err(down) => return unavailable(&down.reason),
    };
    let filter = match history_filter(query, Timestamp::now()) {
        Ok(filter) => filter,
        Err(e) => return e.response(),
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
        Err(down) => return unavailable(&down.reason),
    };
    let now = Timestamp::now();
    let now_ms = now.as_ms();
    if id.is_empty() {
        return match *request.method() {
            Method::GET | Method::HEAD => {
                let list: Vec<_> = silences.list().iter().map(|s| s.to_json(now_ms)).collect();
                json_response(StatusCode::OK, &json!({ "silences": list }))
            }
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
                let matchers = new
                    .matchers
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                let created_by = new.created_by.clone();
                match silences.add(new, now).await {
                    Ok(id) => {
                        tracing::info!(silence = id, matchers = %matchers, created_by = %created_by, "Silence added.");
                        json_response(StatusCode::OK, &json!({ "silenceID": id }))
                    }
                    Err(AddError::Full(full)) => error(StatusCode::CONFLICT, &full.to_string()),
                    Err(AddError::Database(e)) => database_error(&e),
                }
            }
            _ => not_allowed("GET, HEAD, POST"),
        };
    }
    let Ok(id) = id.parse::<i64>() else {
        return bad(
            "id",
            &format!(
                "\"{}\" is not a silence id (a number)",
                crate::timespec::quote(&id)
            ),
        );
    };
    match *request.method() {
        Method::GET | Method::HEAD => match silences.current().iter().find(|s| s.id == id) {
            Some(s) => json_response(StatusCode::OK, &s.to_json(now_ms)),
            None => error(StatusCode::NOT_FOUND, &format!("no silence {id}")),
        },
        Method::DELETE => match silences.expire(id, now).await {
            Ok(Some(s)) => {
                tracing::info!(silence = id, "Silence expired.");
                json_response(StatusCode::OK, &s.to_json(now_ms))
            }
            Ok(None) => error(StatusCode::NOT_FOUND, &format!("no silence {id}")),
            Err(e) => database_error(&e),
        },
        _ => not_allowed("GET, HEAD, DELETE"),
    }
}

#[cfg(test)]
mod tests;
