//! The outbox rows of planned messages: the webhook body of one alert, or
//! of several grouped alerts in one Alertmanager webhook v4 message
//! (`alerts[]` holds them all; `commonLabels` and `commonAnnotations` are
//! what they share; the group is the node, so `groupLabels` is its `host`).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::notify::details::Details;

use super::plan::Message;
use super::store::Outgoing;

/// The outbox rows for `messages`, whose links point at `external_url`;
/// each alert carries its details (by fingerprint) as `gpuwatch`.
pub fn outgoing(
    messages: &[Message],
    external_url: &str,
    details: &BTreeMap<String, Details>,
) -> Vec<Outgoing> {
    messages
        .iter()
        .filter_map(|m| {
            let bodies: Vec<Value> = m
                .notices
                .iter()
                .filter_map(|n| {
                    let mut body =
                        crate::notify::webhook::payload(&n.transition, &m.receiver, external_url)?;
                    if let Some(d) = details.get(&n.fingerprint) {
                        crate::notify::details::attach(&mut body, d);
                    }
                    Some(body)
                })
                .collect();
            let fingerprints: Vec<&str> =
                m.notices.iter().map(|n| n.fingerprint.as_str()).collect();
            merge(bodies).map(|body| Outgoing {
                receiver: m.receiver.clone(),
                fingerprint: fingerprints.join(","),
                payload: body.to_string(),
            })
        })
        .collect()
}

/// What every object in `objects` has with the same value.
fn common(objects: &[&Value]) -> Map<String, Value> {
    let Some(first) = objects.first().and_then(|o| o.as_object()) else {
        return Map::new();
    };
    first
        .iter()
        .filter(|(k, v)| objects.iter().all(|o| o.get(k.as_str()) == Some(*v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// One webhook body from the bodies of single alerts (`None` when empty).
pub fn merge(mut bodies: Vec<Value>) -> Option<Value> {
    if bodies.len() <= 1 {
        return bodies.pop();
    }
    let alerts: Vec<Value> = bodies
        .iter()
        .filter_map(|b| b["alerts"].as_array())
        .flatten()
        .cloned()
        .collect();
    let labels: Vec<&Value> = alerts.iter().map(|a| &a["labels"]).collect();
    let annotations: Vec<&Value> = alerts.iter().map(|a| &a["annotations"]).collect();
    let common_labels = common(&labels);
    let mut group_labels = BTreeMap::new();
    if let Some(host) = common_labels.get("host").and_then(Value::as_str) {
        group_labels.insert("host".to_string(), host.to_string());
    }
    let status = if alerts.iter().any(|a| a["status"] == "firing") {
        "firing"
    } else {
        "resolved"
    };
    let mut body = bodies.swap_remove(0);
    body["groupKey"] = json!(format!(
        "{{}}:{{host=\"{}\"}}",
        group_labels.get("host").map_or("", String::as_str)
    ));
    body["status"] = json!(status);
    body["groupLabels"] = json!(group_labels);
    body["commonLabels"] = Value::Object(common_labels);
    body["commonAnnotations"] = Value::Object(common(&annotations));
    body["alerts"] = Value::Array(alerts);
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(name: &str, gpu: &str) -> Value {
        json!({
            "version": "4",
            "groupKey": format!("{{}}:{{alertname=\"{name}\"}}"),
            "status": "firing",
            "receiver": "ops",
            "groupLabels": {"alertname": name},
            "commonLabels": {"alertname": name, "host": "n1", "gpu": gpu},
            "commonAnnotations": {"summary": format!("{name} on {gpu}"), "runbook": "r"},
            "alerts": [{
                "status": "firing",
                "labels": {"alertname": name, "host": "n1", "gpu": gpu},
                "annotations": {"summary": format!("{name} on {gpu}"), "runbook": "r"},
                "fingerprint": format!("{name}{gpu}"),
            }],
        })
    }

    #[test]
    fn one_body_stays_as_it_is_and_several_become_one_group() {
        let one = single("GpuLost", "1");
        assert_eq!(merge(vec![one.clone()]), Some(one));
        assert_eq!(merge(vec![]), None);
        let body = merge(vec![single("GpuLost", "1"), single("GpuXidContained", "2")]).unwrap();
        assert_eq!(body["alerts"].as_array().map(Vec::len), Some(2));
        assert_eq!(body["alerts"][1]["fingerprint"], "GpuXidContained2");
        assert_eq!(body["commonLabels"], json!({"host": "n1"}));
        assert_eq!(body["commonAnnotations"], json!({"runbook": "r"}));
        assert_eq!(body["groupLabels"], json!({"host": "n1"}));
        assert_eq!(body["groupKey"], "{}:{host=\"n1\"}");
        assert_eq!(body["status"], "firing");
        assert_eq!(body["version"], "4");
        assert_eq!(body["receiver"], "ops");
    }
}
