//! Query-parameter helpers the JSON APIs share (history, events, alert
//! history): reading them, checking times and limits, and the 400/503
//! answers that name the parameter.

use std::collections::HashMap;

use hyper::StatusCode;
use serde_json::json;

use crate::timespec::{parse_count, Timestamp};

use super::response::{json_response, HttpResponse};

/// 400: the query parameter and why.
pub fn bad(parameter: &str, message: &str) -> HttpResponse {
    json_response(
        StatusCode::BAD_REQUEST,
        &json!({ "error": format!("{parameter}: {message}"), "parameter": parameter }),
    )
}

/// The query parameters.
pub fn params(query: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// 503: history is on, but its database is not open (yet).
pub fn unavailable(reason: &str) -> HttpResponse {
    json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        &json!({ "error": format!("history database unavailable: {reason}") }),
    )
}

/// A refused query parameter: its name and why (the message quotes the
/// value where one was given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{parameter}: {message}")]
pub struct ParamError {
    /// The parameter.
    pub parameter: String,
    /// What is wrong and what is accepted.
    pub message: String,
}

impl ParamError {
    /// A refused `parameter`.
    pub fn new(parameter: &str, message: impl ToString) -> ParamError {
        ParamError {
            parameter: parameter.to_string(),
            message: message.to_string(),
        }
    }

    /// The 400 response.
    pub fn response(&self) -> HttpResponse {
        bad(&self.parameter, &self.message)
    }
}

/// A time parameter, `default` when absent.
pub fn time_param(
    p: &HashMap<String, String>,
    name: &str,
    default: &str,
    now: Timestamp,
) -> Result<Timestamp, ParamError> {
    Timestamp::parse(p.get(name).map_or(default, String::as_str), now)
        .map_err(|e| ParamError::new(name, e))
}

/// A `limit` parameter: 1 to `max`, `default` when absent.
pub fn limit_param(p: &HashMap<String, String>, default: u32, max: u32) -> Result<u32, ParamError> {
    match p.get("limit") {
        None => Ok(default),
        Some(l) => parse_count(l, 1, max).map_err(|e| ParamError::new("limit", e)),
    }
}
