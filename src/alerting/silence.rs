//! Silences: label matchers and a time window during which matching alerts
//! are still evaluated and shown, but not notified. This module is pure
//! (types, checks, JSON); [`super::silences`] stores them.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use super::matcher::{all_match, Matcher};

/// The longest comment or author accepted, in characters.
const MAX_TEXT: usize = 4096;

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

/// RFC 3339 with milliseconds, UTC.
pub fn rfc3339_ms(ms: i64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64))
        .to_string()
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

    /// The matchers as one line, e.g. `alertname=GpuHot, gpu=0`.
    pub fn matchers_text(&self) -> String {
        let parts: Vec<String> = self.matchers.iter().map(Matcher::to_string).collect();
        parts.join(", ")
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

fn parse_instant(field: &str, value: &Value) -> Result<i64, FieldError> {
    let text = value.as_str().ok_or_else(|| {
        bad(
            field,
            "must be a string: an RFC 3339 time such as 2026-11-29T20:00:00Z",
        )
    })?;
    humantime::parse_rfc3339_weak(text)
        .map(|t| {
            t.duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0)
        })
        .map_err(|_| {
            bad(
                field,
                format!("\"{text}\" is not an RFC 3339 time such as 2026-11-29T20:00:00Z"),
            )
        })
}

fn text_field(object: &Map<String, Value>, field: &str, what: &str) -> Result<String, FieldError> {
    match object.get(field) {
        Some(Value::String(s)) if !s.trim().is_empty() && s.chars().count() <= MAX_TEXT => {
            Ok(s.trim().to_string())
        }
        Some(Value::String(s)) if !s.trim().is_empty() => {
            Err(bad(field, format!("is longer than {MAX_TEXT} characters")))
        }
        Some(Value::String(_)) | None => Err(bad(field, format!("is missing: {what}"))),
        Some(_) => Err(bad(field, "must be a string")),
    }
}

fn parse_matcher(field: &str, value: &Value) -> Result<Matcher, FieldError> {
    match value {
        Value::String(text) => Matcher::parse(text).map_err(|m| bad(field, m)),
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
                (false, true) => super::matcher::MatchOp::Equal,
                (false, false) => super::matcher::MatchOp::NotEqual,
                (true, true) => super::matcher::MatchOp::Regex,
                (true, false) => super::matcher::MatchOp::NotRegex,
            };
            Matcher::new(&name, op, &value).map_err(|m| {
                let which = if m.contains("label name") {
                    "name"
                } else {
                    "value"
                };
                bad(format!("{field}.{which}"), m)
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
/// Every error names the field.
pub fn parse_new(body: &[u8], now_ms: i64) -> Result<NewSilence, FieldError> {
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
                key.as_str(),
                format!("unknown field: a silence has {}", KNOWN.join(", ")),
            ));
        }
    }
    let matchers =
        match object.get("matchers") {
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
    let starts_ms = match object.get("startsAt") {
        None | Some(Value::Null) => now_ms,
        Some(v) => parse_instant("startsAt", v)?,
    };
    let ends_ms = match (object.get("endsAt"), object.get("duration")) {
        (Some(_), Some(_)) => {
            return Err(bad("duration", "give either endsAt or duration, not both"))
        }
        (Some(v), None) => parse_instant("endsAt", v)?,
        (None, Some(Value::String(text))) => match humantime::parse_duration(text) {
            Ok(d) if !d.is_zero() => starts_ms.saturating_add(d.as_millis() as i64),
            _ => {
                return Err(bad(
                    "duration",
                    format!("\"{text}\" is not a duration such as 30m, 2h or 1d"),
                ))
            }
        },
        (None, Some(_)) => return Err(bad("duration", "must be a string such as \"2h\"")),
        (None, None) => {
            return Err(bad(
                "endsAt",
                "is missing: give endsAt (RFC 3339) or duration (e.g. \"2h\")",
            ))
        }
    };
    if ends_ms <= starts_ms {
        return Err(bad("endsAt", "must be after startsAt"));
    }
    if ends_ms <= now_ms {
        return Err(bad(
            "endsAt",
            "is in the past: the silence would never mute",
        ));
    }
    Ok(NewSilence {
        matchers,
        starts_ms,
        ends_ms,
        created_by: text_field(&object, "createdBy", "who makes the silence")?,
        comment: text_field(&object, "comment", "why the alerts are silenced")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    fn parse(body: Value) -> Result<NewSilence, FieldError> {
        parse_new(body.to_string().as_bytes(), NOW)
    }

    #[test]
    fn a_silence_from_strings_or_alertmanager_objects() {
        let s = parse(json!({
            "matchers": ["alertname=GpuHot", {"name": "gpu", "value": "[01]", "isRegex": true}],
            "duration": "2h",
            "createdBy": "ops",
            "comment": "fan swap",
        }))
        .unwrap();
        assert_eq!(s.starts_ms, NOW);
        assert_eq!(s.ends_ms, NOW + 2 * 3_600_000);
        assert_eq!(s.matchers.len(), 2);
        assert_eq!(s.matchers[1].to_string(), "gpu=~[01]");
        let s = parse(json!({
            "matchers": ["gpu=0"],
            "startsAt": rfc3339_ms(NOW + 1000),
            "endsAt": rfc3339_ms(NOW + 60_000),
            "createdBy": "ops",
            "comment": "later",
        }))
        .unwrap();
        assert_eq!((s.starts_ms, s.ends_ms), (NOW + 1000, NOW + 60_000));
    }

    #[test]
    fn every_refusal_names_its_field() {
        let base =
            json!({"matchers": ["gpu=0"], "duration": "1h", "createdBy": "a", "comment": "c"});
        let with = |key: &str, value: Value| {
            let mut b = base.clone();
            b[key] = value;
            parse(b).unwrap_err().field
        };
        let without = |key: &str| {
            let mut b = base.clone();
            b.as_object_mut().unwrap().remove(key);
            parse(b).unwrap_err().field
        };
        assert_eq!(with("matchers", json!([])), "matchers");
        assert_eq!(with("matchers", json!(["gpu=0", "gpu=~("])), "matchers[1]");
        assert_eq!(
            with("matchers", json!([{"name": "gpu"}])),
            "matchers[0].value"
        );
        assert_eq!(
            with("matchers", json!([{"name": "9", "value": "x"}])),
            "matchers[0].name"
        );
        assert_eq!(with("matchers", json!(["gpu=~.*"])), "matchers");
        assert_eq!(with("duration", json!("soon")), "duration");
        assert_eq!(with("endsAt", json!("2020-01-01T00:00:00Z")), "duration");
        assert_eq!(with("startsAt", json!("yesterday")), "startsAt");
        assert_eq!(with("comment", json!("  ")), "comment");
        assert_eq!(with("creator", json!("x")), "creator");
        assert_eq!(without("createdBy"), "createdBy");
        assert_eq!(without("duration"), "endsAt");
        let mut past = base.clone();
        past.as_object_mut().unwrap().remove("duration");
        past["endsAt"] = json!("2020-01-01T00:00:00Z");
        assert_eq!(parse(past).unwrap_err().field, "endsAt");
        assert_eq!(parse_new(b"{", NOW).unwrap_err().field, "body");
    }

    #[test]
    fn state_follows_the_window() {
        let s = Silence {
            id: 1,
            matchers: vec![Matcher::parse("gpu=0").unwrap()],
            starts_ms: 100,
            ends_ms: 200,
            created_by: "a".into(),
            comment: "c".into(),
            updated_ms: 0,
        };
        let gpu0: BTreeMap<String, String> = [("gpu".to_string(), "0".to_string())].into();
        assert_eq!(s.state(99), SilenceState::Pending);
        assert!(!s.mutes(&gpu0, 99));
        assert_eq!(s.state(100), SilenceState::Active);
        assert!(s.mutes(&gpu0, 150));
        assert!(!s.mutes(&BTreeMap::new(), 150));
        assert_eq!(s.state(200), SilenceState::Expired);
        assert!(!s.mutes(&gpu0, 200));
        assert_eq!(s.to_json(150)["status"]["state"], "active");
    }
}
