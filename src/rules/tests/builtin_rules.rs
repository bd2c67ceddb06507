//! The built-in rules on the readings they watch: Xid, ECC, temperature
//! against each GPU's own threshold, clock events, memory pressure, row
//! remapping, a stale collection, and their annotations.

use super::*;

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
