//! What on a snapshot asks for the node to be drained: the health verdict
//! (the one judge `/metrics`, `/api/v1/health` and the web view use:
//! [`judge`], with the Xid escalations) plus the GPUs on the PCI bus that
//! the driver does not list, each reason classed by what it asks for and
//! kept when `[remediation]` lets that class and source act.

use crate::gpu::Snapshot;
use crate::health::action_class::ActionClass;
use crate::health::escalation::Escalated;
use crate::health::verdict::{judge, State};

use crate::config::RemediationConfig;

/// One reason to take the node out of scheduling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    /// NVML index of the GPU; `None` for a GPU the driver does not list.
    pub gpu: Option<u32>,
    /// Its UUID, or its PCI address when the driver does not list it.
    pub uuid: String,
    /// The action class the judge gave the reason (one of
    /// [`crate::config::remediation::ACTIONS`]).
    pub action: &'static str,
    /// Where the reason comes from (`xid`, `recovery_action`, `pci`, ...).
    pub source: &'static str,
    /// What is wrong, as the verdict says it.
    pub text: String,
}

/// The triggers on `snapshot` (as of its `taken_at`) that `config` lets act, worst first
/// per GPU, GPUs in index order, then the GPUs missing from the driver.
pub fn triggers(
    snapshot: &Snapshot,
    escalated: &Escalated,
    config: &RemediationConfig,
) -> Vec<Trigger> {
    let acts = |state: State, action: &str, source: &str| {
        (state == State::Unhealthy || (config.degraded && state == State::Degraded))
            && config.actions.iter().any(|a| a == action)
            && config.sources.iter().any(|s| s == source)
    };
    let mut out = Vec::new();
    for gpu in &snapshot.gpus {
        let v = judge(snapshot, gpu, escalated);
        for reason in &v.reasons {
            let action = reason.class.as_str();
            if acts(reason.state, action, reason.source) {
                out.push(Trigger {
                    gpu: Some(gpu.index),
                    uuid: gpu.uuid.clone(),
                    action,
                    source: reason.source,
                    text: reason.text.clone(),
                });
            }
        }
    }
    let missing = snapshot.missing_from_driver();
    for address in missing {
        if acts(State::Unhealthy, ActionClass::GpuMissing.as_str(), "pci") {
            out.push(Trigger {
                gpu: None,
                text: format!(
                    "the GPU at {address} is on the PCI bus but the driver does not list it"
                ),
                uuid: address,
                action: ActionClass::GpuMissing.as_str(),
                source: "pci",
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::gpu::links::LinkHealth;
    use crate::gpu::{testing, GpuSnapshot, SlowReadings, XidCount};

    const NOW: Duration = Duration::from_secs(1_000_000);

    fn snapshot(gpus: Vec<GpuSnapshot>) -> Snapshot {
        testing::snapshot(SystemTime::UNIX_EPOCH + NOW, gpus)
    }

    #[test]
    fn only_the_configured_classes_and_sources_act() {
        let now = SystemTime::UNIX_EPOCH + NOW;
        let reset = GpuSnapshot {
            health: Arc::new(SlowReadings {
                links: LinkHealth {
                    recovery_action: Some("gpu_reset"),
                    ..LinkHealth::default()
                },
                ..SlowReadings::default()
            }),
            ..testing::gpu(1)
        };
        let app_error = GpuSnapshot {
            xid_errors: Arc::new(vec![XidCount {
                code: 13,
                count: 1,
                last_seen: now,
            }]),
            ..testing::gpu(2)
        };
        let s = snapshot(vec![testing::gpu(0), reset, app_error]);
        let config = RemediationConfig::default();
        let got = triggers(&s, &Escalated::new(), &config);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(
            (got[0].gpu, got[0].action, got[0].source),
            (Some(1), "RESET_GPU", "recovery_action")
        );
        // Degraded acts only when asked, and only for listed classes.
        let degraded = RemediationConfig {
            degraded: true,
            actions: vec!["RESTART_APP".into()],
            ..RemediationConfig::default()
        };
        let got = triggers(&s, &Escalated::new(), &degraded);
        assert_eq!(got.iter().map(|t| t.gpu).collect::<Vec<_>>(), [Some(2)]);
        // A source left out does not act.
        let no_recovery = RemediationConfig {
            sources: vec!["xid".into()],
            ..RemediationConfig::default()
        };
        assert!(triggers(&s, &Escalated::new(), &no_recovery).is_empty());
        // An escalation (GpuXidRecurring) asks for inspection.
        let escalated = Escalated::from([(testing::gpu(0).alert_key(), vec![79])]);
        let got = triggers(&snapshot(vec![testing::gpu(0)]), &escalated, &config);
        assert_eq!(got[0].action, "INSPECT_HARDWARE");
    }
}
