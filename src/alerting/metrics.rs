//! `gpuwatch_alerts`: like Prometheus's `ALERTS`, one series (value 1) per
//! pending or firing alert; `gpuwatch_rule_values_total`, how often each
//! rule had a value to judge; and `gpuwatch_alerting_dropped_snapshots_total`,
//! the snapshots alerting's queue was too full to take.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::exporter::families::Family;
use crate::rules::AlertState;

use super::AlertsReceiver;

/// Encodes the latest evaluation state and the queue's drops.
#[derive(Debug)]
pub struct AlertsCollector {
    /// The latest evaluation state.
    pub alerts: AlertsReceiver,
    /// Snapshots alerting's queue dropped ([`super::AlertQueue::dropped`]).
    pub dropped_snapshots: Arc<AtomicU64>,
    /// Whether to export `gpuwatch_rule_values_total` (detail set
    /// `rule_values`).
    pub rule_values: bool,
}

impl Collector for AlertsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let state = self.alerts.borrow().clone();
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
        for (rule, n) in state.values.iter().filter(|_| self.rule_values) {
            values.push(vec![("rule", Cow::Borrowed(rule.as_str()))], *n as f64);
        }
        values.encode(&mut encoder)?;
        let mut dropped = Family::counter(
            "alerting_dropped_snapshots",
            "Snapshots alerting's queue was too full to take (the rules skipped those samples).",
            None,
        );
        dropped.push(
            vec![],
            self.dropped_snapshots.load(Ordering::Relaxed) as f64,
        );
        dropped.encode(&mut encoder)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, UNIX_EPOCH};

    use prometheus_client::registry::Registry;

    use super::*;
    use crate::alerting::queue::{queue, CAPACITY};
    use crate::gpu::testing;

    fn scrape(collector: AlertsCollector) -> String {
        let mut registry = Registry::with_prefix("gpuwatch");
        registry.register_collector(Box::new(collector));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        text
    }

    /// The sampler offers more snapshots than the queue holds while the
    /// evaluation takes none: the ones beyond its capacity are counted,
    /// and /metrics shows the count.
    #[test]
    fn a_full_queue_counts_its_dropped_snapshots() {
        let (sink, mut alerting) = queue();
        let (_publish, alerts) = tokio::sync::watch::channel(Arc::new(Default::default()));
        let collector = || AlertsCollector {
            alerts: alerts.clone(),
            dropped_snapshots: alerting.dropped.clone(),
            rule_values: true,
        };
        let text = scrape(collector());
        assert!(
            text.contains("\ngpuwatch_alerting_dropped_snapshots_total 0.0\n"),
            "{text}"
        );
        for s in 0..CAPACITY as u64 + 3 {
            let taken = UNIX_EPOCH + Duration::from_secs(1_000_000 + s);
            sink.offer(&Arc::new(testing::snapshot(taken, vec![testing::gpu(0)])));
        }
        let text = scrape(collector());
        assert!(
            text.contains("\ngpuwatch_alerting_dropped_snapshots_total 3.0\n"),
            "{text}"
        );
        // The queue kept the oldest ones, in order.
        let first = alerting.snapshots.try_recv().expect("a queued snapshot");
        assert_eq!(first.taken_at, UNIX_EPOCH + Duration::from_secs(1_000_000));
        // Once there is room again, nothing more is dropped.
        sink.offer(&first);
        assert!(scrape(collector()).contains("\ngpuwatch_alerting_dropped_snapshots_total 3.0\n"));
    }
}
