//! Unit tests of the workload rules: `GpuWorkloadIdle` over a snapshot's
//! workload table, stepped through time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;
use crate::gpu::{testing, Device, Snapshot, Usage, WorkloadAttributes, WorkloadKey};
use crate::rules::{builtin_rules, evaluate, parse_rules, AlertState, Condition, EvalState, Rule};

fn at(s: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
}

/// A Slurm job of alice on `gpus` since second `from`, at `now` seconds,
/// with SM activity `ratio` throughout (cumulative, as the accounting
/// publishes it): `active` seconds of SM work so far.
fn job(id: &str, gpus: &[u32], from: u64, now: u64, active: f64) -> Workload {
    let held = (now - from) as f64;
    let devices = gpus
        .iter()
        .map(|g| {
            (
                Device {
                    gpu: *g,
                    gpu_instance_id: None,
                },
                Usage {
                    gpu_seconds: held,
                    sm_active_seconds: active / gpus.len() as f64,
                    ..Usage::default()
                },
            )
        })
        .collect::<crate::gpu::DeviceUsages>();
    Workload::new(
        WorkloadKey {
            kind: WorkloadKind::SlurmJob,
            id: id.to_string(),
        },
        WorkloadAttributes {
            user: Some("alice".into()),
            account: Some("physics".into()),
            partition: Some("gpu".into()),
            ..WorkloadAttributes::default()
        },
        at(from),
        at(now),
        devices,
    )
}

fn snapshot(s: u64, live: Vec<Workload>, ended: Vec<Workload>) -> Snapshot {
    let gpus = (0..4).map(testing::gpu).collect();
    Snapshot {
        hostname: "node-7".into(),
        workloads: Arc::new(WorkloadTable {
            live,
            ended,
            left_out: 0,
        }),
        ..testing::snapshot(at(s), gpus)
    }
}

fn idle_rule() -> Vec<Rule> {
    builtin_rules()
        .into_iter()
        .filter(|r| r.name == "GpuWorkloadIdle")
        .collect()
}

const KEY: &str = "GpuWorkloadIdle/slurm_job:1234";

fn state(s: &EvalState) -> &'static str {
    s.alerts
        .iter()
        .find(|(k, _)| k.to_string() == KEY)
        .map_or("inactive", |(_, a)| a.state.as_str())
}

/// Steps the rules every 10 s over `[from, to]` with the job's activity
/// given per second by `active_at`; returns the state and the seconds at
/// which the alert changed, with the new state.
fn run(
    rules: &[Rule],
    from: u64,
    to: u64,
    active_at: impl Fn(u64) -> f64,
) -> (EvalState, Vec<(u64, &'static str)>) {
    let mut st = EvalState::default();
    let mut log = Vec::new();
    let mut s = from;
    while s <= to {
        let live = vec![job("1234", &[0, 1], 0, s, active_at(s))];
        let (next, transitions) = evaluate(rules, &snapshot(s, live, vec![]), &st, at(s));
        for t in transitions {
            log.push((s, t.to.as_str()));
        }
        st = next;
        s += 10;
    }
    (st, log)
}

#[test]
fn an_idle_job_fires_after_30_minutes_with_its_identity() {
    let rules = idle_rule();
    // 0.2 % of its held time active, from the start.
    let (st, log) = run(&rules, 0, 1900, |s| s as f64 * 2.0 * 0.002);
    assert_eq!(log, vec![(10, "pending"), (1800, "firing")], "{log:?}");
    let (key, alert) = st
        .alerts
        .iter()
        .find(|(k, _)| k.to_string() == KEY)
        .expect("the alert");
    assert_eq!(
        key.target,
        Target::Workload {
            kind: "slurm_job".into(),
            id: "1234".into()
        }
    );
    let labels: Vec<(&str, &str)> = alert
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        labels,
        vec![
            ("account", "physics"),
            ("alertname", "GpuWorkloadIdle"),
            ("gpus", "0,1"),
            ("host", "node-7"),
            ("kind", "slurm_job"),
            ("severity", "warning"),
            ("user", "alice"),
            ("workload", "1234"),
        ]
    );
    assert!((alert.value.expect("a value") - 0.002).abs() < 1e-9);
    assert_eq!(
        alert.annotations["description"],
        "Slurm job 1234 of alice (account physics, partition gpu) has held GPUs 0,1 on node-7 \
         for 30 minutes with SM activity 0.2 % (alert below 1 %): SM-active seconds per \
         GPU-second held over that window. Ask its owner to free the GPUs, or cancel it."
    );
    assert_eq!(
        alert.annotations["summary"],
        "Slurm job 1234 of alice (account physics, partition gpu) on node-7 holds GPUs 0,1 but idles"
    );
}

#[test]
fn a_working_job_never_fires() {
    let rules = idle_rule();
    let (st, log) = run(&rules, 0, 4000, |s| s as f64 * 2.0 * 0.5);
    assert!(log.is_empty(), "{log:?}");
    assert_eq!(state(&st), "inactive");
    assert_eq!(st.values.get("GpuWorkloadIdle").copied(), Some(400));
}

#[test]
fn a_job_that_worked_then_idles_fires_when_the_last_30_minutes_were_idle() {
    let rules = idle_rule();
    // Full SM activity for an hour, then nothing.
    let active = |s: u64| s.min(3600) as f64 * 2.0;
    let (_, log) = run(&rules, 0, 3600 + 1900, active);
    let fired = log
        .iter()
        .find(|(_, to)| *to == "firing")
        .map(|(s, _)| *s)
        .expect("fires");
    // 1 % of 30 minutes is 18 s: the window's work must have dropped under
    // that, 30 min − 18 s after the work stopped (to within a sample).
    let idle_for = fired - 3600;
    assert!(
        (1770..=1800).contains(&idle_for),
        "fired {idle_for} s after going idle: {log:?}"
    );
    assert!(
        !log.iter().any(|(_, to)| *to == "pending"),
        "a full window fires at once: {log:?}"
    );
}

#[test]
fn it_resolves_when_the_job_works_again_or_ends() {
    let rules = idle_rule();
    // Idle until 2000 s, then fully busy.
    let active = |s: u64| s.saturating_sub(2000) as f64 * 2.0;
    let (_, log) = run(&rules, 0, 2100, active);
    assert_eq!(
        log,
        vec![(10, "pending"), (1800, "firing"), (2020, "resolved")],
        "18 s of full work in the window lifts it over 1 %"
    );

    // Idle, firing, then the job ends: resolved with the labels it had.
    let (st, _) = run(&rules, 0, 1900, |_| 0.0);
    assert_eq!(state(&st), "firing");
    let gone = snapshot(1910, vec![], vec![job("1234", &[0, 1], 0, 1900, 0.0)]);
    let (after, transitions) = evaluate(&rules, &gone, &st, at(1910));
    assert_eq!(transitions.len(), 1);
    assert_eq!(transitions[0].to.as_str(), "resolved");
    assert_eq!(transitions[0].labels["workload"], "1234");
    assert!(after.workloads.is_empty(), "its window is dropped");
}

#[test]
fn a_pending_alert_keeps_its_labels_when_the_job_takes_another_gpu() {
    let rules = idle_rule();
    let mut st = EvalState::default();
    for s in (0..=1800).step_by(10) {
        let gpus: &[u32] = if s < 900 { &[0] } else { &[0, 2] };
        let live = vec![job("1234", gpus, 0, s, 0.0)];
        st = evaluate(&rules, &snapshot(s, live, vec![]), &st, at(s)).0;
    }
    let alert = st.alerts.values().next().expect("the alert");
    assert!(matches!(alert.state, AlertState::Firing { .. }));
    assert_eq!(alert.labels["gpus"], "0", "labels of the episode's start");
    assert!(alert.annotations["description"].contains("GPUs 0,2"));
}

#[test]
fn windows_and_alerts_are_bounded_by_the_live_workloads() {
    let rules = idle_rule();
    let mut st = EvalState::default();
    for s in (0..=1900).step_by(10) {
        let live: Vec<Workload> = (0..512)
            .map(|i| job(&format!("{}", 9_000_000 + i), &[i % 4], 0, s, 0.0))
            .collect();
        st = evaluate(&rules, &snapshot(s, live, vec![]), &st, at(s)).0;
        if s % 600 == 0 {
            assert!(st.workloads.len() <= 512);
            for window in st.workloads.values() {
                assert!(
                    window.len() <= WINDOW_SAMPLES as usize + 2,
                    "{}",
                    window.len()
                );
            }
        }
    }
    assert_eq!(st.alerts.len(), 512);
    assert!(st
        .alerts
        .values()
        .all(|a| matches!(a.state, AlertState::Firing { .. })));
    // All end: resolved, windows gone.
    let (st, transitions) = evaluate(&rules, &snapshot(1910, vec![], vec![]), &st, at(1910));
    assert_eq!(transitions.len(), 512);
    assert!(st.workloads.is_empty());
}

#[test]
fn the_window_reads_partial_then_full_ratios() {
    let mut w = IdleWindow::default();
    let window = Duration::from_secs(100);
    assert_eq!(
        w.observe(at(0), 0.0, 0.0, window),
        Reading {
            ratio: None,
            full: false
        }
    );
    let r = w.observe(at(50), 50.0, 5.0, window);
    assert_eq!((r.ratio, r.full), (Some(0.1), false));
    // The same snapshot evaluated again reads the same.
    assert_eq!(w.observe(at(50), 50.0, 5.0, window), r);
    let r = w.observe(at(100), 100.0, 5.0, window);
    assert_eq!((r.ratio, r.full), (Some(0.05), true));
    let r = w.observe(at(150), 150.0, 5.0, window);
    assert_eq!((r.ratio, r.full), (Some(0.0), true), "the window slid");
    // Totals that restarted (a new workload with the same key): start over.
    let r = w.observe(at(160), 1.0, 0.0, window);
    assert_eq!(r.ratio, None);
    assert_eq!(w.len(), 1);
}

#[test]
fn kinds_and_the_mps_server_are_judged_as_configured() {
    let toml = "[[rules]]\nname = \"GpuWorkloadIdle\"\ncondition = \"workload_idle(0.05, pod, process)\"\nfor = \"1m\"\n";
    let rules: Vec<Rule> = parse_rules(toml, "t.toml")
        .expect("valid")
        .into_iter()
        .filter(|r| r.name == "GpuWorkloadIdle")
        .collect();
    assert_eq!(rules[0].for_, Duration::from_secs(60));
    let mut process = job("4242", &[3], 0, 0, 0.0);
    process.key.kind = WorkloadKind::Process;
    process.attributes = WorkloadAttributes {
        user: Some("bob".into()),
        command: Some("python3".into()),
        ..WorkloadAttributes::default()
    };
    let mut mps = process.clone();
    mps.key.id = "77".into();
    mps.attributes.command = Some(MPS_SERVER_NAME.into());
    let mut st = EvalState::default();
    for s in (0..=70).step_by(10) {
        let with = |w: &Workload| {
            let mut w = w.clone();
            w.devices
                .values_mut()
                .for_each(|u| u.gpu_seconds = s as f64);
            w
        };
        let live = vec![with(&process), with(&mps), job("1234", &[0], 0, s, 0.0)];
        st = evaluate(&rules, &snapshot(s, live, vec![]), &st, at(s)).0;
    }
    let keys: Vec<String> = st.alerts.keys().map(ToString::to_string).collect();
    assert_eq!(keys, vec!["GpuWorkloadIdle/process:4242"]);
    let alert = st.alerts.values().next().expect("one");
    assert!(matches!(alert.state, AlertState::Firing { .. }));
    assert_eq!(
        alert.annotations["summary"],
        "process 4242 of bob (python3) on node-7 holds GPUs 3 but idles"
    );
}

#[test]
fn the_condition_parses_checks_and_can_be_switched_off() {
    let c = Condition::parse("workload_idle(0.02, slurm_job)").expect("parses");
    assert_eq!(c.to_string(), "workload_idle(0.02, slurm_job)");
    assert!(c.is_workload_level() && !c.is_node_level());
    assert_eq!(c.threshold(), Some(0.02));
    for bad in [
        "workload_idle()",
        "workload_idle(2)",
        "workload_idle(x)",
        "workload_idle(0.01, job)",
        "workload_idle(0.01) and temperature > 80",
    ] {
        assert!(Condition::parse(bad).is_err(), "{bad}");
    }
    let off = "[[rules]]\nname = \"GpuWorkloadIdle\"\nenabled = false\n";
    let rules = parse_rules(off, "t.toml").expect("valid");
    assert!(rules.iter().all(|r| r.name != "GpuWorkloadIdle"));
    let problems = parse_rules(
        "[[rules]]\nname = \"GpuWorkloadIdle\"\ncondition = \"workload_idle(1.5)\"\n",
        "t.toml",
    )
    .expect_err("out of range");
    assert_eq!(problems[0].field, "rules[0].condition");
    assert!(problems[0].message.contains("from 0 to 1"), "{problems:?}");
}

#[test]
fn gpu_alerts_name_the_workloads_on_their_gpu_bounded() {
    let mut live: Vec<Workload> = (0..5)
        .map(|i| job(&format!("{}", 100 + i), &[0], 0, 60, 30.0))
        .collect();
    live.push(job("200", &[1], 0, 60, 30.0));
    let table = WorkloadTable {
        live,
        ended: vec![job("99", &[0], 0, 50, 0.0)],
        left_out: 0,
    };
    assert_eq!(
        on_gpu(&table, 0).as_deref(),
        Some("slurm_job 100 (alice), slurm_job 101 (alice), slurm_job 102 (alice) +3 more")
    );
    let only_ended = WorkloadTable {
        ended: table.ended.clone(),
        ..WorkloadTable::default()
    };
    assert_eq!(
        on_gpu(&only_ended, 0).as_deref(),
        Some("slurm_job 99 (alice, ended)")
    );
    assert_eq!(on_gpu(&table, 3), None);

    // A per-GPU rule's alert carries them as the `workloads` annotation.
    let rules = parse_rules(
        "[[rules]]\nname = \"GpuUp\"\ncondition = \"temperature > -1000\"\n",
        "t.toml",
    )
    .expect("valid");
    let rules: Vec<Rule> = rules.into_iter().filter(|r| r.name == "GpuUp").collect();
    let mut snap = snapshot(60, table.live.clone(), table.ended.clone());
    for gpu in &mut snap.gpus {
        gpu.readings.temperature_gpu_celsius = Some(40.0);
    }
    let (st, _) = evaluate(&rules, &snap, &EvalState::default(), at(60));
    let by_gpu: BTreeMap<String, Option<String>> = st
        .alerts
        .values()
        .map(|a| {
            (
                a.labels["gpu"].clone(),
                a.annotations.get("workloads").cloned(),
            )
        })
        .collect();
    assert_eq!(by_gpu["1"].as_deref(), Some("slurm_job 200 (alice)"));
    assert_eq!(by_gpu["3"], None);
    assert!(by_gpu["0"]
        .as_deref()
        .is_some_and(|w| w.ends_with("+3 more")));
}
