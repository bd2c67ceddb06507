//! `GET /api/v1/history` and `GET /api/v1/events`: JSON over the history
//! database. A bad parameter is a 400 whose JSON names it and says why.

use std::collections::HashMap;

use hyper::StatusCode;
use serde_json::json;

use crate::history::catalog;
use crate::history::query::{self, GpuSelector, QueryError};
use crate::timespec::{parse_count, Step, Timestamp};

use super::routes::{respond, HttpResponse};
use super::HttpState;

/// The most events one `/api/v1/events` answer lists.
const MAX_EVENTS: u32 = 100_000;

/// A JSON response.
pub(super) fn json_response(status: StatusCode, value: &serde_json::Value) -> HttpResponse {
    respond(status, "application/json", value.to_string())
}

/// 400: the query parameter and why.
pub(super) fn bad(parameter: &str, message: &str) -> HttpResponse {
    json_response(
        StatusCode::BAD_REQUEST,
        &json!({ "error": format!("{parameter}: {message}"), "parameter": parameter }),
    )
}

/// The query parameters.
pub(super) fn params(query: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

fn failed(error: QueryError) -> HttpResponse {
    match error {
        QueryError::BadParameter { parameter, message } => bad(parameter, &message),
        QueryError::Sql(e) => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({ "error": format!("reading the history database failed: {e}") }),
        ),
    }
}

fn disabled() -> HttpResponse {
    json_response(
        StatusCode::NOT_FOUND,
        &json!({ "error": "history is disabled on this agent ([history] enabled = false, or --no-history)" }),
    )
}

/// `?gpu=INDEX|UUID&metric=NAME&from=-1h&to=now&step=1m`
pub async fn history(state: &HttpState, query: Option<&str>) -> HttpResponse {
    let Some(api) = &state.history else {
        return disabled();
    };
    let p = params(query);
    let now = Timestamp::now();
    let Some(gpu) = p.get("gpu") else {
        return bad("gpu", "missing: give a GPU index (0, 1, ...) or UUID");
    };
    let gpu: GpuSelector = match gpu.parse() {
        Ok(gpu) => gpu,
        Err(e) => return bad("gpu", &e.to_string()),
    };
    let Some(metric) = p.get("metric") else {
        return bad(
            "metric",
            &format!("missing: one of {}", catalog::names().join(", ")),
        );
    };
    let Some(field) = catalog::field(metric) else {
        return bad(
            "metric",
            &format!(
                "unknown metric \"{metric}\": one of {}",
                catalog::names().join(", ")
            ),
        );
    };
    let from = match Timestamp::parse(p.get("from").map_or("-1h", String::as_str), now) {
        Ok(t) => t,
        Err(e) => return bad("from", &e.to_string()),
    };
    let to = match Timestamp::parse(p.get("to").map_or("now", String::as_str), now) {
        Ok(t) => t,
        Err(e) => return bad("to", &e.to_string()),
    };
    let step = match p.get("step").map(|s| Step::parse(s)) {
        None => None,
        Some(Ok(step)) => Some(step.get()),
        Some(Err(e)) => return bad("step", &e.to_string()),
    };
    match query::series(
        &api.store.pool,
        &gpu,
        field,
        from.as_ms(),
        to.as_ms(),
        step,
        api.retention,
        now.as_ms(),
    )
    .await
    {
        Ok(series) => json_response(StatusCode::OK, &json!(series)),
        Err(e) => failed(e),
    }
}

/// `?from=-1d&to=now&gpu=&kind=&limit=`
pub async fn events(state: &HttpState, query: Option<&str>) -> HttpResponse {
    let Some(api) = &state.history else {
        return disabled();
    };
    let p = params(query);
    let now = Timestamp::now();
    let from = match Timestamp::parse(p.get("from").map_or("-1d", String::as_str), now) {
        Ok(t) => t,
        Err(e) => return bad("from", &e.to_string()),
    };
    let to = match Timestamp::parse(p.get("to").map_or("now", String::as_str), now) {
        Ok(t) => t,
        Err(e) => return bad("to", &e.to_string()),
    };
    let gpu: Option<GpuSelector> = match p.get("gpu").map(|g| g.parse()) {
        None => None,
        Some(Ok(gpu)) => Some(gpu),
        Some(Err(e)) => return bad("gpu", &e.to_string()),
    };
    let limit = match p.get("limit").map(|l| parse_count(l, 1, MAX_EVENTS)) {
        None => 1000,
        Some(Ok(l)) => l,
        Some(Err(e)) => return bad("limit", &e.to_string()),
    };
    match query::events(
        &api.store.pool,
        from.as_ms(),
        to.as_ms(),
        gpu.as_ref(),
        p.get("kind").map(String::as_str),
        i64::from(limit),
    )
    .await
    {
        Ok(events) => json_response(StatusCode::OK, &json!({ "events": events })),
        Err(e) => failed(e),
    }
}
