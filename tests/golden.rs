//! The golden /metrics test: a deterministic scenario (time frozen) must
//! produce exactly `tests/golden/metrics.prom` (volatile values masked),
//! pass `promtool check metrics`, and match the metric table of docs/metrics.md.
//!
//! Regenerate the golden file with `GPUWATCH_UPDATE_GOLDEN=1 cargo test --test golden`.

mod common;

use std::collections::BTreeSet;

use common::{fixture, Metrics};

/// Families whose values change from run to run (time, CPU, counts of ticks).
const VOLATILE: &[&str] = &[
    // Integrated over the agent's own (wall-clock) ticks.
    "gpuwatch_workload_gpu_seconds_total",
    "gpuwatch_workload_sm_active_seconds_total",
    "gpuwatch_workload_energy_joules_total",
    "gpuwatch_last_sample_timestamp_seconds",
    "gpuwatch_snapshot_age_seconds",
    "gpuwatch_sample_duration_seconds",
    "gpuwatch_samples_total",
    "gpuwatch_rule_values_total",
    "gpuwatch_xid_last_seen_timestamp_seconds",
    "gpuwatch_history_rows_written_total",
    "gpuwatch_history_commit_duration_seconds",
    "gpuwatch_history_database_size_bytes",
    "gpuwatch_history_oldest_sample_timestamp_seconds",
    "process_resident_memory_bytes",
    "process_cpu_seconds_total",
    "process_start_time_seconds",
];

/// Families whose very series come and go with timing: which NVML calls a
/// lost GPU has failed so far; which history tiers have rows yet (a run
/// that crosses a wall-clock minute commits a minute row, and the
/// `tier="minute"` series appears). Their samples are left out entirely.
const VOLATILE_SERIES: &[&str] = &[
    "gpuwatch_nvml_errors_total",
    "gpuwatch_history_oldest_sample_timestamp_seconds",
];

fn masked(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let name = line.split(['{', ' ']).next().unwrap_or("");
        if !line.starts_with('#') && VOLATILE_SERIES.contains(&name) {
            continue;
        }
        if !line.starts_with('#') && VOLATILE.contains(&name) {
            let head = line.rsplit_once(' ').map_or(line, |(head, _)| head);
            out.push_str(head);
            out.push_str(" <volatile>\n");
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn golden_metrics_match_promtool_and_the_docs() {
    // Every detail set, so that every family is covered.
    let metrics = common::golden::scrape("\"full\"");

    // 1. promtool, the real linter.
    let (ok, said) = common::promtool_check_metrics(&metrics.text);
    assert!(
        ok && said.trim().is_empty(),
        "promtool check metrics complained:\n{said}\n{}",
        metrics.text
    );

    // 2. The golden file.
    let golden_path = fixture("golden/metrics.prom");
    let actual = masked(&metrics.text);
    if std::env::var_os("GPUWATCH_UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden_path, &actual).expect("write the golden file");
    }
    let expected = std::fs::read_to_string(&golden_path)
        .expect("tests/golden/metrics.prom exists (GPUWATCH_UPDATE_GOLDEN=1 creates it)");
    if expected != actual {
        let diff: Vec<String> = expected
            .lines()
            .zip(actual.lines())
            .filter(|(e, a)| e != a)
            .take(10)
            .map(|(e, a)| format!("- {e}\n+ {a}"))
            .collect();
        panic!(
            "/metrics differs from {} ({} vs {} lines); first differences:\n{}\nRun with GPUWATCH_UPDATE_GOLDEN=1 if the change is intended.",
            golden_path.display(),
            expected.lines().count(),
            actual.lines().count(),
            diff.join("\n")
        );
    }

    // 3. Values straight from the scenario.
    let gpu0 = [("gpu", "0")];
    assert_eq!(
        metrics.value("gpuwatch_gpu_utilization_ratio", &gpu0),
        Some(0.75)
    );
    assert_eq!(
        metrics.value("gpuwatch_memory_total_bytes", &gpu0),
        Some(40960.0 * 1048576.0)
    );
    assert_eq!(
        metrics.value("gpuwatch_gpu_temperature_celsius", &gpu0),
        Some(60.0)
    );
    assert_eq!(
        metrics.value("gpuwatch_memory_temperature_celsius", &gpu0),
        Some(65.0)
    );
    assert_eq!(
        metrics.value("gpuwatch_power_usage_watts", &gpu0),
        Some(250.0)
    );
    assert_eq!(
        metrics.value("gpuwatch_power_limit_watts", &gpu0),
        Some(400.0)
    );
    assert_eq!(
        metrics.value("gpuwatch_clock_hertz", &[("gpu", "0"), ("clock", "sm")]),
        Some(1410e6)
    );
    assert_eq!(
        metrics.value(
            "gpuwatch_clock_event_active",
            &[("gpu", "0"), ("reason", "sw_power_cap")]
        ),
        Some(1.0)
    );
    assert_eq!(
        metrics.value(
            "gpuwatch_clock_event_active",
            &[("gpu", "0"), ("reason", "hw_thermal_slowdown")]
        ),
        Some(0.0)
    );
    assert_eq!(
        metrics.value(
            "gpuwatch_ecc_errors_total",
            &[("gpu", "0"), ("type", "corrected"), ("counter", "volatile")]
        ),
        Some(3.0)
    );
    assert_eq!(
        metrics.value("gpuwatch_remapped_rows_pending", &gpu0),
        Some(1.0)
    );
    assert_eq!(
        metrics.value("gpuwatch_pcie_replay_errors_total", &gpu0),
        Some(3.0)
    );
    assert_eq!(
        metrics.value("gpuwatch_xid_errors_total", &[("gpu", "0"), ("xid", "13")]),
        Some(1.0)
    );
    assert_eq!(
        metrics.value(
            "gpuwatch_compute_mode",
            &[("gpu", "0"), ("mode", "exclusive_process")]
        ),
        Some(1.0)
    );
    assert_eq!(
        metrics.value(
            "gpuwatch_process_memory_used_bytes",
            &[("pid", "4242"), ("process_name", "python3")]
        ),
        Some(10240.0 * 1048576.0)
    );
    assert_eq!(metrics.value("gpuwatch_gpu_processes", &gpu0), Some(2.0));
    // process_top_n = 1: tritonserver (4096 MiB) is summed into "other".
    assert_eq!(
        metrics.value(
            "gpuwatch_process_memory_used_bytes",
            &[("gpu", "0"), ("pid", "other")]
        ),
        Some(4096.0 * 1048576.0)
    );
    assert!(metrics
        .find("gpuwatch_process_info", &[("pid", "4343")])
        .is_empty());
    // 75 % GPU utilization shared by memory: 75 × 10240 / 14336 = 53.6 → 54 %.
    assert_eq!(
        metrics.value(
            "gpuwatch_process_sm_utilization_ratio",
            &[("gpu", "0"), ("pid", "4242")]
        ),
        Some(0.54)
    );
    // Host facts from tests/fixtures/proc-golden.
    let info = metrics.find("gpuwatch_process_info", &[("pid", "4242")]);
    assert_eq!(info.len(), 1);
    let labels = &info[0].labels;
    let label = |k: &str| labels.get(k).map(String::as_str);
    assert_eq!(label("user"), Some("alice"));
    assert_eq!(label("container_runtime"), Some("docker"));
    assert_eq!(label("gpu_instance"), Some("1"));
    assert_eq!(label("command"), Some("python3 train.py --model resnet50"));
    // MIG: 2 instances; instance 2 holds tritonserver's 4096 MiB.
    assert_eq!(metrics.value("gpuwatch_mig_instances", &gpu0), Some(2.0));
    assert_eq!(
        metrics.value(
            "gpuwatch_mig_instance_memory_used_bytes",
            &[("gpu", "0"), ("gpu_instance", "2")]
        ),
        Some(4096.0 * 1048576.0)
    );
    // Capacity, by hand. GPU 0: exclusive process mode with processes → 0.
    // GPU 1: 24576 − 256 reserved − 2048 blender = 22272 MiB free; minus the
    // 1 GiB margin = 21248 MiB; / 2048 = 10.4 → 10. GPU 2 is lost → 0.
    let fits = |gpu: &str, profile: &str| {
        metrics.value(
            "gpuwatch_gpu_capacity_fits",
            &[("gpu", gpu), ("profile", profile)],
        )
    };
    assert_eq!(fits("0", "small"), Some(0.0));
    assert_eq!(fits("1", "small"), Some(10.0));
    assert_eq!(fits("2", "small"), Some(0.0));
    assert_eq!(fits("1", "a100-big"), None, "the RTX 3090 is not an A100");
    assert_eq!(
        metrics.value("gpuwatch_node_capacity_fits", &[("profile", "small")]),
        Some(10.0)
    );
    // Unsupported readings are absent, not 0.
    assert!(metrics
        .find("gpuwatch_memory_temperature_celsius", &[("gpu", "1")])
        .is_empty());
    assert!(metrics
        .find("gpuwatch_ecc_errors_total", &[("gpu", "1")])
        .is_empty());
    assert!(metrics.find("gpuwatch_fan_speed_ratio", &gpu0).is_empty());
    assert_eq!(
        metrics
            .find("gpuwatch_fan_speed_ratio", &[("gpu", "1")])
            .len(),
        2
    );
    // The lost GPU is reported.
    assert_eq!(metrics.value("gpuwatch_gpu_up", &[("gpu", "2")]), Some(0.0));
    assert_eq!(
        metrics.value("gpuwatch_gpu_lost", &[("gpu", "2"), ("reason", "gpu_lost")]),
        Some(1.0)
    );

    // 4. docs/metrics.md's table documents exactly what is exported.
    check_docs_table(&metrics);
}

/// The same scenario at the default /metrics: `tests/golden/metrics-default.prom`,
/// promtool-clean, and exactly the full golden file without the detail
/// sets' families.
#[test]
fn golden_default_metrics_leave_out_the_detail_sets_only() {
    let metrics = common::golden::scrape("");
    let (ok, said) = common::promtool_check_metrics(&metrics.text);
    assert!(ok && said.trim().is_empty(), "promtool: {said}");
    let golden_path = fixture("golden/metrics-default.prom");
    let actual = masked(&metrics.text);
    if std::env::var_os("GPUWATCH_UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden_path, &actual).expect("write the golden file");
    }
    let expected = std::fs::read_to_string(&golden_path)
        .expect("tests/golden/metrics-default.prom exists (GPUWATCH_UPDATE_GOLDEN=1 creates it)");
    assert!(
        expected == actual,
        "/metrics differs from {}; run with GPUWATCH_UPDATE_GOLDEN=1 if the change is intended",
        golden_path.display()
    );
    // The full golden file, less the detail families, is the default one.
    let detail = [
        "gpuwatch_nvlink_up",
        "gpuwatch_nvlink_errors_total",
        "gpuwatch_nvlink_data_bytes_total",
        "gpuwatch_gpm_nvlink_link_bytes_per_second",
        "gpuwatch_gpm_media_engine_active_ratio",
        "gpuwatch_gpm_mig_media_engine_active_ratio",
        "gpuwatch_gpm_pipe_active_ratio",
        "gpuwatch_gpm_mig_pipe_active_ratio",
        "gpuwatch_process_info",
        "gpuwatch_process_memory_used_bytes",
        "gpuwatch_process_sm_utilization_ratio",
        "gpuwatch_process_memory_utilization_ratio",
        "gpuwatch_collector_success",
        "gpuwatch_rule_values_total",
    ];
    let family_of = |line: &str| -> String {
        let name = line
            .strip_prefix("# HELP ")
            .or_else(|| line.strip_prefix("# TYPE "))
            .or_else(|| line.strip_prefix("# UNIT "))
            .unwrap_or(line);
        name.split(['{', ' ']).next().unwrap_or("").to_string()
    };
    let is_detail = |line: &str| {
        let name = family_of(line);
        // Plain processes' workload series come with the processes set.
        let process_workload =
            name.starts_with("gpuwatch_workload_") && line.contains("kind=\"process\"");
        process_workload
            || detail
                .iter()
                .any(|d| name == *d || d.strip_suffix("_total") == Some(name.as_str()))
    };
    let full = std::fs::read_to_string(fixture("golden/metrics.prom")).expect("golden file");
    let without: Vec<&str> = full.lines().filter(|l| !is_detail(l)).collect();
    let default: Vec<&str> = actual.lines().collect();
    assert_eq!(
        without, default,
        "the full golden file less the detail sets"
    );
    for family in detail {
        assert!(metrics.find(family, &[]).is_empty(), "{family} is detail");
    }
}

/// What the agent served on a real H200 (driver 580.159.04, 2026-11-29, by
/// scripts/real_gpu_check.py): promtool-clean, and every family it has is in
/// docs/metrics.md's table with the documented type and labels.
#[test]
fn real_h200_metrics_are_clean_and_documented() {
    for label in ["idle", "load"] {
        let path = fixture(&format!("fixtures/real-h200/metrics-{label}.prom"));
        let text = std::fs::read_to_string(&path).expect("real-h200 fixture");
        let (ok, said) = common::promtool_check_metrics(&text);
        assert!(ok && said.trim().is_empty(), "promtool on {label}: {said}");
        let metrics = Metrics::parse(&text);
        let documented = docs_table();
        for sample in &metrics.samples {
            let (kind, labels) = documented.get(&sample.name).unwrap_or_else(|| {
                panic!(
                    "{} (real H200, {label}) is not in the table of docs/metrics.md",
                    sample.name
                )
            });
            assert_eq!(
                metrics.types.get(&sample.name),
                Some(kind),
                "type of {}",
                sample.name
            );
            let names: BTreeSet<String> = sample.labels.keys().cloned().collect();
            assert!(
                names.is_subset(labels),
                "labels of {}: {names:?} vs {labels:?}",
                sample.name
            );
        }
        // What an H200 lacks is absent, not 0: no fans, no page retirement.
        assert!(!metrics.has("gpuwatch_fan_speed_ratio"));
        assert!(!metrics.has("gpuwatch_retired_pages"));
        assert!(metrics.has("gpuwatch_remapped_rows"));
    }
}

fn check_docs_table(metrics: &Metrics) {
    common::assert_documented(
        metrics,
        &docs_table(),
        |_| true,
        "the table of docs/metrics.md",
    );
}

/// The metric table of docs/metrics.md: name → (type, label names).
fn docs_table() -> common::Documented {
    common::docs_metric_table("metrics.md", "metrics-table")
}
