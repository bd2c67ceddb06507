//! The outbox message: one notification to one receiver, about one alert
//! or a group of them. The alerting task writes it ([`OutboxMessage::single`],
//! [`OutboxMessage::group`]); every receiver reads it (the webhook posts it
//! as it is, Alertmanager gets postable alerts made from it, email renders
//! it).
//!
//! Stored as JSON in the Alertmanager webhook v4 shape, so a generic
//! webhook receiver takes it unchanged: `version, groupKey,
//! truncatedAlerts, status, receiver, groupLabels, commonLabels,
//! commonAnnotations, externalURL, alerts[{status, labels, annotations,
//! startsAt, endsAt, generatorURL, fingerprint}]`, plus each alert's
//! [`Details`] as `gpuwatch`, an extra member receivers ignore. Reading is
//! lenient (every member but `alerts` may be missing) so that rows written
//! by earlier versions still deliver.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::rules::{fingerprint, AlertState, Transition};

use super::details::Details;

/// Alertmanager's "zero" time, the `endsAt` of an alert still firing.
pub const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// Firing or resolved, of a message or of one alert in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The alert fires (a group: at least one of its alerts does).
    #[default]
    Firing,
    /// The alert resolved (a group: all of them did).
    Resolved,
}

/// One notification to one receiver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxMessage {
    /// The webhook format's version, "4".
    #[serde(default = "version_4")]
    pub version: String,
    /// The group's key: `{}:{alertname="X"}` for one alert,
    /// `{}:{host="h"}` for a group.
    #[serde(default)]
    pub group_key: String,
    /// Alerts left out of the message (always 0: none are).
    #[serde(default)]
    pub truncated_alerts: u64,
    /// Firing when any of the alerts fires.
    #[serde(default)]
    pub status: Status,
    /// The receiver it is for.
    #[serde(default)]
    pub receiver: String,
    /// The labels the group is made by.
    #[serde(default)]
    pub group_labels: BTreeMap<String, String>,
    /// The labels every alert has with the same value.
    #[serde(default)]
    pub common_labels: BTreeMap<String, String>,
    /// The annotations every alert has with the same value.
    #[serde(default)]
    pub common_annotations: BTreeMap<String, String>,
    /// The agent's URL (empty when not known).
    #[serde(default, rename = "externalURL")]
    pub external_url: String,
    /// The alerts, at least one.
    pub alerts: Vec<OutboxAlert>,
}

/// One alert of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxAlert {
    /// Firing or resolved.
    #[serde(default)]
    pub status: Status,
    /// The alert's labels (`alertname`, `host`, `gpu`, `severity`, ...).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Its annotations (`summary`, `description`, ...), rendered.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// When it started firing, RFC 3339.
    #[serde(default)]
    pub starts_at: String,
    /// When it resolved, RFC 3339; [`ZERO_TIME`] while it fires.
    #[serde(default)]
    pub ends_at: String,
    /// The agent's alerts API (empty when the URL is not known).
    #[serde(default, rename = "generatorURL")]
    pub generator_url: String,
    /// The alert's stable dedup key ([`crate::rules::fingerprint`]).
    #[serde(default)]
    pub fingerprint: String,
    /// What gpuwatch adds (absent in rows written before it existed).
    #[serde(default, rename = "gpuwatch", skip_serializing_if = "Option::is_none")]
    pub details: Option<Details>,
}

fn version_4() -> String {
    "4".to_string()
}

impl OutboxAlert {
    /// When it resolved, `None` while it fires (or when not written).
    pub fn ended(&self) -> Option<&str> {
        Some(self.ends_at.as_str()).filter(|e| !e.is_empty() && *e != ZERO_TIME)
    }
}

impl OutboxMessage {
    /// The message for a transition to firing or resolved (`None` for other
    /// transitions), addressed to `receiver`, with its `details`.
    /// `external_url` is the agent's URL, or empty.
    pub fn single(
        t: &Transition,
        receiver: &str,
        external_url: &str,
        details: Option<Details>,
    ) -> Option<OutboxMessage> {
        let (status, starts, ends) = match (t.to, t.from) {
            (AlertState::Firing { since, .. }, _) => (Status::Firing, since, None),
            (AlertState::Resolved { at }, AlertState::Firing { since, .. }) => {
                (Status::Resolved, since, Some(at))
            }
            (AlertState::Resolved { at }, _) => (Status::Resolved, at, Some(at)),
            _ => return None,
        };
        let alertname = t.key.rule.clone();
        Some(OutboxMessage {
            version: version_4(),
            group_key: format!("{{}}:{{alertname=\"{alertname}\"}}"),
            truncated_alerts: 0,
            status,
            receiver: receiver.to_string(),
            group_labels: BTreeMap::from([("alertname".to_string(), alertname)]),
            common_labels: t.labels.clone(),
            common_annotations: t.annotations.clone(),
            external_url: external_url.to_string(),
            alerts: vec![OutboxAlert {
                status,
                labels: t.labels.clone(),
                annotations: t.annotations.clone(),
                starts_at: rfc3339(starts),
                ends_at: ends.map_or_else(|| ZERO_TIME.to_string(), rfc3339),
                generator_url: generator_url(external_url),
                fingerprint: fingerprint(&t.labels),
                details,
            }],
        })
    }

    /// One message from single-alert messages to the same receiver (`None`
    /// when there are none): one stays as it is; several become a group of
    /// the node, whose `groupLabels` is its `host`, `commonLabels` and
    /// `commonAnnotations` what the alerts share.
    pub fn group(mut messages: Vec<OutboxMessage>) -> Option<OutboxMessage> {
        if messages.len() <= 1 {
            return messages.pop();
        }
        let alerts: Vec<OutboxAlert> = messages
            .iter_mut()
            .flat_map(|m| std::mem::take(&mut m.alerts))
            .collect();
        let common_labels = common(alerts.iter().map(|a| &a.labels));
        let common_annotations = common(alerts.iter().map(|a| &a.annotations));
        let host = common_labels.get("host").cloned();
        let mut group = messages.swap_remove(0);
        group.group_key = format!("{{}}:{{host=\"{}\"}}", host.as_deref().unwrap_or(""));
        group.status = if alerts.iter().any(|a| a.status == Status::Firing) {
            Status::Firing
        } else {
            Status::Resolved
        };
        group.group_labels = host.map(|h| ("host".to_string(), h)).into_iter().collect();
        group.common_labels = common_labels;
        group.common_annotations = common_annotations;
        group.alerts = alerts;
        Some(group)
    }

    /// Reads a stored message.
    pub fn parse(json: &str) -> Result<OutboxMessage, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// The message as stored and as the webhook receiver posts it.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

/// The entries every map in `maps` has with the same value.
fn common<'a>(
    mut maps: impl Iterator<Item = &'a BTreeMap<String, String>> + Clone,
) -> BTreeMap<String, String> {
    let Some(first) = maps.next() else {
        return BTreeMap::new();
    };
    first
        .iter()
        .filter(|(k, v)| maps.clone().all(|m| m.get(*k) == Some(*v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
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

#[cfg(test)]
pub(crate) mod tests;
