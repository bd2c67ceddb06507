//! `GET /api/v1/history` and `GET /api/v1/events`: JSON over the history
//! database. A bad parameter is a 400 whose JSON names it and says why.

use hyper::StatusCode;
use serde_json::json;

use crate::history::catalog;
use crate::history::query::{self, GpuSelector, QueryError};
use crate::timespec::{quote, Step, Timestamp};

use super::params::{bad, limit_param, params, time_param, unavailable, ParamError};
use super::response::{json_response, HttpResponse};
use super::HttpState;

/// The most events one `/api/v1/events` answer lists.
const MAX_EVENTS: u32 = 100_000;

pub(super) fn failed(error: QueryError) -> HttpResponse {
    match error {
        QueryError::BadParameter { parameter, message } => bad(parameter, &message),
        QueryError::Sql(e) => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({ "error": format!("reading the history database failed: {e}") }),
        ),
    }
}

pub(super) fn disabled() -> HttpResponse {
    json_response(
        StatusCode::NOT_FOUND,
        &json!({ "error": "history is disabled on this agent ([history] enabled = false, or --no-history)" }),
    )
}

/// The parameters of `/api/v1/history`, checked.
#[derive(Debug, Clone)]
pub(super) struct SeriesQuery {
    /// The GPU.
    pub gpu: GpuSelector,
    /// The metric.
    pub field: &'static catalog::Field,
    /// From (default an hour ago).
    pub from: Timestamp,
    /// To (default now).
    pub to: Timestamp,
    /// The step, if given.
    pub step: Option<Step>,
}

/// Parses `?gpu=INDEX|UUID&metric=NAME&from=-1h&to=now&step=1m`.
pub(super) fn series_query(query: Option<&str>, now: Timestamp) -> Result<SeriesQuery, ParamError> {
    let p = params(query);
    let Some(gpu) = p.get("gpu") else {
        return Err(ParamError::new(
            "gpu",
            "missing: give a GPU index (0, 1, ...) or UUID",
        ));
    };
    let gpu: GpuSelector = gpu.parse().map_err(|e| ParamError::new("gpu", e))?;
    let Some(metric) = p.get("metric") else {
        return Err(ParamError::new(
            "metric",
            format!("missing: one of {}", catalog::names().join(", ")),
        ));
    };
    let Some(field) = catalog::field(metric) else {
        return Err(ParamError::new(
            "metric",
            format!(
                "unknown metric \"{}\": one of {}",
                quote(metric),
                catalog::names().join(", ")
            ),
        ));
    };
    Ok(SeriesQuery {
        gpu,
        field,
        from: time_param(&p, "from", "-1h", now)?,
        to: time_param(&p, "to", "now", now)?,
        step: p
            .get("step")
            .map(|s| Step::parse(s))
            .transpose()
            .map_err(|e| ParamError::new("step", e))?,
    })
}

/// `?gpu=INDEX|UUID&metric=NAME&from=-1h&to=now&step=1m`
pub async fn history(state: &HttpState, query: Option<&str>) -> HttpResponse {
    let Some(api) = &state.history else {
        return disabled();
    };
    let store = match api.store.get() {
        Ok(store) => store,
        Err(down) => return unavailable(&down.reason),
    };
    let now = Timestamp::now();
    let q = match series_query(query, now) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    match query::series(
        &store.pool,
        &q.gpu,
        q.field,
        q.from.as_ms(),
        q.to.as_ms(),
        q.step.map(Step::get),
        api.retention,
        now.as_ms(),
    )
    .await
    {
        Ok(series) => json_response(StatusCode::OK, &json!(series)),
        Err(e) => failed(e),
    }
}

/// The parameters of `/api/v1/events`, checked.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct EventsQuery {
    /// From (default a day ago).
    pub from: Timestamp,
    /// To (default now).
    pub to: Timestamp,
    /// Only this GPU.
    pub gpu: Option<GpuSelector>,
    /// Only this kind.
    pub kind: Option<String>,
    /// At most this many (default 1000).
    pub limit: u32,
}

/// Parses `?from=-1d&to=now&gpu=&kind=&limit=`.
pub(super) fn events_query(query: Option<&str>, now: Timestamp) -> Result<EventsQuery, ParamError> {
    let p = params(query);
    Ok(EventsQuery {
        from: time_param(&p, "from", "-1d", now)?,
        to: time_param(&p, "to", "now", now)?,
        gpu: p
            .get("gpu")
            .map(|g| g.parse())
            .transpose()
            .map_err(|e| ParamError::new("gpu", e))?,
        kind: p.get("kind").cloned(),
        limit: limit_param(&p, 1000, MAX_EVENTS)?,
    })
}

/// `?from=-1d&to=now&gpu=&kind=&limit=`
pub async fn events(state: &HttpState, query: Option<&str>) -> HttpResponse {
    let Some(api) = &state.history else {
        return disabled();
    };
    let store = match api.store.get() {
        Ok(store) => store,
        Err(down) => return unavailable(&down.reason),
    };
    let q = match events_query(query, Timestamp::now()) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    match query::events(
        &store.pool,
        q.from.as_ms(),
        q.to.as_ms(),
        q.gpu.as_ref(),
        q.kind.as_deref(),
        i64::from(q.limit),
    )
    .await
    {
        Ok(events) => json_response(StatusCode::OK, &json!({ "events": events })),
        Err(e) => failed(e),
    }
}

#[cfg(test)]
pub(super) mod tests;
