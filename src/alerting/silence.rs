//! Silences: label matchers and a time window during which matching alerts
//! are still evaluated and shown, but not notified. This module is pure
//! (types, checks, JSON); [`super::silence_store`] stores them.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::timespec::{self, format_rfc3339_ms, parse_duration, Timestamp, SILENCE};

use crate::routing::matcher::{all_match, MatchOp, Matcher};

/// The most matchers one silence has.
pub const MAX_MATCHERS: usize = 16;
/// The longest comment accepted, in bytes (UTF-8).
pub const MAX_COMMENT_BYTES: usize = 1024;
/// The longest `createdBy` accepted, in bytes (UTF-8).
pub const MAX_AUTHOR_BYTES: usize = 256;

/// One stored silence.
#[derive(Debug, Clone, PartialEq)]
pub struct Silence {
    /// Its id.
    pub id: i64,
    /// All must match an alert's labels.
    pub matchers: Vec<Matcher>,
    /// Start (ms since the Unix epoch).
    pub starts_ms: i64,
    /// End (ms since the Unix epoch); expiring sets it to the time of expiry.
    pub ends_ms: i64,
    /// Who made it.
    pub created_by: String,
    /// Why.
    pub comment: String,
    /// When it was made or last changed (ms since the Unix epoch).
    pub updated_ms: i64,
}

/// Where a silence stands at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SilenceState {
    /// Starts later.
    Pending,
    /// Mutes matching alerts now.
    Active,
    /// Over (ran out or was expired).
    Expired,
}

impl SilenceState {
    /// "pending", "active" or "expired", as Alertmanager writes them.
    pub fn as_str(self) -> &'static str {
        match self {
            SilenceState::Pending => "pending",
            SilenceState::Active => "active",
            SilenceState::Expired => "expired",
        }
    }
}

/// RFC 3339 with milliseconds, UTC. Total: a stored time outside
/// 1970..9999 (from an older version) is clamped, so one odd row never
/// breaks the listing.
pub fn rfc3339_ms(ms: i64) -> String {
    format_rfc3339_ms(ms)
}

impl Silence {
    /// Its state at `now_ms`.
    pub fn state(&self, now_ms: i64) -> SilenceState {
        if now_ms >= self.ends_ms {
            SilenceState::Expired
        } else if now_ms < self.starts_ms {
            SilenceState::Pending
        } else {
            SilenceState::Active
        }
    }

    /// Whether it mutes an alert with these labels at `now_ms`.
    pub fn mutes(&self, labels: &BTreeMap<String, String>, now_ms: i64) -> bool {
        self.state(now_ms) == SilenceState::Active && all_match(&self.matchers, labels)
    }

    /// The JSON the API returns (Alertmanager's field names).
    pub fn to_json(&self, now_ms: i64) -> Value {
        json!({
            "id": self.id,
            "matchers": self.matchers,
            "startsAt": rfc3339_ms(self.starts_ms),
            "endsAt": rfc3339_ms(self.ends_ms),
            "createdBy": self.created_by,
            "comment": self.comment,
            "updatedAt": rfc3339_ms(self.updated_ms),
            "status": { "state": self.state(now_ms).as_str() },
        })
    }

    /// About how many bytes of memory it holds: texts and compiled
    /// matchers (see [`Matcher::memory`]).
    pub fn memory(&self) -> usize {
        std::mem::size_of::<Silence>()
            + self.matchers.iter().map(Matcher::memory).sum::<usize>()
            + self.created_by.len()
            + self.comment.len()
    }
}

/// A silence to add, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSilence {
    /// All must match.
    pub matchers: Vec<Matcher>,
    /// Start (ms since the Unix epoch).
    pub starts_ms: i64,
    /// End (ms since the Unix epoch), after the start and after now.
    pub ends_ms: i64,
    /// Who makes it.
    pub created_by: String,
    /// Why.
    pub comment: String,
}

/// Why a new silence was refused: the JSON field and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// The field, e.g. `matchers[1].value` or `endsAt`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

fn parse_instant(field: &str, value: &Value) -> Result<Timestamp, FieldError> {
    let text = value.as_str().ok_or_else(|| {
        bad(
            field,
            "must be a string: an RFC 3339 time such as 2026-11-29T20:00:00Z",
        )
    })?;
    Timestamp::parse_rfc3339(text).map_err(|e| bad(field, e.to_string()))
}

fn text_field(
    object: &Map<String, Value>,
    field: &str,
    what: &str,
    max_bytes: usize,
) -> Result<String, FieldError> {
    match object.get(field) {
        Some(Value::String(s)) if !s.trim().is_empty() && s.trim().len() <= max_bytes => {
            Ok(s.trim().to_string())
        }
        Some(Value::String(s)) if !s.trim().is_empty() => Err(bad(
            field,
            format!(
                "is {} bytes long; at most {max_bytes} are allowed",
                s.trim().len()
            ),
        )),
        Some(Value::String(_)) | None => Err(bad(field, format!("is missing: {what}"))),
        Some(_) => Err(bad(field, "must be a string")),
    }
}

fn parse_matcher(field: &str, value: &Value) -> Result<Matcher, FieldError> {
    match value {
        Value::String(text) => Matcher::parse(text).map_err(|e| bad(field, e.to_string())),
        Value::Object(object) => {
            for key in object.keys() {
                if !["name", "value", "isRegex", "isEqual"].contains(&key.as_str()) {
                    return Err(bad(
                        format!("{field}.{key}"),
                        "unknown field: a matcher has name, value, isRegex and isEqual",
                    ));
                }
            }
            let name = match object.get("name") {
                Some(Value::String(s)) => s.clone(),
                _ => return Err(bad(format!("{field}.name"), "is missing: the label's name")),
            };
            let value = match object.get("value") {
                Some(Value::String(s)) => s.clone(),
                _ => {
                    return Err(bad(
                        format!("{field}.value"),
                        "is missing: the value (or regex) to match",
                    ))
                }
            };
            let flag = |key: &str, default: bool| match object.get(key) {
                None => Ok(default),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(bad(format!("{field}.{key}"), "must be true or false")),
            };
            let op = match (flag("isRegex", false)?, flag("isEqual", true)?) {
                (false, true) => MatchOp::Equal,
                (false, false) => MatchOp::NotEqual,
                (true, true) => MatchOp::Regex,
                (true, false) => MatchOp::NotRegex,
            };
            Matcher::new(&name, op, &value).map_err(|e| {
                let which = if e.is_about_name() { "name" } else { "value" };
                bad(format!("{field}.{which}"), e.to_string())
            })
        }
        _ => Err(bad(
            field,
            "must be a string such as \"gpu=0\" or an object {\"name\", \"value\", \"isRegex\", \"isEqual\"}",
        )),
    }
}

/// Parses and checks a new silence from the API's JSON:
/// `{"matchers": ["alertname=GpuHot", {"name": "gpu", "value": "0"}],
///   "startsAt": RFC 3339 (default now), "endsAt": RFC 3339 | "duration": "2h",
///   "createdBy": "...", "comment": "..."}`.
/// At most [`MAX_MATCHERS`] matchers (each within the
/// [`crate::routing::matcher`] limits); times in 1970..9999; a silence lasts 1 s
/// to 1 year ([`SILENCE`]). Every error names the field.
pub fn parse_new(body: &[u8], now: Timestamp) -> Result<NewSilence, FieldError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| bad("body", format!("is not JSON: {e}")))?;
    let Value::Object(object) = value else {
        return Err(bad("body", "must be a JSON object"));
    };
    const KNOWN: [&str; 6] = [
        "matchers",
        "startsAt",
        "endsAt",
        "duration",
        "createdBy",
        "comment",
    ];
    for key in object.keys() {
        if !KNOWN.contains(&key.as_str()) {
            return Err(bad(
                timespec::quote(key),
                format!("unknown field: a silence has {}", KNOWN.join(", ")),
            ));
        }
    }
    let matchers =
        match object.get("matchers") {
            Some(Value::Array(list)) if list.len() > MAX_MATCHERS => {
                return Err(bad(
                    "matchers",
                    format!(
                        "has {} matchers; at most {MAX_MATCHERS} are allowed",
                        list.len()
                    ),
                ))
            }
            Some(Value::Array(list)) if !list.is_empty() => list
                .iter()
                .enumerate()
                .map(|(i, m)| parse_matcher(&format!("matchers[{i}]"), m))
                .collect::<Result<Vec<_>, _>>()?,
            Some(Value::Array(_)) | None => return Err(bad(
                "matchers",
                "is missing or empty: give at least one, e.g. [\"alertname=GpuHot\", \"gpu=0\"]",
            )),
            Some(_) => return Err(bad("matchers", "must be a list")),
        };
    if matchers.iter().all(Matcher::matches_empty) {
        return Err(bad(
            "matchers",
            "every matcher also matches alerts without the label, so the silence would mute almost everything: add one such as alertname=NAME",
        ));
    }
    let starts = match object.get("startsAt") {
        None | Some(Value::Null) => now,
        Some(v) => parse_instant("startsAt", v)?,
    };
    let ends = match (object.get("endsAt"), object.get("duration")) {
        (Some(_), Some(_)) => {
            return Err(bad("duration", "give either endsAt or duration, not both"))
        }
        (Some(v), None) => {
            let ends = parse_instant("endsAt", v)?;
            if ends > starts && ends.since(starts) > SILENCE.max {
                return Err(bad(
                    "endsAt",
                    format!(
                        "the silence would last longer than {}, the most allowed: add a new one when it ends",
                        humantime::format_duration(SILENCE.max)
                    ),
                ));
            }
            ends
        }
        (None, Some(Value::String(text))) => {
            let d = parse_duration(text, SILENCE).map_err(|e| bad("duration", e.to_string()))?;
            starts.checked_add(d).ok_or_else(|| {
                bad(
                    "duration",
                    format!(
                        "{starts} plus \"{}\" is past {}, the latest time accepted",
                        timespec::quote(text),
                        Timestamp::LATEST
                    ),
                )
            })?
        }
        (None, Some(_)) => return Err(bad("duration", "must be a string such as \"2h\"")),
        (None, None) => {
            return Err(bad(
                "endsAt",
                "is missing: give endsAt (RFC 3339) or duration (e.g. \"2h\")",
            ))
        }
    };
    if ends <= starts {
        return Err(bad("endsAt", "must be after startsAt"));
    }
    if ends <= now {
        return Err(bad(
            "endsAt",
            "is in the past: the silence would never mute",
        ));
    }
    Ok(NewSilence {
        matchers,
        starts_ms: starts.as_ms(),
        ends_ms: ends.as_ms(),
        created_by: text_field(
            &object,
            "createdBy",
            "who makes the silence",
            MAX_AUTHOR_BYTES,
        )?,
        comment: text_field(
            &object,
            "comment",
            "why the alerts are silenced",
            MAX_COMMENT_BYTES,
        )?,
    })
}

#[cfg(test)]
mod tests;
