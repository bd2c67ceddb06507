//! What a notification says beyond the alert's labels and annotations: the
//! rule's condition and threshold, the GPU's name, the reading behind the
//! alert with the GPU's own limit, and a short history of that reading.
//! Alerting gathers it once, when the transition is written to the outbox
//! (see `crate::alerting`'s details), so a message delivered late (a mail
//! server down for an hour) still shows the history up to the moment the
//! alert fired or resolved. This module is only the contract: the types
//! both sides read.
//!
//! It travels in the outbox message as each alert's `gpuwatch` member
//! ([`super::OutboxAlert::details`]): an extra member of the Alertmanager
//! webhook v4 alert object, which existing webhook receivers ignore.

use serde::{Deserialize, Serialize};

use super::workload::WorkloadDetails;

/// Extra facts about one alert (the payload's `alerts[0].gpuwatch`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Details {
    /// The rule's condition as written, e.g. `temperature > 85`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// The condition's value at the transition (1/0 for yes/no conditions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// The rule's threshold (a comparison's number, a margin, an age).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// The GPU's product name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_name: Option<String>,
    /// The reading behind the alert (e.g. the temperature for a thermal
    /// slowdown), when the rule has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<MetricDetails>,
    /// The workload a workload alert is about (`GpuWorkloadIdle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadDetails>,
    /// The workloads on a GPU alert's GPU (at most 3; the `workloads`
    /// annotation says how many more).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<WorkloadDetails>,
}

/// The reading behind an alert, now and over the last 30 minutes
/// (`alerting::details::HISTORY_SPAN`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricDetails {
    /// The history metric name (as `/api/v1/history?metric=`).
    pub name: String,
    /// What a person reads, e.g. "GPU temperature".
    pub label: String,
    /// Its unit, e.g. "°C".
    pub unit: String,
    /// The reading in the snapshot that made the transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<f64>,
    /// The GPU's own limit for it (slowdown temperature, power limit, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// What that limit is, e.g. "slowdown threshold".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_name: Option<String>,
    /// Its recent history, ending with `current`; absent when there is
    /// neither a reading nor a row in the database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistorySummary>,
}

/// A reading over the last minutes: range, summary and one value per step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistorySummary {
    /// Start, Unix seconds.
    pub from: f64,
    /// End, Unix seconds.
    pub to: f64,
    /// Seconds per point.
    pub step_seconds: f64,
    /// Lowest value seen.
    pub min: f64,
    /// Average over the points that have data.
    pub avg: f64,
    /// Highest value seen.
    pub max: f64,
    /// One average per step from `from` (null: no data in that step).
    pub points: Vec<Option<f64>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_round_trip_through_the_message() {
        let mut message =
            crate::outbox::OutboxMessage::parse(r#"{"alerts": [{"status": "firing"}]}"#)
                .expect("a message");
        assert_eq!(message.alerts[0].details, None);
        let details = Details {
            condition: Some("temperature > 85".into()),
            value: Some(90.0),
            threshold: Some(85.0),
            gpu_name: Some("NVIDIA H100".into()),
            metric: None,
            ..Details::default()
        };
        message.alerts[0].details = Some(details.clone());
        let json = message.to_json().expect("JSON");
        let value: serde_json::Value = serde_json::from_str(&json).expect("parses");
        assert_eq!(value["alerts"][0]["gpuwatch"]["gpuName"], "NVIDIA H100");
        let back = crate::outbox::OutboxMessage::parse(&json).expect("reads back");
        assert_eq!(back.alerts[0].details, Some(details));
    }
}
