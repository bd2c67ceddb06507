//! The alert life cycle: pending, firing, resolved, holds and hysteresis,
//! absent data, lost GPUs, restored state and removed rules.

use super::*;

#[test]
fn inactive_pending_firing_resolved_inactive() {
    let mut run = Run::new(vec![user_rule(HOT_RULE)]);
    assert!(run.step(0, vec![hot(0, 70.0)]).is_empty());
    let t = run.step(10, vec![hot(0, 85.0)]).to_vec();
    assert_eq!(t.len(), 1);
    assert_eq!(
        (t[0].from, t[0].to),
        (AlertState::Inactive, AlertState::Pending { since: at(10) })
    );
    assert!(
        run.step(30, vec![hot(0, 85.0)]).is_empty(),
        "held 20 s of 30 s"
    );
    let t = run.step(40, vec![hot(0, 86.0)]).to_vec();
    assert_eq!(
        t[0].to,
        AlertState::Firing {
            since: at(10),
            last_true: at(40)
        },
        "fires once held for 30 s; since is the pending start"
    );
    assert_eq!(t[0].value, Some(86.0));
    assert_eq!(t[0].labels["alertname"], "GpuHot");
    assert_eq!(t[0].labels["gpu"], "0");
    assert_eq!(t[0].labels["uuid"], "GPU-0");
    assert_eq!(t[0].labels["host"], "node1");
    assert_eq!(t[0].labels["severity"], "warning");
    assert!(
        run.step(50, vec![hot(0, 90.0)]).is_empty(),
        "stays firing quietly"
    );
    let t = run.step(60, vec![hot(0, 60.0)]).to_vec();
    assert_eq!(t[0].to, AlertState::Resolved { at: at(60) });
    assert!(run.step(70, vec![hot(0, 60.0)]).is_empty());
    assert_eq!(run.state_of("GpuHot/GPU-0"), "resolved");
    // Resolved alerts are forgotten after the retention, without a transition.
    assert!(run.step(60 + 15 * 60, vec![hot(0, 60.0)]).is_empty());
    assert_eq!(run.state_of("GpuHot/GPU-0"), "inactive");
    assert!(run.state.alerts.is_empty());
}

#[test]
fn pending_that_turns_false_goes_back_to_inactive_without_resolving() {
    let mut run = Run::new(vec![user_rule(HOT_RULE)]);
    run.step(0, vec![hot(0, 85.0)]);
    let t = run.step(10, vec![hot(0, 70.0)]).to_vec();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].from, AlertState::Pending { since: at(0) });
    assert_eq!(t[0].to, AlertState::Inactive);
    // Becoming true again starts a new hold.
    run.step(20, vec![hot(0, 85.0)]);
    assert!(run.step(45, vec![hot(0, 85.0)]).is_empty(), "25 s of 30 s");
    assert_eq!(run.step(50, vec![hot(0, 85.0)])[0].to.as_str(), "firing");
    assert!(!run.log.iter().any(|(_, _, _, to)| *to == "resolved"));
}

#[test]
fn for_zero_fires_at_once_and_resolved_can_fire_again() {
    let mut run = Run::new(vec![user_rule(
        "[[rules]]\nname = \"Hot\"\ncondition = \"temperature > 80\"\n",
    )]);
    let t = run.step(0, vec![hot(0, 81.0)]).to_vec();
    assert_eq!(
        (t[0].from.as_str(), t[0].to.as_str()),
        ("inactive", "firing")
    );
    run.step(1, vec![hot(0, 70.0)]);
    let t = run.step(2, vec![hot(0, 81.0)]).to_vec();
    assert_eq!(
        (t[0].from.as_str(), t[0].to.as_str()),
        ("resolved", "firing")
    );
}

#[test]
fn one_alert_per_rule_and_gpu() {
    let mut run = Run::new(vec![user_rule(HOT_RULE)]);
    run.step(0, vec![hot(0, 85.0), hot(1, 70.0), hot(2, 85.0)]);
    let keys: Vec<String> = run.state.alerts.keys().map(ToString::to_string).collect();
    assert_eq!(keys, ["GpuHot/GPU-0", "GpuHot/GPU-2"]);
}

#[test]
fn keep_firing_for_holds_a_firing_alert() {
    let rule = user_rule(
        "[[rules]]\nname = \"Hot\"\ncondition = \"temperature > 80\"\nkeep_firing_for = \"1m\"\n",
    );
    let mut run = Run::new(vec![rule]);
    run.step(0, vec![hot(0, 85.0)]);
    assert!(run.step(10, vec![hot(0, 70.0)]).is_empty());
    assert!(
        run.step(59, vec![hot(0, 70.0)]).is_empty(),
        "59 s after last true"
    );
    assert_eq!(run.step(60, vec![hot(0, 70.0)])[0].to.as_str(), "resolved");
    // True again within keep_firing_for restarts the clock.
    run.step(100, vec![hot(0, 85.0)]);
    run.step(110, vec![hot(0, 85.0)]);
    assert!(run.step(169, vec![hot(0, 70.0)]).is_empty());
    assert_eq!(run.step(170, vec![hot(0, 70.0)])[0].to.as_str(), "resolved");
}

#[test]
fn clear_threshold_gives_hysteresis() {
    let rule =
        user_rule("[[rules]]\nname = \"Hot\"\ncondition = \"temperature > 85\"\nclear = 80\n");
    assert_eq!(rule.clear, Some(80.0));
    let mut run = Run::new(vec![rule]);
    assert!(run.step(0, vec![hot(0, 84.0)]).is_empty());
    assert_eq!(run.step(1, vec![hot(0, 86.0)])[0].to.as_str(), "firing");
    assert!(
        run.step(2, vec![hot(0, 84.0)]).is_empty(),
        "below 85 but above 80"
    );
    assert!(run.step(3, vec![hot(0, 81.0)]).is_empty());
    assert_eq!(run.step(4, vec![hot(0, 79.0)])[0].to.as_str(), "resolved");
    // Below-direction rules clear upwards.
    let rule = user_rule(
        "[[rules]]\nname = \"LowFree\"\ncondition = \"memory_free_bytes < 1GiB\"\nclear = 2147483648\n",
    );
    let mut run = Run::new(vec![rule]);
    let with_free = |free: u64| {
        let mut g = gpu(0, 50.0);
        g.readings.memory = Some(MemoryReading {
            total_bytes: 80 * GIB,
            used_bytes: 80 * GIB - free,
            free_bytes: free,
            reserved_bytes: 0,
        });
        g
    };
    assert_eq!(
        run.step(0, vec![with_free(GIB / 2)])[0].to.as_str(),
        "firing"
    );
    assert!(run.step(1, vec![with_free(GIB + GIB / 2)]).is_empty());
    assert_eq!(
        run.step(2, vec![with_free(3 * GIB)])[0].to.as_str(),
        "resolved"
    );
}

#[test]
fn absent_data_is_not_zero() {
    let rules = vec![
        user_rule("[[rules]]\nname = \"Cool\"\ncondition = \"temperature < 10\"\n"),
        user_rule("[[rules]]\nname = \"NoTemp\"\ncondition = \"absent(temperature)\"\n"),
        user_rule("[[rules]]\nname = \"NoFan\"\ncondition = \"absent(fan_speed)\"\n"),
        builtin("GpuTemperatureNearSlowdown"),
        builtin("GpuMemoryPressure"),
    ];
    let mut run = Run::new(rules);
    let mut blank = gpu(0, 50.0);
    blank.readings.temperature_gpu_celsius = None;
    blank.readings.memory = None;
    // Never seen, group not failed: unsupported, not absent.
    assert!(run.step(0, vec![blank.clone()]).is_empty());
    // Seen once, then missing: absent fires; "< 10" and the derived
    // near-slowdown and memory rules stay false.
    run.step(1, vec![gpu(0, 50.0)]);
    let t = run.step(2, vec![blank.clone()]).to_vec();
    let names: Vec<&str> = t.iter().map(|t| t.key.rule.as_str()).collect();
    assert_eq!(names, ["NoTemp"]);
    assert_eq!(t[0].value, None);
    // A failed field group counts as absent even if never seen.
    let mut fanless = gpu(0, 50.0);
    fanless.groups.insert(FieldGroup::Device, false);
    let t = run.step(3, vec![fanless]).to_vec();
    assert!(t
        .iter()
        .any(|t| t.key.rule == "NoFan" && t.to.as_str() == "firing"));
    // A lost GPU's readings are not "absent": GpuLost covers it.
    let mut run = Run::new(vec![user_rule(
        "[[rules]]\nname = \"NoTemp\"\ncondition = \"absent(temperature)\"\n",
    )]);
    run.step(0, vec![gpu(0, 50.0)]);
    let mut lost = blank;
    lost.status = GpuStatus::Lost {
        reason: "gpu_lost".into(),
    };
    assert!(run.step(1, vec![lost]).is_empty());
}

#[test]
fn lost_gpu_fires_at_once_and_resolves_when_back() {
    let mut run = Run::new(builtin_rules());
    run.step(0, vec![gpu(0, 50.0), gpu(1, 50.0)]);
    let mut lost = gpu(1, 50.0);
    lost.status = GpuStatus::Lost {
        reason: "gpu_lost".into(),
    };
    lost.readings = FastReadings::default();
    let t = run.step(1, vec![gpu(0, 50.0), lost]).to_vec();
    assert_eq!(
        t.len(),
        1,
        "only GpuLost, nothing from the missing readings"
    );
    assert_eq!(t[0].key.to_string(), "GpuLost/GPU-1");
    assert_eq!(t[0].to.as_str(), "firing");
    assert_eq!(t[0].labels["severity"], "critical");
    assert_eq!(t[0].annotations["summary"], "GPU 1 on node1 is lost");
    let t = run.step(2, vec![gpu(0, 50.0), gpu(1, 50.0)]).to_vec();
    assert_eq!(t[0].to.as_str(), "resolved");
}

#[test]
fn restored_state_does_not_fire_again() {
    let rules = vec![user_rule(HOT_RULE), builtin("GpuEccUncorrectable")];
    let mut run = Run::new(rules.clone());
    run.step(0, vec![with_ecc(Some(0), Some(3))]);
    run.step(10, vec![hot(0, 85.0)]);
    run.step(40, vec![hot(0, 85.0)]);
    assert_eq!(run.state_of("GpuHot/GPU-0"), "firing");
    // Through JSON, as the outbox will store it.
    let json = serde_json::to_string(&run.state).expect("serialize");
    let restored: EvalState = serde_json::from_str(&json).expect("deserialize");
    // All of it but the counters, which start again at 0, and when each
    // alert's annotations were rendered (again at the next evaluation).
    assert!(!run.state.values.is_empty());
    let mut saved = EvalState {
        values: BTreeMap::new(),
        ..run.state.clone()
    };
    saved
        .alerts
        .values_mut()
        .for_each(|a| a.annotated_at = None);
    assert_eq!(restored, saved);
    let mut again = Run::new(rules.clone());
    again.state = restored;
    assert!(
        again.step(100, vec![hot(0, 85.0)]).is_empty(),
        "no new firing"
    );
    // The ECC baseline survived too: an increase while down is seen.
    let t = again.step(101, vec![with_ecc(Some(0), Some(4))]).to_vec();
    let names: Vec<(&str, &str)> = t
        .iter()
        .map(|t| (t.key.rule.as_str(), t.to.as_str()))
        .collect();
    assert_eq!(
        names,
        [("GpuHot", "resolved"), ("GpuEccUncorrectable", "firing")]
    );
    // A pending alert keeps its start time across a restart.
    let mut run = Run::new(rules.clone());
    run.step(0, vec![hot(0, 85.0)]);
    let json = serde_json::to_string(&run.state).expect("serialize");
    let mut again = Run::new(rules);
    again.state = serde_json::from_str(&json).expect("deserialize");
    assert_eq!(again.step(30, vec![hot(0, 85.0)])[0].to.as_str(), "firing");
}

#[test]
fn alerts_of_a_removed_rule_or_gpu_resolve() {
    let mut run = Run::new(vec![user_rule(HOT_RULE)]);
    run.step(0, vec![hot(0, 85.0), hot(1, 85.0)]);
    run.step(30, vec![hot(0, 85.0), hot(1, 85.0)]);
    // GPU 1 disappears from the snapshot.
    let t = run.step(31, vec![hot(0, 85.0)]).to_vec();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].key.to_string(), "GpuHot/GPU-1");
    assert_eq!(t[0].to.as_str(), "resolved");
    assert_eq!(
        t[0].labels["gpu"], "1",
        "resolved with the labels it fired with"
    );
    // The rule is removed from the configuration.
    run.rules.clear();
    let t = run.step(32, vec![hot(0, 85.0)]).to_vec();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].key.to_string(), "GpuHot/GPU-0");
    assert_eq!(t[0].to.as_str(), "resolved");
}

/// Each rule checked is counted, +1 per check that had a value to judge:
/// a reading compared counts, an increase that did not happen does not.
#[test]
fn rule_checks_with_a_value_are_counted() {
    let rules = vec![user_rule(HOT_RULE), builtin("GpuEccUncorrectable")];
    let mut run = Run::new(rules);
    run.step(0, vec![hot(0, 70.0)]);
    run.step(10, vec![hot(0, 85.0)]);
    assert_eq!(run.state.values.get("GpuHot"), Some(&2));
    assert_eq!(run.state.values.get("GpuEccUncorrectable"), Some(&0));
}

#[test]
fn a_holding_alerts_annotations_are_rendered_again_every_ten_seconds_its_value_every_step() {
    let mut run = Run::new(vec![user_rule(
        "[[rules]]\nname = \"GpuHot\"\ncondition = \"temperature > 80\"\n\
         annotations = { summary = \"GPU {{ .gpu }} at {{ .value }}\" }\n",
    )]);
    let t = run.step(0, vec![hot(0, 81.0)]).to_vec();
    assert_eq!(
        t[0].annotations["summary"], "GPU 0 at 81",
        "a transition renders"
    );
    let alert = |run: &Run| run.state.alerts.values().next().cloned().expect("firing");
    run.step(1, vec![hot(0, 82.0)]);
    let a = alert(&run);
    assert_eq!(a.value, Some(82.0), "the value is the latest at every step");
    assert_eq!(
        a.annotations["summary"], "GPU 0 at 81",
        "not rendered 1 s later"
    );
    run.step(9, vec![hot(0, 83.0)]);
    assert_eq!(alert(&run).annotations["summary"], "GPU 0 at 81");
    run.step(10, vec![hot(0, 84.0)]);
    assert_eq!(
        alert(&run).annotations["summary"],
        "GPU 0 at 84",
        "rendered again {ANNOTATION_REFRESH:?} after the last rendering"
    );
    run.step(11, vec![hot(0, 85.0)]);
    assert_eq!(alert(&run).annotations["summary"], "GPU 0 at 84");
    // A restored state (the time not saved) renders at the next step.
    run.state
        .alerts
        .values_mut()
        .for_each(|a| a.annotated_at = None);
    run.step(12, vec![hot(0, 86.0)]);
    assert_eq!(alert(&run).annotations["summary"], "GPU 0 at 86");
    // Resolving renders with the transition's value as before.
    let t = run.step(13, vec![hot(0, 60.0)]).to_vec();
    assert_eq!(t[0].to.as_str(), "resolved");
}
