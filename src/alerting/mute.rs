//! Why an alert is not notified now: a silence matches it, or it is
//! inhibited because its GPU is lost (a lost GPU's temperature, memory or
//! Xid alerts say nothing the `GpuLost` alert does not). Muted alerts are
//! still evaluated, stored and shown; only their notifications wait.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::rules::{Alert, AlertKey, AlertState, EvalState, Target};

use super::silence::Silence;

/// The rule whose firing alert inhibits the other alerts of its GPU.
pub const INHIBITING_RULE: &str = "GpuLost";

/// Why one alert is muted (nothing: it is not).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mute {
    /// The active silences that match it.
    pub silenced_by: Vec<i64>,
    /// The firing alert that inhibits it, e.g. `GpuLost/GPU-…`.
    pub inhibited_by: Option<String>,
}

impl Mute {
    /// Whether notifications for the alert are held back.
    pub fn is_muted(&self) -> bool {
        !self.silenced_by.is_empty() || self.inhibited_by.is_some()
    }
}

/// What mutes alerts at one moment: the lost GPUs of a state and the
/// silences.
#[derive(Debug)]
pub struct Mutes<'a> {
    lost: BTreeSet<String>,
    silences: &'a [Arc<Silence>],
    now_ms: i64,
}

impl<'a> Mutes<'a> {
    /// The mutes for `state` (whose firing `GpuLost` alerts inhibit) and
    /// `silences` at `now_ms`.
    pub fn new(state: &EvalState, silences: &'a [Arc<Silence>], now_ms: i64) -> Mutes<'a> {
        let lost = state
            .alerts
            .iter()
            .filter(|(key, alert)| {
                key.rule == INHIBITING_RULE && matches!(alert.state, AlertState::Firing { .. })
            })
            .filter_map(|(key, _)| match &key.target {
                Target::Gpu(uuid) => Some(uuid.clone()),
                Target::Node | Target::Workload { .. } => None,
            })
            .collect();
        Mutes {
            lost,
            silences,
            now_ms,
        }
    }

    /// Why `alert` is muted.
    pub fn of(&self, key: &AlertKey, alert: &Alert) -> Mute {
        let inhibited_by = match &key.target {
            Target::Gpu(uuid) if key.rule != INHIBITING_RULE && self.lost.contains(uuid) => {
                Some(format!("{INHIBITING_RULE}/{uuid}"))
            }
            _ => None,
        };
        Mute {
            silenced_by: self
                .silences
                .iter()
                .filter(|s| s.mutes(&alert.labels, self.now_ms))
                .map(|s| s.id)
                .collect(),
            inhibited_by,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::routing::matcher::Matcher;

    fn alert(state: AlertState, labels: &[(&str, &str)]) -> Alert {
        Alert {
            state,
            value: None,
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            annotations: BTreeMap::new(),
            annotated_at: None,
        }
    }

    fn key(rule: &str, uuid: &str) -> AlertKey {
        AlertKey {
            rule: rule.into(),
            target: Target::Gpu(uuid.into()),
        }
    }

    fn firing() -> AlertState {
        let t = UNIX_EPOCH + Duration::from_secs(1000);
        AlertState::Firing {
            since: t,
            last_true: t,
        }
    }

    #[test]
    fn a_lost_gpu_inhibits_its_other_alerts_only() {
        let mut state = EvalState::default();
        state
            .alerts
            .insert(key("GpuLost", "GPU-1"), alert(firing(), &[("gpu", "1")]));
        let xid1 = alert(firing(), &[("alertname", "GpuXidFatal"), ("gpu", "1")]);
        state
            .alerts
            .insert(key("GpuXidFatal", "GPU-1"), xid1.clone());
        let mutes = Mutes::new(&state, &[], 0);
        let m = mutes.of(&key("GpuXidFatal", "GPU-1"), &xid1);
        assert_eq!(m.inhibited_by.as_deref(), Some("GpuLost/GPU-1"));
        assert!(m.is_muted());
        // The lost alert itself, another GPU's alerts and node alerts: not.
        assert!(!mutes
            .of(
                &key("GpuLost", "GPU-1"),
                &state.alerts[&key("GpuLost", "GPU-1")]
            )
            .is_muted());
        assert!(!mutes.of(&key("GpuXidFatal", "GPU-2"), &xid1).is_muted());
        let node = AlertKey {
            rule: "GpuwatchStale".into(),
            target: Target::Node,
        };
        assert!(!mutes.of(&node, &xid1).is_muted());
        // A pending or resolved GpuLost inhibits nothing.
        let t = UNIX_EPOCH + Duration::from_secs(1000);
        for other in [
            AlertState::Pending { since: t },
            AlertState::Resolved { at: t },
        ] {
            let mut s = state.clone();
            s.alerts.get_mut(&key("GpuLost", "GPU-1")).unwrap().state = other;
            assert!(!Mutes::new(&s, &[], 0)
                .of(&key("GpuXidFatal", "GPU-1"), &xid1)
                .is_muted());
        }
    }

    #[test]
    fn active_matching_silences_mute() {
        let silence = |id, matcher: &str, starts_ms, ends_ms| {
            Arc::new(Silence {
                id,
                matchers: vec![Matcher::parse(matcher).unwrap()],
                starts_ms,
                ends_ms,
                created_by: "t".into(),
                comment: "c".into(),
                updated_ms: 0,
            })
        };
        let silences = vec![
            silence(1, "gpu=0", 0, 100),
            silence(2, "alertname=~Gpu.*", 0, 100),
            silence(3, "gpu=0", 50, 60),
            silence(4, "gpu=1", 0, 100),
        ];
        let a = alert(firing(), &[("alertname", "GpuHot"), ("gpu", "0")]);
        let state = EvalState::default();
        let mutes = Mutes::new(&state, &silences, 10);
        let m = mutes.of(&key("GpuHot", "GPU-0"), &a);
        assert_eq!(m.silenced_by, vec![1, 2]);
        assert_eq!(m.inhibited_by, None);
        let later = Mutes::new(&state, &silences, 55);
        assert_eq!(
            later.of(&key("GpuHot", "GPU-0"), &a).silenced_by,
            vec![1, 2, 3]
        );
        assert!(!Mutes::new(&state, &silences, 100)
            .of(&key("GpuHot", "GPU-0"), &a)
            .is_muted());
    }
}
