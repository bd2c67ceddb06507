//! The fast tier's field batch asks the clock-event violation counters by
//! NVML 12's ids (251..=253); drivers from 580.82 (CUDA 13.0 Update 1) know
//! them as 269..=271 and answer power-smoothing fields at 251..=253. The
//! NVML adapter renumbers for the driver it finds (`raw::wire_id`): on the
//! simulator, which numbers its fields as the scenario's driver would, the
//! counters read the same under a 570 and a 580.82 driver, and are there.

mod common;

use std::time::Duration;

use common::{Agent, Metrics};

const FAMILY: &str = "gpuwatch_clock_event_duration_seconds_total";
const REASONS: [&str; 3] = [
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
];

/// One H100 held down by all three reasons from the start, under `driver`.
fn scenario(dir: &std::path::Path, driver: &str) -> std::path::PathBuf {
    let path = dir.join(format!("field-ids-{driver}.toml"));
    let text = format!(
        "name = \"field-ids\"\n\
         description = \"clock-event violation counters under driver {driver}\"\n\
         driver_version = \"{driver}\"\n\n\
         [[gpu]]\n\
         name = \"NVIDIA H100 80GB HBM3\"\n\
         memory_total_mib = 81559\n\
         power_limit_w = 700\n\
         auto_reasons = false\n\n\
         [gpu.metrics]\n\
         utilization_gpu = 50\n\
         # SW thermal 0x20, HW thermal 0x40, HW power brake 0x80.\n\
         clocks_event_reasons = 0xE0\n"
    );
    std::fs::write(&path, text).expect("write the scenario");
    path
}

/// The three violation counters of GPU 0, with the simulator's clock frozen
/// at 10 s.
fn counters(driver: &str) -> Vec<Option<f64>> {
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = scenario(dir.path(), driver);
    let agent = Agent::start(
        scenario.to_str().expect("utf-8 path"),
        &["--no-history"],
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    let value = |m: &Metrics, reason| m.value(FAMILY, &[("gpu", "0"), ("reason", reason)]);
    let m = agent.wait_for("the violation counters", Duration::from_secs(30), |m| {
        REASONS.iter().all(|reason| value(m, reason).is_some())
    });
    REASONS.iter().map(|reason| value(&m, reason)).collect()
}

#[test]
fn violation_counters_read_the_same_under_both_field_numberings() {
    let v12 = counters("570.86.15");
    let v13u1 = counters("580.82.07");
    assert!(
        v12.iter().all(|v| v.is_some_and(|s| s > 0.0)),
        "570 driver: {v12:?}"
    );
    assert_eq!(v13u1, v12, "580.82 driver against 570");
}
