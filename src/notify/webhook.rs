//! The generic webhook receiver: the message body in the Alertmanager
//! webhook v4 shape (so existing receivers work), the alert fingerprint,
//! and one POST with its outcome.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{json, Value};

use crate::rules::{AlertState, Transition};

use super::http::{post_json, Auth};
use super::{Outcome, WebhookConfig};

/// Alertmanager's "zero" time, the `endsAt` of an alert still firing.
pub const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// The alert's stable dedup key: FNV-1a (64 bits, hex) over its sorted
/// labels. The same alert (rule, GPU, labels) always gets the same one,
/// across restarts and releases.
pub fn fingerprint(labels: &BTreeMap<String, String>) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, value) in labels {
        for byte in name
            .bytes()
            .chain([0xff])
            .chain(value.bytes())
            .chain([0xff])
        {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// `t` as RFC 3339 UTC with milliseconds, as Alertmanager writes times.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// The `generatorURL` of the agent's alerts: its alerts API under
/// `external_url` (empty when that is).
pub fn generator_url(external_url: &str) -> String {
    if external_url.is_empty() {
        String::new()
    } else {
        format!("{}/api/v1/alerts", external_url.trim_end_matches('/'))
    }
}

/// The message for a transition to firing or resolved (`None` for other
/// transitions), addressed to `receiver`. `external_url` is the agent's
/// URL, or empty.
pub fn payload(t: &Transition, receiver: &str, external_url: &str) -> Option<Value> {
    let (status, starts, ends) = match (t.to, t.from) {
        (AlertState::Firing { since, .. }, _) => ("firing", since, None),
        (AlertState::Resolved { at }, AlertState::Firing { since, .. }) => {
            ("resolved", since, Some(at))
        }
        (AlertState::Resolved { at }, _) => ("resolved", at, Some(at)),
        _ => return None,
    };
    let alertname = t.key.rule.clone();
    let generator = generator_url(external_url);
    Some(json!({
        "version": "4",
        "groupKey": format!("{{}}:{{alertname=\"{alertname}\"}}"),
        "truncatedAlerts": 0,
        "status": status,
        "receiver": receiver,
        "groupLabels": { "alertname": alertname },
        "commonLabels": t.labels,
        "commonAnnotations": t.annotations,
        "externalURL": external_url,
        "alerts": [{
            "status": status,
            "labels": t.labels,
            "annotations": t.annotations,
            "startsAt": rfc3339(starts),
            "endsAt": ends.map(rfc3339).unwrap_or_else(|| ZERO_TIME.to_string()),
            "generatorURL": generator,
            "fingerprint": fingerprint(&t.labels),
        }],
    }))
}

/// POSTs `body` to the webhook as it is (blocking: run it on a blocking
/// thread). Errors name the receiver's URL, never its token or headers.
pub fn send(config: &WebhookConfig, body: &str) -> Outcome {
    let auth = config.bearer_token.clone().map(Auth::Bearer);
    post_json(
        &config.url,
        &config.headers,
        auth.as_ref(),
        config.timeout,
        body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{AlertKey, Target};
    use std::time::Duration;

    #[test]
    fn firing_and_resolved_messages_have_the_v4_shape() {
        let mut labels = BTreeMap::new();
        labels.insert("alertname".to_string(), "GpuLost".to_string());
        labels.insert("gpu".to_string(), "1".to_string());
        let since = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let at = since + Duration::from_secs(60);
        let firing = Transition {
            key: AlertKey {
                rule: "GpuLost".into(),
                target: Target::Gpu("GPU-1".into()),
            },
            from: AlertState::Pending { since },
            to: AlertState::Firing {
                since,
                last_true: since,
            },
            at: since,
            value: None,
            labels: labels.clone(),
            annotations: BTreeMap::new(),
        };
        let body = payload(&firing, "ops", "").unwrap();
        assert_eq!(body["version"], "4");
        assert_eq!(body["status"], "firing");
        assert_eq!(body["receiver"], "ops");
        assert_eq!(body["groupLabels"]["alertname"], "GpuLost");
        assert_eq!(body["alerts"][0]["startsAt"], "2023-11-14T22:13:20.000Z");
        assert_eq!(body["alerts"][0]["endsAt"], ZERO_TIME);
        assert_eq!(body["alerts"][0]["fingerprint"], fingerprint(&labels));
        let resolved = Transition {
            from: firing.to,
            to: AlertState::Resolved { at },
            at,
            ..firing.clone()
        };
        let body = payload(&resolved, "ops", "http://node:9842").unwrap();
        assert_eq!(body["status"], "resolved");
        assert_eq!(body["alerts"][0]["startsAt"], "2023-11-14T22:13:20.000Z");
        assert_eq!(body["alerts"][0]["endsAt"], "2023-11-14T22:14:20.000Z");
        assert_eq!(
            body["alerts"][0]["generatorURL"],
            "http://node:9842/api/v1/alerts"
        );
        let pending = Transition {
            from: AlertState::Inactive,
            to: AlertState::Pending { since },
            ..firing
        };
        assert!(payload(&pending, "ops", "").is_none());
    }

    #[test]
    fn fingerprints_are_stable_and_label_sensitive() {
        let mut a = BTreeMap::new();
        a.insert("alertname".to_string(), "GpuLost".to_string());
        assert_eq!(fingerprint(&a), fingerprint(&a.clone()));
        assert_eq!(fingerprint(&a).len(), 16);
        let mut b = a.clone();
        b.insert("gpu".to_string(), "0".to_string());
        assert_ne!(fingerprint(&a), fingerprint(&b));
    }
}
