//! `gpuwatch_alerts`: like Prometheus's `ALERTS`, one series (value 1) per
//! pending or firing alert; `gpuwatch_rule_values_total`, how often each
//! rule had a value to judge; and `gpuwatch_alerting_dropped_snapshots_total`,
//! the snapshots alerting's queue was too full to take.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::families::Family;
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
            "Alerts of gpuwatch's rules that are pending or firing (value 1), like Prometheus's ALERTS; a workload rule's alerts count into one series per state (their identity is in /api/v1/alerts).",
            None,
        );
        // Alerts with the same labels (a workload rule's, which have no GPU
        // label) are one series counting them: never a duplicate series,
        // and bounded whatever the number of workloads.
        let mut counted: BTreeMap<[String; 4], [f64; 2]> = BTreeMap::new();
        for (key, alert) in &state.alerts {
            let slot = match alert.state {
                AlertState::Pending { .. } => 0,
                AlertState::Firing { .. } => 1,
                _ => continue,
            };
            let label = |name: &str| alert.labels.get(name).cloned().unwrap_or_default();
            let labels = [
                key.rule.clone(),
                label("severity"),
                label("gpu"),
                label("uuid"),
            ];
            counted.entry(labels).or_default()[slot] += 1.0;
        }
        for ([alertname, severity, gpu, uuid], counts) in counted {
            for (kind, n) in ["pending", "firing"].into_iter().zip(counts) {
                if n == 0.0 {
                    continue;
                }
                family.push(
                    vec![
                        ("alertname", Cow::Owned(alertname.clone())),
                        ("severity", Cow::Owned(severity.clone())),
                        ("gpu", Cow::Owned(gpu.clone())),
                        ("uuid", Cow::Owned(uuid.clone())),
                        ("state", Cow::Borrowed(kind)),
                    ],
                    n,
                );
            }
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

    /// Alerts of a workload rule have no GPU label: they count into one
    /// series per state (never a duplicate series, bounded whatever the
    /// number of workloads); GPU alerts stay one series each.
    #[test]
    fn workload_alerts_count_into_one_series_per_state() {
        use crate::rules::{Alert, AlertKey, EvalState, Target};
        let at = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let alert = |state: AlertState, gpu: &str| Alert {
            state,
            value: Some(0.0),
            labels: [("severity", "warning"), ("gpu", gpu)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            annotations: Default::default(),
            annotated_at: None,
        };
        let pending = AlertState::Pending { since: at };
        let firing = AlertState::Firing {
            since: at,
            last_true: at,
        };
        let mut state = EvalState::default();
        for (n, s) in [(1, pending), (2, pending), (3, pending), (4, firing)] {
            state.alerts.insert(
                AlertKey {
                    rule: "GpuWorkloadIdle".into(),
                    target: Target::Workload {
                        kind: "slurm_job".into(),
                        id: n.to_string(),
                    },
                },
                alert(s, ""),
            );
        }
        for gpu in ["0", "1"] {
            state.alerts.insert(
                AlertKey {
                    rule: "GpuHeldButIdle".into(),
                    target: Target::Gpu(format!("GPU-{gpu}")),
                },
                alert(firing, gpu),
            );
        }
        let (_publish, alerts) = tokio::sync::watch::channel(Arc::new(state));
        let (_sink, queued) = queue();
        let text = scrape(AlertsCollector {
            alerts,
            dropped_snapshots: queued.dropped.clone(),
            rule_values: false,
        });
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("gpuwatch_alerts{"))
            .collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines.contains(&r#"gpuwatch_alerts{alertname="GpuWorkloadIdle",severity="warning",gpu="",uuid="",state="pending"} 3.0"#), "{text}");
        assert!(lines.contains(&r#"gpuwatch_alerts{alertname="GpuWorkloadIdle",severity="warning",gpu="",uuid="",state="firing"} 1.0"#), "{text}");
        assert!(lines.contains(&r#"gpuwatch_alerts{alertname="GpuHeldButIdle",severity="warning",gpu="1",uuid="",state="firing"} 1.0"#), "{text}");
    }
}
