use super::*;
use crate::scenario::schema::ProcessKind;
use crate::{builtin, Scenario};

fn engine(src: &str) -> Engine {
    Engine::new(Scenario::parse(src, "test").expect("valid scenario"))
}

fn builtin_engine(name: &str) -> Engine {
    engine(builtin::get(name).expect("shipped scenario"))
}

#[test]
fn every_shipped_scenario_evaluates_for_ten_minutes() {
    for name in builtin::NAMES {
        let e = builtin_engine(name);
        assert!(e.gpu_count() > 0, "{name}");
        for step in 0..=600 {
            let t = step as f64;
            for i in 0..e.gpu_count() {
                let g = e.gpu(i).expect("gpu");
                let _ = (
                    g.utilization(t),
                    g.memory(t),
                    g.temperature(t),
                    g.power_mw(t),
                    g.energy_mj(t),
                );
                let _ = (
                    g.clock_mhz(1, t),
                    g.clocks_event_reasons(t),
                    g.pstate(t),
                    g.fan_percent(0, t),
                );
                let _ = (
                    g.ecc(t),
                    g.remapped_rows(t),
                    g.processes(ProcessKind::Compute, t),
                );
                let _ = (e.field(i, 252, 0, t), e.gate(i, t));
                if let Ok(m) = g.memory(t) {
                    assert!(
                        m.used <= m.total && m.used >= m.reserved,
                        "{name} gpu {i} t {t}"
                    );
                }
                if let Ok((u, m)) = g.utilization(t) {
                    assert!(u <= 100 && m <= 100);
                }
                let _ = (g.nvlink_active(0, t), g.fabric(t), e.field(i, 138, 0, t));
                if step % 60 == 0 && g.gpm_supported() {
                    let w = g.gpm_window(None, 0.0, t).expect("gpm window");
                    for id in [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 30, 40, 50] {
                        if let Ok(v) = w.metric(id) {
                            assert!(
                                (0.0..=100.0).contains(&v),
                                "{name} gpu {i} metric {id}: {v}"
                            );
                        }
                    }
                    assert!(w.metric(20).expect("pcie tx") >= 0.0);
                }
            }
        }
    }
}

#[test]
fn golden_is_constant() {
    let e = builtin_engine("golden");
    let g = e.gpu(0).expect("gpu 0");
    assert_eq!(g.utilization(10.0), Ok((75, 40)));
    assert_eq!(g.power_mw(10.0), Ok(250_000));
    assert_eq!(g.temperature(10.0), Ok(60));
    assert_eq!(g.energy_mj(10.0), Ok(2_500_000));
    assert_eq!(g.fan_count(0.0), Err(Unavailable::NotSupported));
    let m = g.memory(10.0).expect("memory");
    assert_eq!(m.used, (512 + 10240) * 1024 * 1024);
    assert_eq!(
        e.gpu(1).expect("gpu 1").ecc(1.0),
        Err(Unavailable::NotSupported)
    );
}

#[test]
fn counters_are_monotonic_and_pure() {
    let e = builtin_engine("thermal-incident");
    let hot = e.gpu(3).expect("hot gpu");
    let mut prev = (0, 0);
    for step in 0..900 {
        let t = step as f64 * 0.7;
        let energy = hot.energy_mj(t).expect("energy");
        let thermal = hot
            .violation_ns(Violation::Reason(reasons::HW_THERMAL), t)
            .expect("violation");
        assert!(energy >= prev.0 && thermal >= prev.1, "t {t}");
        prev = (energy, thermal);
    }
    // HW thermal slowdown is set once the GPU reaches 88 °C (100 s) and lasts until 5 min.
    assert_eq!(
        hot.clocks_event_reasons(50.0)
            .map(|r| r & reasons::HW_THERMAL),
        Ok(0)
    );
    assert_ne!(
        hot.clocks_event_reasons(150.0)
            .map(|r| r & reasons::HW_THERMAL),
        Ok(0)
    );
    assert_eq!(
        hot.violation_ns(Violation::Reason(reasons::HW_THERMAL), 100.0),
        Ok(0)
    );
    assert_eq!(
        hot.violation_ns(Violation::Reason(reasons::HW_THERMAL), 300.0),
        Ok(200_000_000_000)
    );
    // Same t from a fresh engine gives the same answer.
    let again = builtin_engine("thermal-incident");
    assert_eq!(
        again.gpu(3).expect("gpu").energy_mj(400.0),
        hot.energy_mj(400.0)
    );
}

#[test]
fn fault_windows() {
    let e = builtin_engine("faults");
    let lost = e.gpu(1).expect("gpu 1");
    assert!(lost.utilization(59.0).is_ok());
    assert_eq!(lost.utilization(60.0), Err(Unavailable::GpuLost));
    assert_eq!(
        e.gpu(0).expect("gpu 0").power_mw(1.0),
        Err(Unavailable::NotSupported)
    );
    assert_eq!(e.gate(2, 119.0), Gate::Open);
    assert_eq!(e.gate(2, 130.0), Gate::Hang(Some(150.0)));
    assert_eq!(e.gate(2, 150.0), Gate::Open);
    let ecc = e.gpu(3).expect("gpu 3");
    assert_eq!(ecc.ecc(44.0).map(|c| c.uncorrected), Ok(0));
    assert_eq!(ecc.ecc(46.0).map(|c| c.uncorrected), Ok(1));
    assert_eq!(ecc.remapped_rows(46.0), Ok((0, 1, true, false)));
    let xids: Vec<(f64, u64)> = e
        .events()
        .iter()
        .filter(|ev| ev.event_type == 0x8)
        .map(|ev| (ev.at, ev.data))
        .collect();
    assert_eq!(xids, vec![(30.0, 94), (60.0, 79)]);
}

#[test]
fn process_pool_is_deterministic_with_churn() {
    let a = builtin_engine("h100x8");
    let b = builtin_engine("h100x8");
    let list = |e: &Engine, t| {
        e.gpu(7)
            .expect("gpu")
            .processes(ProcessKind::Compute, t)
            .expect("processes")
    };
    assert_eq!(list(&a, 100.0).len(), 10);
    assert_eq!(list(&a, 100.0), list(&b, 100.0));
    let pids = |t| list(&a, t).iter().map(|p| p.pid).collect::<Vec<_>>();
    assert_ne!(pids(0.0), pids(600.0), "processes must churn");
    let p = &list(&a, 333.0)[3];
    assert_eq!(
        a.process_name(p.pid, 333.0).as_deref(),
        Some(p.name.as_str())
    );
    // Training GPUs hold 60-75 GB.
    let used = a.gpu(0).expect("gpu").memory(10.0).expect("memory").used as f64 / 1e9;
    assert!((60.0..80.0).contains(&used), "{used}");
}

#[test]
fn memory_pressure_reaches_98_percent() {
    let e = builtin_engine("memory-pressure");
    let m = e.gpu(2).expect("gpu").memory(400.0).expect("memory");
    let pct = m.used as f64 / m.total as f64 * 100.0;
    assert!((97.0..99.5).contains(&pct), "{pct}");
    let early = e.gpu(2).expect("gpu").memory(10.0).expect("memory");
    assert!(early.used < m.used / 2);
}

#[test]
fn field_ids_follow_the_driver_version() {
    let src = "driver_version = \"580.82.07\"\n[[gpu]]\n[gpu.metrics]\ntemperature_gpu = 100\n";
    let e = engine(src);
    assert!(matches!(e.field(0, 270, 0, 50.0), Ok(FieldValue::Ull(ns)) if ns == 50_000_000_000));
    assert_eq!(e.field(0, 252, 0, 50.0), Err(Unavailable::NotSupported));
    let old = engine("[[gpu]]\n[gpu.metrics]\ntemperature_gpu = 100\n");
    assert!(matches!(old.field(0, 252, 0, 50.0), Ok(FieldValue::Ull(ns)) if ns == 50_000_000_000));
    assert_eq!(old.field(0, 9999, 0, 1.0), Err(Unavailable::NotSupported));
}
