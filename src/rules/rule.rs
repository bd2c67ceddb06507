//! The rule and alert types: what a rule says, which alert it makes, the
//! state an alert is in and the transitions between states.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::condition::Condition;
use super::template::Template;

/// How bad an alert is; the `severity` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing, nobody needs to act now (anomalies).
    Info,
    /// Degraded: someone should look during working hours.
    Warning,
    /// Broken or about to break: act now.
    Critical,
}

impl Severity {
    /// The label value: "info", "warning" or "critical".
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }

    /// Parses a label value.
    pub fn parse(text: &str) -> Option<Severity> {
        match text {
            "info" => Some(Severity::Info),
            "warning" => Some(Severity::Warning),
            "critical" => Some(Severity::Critical),
            _ => None,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One alerting rule: a condition evaluated per GPU (or once for the node),
/// how long it must hold, and what the alert says.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The `alertname`; unique within a rule set.
    pub name: String,
    /// When the rule is true.
    pub condition: Condition,
    /// How long the condition must hold before the alert fires (0: at once).
    pub for_: Duration,
    /// How long a firing alert stays firing after its condition turned false.
    pub keep_firing_for: Duration,
    /// Hysteresis: once firing, the alert stays firing until the value
    /// crosses this threshold (only for comparisons, on the far side of the
    /// firing threshold).
    pub clear: Option<f64>,
    /// The `severity` label.
    pub severity: Severity,
    /// Extra labels for the alert.
    pub labels: BTreeMap<String, String>,
    /// Annotation templates, e.g. `summary` and `description`.
    pub annotations: BTreeMap<String, Template>,
}

/// What an alert is about: a GPU (by UUID), the node as a whole, or one
/// workload (a Slurm job, a pod, a container, a process).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Target {
    /// One GPU, by its UUID (or `index:N` when NVML gave no UUID).
    Gpu(String),
    /// The node (e.g. collection stale).
    Node,
    /// One workload, by its kind (`slurm_job`, `pod`, ...) and id.
    Workload {
        /// The kind's name, as the `kind` label.
        kind: String,
        /// The id within the kind (job id, `namespace/pod`, ...).
        id: String,
    },
}

impl Target {
    /// The target as one word: the GPU's UUID, `node`, or `kind:id`.
    pub fn as_text(&self) -> String {
        match self {
            Target::Gpu(uuid) => uuid.clone(),
            Target::Node => "node".to_string(),
            Target::Workload { kind, id } => format!("{kind}:{id}"),
        }
    }
}

/// Identifies one alert: one per (rule, GPU) or (rule, node).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AlertKey {
    /// The rule's name.
    pub rule: String,
    /// The GPU or the node.
    pub target: Target,
}

impl fmt::Display for AlertKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.rule, self.target.as_text())
    }
}

/// Where one alert stands (Prometheus semantics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum AlertState {
    /// The condition is false (inactive alerts are not kept in the state).
    Inactive,
    /// The condition is true but has not held for `for` yet.
    Pending {
        /// When the condition became true.
        since: SystemTime,
    },
    /// The condition held long enough; the alert is active.
    Firing {
        /// When the condition became true (the pending start, as Prometheus'
        /// `activeAt`).
        since: SystemTime,
        /// The last evaluation at which the condition (or, with a clear
        /// threshold, the stay condition) was true.
        last_true: SystemTime,
    },
    /// The alert fired and has since resolved.
    Resolved {
        /// When it resolved.
        at: SystemTime,
    },
}

impl AlertState {
    /// "inactive", "pending", "firing" or "resolved", as the `state` label.
    pub fn as_str(&self) -> &'static str {
        match self {
            AlertState::Inactive => "inactive",
            AlertState::Pending { .. } => "pending",
            AlertState::Firing { .. } => "firing",
            AlertState::Resolved { .. } => "resolved",
        }
    }
}

/// One change of an alert's state, produced by an evaluation: what the
/// notifiers and the outbox consume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    /// The alert.
    pub key: AlertKey,
    /// The state before.
    pub from: AlertState,
    /// The state after.
    pub to: AlertState,
    /// When (the evaluation's `now`).
    pub at: SystemTime,
    /// The condition's value at this evaluation, where it has one.
    pub value: Option<f64>,
    /// The alert's labels: `alertname`, `severity`, `host`, `gpu` and
    /// `uuid` for GPU alerts, the workload's identity for workload alerts
    /// (see [`super::workload`]), then the rule's own labels.
    pub labels: BTreeMap<String, String>,
    /// The rendered annotations.
    pub annotations: BTreeMap<String, String>,
}

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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::fingerprint;

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
