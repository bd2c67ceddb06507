use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;
use crate::gpu::{
    CollectionStats, EccCounters, FastReadings, FieldGroup, GpuIdentity, GpuSnapshot, GpuStatus,
    MemoryReading, SlowReadings, Snapshot, SystemInfo, XidCount,
};

const GIB: u64 = 1 << 30;

fn at(s: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
}

fn gpu(index: u32, temp: f64) -> GpuSnapshot {
    GpuSnapshot {
        index,
        uuid: format!("GPU-{index}"),
        status: GpuStatus::Up,
        identity: Arc::new(GpuIdentity {
            name: Some("Test GPU".into()),
            temperature_slowdown_celsius: Some(90.0),
            temperature_shutdown_celsius: Some(95.0),
            ..GpuIdentity::default()
        }),
        readings: FastReadings {
            temperature_gpu_celsius: Some(temp),
            power_watts: Some(300.0),
            utilization_gpu_ratio: Some(0.5),
            clock_event_reasons: Some(0),
            memory: Some(MemoryReading {
                total_bytes: 80 * GIB,
                used_bytes: 10 * GIB,
                free_bytes: 70 * GIB,
                reserved_bytes: 0,
            }),
            ..FastReadings::default()
        },
        health: Arc::new(SlowReadings {
            ecc: EccCounters {
                uncorrected_volatile: Some(0),
                uncorrected_aggregate: Some(3),
                ..EccCounters::default()
            },
            remapped_rows_failure: Some(false),
            remapped_rows_pending: Some(false),
            ..SlowReadings::default()
        }),
        processes: Arc::new(vec![]),
        mig_instances: Arc::default(),
        pods: Arc::default(),
        xid_errors: Arc::new(vec![]),
        groups: BTreeMap::new(),
        gpm: Default::default(),
    }
}

fn snap(s: u64, gpus: Vec<GpuSnapshot>) -> Snapshot {
    Snapshot {
        taken_at: at(s),
        hostname: "node1".into(),
        system: Arc::new(SystemInfo::default()),
        gpus,
        collection: CollectionStats::default(),
        kubelet: None,
    }
}

fn user_rule(toml: &str) -> Rule {
    let rules = parse_rules(toml, "test.toml").expect("valid rules");
    let name = toml
        .lines()
        .find_map(|l| l.trim().strip_prefix("name = "))
        .map(|n| n.trim_matches('"').to_string())
        .expect("a name");
    rules
        .into_iter()
        .find(|r| r.name == name)
        .expect("the rule")
}

fn builtin(name: &str) -> Rule {
    builtin_rules()
        .into_iter()
        .find(|r| r.name == name)
        .expect("built-in rule")
}

/// Runs `rules` over a series of (second, snapshot) and returns every
/// transition as (second, key, from, to).
struct Run {
    rules: Vec<Rule>,
    state: EvalState,
    log: Vec<(u64, String, &'static str, &'static str)>,
    last: Vec<Transition>,
}

impl Run {
    fn new(rules: Vec<Rule>) -> Run {
        Run {
            rules,
            state: EvalState::default(),
            log: vec![],
            last: vec![],
        }
    }

    fn step(&mut self, s: u64, gpus: Vec<GpuSnapshot>) -> &[Transition] {
        self.step_snap(s, snap(s, gpus))
    }

    fn step_snap(&mut self, s: u64, snapshot: Snapshot) -> &[Transition] {
        let (state, transitions) = evaluate(&self.rules, &snapshot, &self.state, at(s));
        self.state = state;
        for t in &transitions {
            self.log
                .push((s, t.key.to_string(), t.from.as_str(), t.to.as_str()));
        }
        self.last = transitions;
        &self.last
    }

    fn state_of(&self, key: &str) -> &'static str {
        self.state
            .alerts
            .iter()
            .find(|(k, _)| k.to_string() == key)
            .map_or("inactive", |(_, a)| a.state.as_str())
    }
}

fn hot(index: u32, temp: f64) -> GpuSnapshot {
    gpu(index, temp)
}

const HOT_RULE: &str = r#"
[[rules]]
name = "GpuHot"
condition = "temperature > 80"
for = "30s"
"#;

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

fn with_xid(index: u32, counts: &[(u64, u64)]) -> GpuSnapshot {
    let mut g = gpu(index, 50.0);
    g.xid_errors = Arc::new(
        counts
            .iter()
            .map(|(code, count)| XidCount {
                code: *code,
                count: *count,
                last_seen: at(0),
            })
            .collect(),
    );
    g
}

#[test]
fn xid_fatal_and_contained_are_told_apart() {
    let mut run = Run::new(builtin_rules());
    run.step(0, vec![with_xid(0, &[]), with_xid(1, &[])]);
    let t = run
        .step(
            1,
            vec![with_xid(0, &[(79, 1)]), with_xid(1, &[(94, 1), (43, 2)])],
        )
        .to_vec();
    let got: Vec<(String, &str, Option<f64>)> = t
        .iter()
        .map(|t| (t.key.to_string(), t.labels["severity"].as_str(), t.value))
        .collect();
    assert_eq!(
        got,
        [
            ("GpuXidFatal/GPU-0".to_string(), "critical", Some(79.0)),
            ("GpuXidContained/GPU-1".to_string(), "warning", Some(94.0)),
        ],
        "Xid 43 (IGNORE in the catalog) raises nothing"
    );
    assert_eq!(
        t[0].annotations["summary"],
        "Fatal Xid 79 on GPU 0 of node1"
    );
    // The count does not grow: keep firing for 30 minutes, then resolve.
    assert!(run
        .step(
            60,
            vec![with_xid(0, &[(79, 1)]), with_xid(1, &[(94, 1), (43, 2)])]
        )
        .is_empty());
    let t = run
        .step(
            1 + 30 * 60,
            vec![with_xid(0, &[(79, 1)]), with_xid(1, &[(94, 1), (43, 2)])],
        )
        .to_vec();
    assert_eq!(t.len(), 2);
    assert!(t.iter().all(|t| t.to.as_str() == "resolved"));
    // A new one fires again.
    let t = run
        .step(
            2000,
            vec![with_xid(0, &[(79, 2)]), with_xid(1, &[(94, 1), (43, 2)])],
        )
        .to_vec();
    assert_eq!(t.len(), 1);
    assert_eq!(
        (t[0].key.rule.as_str(), t[0].to.as_str()),
        ("GpuXidFatal", "firing")
    );
}

#[test]
fn xid_counts_are_since_agent_start() {
    // No baseline: the counts are all new (the agent counts from its start).
    let mut run = Run::new(vec![builtin("GpuXidFatal")]);
    assert_eq!(run.step(0, vec![with_xid(0, &[(48, 1)])]).len(), 1);
    // A restart resets the counts below the restored baseline: the new count
    // is all new.
    let mut restored = Run::new(vec![builtin("GpuXidFatal")]);
    restored.state = run.state.clone();
    restored.state.alerts.clear();
    restored.step(10, vec![with_xid(0, &[])]);
    assert!(restored.step(11, vec![with_xid(0, &[])]).is_empty());
    assert_eq!(restored.step(12, vec![with_xid(0, &[(48, 1)])]).len(), 1);
}

fn with_ecc(volatile: Option<u64>, aggregate: Option<u64>) -> GpuSnapshot {
    let mut g = gpu(0, 50.0);
    let mut health = (*g.health).clone();
    health.ecc.uncorrected_volatile = volatile;
    health.ecc.uncorrected_aggregate = aggregate;
    g.health = Arc::new(health);
    g
}

#[test]
fn ecc_increase_fires_once() {
    let mut run = Run::new(vec![builtin("GpuEccUncorrectable")]);
    // The first reading is a baseline, whatever the lifetime count.
    assert!(run.step(0, vec![with_ecc(Some(0), Some(3))]).is_empty());
    assert!(run.step(1, vec![with_ecc(Some(0), Some(3))]).is_empty());
    let t = run.step(2, vec![with_ecc(Some(2), Some(5))]).to_vec();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].to.as_str(), "firing");
    assert_eq!(t[0].value, Some(4.0), "volatile +2 and aggregate +2");
    // Stays the same, grows again, goes missing: no new firing transition.
    for (s, v, a) in [
        (3, Some(2), Some(5)),
        (4, Some(3), Some(6)),
        (5, None, None),
    ] {
        assert!(run.step(s, vec![with_ecc(v, a)]).is_empty(), "second {s}");
    }
    // A driver reload resets the volatile count: a new baseline, no alert.
    assert!(run.step(6, vec![with_ecc(Some(0), Some(6))]).is_empty());
    let firing: Vec<_> = run.log.iter().filter(|l| l.3 == "firing").collect();
    assert_eq!(firing.len(), 1);
    // Aggregate only (volatile unsupported) also counts.
    let mut run = Run::new(vec![builtin("GpuEccUncorrectable")]);
    run.step(0, vec![with_ecc(None, Some(1))]);
    assert_eq!(run.step(1, vec![with_ecc(None, Some(2))]).len(), 1);
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
    // All of it but the counters, which start again at 0.
    assert!(!run.state.values.is_empty());
    let saved = EvalState {
        values: BTreeMap::new(),
        ..run.state.clone()
    };
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

#[test]
fn near_slowdown_uses_each_gpus_own_threshold() {
    let mut run = Run::new(vec![
        builtin("GpuTemperatureNearSlowdown"),
        builtin("GpuTemperatureNearShutdown"),
    ]);
    let with_limits = |index: u32, temp: f64, slowdown: f64, shutdown: f64| {
        let mut g = gpu(index, temp);
        g.identity = Arc::new(GpuIdentity {
            temperature_slowdown_celsius: Some(slowdown),
            temperature_shutdown_celsius: Some(shutdown),
            ..(*g.identity).clone()
        });
        g
    };
    // Both at 84 °C: 3 °C below GPU 0's slowdown (87), 14 below GPU 1's (98).
    let gpus = || {
        vec![
            with_limits(0, 84.0, 87.0, 92.0),
            with_limits(1, 84.0, 98.0, 103.0),
        ]
    };
    let t = run.step(0, gpus()).to_vec();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].key.to_string(), "GpuTemperatureNearSlowdown/GPU-0");
    assert_eq!(t[0].to.as_str(), "pending");
    assert_eq!(t[0].value, Some(3.0));
    assert!(run.step(299, gpus()).is_empty());
    let t = run.step(300, gpus()).to_vec();
    assert_eq!(t[0].to.as_str(), "firing");
    assert_eq!(
        t[0].annotations["description"],
        "GPU 0 (Test GPU, GPU-0) on node1 has been 3 °C below its slowdown threshold (alert at 5 °C or less) for 5 minutes."
    );
    // Near shutdown: within 3 °C of GPU 0's 92 °C, critical after 1 minute.
    let t = run
        .step(301, vec![with_limits(0, 89.5, 87.0, 92.0)])
        .to_vec();
    let shutdown: Vec<_> = t
        .iter()
        .filter(|t| t.key.rule == "GpuTemperatureNearShutdown")
        .collect();
    assert_eq!(shutdown[0].to.as_str(), "pending");
    let t = run
        .step(361, vec![with_limits(0, 89.5, 87.0, 92.0)])
        .to_vec();
    assert_eq!(t[0].to.as_str(), "firing");
    assert_eq!(t[0].labels["severity"], "critical");
    assert_eq!(t[0].value, Some(2.5));
    // No threshold from NVML: no value, no alert (never a hard-coded limit).
    let mut run = Run::new(vec![builtin("GpuTemperatureNearSlowdown")]);
    let mut unknown = gpu(0, 120.0);
    unknown.identity = Arc::new(GpuIdentity::default());
    assert!(run.step(0, vec![unknown]).is_empty());
}

#[test]
fn clock_event_rules_follow_their_bits() {
    let mut run = Run::new(vec![
        builtin("GpuHwThermalSlowdown"),
        builtin("GpuSwThermalSlowdown"),
        builtin("GpuHwPowerBrake"),
    ]);
    let with_reasons = |mask: u64| {
        let mut g = gpu(0, 50.0);
        g.readings.clock_event_reasons = Some(mask);
        g
    };
    let t = run.step(0, vec![with_reasons(0x40 | 0x80 | 0x4)]).to_vec();
    let names: Vec<&str> = t.iter().map(|t| t.key.rule.as_str()).collect();
    assert_eq!(names, ["GpuHwThermalSlowdown", "GpuHwPowerBrake"]);
    run.step(1, vec![with_reasons(0x20)]);
    assert!(run.step(300, vec![with_reasons(0x20)]).is_empty());
    let t = run.step(301, vec![with_reasons(0x20)]).to_vec();
    assert_eq!(
        (t[0].key.rule.as_str(), t[0].to.as_str()),
        ("GpuSwThermalSlowdown", "firing")
    );
}

#[test]
fn memory_pressure_by_ratio_or_free_bytes() {
    let mut run = Run::new(vec![builtin("GpuMemoryPressure")]);
    let with_memory = |total: u64, used: u64| {
        let mut g = gpu(0, 50.0);
        g.readings.memory = Some(MemoryReading {
            total_bytes: total,
            used_bytes: used,
            free_bytes: total - used,
            reserved_bytes: 0,
        });
        g
    };
    // 96 % of 80 GiB used (3.2 GiB free): the ratio.
    assert_eq!(
        run.step(0, vec![with_memory(80 * GIB, 77 * GIB)])[0]
            .to
            .as_str(),
        "pending"
    );
    assert_eq!(
        run.step(300, vec![with_memory(80 * GIB, 77 * GIB)])[0]
            .to
            .as_str(),
        "firing"
    );
    // 8 GiB card with 512 MiB free (94 %): the free bytes.
    let mut run = Run::new(vec![builtin("GpuMemoryPressure")]);
    assert_eq!(
        run.step(0, vec![with_memory(8 * GIB, 8 * GIB - GIB / 2)])[0]
            .to
            .as_str(),
        "pending"
    );
    // Plenty free: nothing.
    let mut run = Run::new(vec![builtin("GpuMemoryPressure")]);
    assert!(run
        .step(0, vec![with_memory(80 * GIB, 40 * GIB)])
        .is_empty());
}

#[test]
fn remap_failure_and_pending() {
    let mut run = Run::new(builtin_rules());
    let mut g = gpu(0, 50.0);
    let mut health = (*g.health).clone();
    health.remapped_rows_failure = Some(true);
    health.remapped_rows_pending = Some(true);
    g.health = Arc::new(health);
    let t = run.step(0, vec![g]).to_vec();
    let got: Vec<(&str, &str)> = t
        .iter()
        .map(|t| (t.key.rule.as_str(), t.labels["severity"].as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("GpuRowRemapFailure", "critical"),
            ("GpuRowRemapPending", "warning")
        ]
    );
}

#[test]
fn collection_stale_is_node_level() {
    let mut run = Run::new(vec![builtin("GpuwatchStale")]);
    let latest = snap(0, vec![gpu(0, 50.0), gpu(1, 50.0)]);
    assert!(
        run.step_snap(30, latest.clone()).is_empty(),
        "30 s old is fine"
    );
    let t = run.step_snap(31, latest.clone()).to_vec();
    assert_eq!(t.len(), 1, "one alert for the node, not one per GPU");
    assert_eq!(t[0].key.target, Target::Node);
    assert_eq!(t[0].to.as_str(), "pending");
    assert!(!t[0].labels.contains_key("gpu"));
    let t = run.step_snap(151, latest).to_vec();
    assert_eq!(t[0].to.as_str(), "firing");
    assert_eq!(
        t[0].annotations["description"],
        "The latest snapshot on node1 is 151 s old (limit 30 s): NVML is failing or a driver call hung."
    );
    let t = run.step_snap(152, snap(152, vec![gpu(0, 50.0)])).to_vec();
    assert_eq!(t[0].to.as_str(), "resolved");
}

#[test]
fn templates_render_and_reject_unknown_placeholders() {
    let t = Template::parse(
        "{{ .name }} #{{.gpu}} ({{ .uuid }}) on {{ .host }}: {{ .value }} > {{ .threshold }} {{ .value }}",
    )
    .expect("valid");
    let context = Context {
        value: Some(87.456),
        gpu: Some(3),
        uuid: Some("GPU-abc"),
        name: Some("H100"),
        host: "n1",
        threshold: Some(85.0),
        hold: Duration::from_secs(90),
        missing_pci: None,
    };
    assert_eq!(
        t.render(&context),
        "H100 #3 (GPU-abc) on n1: 87.46 > 85 87.46"
    );
    assert_eq!(
        t.render(&Context {
            host: "n1",
            ..Context::default()
        }),
        "n/a #n/a (n/a) on n1: n/a > n/a n/a"
    );
    assert!(Template::parse("no placeholders").is_ok());
    assert!(Template::parse("{{ .labels.team }}")
        .expect_err("unknown")
        .to_string()
        .contains("is not a placeholder"));
    assert!(Template::parse("{{ value }}").is_err(), "needs the dot");
    assert!(Template::parse("{{ .value").is_err());
    // Every built-in annotation parses (a bad one would be dropped silently).
    for rule in builtin_rules() {
        assert!(rule.annotations.len() >= 2, "{}", rule.name);
    }
    let hold = Template::parse("held {{ .for }}").expect("valid");
    for (d, text) in [
        (Duration::from_secs(2), "held 2 seconds"),
        (Duration::from_secs(60), "held 1 minute"),
        (Duration::from_secs(5400), "held 1 hour 30 minutes"),
        (Duration::from_millis(500), "held 500 ms"),
        (Duration::ZERO, "held 0 seconds"),
    ] {
        let context = Context {
            hold: d,
            ..Context::default()
        };
        assert_eq!(hold.render(&context), text);
    }
}

/// The built-in texts describe the rule as configured: a tuned hold shows
/// in the alert (it used to say "for over 1 minute" whatever `for` was).
#[test]
fn builtin_annotations_follow_the_configured_hold() {
    let rules = parse_rules(
        "[[rules]]\nname = \"GpuHwThermalSlowdown\"\nfor = \"2s\"\n",
        "test.toml",
    )
    .expect("valid");
    let thermal: Vec<Rule> = rules
        .into_iter()
        .filter(|r| r.name == "GpuHwThermalSlowdown")
        .collect();
    let mut run = Run::new(thermal);
    let mut throttled = gpu(0, 91.0);
    throttled.readings.clock_event_reasons = Some(0x40);
    run.step(0, vec![throttled.clone()]);
    let t = run.step(2, vec![throttled]).to_vec();
    assert_eq!(t[0].to.as_str(), "firing");
    let description = &t[0].annotations["description"];
    assert!(description.contains("for over 2 seconds."), "{description}");
    // No built-in text carries a number of its own for what the
    // configuration sets: holds come from {{ .for }}, thresholds from
    // {{ .threshold }}, Xid codes from {{ .value }}.
    let fixed = regex_automata::meta::Regex::new(
        r"\b\d+(\.\d+)? ?(s|m|h|seconds?|minutes?|hours?|°C|%|GiB)\b|Xid \d",
    )
    .expect("regex");
    for rule in builtin_rules() {
        for (key, template) in &rule.annotations {
            assert!(
                !fixed.is_match(template.source()),
                "{}.{key} has a fixed number: {}",
                rule.name,
                template.source()
            );
        }
    }
}

#[test]
fn conditions_parse_and_print() {
    for text in [
        "temperature > 85",
        "degrees_below_slowdown <= 5",
        "clock_event(sw_thermal_slowdown, hw_thermal_slowdown)",
        "xid(48, 79)",
        "increase(ecc_uncorrected)",
        "remap_failure",
        "gpu_lost",
        "absent(power)",
        "stale(30s)",
        "memory_used_ratio > 0.95 or memory_free_bytes < 1073741824",
    ] {
        let parsed = Condition::parse(text).expect(text);
        assert_eq!(parsed.to_string(), text);
    }
    assert_eq!(
        Condition::parse("memory_free_bytes < 1GiB").expect("size"),
        Condition::Compare {
            metric: Metric::MemoryFreeBytes,
            op: Op::Lt,
            threshold: GIB as f64
        }
    );
    for (bad, why) in [
        ("temprature > 85", "not a metric"),
        ("temperature >> 85", "not an operator"),
        ("temperature > hot", "not a number"),
        ("clock_event(too_hot)", "not a clock-event reason"),
        ("xid(0)", "not an Xid code"),
        ("increase(temperature)", "not a counter"),
        ("stale(soon)", "not a positive duration"),
        ("gpu_lost or stale(1m)", "node-level"),
        ("absent(power", "closing parenthesis"),
        ("", "empty"),
    ] {
        let error = Condition::parse(bad).expect_err(bad);
        assert!(error.contains(why), "{bad}: {error}");
    }
}

#[test]
fn rules_toml_tunes_disables_and_adds() {
    let rules = parse_rules(
        r#"
[[rules]]
name = "GpuMemoryPressure"
for = "15m"
labels = { team = "ml" }

[[rules]]
name = "GpuSwThermalSlowdown"
enabled = false

[[rules]]
name = "GpuTemperatureNearSlowdown"
clear = 8

[[rules]]
name = "GpuHot"
condition = "temperature > 85"
severity = "critical"
keep_firing_for = "2m"
annotations = { summary = "GPU {{ .gpu }} at {{ .value }}" }
"#,
        "rules.toml",
    )
    .expect("valid");
    let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    assert!(!names.contains(&"GpuSwThermalSlowdown"));
    assert_eq!(names.last(), Some(&"GpuHot"));
    assert_eq!(names.len(), builtin_rules().len());
    let pressure = rules
        .iter()
        .find(|r| r.name == "GpuMemoryPressure")
        .expect("kept");
    assert_eq!(pressure.for_, Duration::from_secs(900));
    assert_eq!(pressure.labels["team"], "ml");
    assert_eq!(pressure.annotations.len(), 2, "built-in annotations kept");
    let near = rules
        .iter()
        .find(|r| r.name == "GpuTemperatureNearSlowdown")
        .expect("kept");
    assert_eq!(near.clear, Some(8.0));
    let hot = rules.iter().find(|r| r.name == "GpuHot").expect("added");
    assert_eq!(hot.severity, Severity::Critical);
    assert_eq!(hot.keep_firing_for, Duration::from_secs(120));
    assert_eq!(hot.for_, Duration::ZERO);
    // An empty file is the built-in pack.
    assert_eq!(
        parse_rules("", "empty.toml").expect("valid"),
        builtin_rules()
    );
}

#[test]
fn rules_toml_errors_name_the_field_and_line() {
    let source = r#"[[rules]]
name = "A"
condition = "temperature > 85"
for = "5 minutes please"

[[rules]]
name = "B"
condition = "temprature > 85"
severity = "page"
clear = 90
labels = { alertname = "x" }
annotations = { summary = "{{ .colour }}" }

[[rules]]
name = "A"
condition = "gpu_lost"

[[rules]]
name = "NoCondition"

[[rules]]
name = "C"
condition = "temperature > 85"
clear = 90
"#;
    let problems = parse_rules(source, "rules.toml").expect_err("invalid");
    let got: Vec<String> = problems.iter().map(ToString::to_string).collect();
    let expect = [
        "rules.toml:4:7: rules[0].for: \"5 minutes please\" is not a duration",
        "rules.toml:8:13: rules[1].condition: \"temprature\" is not a metric",
        "rules.toml:9:12: rules[1].severity: \"page\" is not a severity",
        "rules.toml:11:10: rules[1].labels.alertname: \"alertname\" is set by gpuwatch itself",
        "rules.toml:12:27: rules[1].annotations.summary: \"{{ .colour }}\" is not a placeholder",
        "rules.toml:15:8: rules[2].name: \"A\" is defined twice",
        "rules.toml:19:8: rules[3].condition: \"NoCondition\" is not a built-in rule, so it needs a condition",
        "rules.toml:24:9: rules[4].clear: must be below the threshold 85",
    ];
    assert_eq!(got.len(), expect.len(), "{got:#?}");
    for (got, expect) in got.iter().zip(expect) {
        assert!(got.starts_with(expect), "{got}\n  expected {expect}");
    }
    // Unknown fields are rejected with the entry's path.
    let problems = parse_rules(
        "[[rules]]\nname = \"A\"\ncondition = \"gpu_lost\"\n\n[[rules]]\nname = \"B\"\nfour = \"1m\"\n",
        "rules.toml",
    )
    .expect_err("unknown field");
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].field, "rules[1]");
    assert_eq!(problems[0].line, Some(7));
    assert!(
        problems[0].message.contains("unknown field `four`"),
        "{}",
        problems[0].message
    );
    // A missing name.
    let problems =
        parse_rules("[[rules]]\ncondition = \"gpu_lost\"\n", "rules.toml").expect_err("no name");
    assert_eq!(problems[0].field, "rules[0]");
}

/// A node of four GPUs under a changing load, every 10 s for `hours`:
/// each GPU's temperature follows 35 °C + 45 °C × utilization (plus a small
/// per-GPU offset) with a 90 s lag and ±1 °C of noise. `shared`: all GPUs
/// run the same job (data parallel) or each its own. `fault`: from this
/// second on, GPU 2 runs 20 °C hotter (a failing fan). Returns the log
/// and the final state.
fn anomaly_run(hours: u64, shared: bool, fault: Option<u64>) -> (Vec<LogLine>, EvalState) {
    let mut run = Run::new(vec![
        builtin("GpuTemperatureAnomaly"),
        builtin("GpuHotterThanPeers"),
    ]);
    let loads = [0.0, 0.3, 0.6, 0.95, 0.6, 0.0, 0.95, 0.3];
    let mut seed: u64 = 42;
    let mut noise = move || {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((seed >> 33) as f64 / (1u64 << 31) as f64) * 2.0 - 1.0
    };
    let mut temps = [35.0f64; 4];
    for s in (0..hours * 3600).step_by(10) {
        let phase = (s / 900) as usize; // a new job every 15 minutes
        let mut gpus = Vec::new();
        for i in 0..4usize {
            let load = if shared {
                loads[phase % loads.len()]
            } else {
                loads[(phase * 3 + i * 5) % loads.len()]
            };
            let mut target = 35.0 + 45.0 * load + i as f64;
            if i == 2 && fault.is_some_and(|f| s >= f) {
                target += 20.0;
            }
            temps[i] += (target - temps[i]) * (1.0 - (-10.0f64 / 90.0).exp());
            let mut g = gpu(i as u32, temps[i] + noise());
            g.readings.utilization_gpu_ratio = Some((load + 0.03 * noise()).clamp(0.0, 1.0));
            gpus.push(g);
        }
        run.step(s, gpus);
    }
    (run.log, run.state)
}

/// (second, alert, from, to) of [`anomaly_run`]'s log.
type LogLine = (u64, String, &'static str, &'static str);

#[test]
fn anomaly_no_false_alarm_under_normal_load_changes() {
    for shared in [true, false] {
        let (log, state) = anomaly_run(4, shared, None);
        assert!(
            log.iter().all(|l| l.3 != "firing"),
            "shared {shared}: {log:#?}"
        );
        // Quiet because the rules judged and found nothing, not because
        // they never had a score: 4 GPUs × 6 checks a minute × 4 hours,
        // less the warm-up of each load bucket. (With a job each, no two
        // GPUs ever run at a similar load: there are no peers to compare.)
        let judging: &[&str] = if shared {
            &["GpuTemperatureAnomaly", "GpuHotterThanPeers"]
        } else {
            &["GpuTemperatureAnomaly"]
        };
        for rule in judging {
            let judged = state.values.get(*rule).copied().unwrap_or(0);
            assert!(
                judged > 1000,
                "shared {shared}: {rule} judged {judged} times"
            );
        }
    }
}

#[test]
fn anomaly_failing_fan_is_found_by_baseline_and_peers() {
    let fault = 3 * 3600;
    let (log, _) = anomaly_run(4, true, Some(fault));
    let firing: Vec<&(u64, String, &str, &str)> = log.iter().filter(|l| l.3 == "firing").collect();
    let keys: BTreeMap<&str, u64> = firing.iter().map(|l| (l.1.as_str(), l.0)).collect();
    assert_eq!(
        keys.keys().copied().collect::<Vec<_>>(),
        ["GpuHotterThanPeers/GPU-2", "GpuTemperatureAnomaly/GPU-2"],
        "{log:#?}"
    );
    for (key, s) in &keys {
        // The hold (5 minutes) plus the lag of the temperature.
        assert!(
            *s >= fault + 300 && *s <= fault + 600,
            "{key} fired {} s after the fault",
            s - fault
        );
    }
    // And the baseline alone, without peers (a single-GPU node).
    let mut run = Run::new(vec![builtin("GpuTemperatureAnomaly")]);
    let mut fired = None;
    for s in (0..3 * 3600).step_by(10) {
        let hot = if s >= 2 * 3600 { 12.0 } else { 0.0 };
        let mut g = gpu(0, 70.0 + hot + if s % 20 == 0 { 0.5 } else { -0.5 });
        g.readings.utilization_gpu_ratio = Some(0.9);
        if let Some(t) = run
            .step(s, vec![g])
            .iter()
            .find(|t| t.to.as_str() == "firing")
        {
            fired.get_or_insert((s, t.value));
        }
    }
    let (s, value) = fired.expect("fires");
    assert_eq!(s, 2 * 3600 + 300);
    assert!(
        value.is_some_and(|v| (11.0..=12.5).contains(&v)),
        "{value:?}"
    );
}

#[test]
fn anomaly_baseline_warms_up_and_ignores_a_repeated_snapshot() {
    let mut baselines = BTreeMap::new();
    // Warm-up: nothing judged for the first 10 minutes of a bucket.
    for s in (0..=600).step_by(10) {
        assert_eq!(anomaly::observe(&mut baselines, 0.5, 60.0, at(s)), None);
    }
    let score = anomaly::observe(&mut baselines, 0.5, 60.0, at(610)).expect("warm");
    assert!(score.above_mean.abs() < 1e-9 && !score.is_anomalous(8.0));
    // Another bucket warms up on its own.
    assert_eq!(anomaly::observe(&mut baselines, 0.95, 80.0, at(620)), None);
    // The same snapshot twice leaves the baseline as it was.
    let before = baselines.clone();
    let _ = anomaly::observe(&mut baselines, 0.5, 75.0, at(630));
    let once = baselines.clone();
    let _ = anomaly::observe(&mut baselines, 0.5, 75.0, at(630));
    assert_eq!(baselines, once);
    assert_ne!(baselines, before);
    assert!(anomaly::observe(&mut baselines, 0.5, 75.0, at(640))
        .expect("warm")
        .is_anomalous(8.0));
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
