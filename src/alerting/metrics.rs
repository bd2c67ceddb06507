//! `gpuwatch_alerts`: like Prometheus's `ALERTS`, one series (value 1) per
//! pending or firing alert; and `gpuwatch_rule_values_total`, how often each
//! rule had a value to judge.

use std::borrow::Cow;
use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::exporter::families::Family;
use crate::rules::AlertState;

use super::AlertsReceiver;

/// Encodes the latest evaluation state.
#[derive(Debug)]
pub struct AlertsCollector(pub AlertsReceiver);

impl Collector for AlertsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let state = self.0.borrow().clone();
        let mut family = Family::gauge(
            "alerts",
            "Alerts of gpuwatch's rules that are pending or firing (value 1), like Prometheus's ALERTS.",
            None,
        );
        for (key, alert) in &state.alerts {
            let kind = match alert.state {
                AlertState::Pending { .. } => "pending",
                AlertState::Firing { .. } => "firing",
                _ => continue,
            };
            let label =
                |name: &str| Cow::Owned(alert.labels.get(name).cloned().unwrap_or_default());
            family.push(
                vec![
                    ("alertname", Cow::Owned(key.rule.clone())),
                    ("severity", label("severity")),
                    ("gpu", label("gpu")),
                    ("uuid", label("uuid")),
                    ("state", Cow::Borrowed(kind)),
                ],
                1.0,
            );
        }
        family.encode(&mut encoder)?;
        let mut values = Family::counter(
            "rule_values",
            "Checks of each rule's condition (per GPU, or per node) that gave it a value to judge: a reading, an anomaly score, an Xid or counter increase seen. A rule that stays at 0 never had the readings it needs (or its detector has not warmed up).",
            None,
        );
        for (rule, n) in &state.values {
            values.push(vec![("rule", Cow::Borrowed(rule.as_str()))], *n as f64);
        }
        values.encode(&mut encoder)
    }
}
