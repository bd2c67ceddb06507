//! The built-in Xid rules (issue 13 §2): one rule per class of NVIDIA's
//! catalog, code lists derived from it; Xid 63/64 left to the row-remap
//! rules where the GPU gives row-remap readings.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;
use crate::gpu::{
    CollectionStats, FastReadings, GpuIdentity, GpuSnapshot, GpuStatus, SlowReadings, Snapshot,
    SystemInfo, XidCount,
};
use crate::health::catalog::{codes_of, Class};

fn at(s: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
}

/// GPU 0 with `xids` (code, count) and, when `remap` is set, row-remap
/// readings (none pending, none failed).
fn gpu(xids: &[(u64, u64)], remap: bool) -> GpuSnapshot {
    GpuSnapshot {
        index: 0,
        uuid: "GPU-0".into(),
        status: GpuStatus::Up,
        identity: Arc::new(GpuIdentity::default()),
        readings: FastReadings::default(),
        health: Arc::new(SlowReadings {
            remapped_rows_pending: remap.then_some(false),
            remapped_rows_failure: remap.then_some(false),
            ..SlowReadings::default()
        }),
        processes: Arc::default(),
        mig_instances: Arc::default(),
        pods: Arc::default(),
        hpc_jobs: Arc::default(),
        xid_errors: Arc::new(
            xids.iter()
                .map(|(code, count)| XidCount {
                    code: *code,
                    count: *count,
                    last_seen: at(0),
                })
                .collect(),
        ),
        groups: BTreeMap::new(),
        gpm: Arc::default(),
    }
}

/// The firing built-in rules (name, value) after `steps` of GPU 0.
fn firing(steps: &[GpuSnapshot]) -> Vec<(String, Option<f64>)> {
    let rules = builtin_rules();
    let mut state = EvalState::default();
    for (s, g) in steps.iter().enumerate() {
        let snapshot = Snapshot {
            taken_at: at(s as u64 * 5),
            hostname: "node1".into(),
            system: Arc::new(SystemInfo::default()),
            gpus: vec![g.clone()],
            workloads: Default::default(),
            collection: CollectionStats::default(),
            kubelet: None,
        };
        state = evaluate(&rules, &snapshot, &state, at(s as u64 * 5)).0;
    }
    state
        .alerts
        .iter()
        .filter(|(_, a)| a.state.as_str() == "firing")
        .map(|(k, a)| (k.rule.clone(), a.value))
        .collect()
}

#[test]
fn each_catalog_class_has_its_rule_with_the_catalogs_codes() {
    let rules = builtin_rules();
    for class in Class::ALL {
        let Some(name) = class.rule() else {
            continue;
        };
        let rule = rules.iter().find(|r| r.name == name).expect(name);
        match &rule.condition {
            Condition::Xid {
                codes,
                defer_to_remap,
            } => {
                assert_eq!(codes, &codes_of(class), "{name}");
                assert!(defer_to_remap, "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    let severity = |n: &str| rules.iter().find(|r| r.name == n).map(|r| r.severity);
    assert_eq!(severity("GpuXidFatal"), Some(Severity::Critical));
    assert_eq!(severity("GpuXidContained"), Some(Severity::Warning));
    assert_eq!(severity("GpuXidContactSupport"), Some(Severity::Warning));
}

#[test]
fn an_xid_fires_the_rule_of_its_class_and_an_ignored_one_none() {
    for (code, rule) in [
        (79, Some("GpuXidFatal")),
        (136, Some("GpuXidFatal")),
        (94, Some("GpuXidContained")),
        (13, Some("GpuXidContained")),
        (61, Some("GpuXidContactSupport")),
        (43, None),
        (154, None),
        (999, None),
    ] {
        let got = firing(&[gpu(&[], false), gpu(&[(code, 1)], false)]);
        let want: Vec<(String, Option<f64>)> = rule
            .map(|r| (r.to_string(), Some(code as f64)))
            .into_iter()
            .collect();
        assert_eq!(got, want, "Xid {code}");
    }
}

#[test]
fn xid_64_defers_to_the_row_remap_rules_where_their_readings_exist() {
    // With row-remap readings: the remap rules speak for it (here none
    // fires: nothing pending, nothing failed), no Xid alert.
    let got = firing(&[gpu(&[], true), gpu(&[(64, 1)], true)]);
    assert_eq!(got, vec![], "deferred to GpuRowRemap*");
    // Without them (a GPU that retires pages instead): the Xid alert stands.
    let got = firing(&[gpu(&[], false), gpu(&[(64, 1)], false)]);
    assert_eq!(got, vec![("GpuXidFatal".to_string(), Some(64.0))]);
    // Another fatal Xid on a GPU with remap readings still fires.
    let got = firing(&[gpu(&[], true), gpu(&[(64, 1), (79, 1)], true)]);
    assert_eq!(got, vec![("GpuXidFatal".to_string(), Some(79.0))]);
}

#[test]
fn a_rule_files_xid_condition_does_not_defer() {
    let condition = Condition::parse("xid(64)").expect("parses");
    assert_eq!(
        condition,
        Condition::Xid {
            codes: vec![64],
            defer_to_remap: false
        }
    );
}

/// One step of a GPU's life for the escalation tests.
enum Step {
    /// The node booted with this boot id (the agent restarts with it, and
    /// its Xid counts start at 0).
    Boot(&'static str),
    /// The agent restarted: same boot, counts from 0, state restored from
    /// its saved JSON.
    AgentRestart,
    /// The GPU stopped answering, then answered again (a GPU reset).
    Reset,
    /// Xid `code` was counted once more.
    Xid(u64),
}

/// Runs `steps` through the built-in rules with `[health]
/// xid_escalate_after = after`; returns whether `GpuXidRecurring` fired
/// after each Xid step.
fn recurring(after: u32, steps: &[Step]) -> Vec<bool> {
    let mut rules = builtin_rules();
    builtin::set_xid_escalation(&mut rules, after);
    let mut state = EvalState::default();
    let mut boot = "boot-0";
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    let mut t = 0;
    let mut out = vec![];
    let mut eval = |state: &mut EvalState, g: GpuSnapshot, boot: &str| {
        t += 60;
        let mut collection = CollectionStats::default();
        collection.health.boot_id = Some(Arc::from(boot));
        let snapshot = Snapshot {
            taken_at: at(t),
            hostname: "node1".into(),
            system: Arc::new(SystemInfo::default()),
            gpus: vec![g],
            workloads: Default::default(),
            collection,
            kubelet: None,
        };
        let (next, transitions) = evaluate(&rules, &snapshot, state, at(t));
        *state = next;
        transitions
            .iter()
            .any(|t| t.key.rule == "GpuXidRecurring" && t.to.as_str() == "firing")
    };
    let snapshot = |counts: &BTreeMap<u64, u64>| {
        let list: Vec<(u64, u64)> = counts.iter().map(|(c, n)| (*c, *n)).collect();
        gpu(&list, false)
    };
    for step in steps {
        match step {
            Step::Boot(id) => {
                boot = id;
                counts.clear();
                eval(&mut state, snapshot(&counts), boot);
            }
            Step::AgentRestart => {
                let saved = serde_json::to_string(&state).expect("state serializes");
                state = serde_json::from_str(&saved).expect("state deserializes");
                counts.clear();
                eval(&mut state, snapshot(&counts), boot);
            }
            Step::Reset => {
                let mut lost = snapshot(&counts);
                lost.status = GpuStatus::Lost {
                    reason: "GPU_IS_LOST".into(),
                };
                eval(&mut state, lost, boot);
                eval(&mut state, snapshot(&counts), boot);
            }
            Step::Xid(code) => {
                *counts.entry(*code).or_default() += 1;
                out.push(eval(&mut state, snapshot(&counts), boot));
            }
        }
    }
    out
}

#[test]
fn a_fatal_xid_that_survives_two_reboots_escalates_to_hardware_inspection() {
    use Step::*;
    let fired = recurring(
        2,
        &[Boot("a"), Xid(79), Boot("b"), Xid(79), Boot("c"), Xid(79)],
    );
    assert_eq!(fired, [false, false, true]);
}

#[test]
fn gpu_resets_count_like_reboots_and_the_count_is_configurable() {
    use Step::*;
    let fired = recurring(2, &[Boot("a"), Xid(48), Reset, Xid(48), Reset, Xid(48)]);
    assert_eq!(fired, [false, false, true]);
    let fired = recurring(1, &[Boot("a"), Xid(48), Reset, Xid(48)]);
    assert_eq!(fired, [false, true]);
}

#[test]
fn agent_restarts_repeats_within_one_boot_and_other_classes_do_not_escalate() {
    use Step::*;
    // An agent restart is not a reboot: the same boot id.
    let fired = recurring(
        2,
        &[
            Boot("a"),
            Xid(79),
            AgentRestart,
            Xid(79),
            AgentRestart,
            Xid(79),
        ],
    );
    assert_eq!(fired, [false, false, false]);
    // Many within one boot: still one epoch.
    let fired = recurring(1, &[Boot("a"), Xid(79), Xid(79), Xid(79)]);
    assert_eq!(fired, [false, false, false]);
    // The epochs survive an agent restart (saved with the alert state).
    let fired = recurring(
        2,
        &[
            Boot("a"),
            Xid(79),
            Boot("b"),
            AgentRestart,
            Xid(79),
            Boot("c"),
            AgentRestart,
            Xid(79),
        ],
    );
    assert_eq!(fired, [false, false, true]);
    // A different code, or an application error, does not escalate.
    let fired = recurring(
        1,
        &[
            Boot("a"),
            Xid(79),
            Boot("b"),
            Xid(48),
            Boot("c"),
            Xid(13),
            Boot("d"),
            Xid(13),
        ],
    );
    assert_eq!(fired, [false, false, false, false]);
}

#[test]
fn xid_recurring_parses_and_the_rule_says_inspect_hardware() {
    assert_eq!(
        Condition::parse("xid_recurring(3)").ok(),
        Some(Condition::XidRecurring { after: 3 })
    );
    assert!(Condition::parse("xid_recurring(0)").is_err());
    let rule = builtin_rules()
        .into_iter()
        .find(|r| r.name == "GpuXidRecurring")
        .expect("built in");
    let context = Context {
        value: Some(79.0),
        host: "n1",
        ..Context::default()
    };
    assert_eq!(
        rule.annotations["action"].render(&context),
        "INSPECT_HARDWARE"
    );
    assert_eq!(rule.severity, Severity::Critical);
}

/// The health verdict follows `GpuXidRecurring`: its firing alerts (the
/// value is the Xid code) and nothing else.
#[test]
fn the_verdict_reads_the_escalations_of_firing_recurring_alerts_only() {
    let alert = |state: AlertState, value: f64| Alert {
        state,
        value: Some(value),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        annotated_at: None,
    };
    let key = |rule: &str, gpu: &str| AlertKey {
        rule: rule.to_string(),
        target: Target::Gpu(gpu.to_string()),
    };
    let firing = AlertState::Firing {
        since: at(60),
        last_true: at(120),
    };
    let mut state = EvalState::default();
    state
        .alerts
        .insert(key("GpuXidRecurring", "GPU-a"), alert(firing, 79.0));
    state
        .alerts
        .insert(key("GpuXidFatal", "GPU-b"), alert(firing, 79.0));
    state.alerts.insert(
        key("GpuXidRecurring", "GPU-c"),
        alert(AlertState::Pending { since: at(60) }, 48.0),
    );
    state.alerts.insert(
        key("GpuXidRecurring", "GPU-d"),
        alert(AlertState::Resolved { at: at(90) }, 48.0),
    );
    let escalated = state.xid_escalations();
    assert_eq!(
        escalated,
        BTreeMap::from([("GPU-a".to_string(), vec![79])]),
        "only the firing escalation"
    );
}
