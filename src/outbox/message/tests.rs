use std::time::Duration;

use super::*;
use crate::rules::{AlertKey, Target};

fn transition(from: AlertState, to: AlertState) -> Transition {
    let labels: BTreeMap<String, String> = [("alertname", "GpuLost"), ("gpu", "1")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Transition {
        key: AlertKey {
            rule: "GpuLost".into(),
            target: Target::Gpu("GPU-1".into()),
        },
        from,
        to,
        at: SystemTime::UNIX_EPOCH,
        value: None,
        labels,
        annotations: BTreeMap::new(),
    }
}

#[test]
fn firing_and_resolved_messages_have_the_v4_shape() {
    let since = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let at = since + Duration::from_secs(60);
    let firing_state = AlertState::Firing {
        since,
        last_true: since,
    };
    let firing = transition(AlertState::Pending { since }, firing_state);
    let m = OutboxMessage::single(&firing, "ops", "", None).expect("a message");
    let body: serde_json::Value =
        serde_json::from_str(&m.to_json().expect("JSON")).expect("parses");
    assert_eq!(body["version"], "4");
    assert_eq!(body["truncatedAlerts"], 0);
    assert_eq!(body["status"], "firing");
    assert_eq!(body["receiver"], "ops");
    assert_eq!(body["groupKey"], "{}:{alertname=\"GpuLost\"}");
    assert_eq!(body["groupLabels"]["alertname"], "GpuLost");
    assert_eq!(body["commonLabels"]["gpu"], "1");
    assert_eq!(body["externalURL"], "");
    assert_eq!(body["alerts"][0]["status"], "firing");
    assert_eq!(body["alerts"][0]["startsAt"], "2023-11-14T22:13:20.000Z");
    assert_eq!(body["alerts"][0]["endsAt"], ZERO_TIME);
    assert_eq!(body["alerts"][0]["generatorURL"], "");
    assert_eq!(
        body["alerts"][0]["fingerprint"],
        fingerprint(&firing.labels)
    );
    assert!(body["alerts"][0].get("gpuwatch").is_none());
    assert_eq!(m.alerts[0].ended(), None);

    let resolved = transition(firing_state, AlertState::Resolved { at });
    let m = OutboxMessage::single(&resolved, "ops", "http://node:9842/", None).expect("one");
    assert_eq!(m.status, Status::Resolved);
    assert_eq!(m.alerts[0].starts_at, "2023-11-14T22:13:20.000Z");
    assert_eq!(m.alerts[0].ended(), Some("2023-11-14T22:14:20.000Z"));
    assert_eq!(m.alerts[0].generator_url, "http://node:9842/api/v1/alerts");

    let pending = transition(AlertState::Inactive, AlertState::Pending { since });
    assert!(OutboxMessage::single(&pending, "ops", "", None).is_none());
}

fn single(name: &str, gpu: &str) -> OutboxMessage {
    let labels: BTreeMap<String, String> = [("alertname", name), ("host", "n1"), ("gpu", gpu)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let annotations: BTreeMap<String, String> = [
        ("summary".to_string(), format!("{name} on {gpu}")),
        ("runbook".to_string(), "r".to_string()),
    ]
    .into();
    OutboxMessage {
        version: "4".into(),
        group_key: format!("{{}}:{{alertname=\"{name}\"}}"),
        truncated_alerts: 0,
        status: Status::Firing,
        receiver: "ops".into(),
        group_labels: [("alertname".to_string(), name.to_string())].into(),
        common_labels: labels.clone(),
        common_annotations: annotations.clone(),
        external_url: String::new(),
        alerts: vec![OutboxAlert {
            status: Status::Firing,
            labels,
            annotations,
            starts_at: String::new(),
            ends_at: ZERO_TIME.into(),
            generator_url: String::new(),
            fingerprint: format!("{name}{gpu}"),
            details: None,
        }],
    }
}

#[test]
fn one_message_stays_as_it_is_and_several_become_one_group() {
    let one = single("GpuLost", "1");
    assert_eq!(OutboxMessage::group(vec![one.clone()]), Some(one));
    assert_eq!(OutboxMessage::group(vec![]), None);
    let mut resolved = single("GpuXidContained", "2");
    resolved.alerts[0].status = Status::Resolved;
    let group = OutboxMessage::group(vec![single("GpuLost", "1"), resolved]).expect("a group");
    assert_eq!(group.alerts.len(), 2);
    assert_eq!(group.alerts[1].fingerprint, "GpuXidContained2");
    assert_eq!(
        group.common_labels,
        [("host".to_string(), "n1".to_string())].into()
    );
    assert_eq!(
        group.common_annotations,
        [("runbook".to_string(), "r".to_string())].into()
    );
    assert_eq!(
        group.group_labels,
        [("host".to_string(), "n1".to_string())].into()
    );
    assert_eq!(group.group_key, "{}:{host=\"n1\"}");
    assert_eq!(group.status, Status::Firing, "one of them fires");
    assert_eq!(group.version, "4");
    assert_eq!(group.receiver, "ops");
}

/// A row as the versions before the typed message wrote it (the JSON of
/// `serde_json::json!`, members in alphabetical order, details as
/// `alerts[0].gpuwatch`) reads into the same message.
pub(crate) const OLD_ROW: &str = r#"{"alerts":[{"annotations":{"summary":"GPU 1 lost"},"endsAt":"0001-01-01T00:00:00Z","fingerprint":"0123456789abcdef","generatorURL":"http://node:9842/api/v1/alerts","gpuwatch":{"condition":"gpu_lost","gpuName":"NVIDIA H100","value":1.0},"labels":{"alertname":"GpuLost","gpu":"1","host":"node","severity":"critical"},"startsAt":"2023-11-14T22:13:20.000Z","status":"firing"}],"commonAnnotations":{"summary":"GPU 1 lost"},"commonLabels":{"alertname":"GpuLost","gpu":"1","host":"node","severity":"critical"},"externalURL":"http://node:9842","groupKey":"{}:{alertname=\"GpuLost\"}","groupLabels":{"alertname":"GpuLost"},"receiver":"ops","status":"firing","truncatedAlerts":0,"version":"4"}"#;

#[test]
fn rows_in_the_old_shape_still_read() {
    let m = OutboxMessage::parse(OLD_ROW).expect("an old row reads");
    assert_eq!(m.receiver, "ops");
    assert_eq!(m.external_url, "http://node:9842");
    assert_eq!(m.alerts.len(), 1);
    let a = &m.alerts[0];
    assert_eq!(a.status, Status::Firing);
    assert_eq!(
        a.labels.get("alertname").map(String::as_str),
        Some("GpuLost")
    );
    assert_eq!(a.fingerprint, "0123456789abcdef");
    assert_eq!(a.generator_url, "http://node:9842/api/v1/alerts");
    let details = a.details.as_ref().expect("details");
    assert_eq!(details.condition.as_deref(), Some("gpu_lost"));
    assert_eq!(details.gpu_name.as_deref(), Some("NVIDIA H100"));
    // Written again, it says the same (member order aside).
    let again: serde_json::Value =
        serde_json::from_str(&m.to_json().expect("JSON")).expect("parses");
    let old: serde_json::Value = serde_json::from_str(OLD_ROW).expect("parses");
    assert_eq!(again, old);
    // Members added later may be missing from older rows.
    let minimal = r#"{"alerts":[{"status":"resolved","labels":{"alertname":"X"},"endsAt":"2023-11-14T22:14:20.000Z"}]}"#;
    let m = OutboxMessage::parse(minimal).expect("a minimal row reads");
    assert_eq!(m.version, "4");
    assert_eq!(m.alerts[0].ended(), Some("2023-11-14T22:14:20.000Z"));
    assert_eq!(m.alerts[0].details, None);
}

#[test]
fn what_is_not_a_message_does_not_read() {
    for text in ["", "nope", "{}", r#"{"alerts": 3}"#, "[]"] {
        assert!(OutboxMessage::parse(text).is_err(), "{text}");
    }
}
