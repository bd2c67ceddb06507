//! The Alertmanager push receiver: `POST {url}/api/v2/alerts` with the
//! postable-alerts array (labels, annotations, startsAt, endsAt,
//! generatorURL), with Prometheus's semantics: a firing alert says
//! `endsAt = now + 4 × resend_interval` and is sent again every
//! `resend_interval` while it fires (see [`resend_body`] and the
//! dispatcher), so Alertmanager resolves it by itself if the agent dies; a
//! resolved one says `endsAt` = when it resolved.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde_json::{json, Map, Value};

use super::http::{post_json, Auth};
use super::Outcome;
use crate::outbox::message::{generator_url, rfc3339};
use crate::outbox::{OutboxMessage, Status};
use crate::rules::{Alert, AlertState};

/// How many resend intervals a firing alert stays valid in Alertmanager
/// without hearing from the agent again (Prometheus uses 4 too).
pub const VALID_FOR_RESENDS: u32 = 4;

/// A `[[receivers]]` entry of type "alertmanager".
#[derive(Debug, Clone, PartialEq)]
pub struct AlertmanagerConfig {
    /// Alertmanager's base URL (alerts go to `{url}/api/v2/alerts`).
    pub url: String,
    /// Extra request headers.
    pub headers: BTreeMap<String, String>,
    /// Basic auth or a bearer token, if Alertmanager (or a proxy in front)
    /// wants one.
    pub auth: Option<Auth>,
    /// Time limit of one request.
    pub timeout: Duration,
    /// How often firing alerts are sent again.
    pub resend_interval: Duration,
    /// The agent's external URL, for the re-sent alerts' `generatorURL`.
    pub external_url: String,
}

impl AlertmanagerConfig {
    /// Where alerts are POSTed.
    pub fn endpoint(&self) -> String {
        format!("{}/api/v2/alerts", self.url.trim_end_matches('/'))
    }

    /// How long a firing alert stays valid: `4 × resend_interval`.
    pub fn valid_for(&self) -> Duration {
        self.resend_interval.saturating_mul(VALID_FOR_RESENDS)
    }
}

/// Why an outbox message cannot be pushed to Alertmanager (no retry can
/// send it).
#[derive(Debug, thiserror::Error)]
pub enum NotAlerts {
    /// It has no alerts.
    #[error("it has no alerts")]
    NoAlerts,
    /// A resolved alert without its end time.
    #[error("a resolved alert has no endsAt")]
    NoEnd,
}

/// Renders an outbox message as Alertmanager's postable alerts, firing
/// ones valid until `now + valid_for`.
pub fn render(
    message: &OutboxMessage,
    now: SystemTime,
    valid_for: Duration,
) -> Result<Value, NotAlerts> {
    if message.alerts.is_empty() {
        return Err(NotAlerts::NoAlerts);
    }
    let mut postable = Vec::with_capacity(message.alerts.len());
    for alert in &message.alerts {
        let ends = match alert.status {
            Status::Firing => rfc3339(now + valid_for),
            Status::Resolved => alert.ended().ok_or(NotAlerts::NoEnd)?.to_string(),
        };
        postable.push(json!({
            "labels": non_empty(&alert.labels),
            "annotations": non_empty(&alert.annotations),
            "startsAt": alert.starts_at,
            "endsAt": ends,
            "generatorURL": alert.generator_url,
        }));
    }
    Ok(Value::Array(postable))
}

/// The entries with a value (Alertmanager, like Prometheus, treats an
/// empty label as no label).
fn non_empty(map: &BTreeMap<String, String>) -> Value {
    let kept: Map<String, Value> = map
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    Value::Object(kept)
}

/// The periodic re-send: the `alerts` that are firing, valid until
/// `now + valid_for`; `None` when none fires.
pub fn resend_body(
    alerts: &[Alert],
    external_url: &str,
    now: SystemTime,
    valid_for: Duration,
) -> Option<String> {
    let generator = generator_url(external_url);
    let postable: Vec<Value> = alerts
        .iter()
        .filter_map(|alert| match alert.state {
            AlertState::Firing { since, .. } => Some(json!({
                "labels": non_empty(&alert.labels),
                "annotations": non_empty(&alert.annotations),
                "startsAt": rfc3339(since),
                "endsAt": rfc3339(now + valid_for),
                "generatorURL": generator,
            })),
            _ => None,
        })
        .collect();
    if postable.is_empty() {
        None
    } else {
        Some(Value::Array(postable).to_string())
    }
}

/// POSTs postable alerts as they are (blocking).
pub fn post(config: &AlertmanagerConfig, body: &str) -> Outcome {
    post_json(
        &config.endpoint(),
        &config.headers,
        config.auth.as_ref(),
        config.timeout,
        body,
    )
}

/// Sends one outbox message (blocking: run it on a blocking thread). A
/// message that cannot be rendered fails for good, with the reason.
pub fn send(config: &AlertmanagerConfig, message: &OutboxMessage) -> Outcome {
    match render(message, SystemTime::now(), config.valid_for()) {
        Ok(body) => post(config, &body.to_string()),
        Err(why) => Outcome::Permanent(format!(
            "the outbox message is not an alert notification: {why}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{AlertKey, Target, Transition};

    fn labels() -> BTreeMap<String, String> {
        [
            ("alertname", "GpuLost"),
            ("gpu", "1"),
            ("severity", "critical"),
            ("team", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn transition(from: AlertState, to: AlertState) -> Transition {
        Transition {
            key: AlertKey {
                rule: "GpuLost".into(),
                target: Target::Gpu("GPU-1".into()),
            },
            from,
            to,
            at: SystemTime::UNIX_EPOCH,
            value: None,
            labels: labels(),
            annotations: [("summary".to_string(), "GPU 1 lost".to_string())].into(),
        }
    }

    #[test]
    fn firing_is_valid_for_four_resends_and_resolved_ends_when_it_resolved() {
        let since = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let firing = AlertState::Firing {
            since,
            last_true: since,
        };
        let message = OutboxMessage::single(
            &transition(AlertState::Pending { since }, firing),
            "am",
            "http://node:9842/",
            None,
        )
        .expect("a message");
        let now = since + Duration::from_secs(30);
        let body = render(&message, now, Duration::from_secs(240)).expect("renders");
        let alert = &body[0];
        assert_eq!(body.as_array().map(Vec::len), Some(1));
        assert_eq!(alert["labels"]["alertname"], "GpuLost");
        assert_eq!(alert["labels"]["gpu"], "1");
        assert!(alert["labels"].get("team").is_none(), "empty labels go");
        assert_eq!(alert["annotations"]["summary"], "GPU 1 lost");
        assert_eq!(alert["startsAt"], "2023-11-14T22:13:20.000Z");
        assert_eq!(alert["endsAt"], "2023-11-14T22:17:50.000Z");
        assert_eq!(alert["generatorURL"], "http://node:9842/api/v1/alerts");
        assert!(alert.get("status").is_none() && alert.get("fingerprint").is_none());

        let at = since + Duration::from_secs(60);
        let mut message = OutboxMessage::single(
            &transition(firing, AlertState::Resolved { at }),
            "am",
            "",
            None,
        )
        .expect("a message");
        let body = render(&message, now, Duration::from_secs(240)).expect("renders");
        assert_eq!(body[0]["endsAt"], "2023-11-14T22:14:20.000Z");
        message.alerts[0].ends_at = String::new();
        assert!(matches!(
            render(&message, now, Duration::ZERO),
            Err(NotAlerts::NoEnd)
        ));
        message.alerts.clear();
        assert!(matches!(
            render(&message, now, Duration::ZERO),
            Err(NotAlerts::NoAlerts)
        ));
    }

    #[test]
    fn resends_carry_only_firing_alerts() {
        let since = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let alert = |state| Alert {
            state,
            value: None,
            labels: labels(),
            annotations: BTreeMap::new(),
            annotated_at: None,
        };
        let now = since + Duration::from_secs(600);
        let pending = alert(AlertState::Pending { since });
        let resolved = alert(AlertState::Resolved { at: since });
        assert_eq!(
            resend_body(
                &[pending.clone(), resolved.clone()],
                "",
                now,
                Duration::ZERO
            ),
            None
        );
        let firing = alert(AlertState::Firing {
            since,
            last_true: now,
        });
        let body = resend_body(
            &[pending, firing, resolved],
            "http://n:1",
            now,
            Duration::from_secs(60),
        )
        .expect("one firing");
        let body: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(body.as_array().map(Vec::len), Some(1));
        assert_eq!(body[0]["startsAt"], "2023-11-14T22:13:20.000Z");
        assert_eq!(body[0]["endsAt"], "2023-11-14T22:24:20.000Z");
        assert_eq!(body[0]["generatorURL"], "http://n:1/api/v1/alerts");
    }
}
