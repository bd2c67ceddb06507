//! The anomaly rules (a GPU against its own baseline and against its
//! peers) on a simulated node under changing load.

use super::*;

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
