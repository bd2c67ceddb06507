//! Evaluation: a pure function of (rules, snapshot, previous state, now)
//! that returns the next state and the transitions, with Prometheus
//! semantics (inactive → pending → firing → resolved).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::anomaly;
use super::check::{check, node_check, observe, GpuEvalState};
use super::condition::Condition;
use super::rule::{AlertKey, AlertState, Rule, Target, Transition};
use super::template::Context;
use super::workload::{self, IdleWindow};
use crate::gpu::{GpuSnapshot, Snapshot, Workload};

pub use super::machine::RESOLVED_RETENTION;
use super::machine::{advance, is_transition, stays};

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
    /// Per (workload rule, workload): the window of its recent figures
    /// (see [`workload`]); only live workloads'. Not saved: the workload
    /// accounting starts over with the agent too.
    #[serde(skip)]
    pub workloads: BTreeMap<(String, Target), IdleWindow>,
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
        workloads: BTreeMap::new(),
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
        if rule.condition.is_workload_level() {
            evaluate_workload_rule(
                rule,
                snapshot,
                previous,
                &mut next,
                &mut transitions,
                &mut visited,
                now,
            );
            continue;
        }
        if rule.condition.is_node_level() {
            let key = AlertKey {
                rule: rule.name.clone(),
                target: Target::Node,
            };
            let (holds, value) = node_check(&rule.condition, snapshot, now);
            count_value(&mut next.values, rule, value);
            let check = Check {
                holds,
                stay: stays(rule, holds, value),
                value,
                for_: rule.for_,
            };
            step(
                rule,
                Subject::Node,
                snapshot,
                key.clone(),
                check,
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
            let check = Check {
                holds,
                stay: stays(rule, holds, value),
                value,
                for_: rule.for_,
            };
            step(
                rule,
                Subject::Gpu(gpu),
                snapshot,
                key.clone(),
                check,
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
pub(super) fn count_value(values: &mut BTreeMap<String, u64>, rule: &Rule, value: Option<f64>) {
    let add = u64::from(value.is_some());
    match values.get_mut(&rule.name) {
        Some(n) => *n += add,
        None => {
            values.insert(rule.name.clone(), add);
        }
    }
}

/// What an alert is about, for its labels and annotations.
#[derive(Debug, Clone, Copy)]
pub(super) enum Subject<'a> {
    /// The node.
    Node,
    /// One GPU.
    Gpu(&'a GpuSnapshot),
    /// One workload.
    Workload(&'a Workload),
}

/// One check of a rule's condition for one alert, as [`step`] takes it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Check {
    /// The condition holds.
    pub holds: bool,
    /// A firing alert stays firing (see [`stays`]).
    pub stay: bool,
    /// The condition's value.
    pub value: Option<f64>,
    /// How long it must hold before firing (the rule's `for`, or what a
    /// workload window leaves of it).
    pub for_: Duration,
}

/// Steps one alert: its next state, the transition if it changed, and its
/// labels and annotations (rendered on a change and now and then while it
/// holds).
#[allow(clippy::too_many_arguments)]
pub(super) fn step(
    rule: &Rule,
    subject: Subject<'_>,
    snapshot: &Snapshot,
    key: AlertKey,
    check: Check,
    previous: &EvalState,
    next: &mut EvalState,
    transitions: &mut Vec<Transition>,
    now: SystemTime,
) {
    let Check {
        holds,
        stay,
        value,
        for_,
    } = check;
    let old = previous.alerts.get(&key);
    let from = old.map_or(AlertState::Inactive, |a| a.state);
    let to = advance(from, holds, stay, for_, rule.keep_firing_for, now);
    if matches!(from, AlertState::Inactive) && matches!(to, AlertState::Inactive) {
        return;
    }
    let changed = is_transition(from, to);
    // A workload alert keeps the labels it was first given (its GPUs may
    // grow) until it resolves, so its fingerprint stays one.
    let sticky = matches!(subject, Subject::Workload(_))
        && matches!(from, AlertState::Pending { .. } | AlertState::Firing { .. });
    let (labels, annotations, annotated_at) = match old {
        Some(old) if changed && sticky => (
            old.labels.clone(),
            annotations(rule, subject, snapshot, value),
            Some(now),
        ),
        Some(old) if !changed => {
            // While the condition holds, render again now and then so the
            // annotations show a recent value.
            let due = old.annotated_at.is_none_or(|at| {
                now.duration_since(at).unwrap_or(Duration::ZERO) >= ANNOTATION_REFRESH
            });
            if holds && due {
                let fresh = annotations(rule, subject, snapshot, value);
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
            labels(rule, subject, snapshot),
            annotations(rule, subject, snapshot, value),
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

fn labels(rule: &Rule, subject: Subject<'_>, snapshot: &Snapshot) -> BTreeMap<String, String> {
    let mut labels = rule.labels.clone();
    labels.insert("alertname".into(), rule.name.clone());
    labels.insert("severity".into(), rule.severity.as_str().into());
    labels.insert("host".into(), snapshot.hostname.clone());
    match subject {
        Subject::Gpu(gpu) => {
            labels.insert("gpu".into(), gpu.index.to_string());
            labels.insert("uuid".into(), gpu.uuid.clone());
        }
        Subject::Workload(w) => workload::labels(w, &mut labels),
        Subject::Node => {}
    }
    labels
}

/// The rule's annotations rendered for `subject`; a GPU alert also gets
/// `workloads`, who ran on the GPU (see [`workload::on_gpu`]).
fn annotations(
    rule: &Rule,
    subject: Subject<'_>,
    snapshot: &Snapshot,
    value: Option<f64>,
) -> BTreeMap<String, String> {
    let missing = match rule.condition {
        Condition::GpusMissingFromDriver => Some(snapshot.missing_from_driver().join(", ")),
        _ => None,
    };
    let (gpu, who, gpus) = match subject {
        Subject::Gpu(gpu) => (Some(gpu), None, None),
        Subject::Workload(w) => (None, Some(workload::describe(w)), Some(workload::gpus(w))),
        Subject::Node => (None, None, None),
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
        workload: who.as_deref(),
        gpus: gpus.as_deref(),
    };
    let mut rendered: BTreeMap<String, String> = rule
        .annotations
        .iter()
        .map(|(name, template)| (name.clone(), template.render(&context)))
        .collect();
    if let Some(on_gpu) = gpu.and_then(|g| workload::on_gpu(&snapshot.workloads, g.index)) {
        rendered.entry("workloads".into()).or_insert(on_gpu);
    }
    rendered
}

/// Evaluates one workload-level rule over the live workloads of
/// `snapshot`: updates each one's window in `next`, steps its alert and
/// records the key in `visited`.
#[allow(clippy::too_many_arguments)]
fn evaluate_workload_rule(
    rule: &Rule,
    snapshot: &Snapshot,
    previous: &EvalState,
    next: &mut EvalState,
    transitions: &mut Vec<Transition>,
    visited: &mut BTreeSet<AlertKey>,
    now: SystemTime,
) {
    let Condition::WorkloadIdle { below, kinds } = &rule.condition else {
        return;
    };
    for workload in snapshot.workloads.live.iter() {
        if !workload::judged(workload, kinds) {
            continue;
        }
        let key = AlertKey {
            rule: rule.name.clone(),
            target: workload::target(workload),
        };
        let window_key = (rule.name.clone(), key.target.clone());
        let mut window = previous
            .workloads
            .get(&window_key)
            .cloned()
            .unwrap_or_default();
        let total = workload.total();
        let reading = window.observe(
            snapshot.taken_at,
            total.gpu_seconds,
            total.sm_active_seconds,
            rule.for_,
        );
        next.workloads.insert(window_key, window);
        count_value(&mut next.values, rule, reading.ratio);
        let holds = reading.ratio.is_some_and(|r| r < *below);
        let check = Check {
            holds,
            stay: holds,
            value: reading.ratio,
            // The window is the hold: pending while it fills, firing once
            // it is full and still idle.
            for_: if reading.full {
                Duration::ZERO
            } else {
                Duration::MAX
            },
        };
        step(
            rule,
            Subject::Workload(workload),
            snapshot,
            key.clone(),
            check,
            previous,
            next,
            transitions,
            now,
        );
        visited.insert(key);
    }
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
