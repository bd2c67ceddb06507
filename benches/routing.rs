//! Cost of planning notifications after each evaluation (routes, silences,
//! inhibition, repeats, grouping), which the alerting task adds to every
//! rules evaluation (about once a second).
//!
//! A bad day on a big node: 8 GPUs with 8 firing alerts each (64), one GPU
//! lost (its alerts inhibited), 10 silences (half with regexes), 3
//! receivers (all, critical only, a label regex; one with a group wait),
//! every alert already sent (the steady state: nothing to send, which is
//! what nearly every evaluation finds). Prints the median per evaluation,
//! and the ratio to a baseline the task already pays on every change of
//! the state: cloning it to publish it.
//!
//! Run: `cargo bench --bench routing`.

#[path = "common/mod.rs"]
mod common;

use common::{median, run_size};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gpuwatch::alerting::mute::Mutes;
use gpuwatch::alerting::plan::{self, Groups, Notified};
use gpuwatch::alerting::silence::Silence;
use gpuwatch::routing::matcher::Matcher;
use gpuwatch::routing::{Destination, Route};
use gpuwatch::rules::{Alert, AlertKey, AlertState, EvalState, Severity, Target};

const RULES: [&str; 8] = [
    "GpuLost",
    "GpuHwThermalSlowdown",
    "GpuSwThermalSlowdown",
    "GpuTemperatureNearSlowdown",
    "GpuMemoryPressure",
    "GpuXidFatal",
    "GpuEccUncorrectable",
    "GpuRowRemapPending",
];

fn state(now: SystemTime) -> EvalState {
    let mut state = EvalState::default();
    for gpu in 0..8u32 {
        for (i, rule) in RULES.iter().enumerate() {
            // GPU 3 is lost; the others have every alert but GpuLost.
            if (*rule == "GpuLost") != (gpu == 3) && i == 0 {
                continue;
            }
            let uuid = format!("GPU-{gpu:08x}-aaaa-bbbb-cccc-dddddddddddd");
            let labels: BTreeMap<String, String> = [
                ("alertname", rule.to_string()),
                (
                    "severity",
                    if i % 3 == 0 { "critical" } else { "warning" }.to_string(),
                ),
                ("host", "gpu-node-17.example.com".to_string()),
                ("gpu", gpu.to_string()),
                ("uuid", uuid.clone()),
                ("team", "ml-infra".to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            let annotations = [(
                "summary".to_string(),
                format!("{rule} on GPU {gpu} of gpu-node-17"),
            )]
            .into_iter()
            .collect();
            state.alerts.insert(
                AlertKey {
                    rule: rule.to_string(),
                    target: Target::Gpu(uuid),
                },
                Alert {
                    state: AlertState::Firing {
                        since: now - Duration::from_secs(600),
                        last_true: now,
                    },
                    value: Some(91.5),
                    labels,
                    annotations,
                    annotated_at: None,
                },
            );
        }
    }
    state
}

fn main() {
    let (smoke, _) = run_size();
    let rounds = if smoke { 50 } else { 20_000 };
    let now = SystemTime::now();
    let now_ms = now.duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    let state = state(now);
    let silences: Vec<Arc<Silence>> = (0..10)
        .map(|i| {
            Arc::new(Silence {
                id: i,
                matchers: vec![
                    if i % 2 == 0 {
                        Matcher::parse(&format!("alertname=~Gpu.*Thermal.*|Other{i}")).unwrap()
                    } else {
                        Matcher::parse(&format!("host=other-node-{i}")).unwrap()
                    },
                    Matcher::parse("gpu=~[4-7]").unwrap(),
                ],
                starts_ms: now_ms - 60_000,
                ends_ms: now_ms + 3_600_000,
                created_by: "bench".into(),
                comment: "bench".into(),
                updated_ms: now_ms,
            })
        })
        .collect();
    let destinations = vec![
        Destination {
            name: "all".into(),
            route: Route::default(),
        },
        Destination {
            name: "pager".into(),
            route: Route {
                severities: vec![Severity::Critical],
                group_wait: Duration::from_secs(30),
                ..Route::default()
            },
        },
        Destination {
            name: "team".into(),
            route: Route {
                matchers: vec![Matcher::parse("team=~ml-.*").unwrap()],
                ..Route::default()
            },
        },
    ];
    // Settle: send everything once, so that evaluations find nothing new.
    let mut notified = Notified::new();
    let mut groups = Groups::new();
    for step in [0, 31_000] {
        let mutes = Mutes::new(&state, &silences, now_ms + step);
        let p = plan::plan(&state, &[], &destinations, &mutes, &notified, now);
        let (_, changes) = plan::group(p, &destinations, &mut groups, now_ms + step);
        plan::apply(&mut notified, &changes);
    }
    let mut planning = Vec::with_capacity(rounds);
    let mut cloning = Vec::with_capacity(rounds);
    let mut sent = 0usize;
    for _ in 0..rounds {
        let start = Instant::now();
        let mutes = Mutes::new(&state, &silences, now_ms + 40_000);
        let p = plan::plan(&state, &[], &destinations, &mutes, &notified, now);
        let (messages, changes) = plan::group(p, &destinations, &mut groups, now_ms + 40_000);
        sent += messages.len() + changes.len();
        planning.push(start.elapsed().as_secs_f64() * 1e6);
        let start = Instant::now();
        let copy = std::hint::black_box(state.clone());
        cloning.push(start.elapsed().as_secs_f64() * 1e6);
        drop(copy);
    }
    assert_eq!(sent, 0, "the steady state sends nothing");
    let plan_us = median(&mut planning);
    let clone_us = median(&mut cloning);
    println!(
        "notification planning, {} alerts x {} receivers, {} silences: median {plan_us:.1} µs per evaluation",
        state.alerts.len(),
        destinations.len(),
        silences.len()
    );
    println!(
        "baseline (cloning the state to publish it): median {clone_us:.1} µs; planning / baseline = {:.2}",
        plan_us / clone_us
    );
}
