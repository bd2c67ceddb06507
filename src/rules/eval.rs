//! Evaluation: a pure function of (rules, snapshot, previous state, now)
//! that returns the next state and the transitions, with Prometheus
//! semantics (inactive → pending → firing → resolved).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::anomaly;
use super::check::{check, node_check, observe, GpuEvalState};
use super::condition::{Condition, Direction};
use super::rule::{AlertKey, AlertState, Rule, Target, Transition};
use super::template::Context;
use crate::gpu::{GpuSnapshot, Snapshot};

/// How long a resolved alert is kept in the state before it is forgotten
/// (Prometheus keeps resolved alerts for 15 minutes too).
pub const RESOLVED_RETENTION: Duration = Duration::from_secs(15 * 60);

/// Everything an evaluation carries over to the next one. Serializable, so
/// that it survives a restart: a firing alert restored from it does not fire
/// again, a pending one keeps its start time, and counter baselines keep an
/// increase that happened while the agent was down from going unnoticed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalState {
    /// Alerts that are pending, firing or recently resolved.
    #[serde(with = "alert_list")]
    pub alerts: BTreeMap<AlertKey, Alert>,
    /// Per GPU (by UUID): counter baselines and readings seen.
    pub gpus: BTreeMap<String, GpuEvalState>,
    /// Per rule: the checks of its condition (per GPU, or per node) that
    /// gave it a value to judge — a reading, an anomaly score, an Xid or
    /// counter increase seen — since the agent started, so that a rule
    /// whose readings never come, or whose detector never warms up, shows
    /// (`gpuwatch_rule_values_total`). Not saved: a counter starts at 0.
    #[serde(skip)]
    pub values: BTreeMap<String, u64>,
}

/// One alert that is not inactive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// Its state.
    pub state: AlertState,
    /// The condition's value at the last evaluation.
    pub value: Option<f64>,
    /// Its labels (kept so that a rule or GPU that disappeared can still be
    /// resolved with them).
    pub labels: BTreeMap<String, String>,
    /// Its annotations as last rendered.
    pub annotations: BTreeMap<String, String>,
    /// When the annotations were last rendered (not saved: after a restart
    /// the next evaluation renders them).
    #[serde(skip)]
    pub annotated_at: Option<SystemTime>,
}

/// How often a holding alert's annotations are rendered again between
/// transitions, so that they show a recent value: not on every evaluation,
/// since rendering (number formatting, a new map) cost more than all the
/// rest of an evaluation step for each pending or firing alert. The alert's
/// `value` is the latest at every evaluation.
pub const ANNOTATION_REFRESH: Duration = Duration::from_secs(10);

impl EvalState {
    /// The Xid codes per GPU that `GpuXidRecurring` says came back after GPU
    /// resets or node reboots (its firing alerts; the value is the code),
    /// for the health verdict.
    pub fn xid_escalations(&self) -> crate::health::escalation::Escalated {
        let mut out = crate::health::escalation::Escalated::new();
        for (key, alert) in &self.alerts {
            let (Target::Gpu(gpu), AlertState::Firing { .. }, Some(value)) =
                (&key.target, &alert.state, alert.value)
            else {
                continue;
            };
            if key.rule != super::builtin::XID_RECURRING || value.is_nan() || value < 1.0 {
                continue;
            }
            let codes = out.entry(gpu.clone()).or_default();
            codes.push(value as u64);
            codes.sort_unstable();
            codes.dedup();
        }
        out
    }
}

/// Evaluates `rules` against `snapshot` at `now`. Pure: the same inputs
/// give the same outputs. Call it on every snapshot; to notice a hung
/// sampler (`stale`), call it also on a timer with the latest snapshot.
pub fn evaluate(
    rules: &[Rule],
    snapshot: &Snapshot,
    previous: &EvalState,
    now: SystemTime,
) -> (EvalState, Vec<Transition>) {
    let mut next = EvalState {
        alerts: BTreeMap::new(),
        gpus: previous.gpus.clone(),
        values: previous.values.clone(),
    };
    let mut changes = BTreeMap::new();
    let peers = anomaly::peer_excess(snapshot);
    let ids: Vec<String> = snapshot.gpus.iter().map(GpuSnapshot::alert_key).collect();
    for (gpu, id) in snapshot.gpus.iter().zip(&ids) {
        let memory = next.gpus.entry(id.clone()).or_default();
        let mut change = observe(
            gpu,
            memory,
            snapshot.taken_at,
            snapshot.collection.health.boot_id.as_deref(),
        );
        change.peer = peers.get(id).copied();
        changes.insert(id.clone(), change);
    }
    // Rules with an alert that is not inactive: only these, and conditions
    // that hold, have anything to step (inactive stays inactive otherwise),
    // which spares building keys for the many (rule, GPU) pairs at rest.
    let active_rules: BTreeSet<&str> = previous.alerts.keys().map(|k| k.rule.as_str()).collect();
    let mut transitions = Vec::new();
    let mut visited = BTreeSet::new();
    for rule in rules {
        let rule_active = active_rules.contains(rule.name.as_str());
        if rule.condition.is_node_level() {
            let key = AlertKey {
                rule: rule.name.clone(),
                target: Target::Node,
            };
            let (holds, value) = node_check(&rule.condition, snapshot, now);
            count_value(&mut next.values, rule, value);
            let stay = stays(rule, holds, value);
            step(
                rule,
                None,
                snapshot,
                key.clone(),
                holds,
                stay,
                value,
                previous,
                &mut next,
                &mut transitions,
                now,
            );
            visited.insert(key);
            continue;
        }
        for (gpu, id) in snapshot.gpus.iter().zip(&ids) {
            let (holds, value) = match (changes.get(id), next.gpus.get(id)) {
                (Some(changes), Some(memory)) => check(&rule.condition, gpu, changes, memory),
                _ => (false, None),
            };
            count_value(&mut next.values, rule, value);
            if !holds && !rule_active {
                continue;
            }
            let key = AlertKey {
                rule: rule.name.clone(),
                target: Target::Gpu(id.clone()),
            };
            let stay = stays(rule, holds, value);
            step(
                rule,
                Some(gpu),
                snapshot,
                key.clone(),
                holds,
                stay,
                value,
                previous,
                &mut next,
                &mut transitions,
                now,
            );
            visited.insert(key);
        }
    }
    // Alerts whose rule or GPU is gone: their condition is no longer true.
    for (key, alert) in &previous.alerts {
        if visited.contains(key) {
            continue;
        }
        let rule = rules.iter().find(|r| r.name == key.rule);
        let keep_for = rule.map_or(Duration::ZERO, |r| r.keep_firing_for);
        let state = advance(alert.state, false, false, Duration::ZERO, keep_for, now);
        if is_transition(alert.state, state) {
            transitions.push(Transition {
                key: key.clone(),
                from: alert.state,
                to: state,
                at: now,
                value: None,
                labels: alert.labels.clone(),
                annotations: alert.annotations.clone(),
            });
        }
        if !matches!(state, AlertState::Inactive) {
            next.alerts.insert(
                key.clone(),
                Alert {
                    state,
                    ..alert.clone()
                },
            );
        }
    }
    (next, transitions)
}

/// Counts a check of `rule`, +1 when it gave a value (every rule checked
/// is listed, from 0).
fn count_value(values: &mut BTreeMap<String, u64>, rule: &Rule, value: Option<f64>) {
    let add = u64::from(value.is_some());
    match values.get_mut(&rule.name) {
        Some(n) => *n += add,
        None => {
            values.insert(rule.name.clone(), add);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn step(
    rule: &Rule,
    gpu: Option<&GpuSnapshot>,
    snapshot: &Snapshot,
    key: AlertKey,
    holds: bool,
    stay: bool,
    value: Option<f64>,
    previous: &EvalState,
    next: &mut EvalState,
    transitions: &mut Vec<Transition>,
    now: SystemTime,
) {
    let old = previous.alerts.get(&key);
    let from = old.map_or(AlertState::Inactive, |a| a.state);
    let to = advance(from, holds, stay, rule.for_, rule.keep_firing_for, now);
    if matches!(from, AlertState::Inactive) && matches!(to, AlertState::Inactive) {
        return;
    }
    let changed = is_transition(from, to);
    let (labels, annotations, annotated_at) = match old {
        Some(old) if !changed => {
            // While the condition holds, render again now and then so the
            // annotations show a recent value.
            let due = old.annotated_at.is_none_or(|at| {
                now.duration_since(at).unwrap_or(Duration::ZERO) >= ANNOTATION_REFRESH
            });
            if holds && due {
                let fresh = annotations(rule, gpu, snapshot, value);
                (old.labels.clone(), fresh, Some(now))
            } else {
                (
                    old.labels.clone(),
                    old.annotations.clone(),
                    old.annotated_at,
                )
            }
        }
        _ => (
            labels(rule, gpu, snapshot),
            annotations(rule, gpu, snapshot, value),
            Some(now),
        ),
    };
    if changed {
        transitions.push(Transition {
            key: key.clone(),
            from,
            to,
            at: now,
            value,
            labels: labels.clone(),
            annotations: annotations.clone(),
        });
    }
    if !matches!(to, AlertState::Inactive) {
        next.alerts.insert(
            key,
            Alert {
                state: to,
                value,
                labels,
                annotations,
                annotated_at,
            },
        );
    }
}

/// One step of the state machine. `holds`: the condition is true; `stay`:
/// a firing alert's stay condition (the clear threshold not crossed, or the
/// condition itself without one).
fn advance(
    from: AlertState,
    holds: bool,
    stay: bool,
    for_: Duration,
    keep_firing_for: Duration,
    now: SystemTime,
) -> AlertState {
    let elapsed = |since: SystemTime| now.duration_since(since).unwrap_or(Duration::ZERO);
    match from {
        AlertState::Inactive | AlertState::Resolved { .. } if holds => {
            if for_.is_zero() {
                AlertState::Firing {
                    since: now,
                    last_true: now,
                }
            } else {
                AlertState::Pending { since: now }
            }
        }
        AlertState::Inactive => AlertState::Inactive,
        AlertState::Resolved { at } => {
            if elapsed(at) >= RESOLVED_RETENTION {
                AlertState::Inactive
            } else {
                from
            }
        }
        AlertState::Pending { since } if holds => {
            if elapsed(since) >= for_ {
                AlertState::Firing {
                    since,
                    last_true: now,
                }
            } else {
                from
            }
        }
        AlertState::Pending { .. } => AlertState::Inactive,
        AlertState::Firing { since, .. } if stay => AlertState::Firing {
            since,
            last_true: now,
        },
        AlertState::Firing { last_true, .. } => {
            if !keep_firing_for.is_zero() && elapsed(last_true) < keep_firing_for {
                from
            } else {
                AlertState::Resolved { at: now }
            }
        }
    }
}

/// Whether a state change is reported: every change of kind except a
/// resolved alert being forgotten after [`RESOLVED_RETENTION`].
fn is_transition(from: AlertState, to: AlertState) -> bool {
    from.as_str() != to.as_str()
        && !matches!(
            (from, to),
            (AlertState::Resolved { .. }, AlertState::Inactive)
        )
}

/// Whether a firing alert stays firing: with a clear threshold, until the
/// value crosses it; otherwise while the condition holds.
fn stays(rule: &Rule, holds: bool, value: Option<f64>) -> bool {
    let (Some(clear), Condition::Compare { op, .. }) = (rule.clear, &rule.condition) else {
        return holds;
    };
    match (value, op.direction()) {
        (Some(v), Direction::Up) => v > clear,
        (Some(v), Direction::Down) => v < clear,
        (Some(_), Direction::Neither) => holds,
        (None, _) => false,
    }
}

fn labels(rule: &Rule, gpu: Option<&GpuSnapshot>, snapshot: &Snapshot) -> BTreeMap<String, String> {
    let mut labels = rule.labels.clone();
    labels.insert("alertname".into(), rule.name.clone());
    labels.insert("severity".into(), rule.severity.as_str().into());
    labels.insert("host".into(), snapshot.hostname.clone());
    if let Some(gpu) = gpu {
        labels.insert("gpu".into(), gpu.index.to_string());
        labels.insert("uuid".into(), gpu.uuid.clone());
    }
    labels
}

fn annotations(
    rule: &Rule,
    gpu: Option<&GpuSnapshot>,
    snapshot: &Snapshot,
    value: Option<f64>,
) -> BTreeMap<String, String> {
    let missing = match rule.condition {
        Condition::GpusMissingFromDriver => Some(snapshot.missing_from_driver().join(", ")),
        _ => None,
    };
    let context = Context {
        value,
        gpu: gpu.map(|g| g.index),
        uuid: gpu.map(|g| g.uuid.as_str()),
        name: gpu.and_then(|g| g.identity.name.as_deref()),
        host: &snapshot.hostname,
        threshold: rule.condition.threshold(),
        hold: rule.for_,
        missing_pci: missing.as_deref(),
    };
    rule.annotations
        .iter()
        .map(|(name, template)| (name.clone(), template.render(&context)))
        .collect()
}

/// The alert map as a list, since JSON object keys must be strings.
mod alert_list {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{Alert, AlertKey};

    #[derive(Serialize, Deserialize)]
    struct Entry {
        key: AlertKey,
        alert: Alert,
    }

    pub fn serialize<S: Serializer>(
        map: &BTreeMap<AlertKey, Alert>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct EntryRef<'a> {
            key: &'a AlertKey,
            alert: &'a Alert,
        }
        s.collect_seq(map.iter().map(|(key, alert)| EntryRef { key, alert }))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<AlertKey, Alert>, D::Error> {
        let list = Vec::<Entry>::deserialize(d)?;
        Ok(list.into_iter().map(|e| (e.key, e.alert)).collect())
    }
}
