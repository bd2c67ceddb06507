//! The GPM built-in rules (issue 12): busy-but-starved and held-but-idle
//! fire after their hold and stay quiet otherwise — on a GPU without GPM
//! above all. Scenario time is the evaluation's `now`: no waiting.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;
use crate::gpu::gpm::{GpmMetrics, GpmReadings};
use crate::gpu::{
    testing, FastReadings, FieldGroup, GpuIdentity, GpuProcess, GpuSnapshot, Snapshot,
};

fn at(s: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
}

/// GPU 0 at `utilization`, with GPM `sm_active` (`None`: no GPM) and
/// processes holding `process_mib` MiB.
fn gpu(utilization: f64, sm_active: Option<f64>, process_mib: u64) -> GpuSnapshot {
    let processes: Vec<GpuProcess> = (process_mib > 0)
        .then(|| GpuProcess {
            pid: 42,
            used_memory_bytes: Some(process_mib << 20),
            ..GpuProcess::default()
        })
        .into_iter()
        .collect();
    GpuSnapshot {
        identity: Arc::new(GpuIdentity {
            name: Some("Test H100".into()),
            ..GpuIdentity::default()
        }),
        readings: FastReadings {
            utilization_gpu_ratio: Some(utilization),
            ..FastReadings::default()
        },
        processes: Arc::new(processes),
        groups: BTreeMap::from([(FieldGroup::Processes, true)]),
        gpm: Arc::new(GpmReadings {
            supported: Some(sm_active.is_some()),
            gpu: sm_active.map(|r| GpmMetrics {
                sm_active_ratio: Some(r),
                ..GpmMetrics::default()
            }),
            instances: vec![],
        }),
        ..testing::gpu(0)
    }
}

/// The alert state of `rule` on GPU 0 after each (second, GPU) step.
fn run(rule: &str, steps: &[(u64, GpuSnapshot)]) -> Vec<&'static str> {
    let rules: Vec<Rule> = builtin_rules()
        .into_iter()
        .filter(|r| r.name == rule)
        .collect();
    assert_eq!(rules.len(), 1, "{rule} is built in");
    let mut state = EvalState::default();
    let mut out = vec![];
    for (s, g) in steps {
        let snapshot = Snapshot {
            hostname: "node1".into(),
            ..testing::snapshot(at(*s), vec![g.clone()])
        };
        let (next, _) = evaluate(&rules, &snapshot, &state, at(*s));
        state = next;
        out.push(
            state
                .alerts
                .iter()
                .find(|(k, _)| k.to_string().starts_with(rule))
                .map_or("inactive", |(_, a)| a.state.as_str()),
        );
    }
    out
}

#[test]
fn busy_but_starved_fires_after_15_minutes_of_busy_and_idle_sms() {
    let starved = || gpu(0.95, Some(0.12), 8000);
    let states = run(
        "GpuBusyButStarved",
        &[(0, starved()), (899, starved()), (900, starved())],
    );
    assert_eq!(states, ["pending", "pending", "firing"]);
    // The SMs get work: resolved.
    let states = run(
        "GpuBusyButStarved",
        &[
            (0, starved()),
            (900, starved()),
            (960, gpu(0.95, Some(0.85), 8000)),
        ],
    );
    assert_eq!(states[2], "resolved");
}

/// A starved job's utilization wanders around 90 % (0.88–0.92 from one
/// sample to the next). On the raw reading (`utilization >= 0.9`) every dip
/// sent the alert back to inactive and it never fired; on the 5-minute
/// average it stays pending and fires after its 15 minutes, and resolves
/// once the average falls below 85 %.
#[test]
fn busy_but_starved_holds_through_utilization_wandering_around_90_percent() {
    let noisy = [0.92, 0.88, 0.91, 0.89, 0.9, 0.88, 0.92, 0.89];
    let mut steps: Vec<(u64, GpuSnapshot)> = (0..=1000u64)
        .step_by(5)
        .map(|s| {
            (
                s,
                gpu(noisy[(s / 5) as usize % noisy.len()], Some(0.12), 8000),
            )
        })
        .collect();
    let fires_at = steps
        .iter()
        .position(|(s, _)| *s >= 900)
        .unwrap_or(steps.len());
    let noisy_steps = steps.len();
    // Then the GPU idles (utilization 0.5): the average sinks below 0.85.
    steps.extend(
        (1005..=1300u64)
            .step_by(5)
            .map(|s| (s, gpu(0.5, Some(0.12), 8000))),
    );
    let states = run("GpuBusyButStarved", &steps);
    assert!(
        states[..fires_at].iter().all(|s| *s == "pending"),
        "{:?}",
        &states[..fires_at]
    );
    assert!(
        states[fires_at..noisy_steps].iter().all(|s| *s == "firing"),
        "{:?}",
        &states[fires_at..noisy_steps]
    );
    assert_eq!(states.last(), Some(&"resolved"));
}

#[test]
fn busy_but_starved_stays_quiet_when_busy_for_real_or_idle_or_without_gpm() {
    for (why, g) in [
        ("SMs busy too", gpu(0.97, Some(0.9), 8000)),
        ("utilization below 90 %", gpu(0.5, Some(0.1), 8000)),
        ("no GPM on the GPU", gpu(0.97, None, 8000)),
    ] {
        let states = run("GpuBusyButStarved", &[(0, g.clone()), (3600, g)]);
        assert_eq!(states, ["inactive", "inactive"], "{why}");
    }
}

#[test]
fn held_but_idle_fires_after_30_minutes_of_held_memory_and_no_sm_work() {
    let held = || gpu(0.0, Some(0.0), 20000);
    let states = run(
        "GpuHeldButIdle",
        &[(0, held()), (1799, held()), (1800, held())],
    );
    assert_eq!(states, ["pending", "pending", "firing"]);
}

#[test]
fn held_but_idle_stays_quiet_when_working_when_free_or_without_gpm() {
    for (why, g) in [
        ("SMs at work", gpu(0.6, Some(0.4), 20000)),
        ("no process memory", gpu(0.0, Some(0.0), 0)),
        ("no GPM on the GPU", gpu(0.0, None, 20000)),
    ] {
        let states = run("GpuHeldButIdle", &[(0, g.clone()), (7200, g)]);
        assert_eq!(states, ["inactive", "inactive"], "{why}");
    }
}

#[test]
fn and_conditions_parse_print_and_refuse_mixing_with_or() {
    let c = Condition::parse("utilization >= 0.9 and sm_active < 0.2").expect("parses");
    assert!(matches!(&c, Condition::All(list) if list.len() == 2));
    assert_eq!(c.to_string(), "utilization >= 0.9 and sm_active < 0.2");
    assert_eq!(c.threshold(), Some(0.2));
    let error =
        Condition::parse("utilization >= 0.9 and sm_active < 0.2 or gpu_lost").expect_err("mixed");
    assert!(error.to_string().contains("mixes"), "{error}");
    let error = Condition::parse("sm_active < 0.2 and stale(30s)").expect_err("node-level");
    assert!(error.to_string().contains("node-level"), "{error}");
}
