//! Unit tests of the rules engine, by topic in `tests/*.rs`; this file
//! holds what they share: a test GPU and snapshot, rule lookup, and `Run`,
//! which steps rules over snapshots and logs every transition.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;
use crate::gpu::{
    testing, EccCounters, FastReadings, FieldGroup, GpuIdentity, GpuSnapshot, GpuStatus,
    MemoryReading, SlowReadings, Snapshot, XidCount,
};

mod anomaly_rules;
mod builtin_rules;
mod config;
mod lifecycle;

const GIB: u64 = 1 << 30;

fn at(s: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
}

fn gpu(index: u32, temp: f64) -> GpuSnapshot {
    GpuSnapshot {
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
        ..testing::gpu(index)
    }
}

fn snap(s: u64, gpus: Vec<GpuSnapshot>) -> Snapshot {
    Snapshot {
        hostname: "node1".into(),
        ..testing::snapshot(at(s), gpus)
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

fn with_ecc(volatile: Option<u64>, aggregate: Option<u64>) -> GpuSnapshot {
    let mut g = gpu(0, 50.0);
    let mut health = (*g.health).clone();
    health.ecc.uncorrected_volatile = volatile;
    health.ecc.uncorrected_aggregate = aggregate;
    g.health = Arc::new(health);
    g
}

const HOT_RULE: &str = r#"
[[rules]]
name = "GpuHot"
condition = "temperature > 80"
for = "30s"
"#;
