//! The series budget of a node's default /metrics (issue 23): the built-in
//! `h100x8` scenario (an HGX H100 node: 8 GPUs, 18 NVLink links each, ~10
//! processes per GPU, GPM with 15 media engines per GPU) serves at most 720
//! series and 100 kB with gpuwatch's names, promtool-clean, still per GPU;
//! the detail sets add exactly their families, in the amounts the scenario
//! implies.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{Agent, Metrics};

/// The budget of the default /metrics on `h100x8`.
const MAX_SERIES: usize = 720;
const MAX_BYTES: usize = 100_000;
/// The scenario: 8 GPUs with 18 links each (see nvml-sim's h100x8.toml).
const GPUS: usize = 8;
const LINKS: usize = 18;

fn scrape(args: &[&str]) -> Metrics {
    let agent = Agent::start("h100x8", args, &[("GPUWATCH_SIM_TIME", "30")]);
    agent.wait_for(
        "GPM figures, the slow tier and the processes",
        Duration::from_secs(30),
        |m| {
            m.find("gpuwatch_gpm_sm_active_ratio", &[]).len() == GPUS
                && m.find("gpuwatch_nvlink_links_down", &[]).len() == GPUS
                && m.find("gpuwatch_gpu_processes", &[]).len() == GPUS
                && m.find("gpuwatch_pcie_link_width", &[]).len() == GPUS
                && m.has("gpuwatch_alerting_dropped_snapshots_total")
        },
    )
}

/// The pending and firing alerts: they come and go with the rules' timing
/// (a GPU of the scenario is starved), not with the detail sets.
const ALERTS: &str = "gpuwatch_alerts";

/// Series per family name (suffixes included), the alerts left out.
fn per_family(m: &Metrics) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for s in m.samples.iter().filter(|s| s.name != ALERTS) {
        *out.entry(s.name.clone()).or_default() += 1;
    }
    out
}

#[test]
fn the_default_metrics_of_an_8_gpu_nvswitch_node_fit_the_budget_and_the_detail_sets_add_the_rest() {
    let default = scrape(&["--no-history"]);
    let full = scrape(&["--no-history", "--metrics-detail", "full"]);

    // 1. promtool, the real linter.
    for (what, m) in [("default", &default), ("full", &full)] {
        let (ok, said) = common::promtool_check_metrics(&m.text);
        assert!(ok && said.trim().is_empty(), "promtool on {what}: {said}");
    }

    // 2. The budget.
    let series = default.samples.len();
    let bytes = default.text.len();
    println!(
        "h100x8 default: {series} series, {bytes} bytes; full: {} series, {} bytes",
        full.samples.len(),
        full.text.len()
    );
    assert!(series <= MAX_SERIES, "{series} series > {MAX_SERIES}");
    assert!(bytes <= MAX_BYTES, "{bytes} bytes > {MAX_BYTES}");

    // 3. Still per GPU: every GPU carries the same families, among them
    // what a fleet reads.
    let mut by_gpu: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in default.samples.iter().filter(|s| s.name != ALERTS) {
        if let Some(gpu) = s.labels.get("gpu") {
            by_gpu
                .entry(gpu.clone())
                .or_default()
                .insert(s.name.clone());
        }
    }
    assert_eq!(by_gpu.len(), GPUS);
    let first = by_gpu.values().next().expect("a GPU").clone();
    assert!(by_gpu.values().all(|f| *f == first), "{by_gpu:?}");
    for family in [
        "gpuwatch_gpu_utilization_ratio",
        "gpuwatch_gpm_sm_active_ratio",
        "gpuwatch_gpm_sm_occupancy_ratio",
        "gpuwatch_gpm_tensor_active_ratio",
        "gpuwatch_gpm_dram_active_ratio",
        "gpuwatch_gpm_graphics_engine_active_ratio",
        "gpuwatch_memory_used_bytes",
        "gpuwatch_gpu_temperature_celsius",
        "gpuwatch_memory_temperature_celsius",
        "gpuwatch_power_usage_watts",
        "gpuwatch_energy_consumption_joules_total",
        "gpuwatch_clock_hertz",
        "gpuwatch_clock_event_active",
        "gpuwatch_clock_event_duration_seconds_total",
        "gpuwatch_ecc_errors_total",
        "gpuwatch_remapped_rows_pending",
        "gpuwatch_gpu_health",
        "gpuwatch_nvlink_links_down",
        "gpuwatch_nvlink_gpu_errors_total",
        "gpuwatch_gpm_nvlink_bytes_per_second",
        "gpuwatch_fabric_registered",
        "gpuwatch_gpu_processes",
    ] {
        assert!(first.contains(family), "{family} is not in the default");
    }

    // 4. The detail sets add exactly their families, as many series as the
    // scenario implies; nothing else differs.
    let d = per_family(&default);
    let f = per_family(&full);
    let rules = gpuwatch::config::Config::default().rules.len();
    let procs = f["gpuwatch_process_info"];
    let engines = f["gpuwatch_gpm_media_engine_active_ratio"];
    let groups = f["gpuwatch_collector_success"];
    let expected: BTreeMap<&str, usize> = [
        // Per link: state; 4 error types; tx and rx.
        ("gpuwatch_nvlink_up", GPUS * LINKS),
        ("gpuwatch_nvlink_errors_total", GPUS * LINKS * 4),
        (
            "gpuwatch_gpm_nvlink_link_bytes_per_second",
            GPUS * LINKS * 2,
        ),
        // 7 pipes per GPU.
        ("gpuwatch_gpm_pipe_active_ratio", GPUS * 7),
        // The top 10 processes of each GPU, 4 families.
        ("gpuwatch_process_info", procs),
        ("gpuwatch_process_memory_used_bytes", procs),
        ("gpuwatch_process_sm_utilization_ratio", procs),
        ("gpuwatch_process_memory_utilization_ratio", procs),
        ("gpuwatch_gpm_media_engine_active_ratio", engines),
        ("gpuwatch_collector_success", groups),
        // One per rule of the built-in pack.
        ("gpuwatch_rule_values_total", rules),
        // Each simulated process is a workload of its own (kind
        // "process": its pid has no /proc here), per-process detail.
        ("gpuwatch_workload_gpu_seconds_total", procs),
        ("gpuwatch_workload_sm_active_seconds_total", procs),
        ("gpuwatch_workload_energy_joules_total", procs),
        ("gpuwatch_workload_peak_memory_bytes", procs),
    ]
    .into_iter()
    .collect();
    assert_eq!(procs, GPUS * 10, "the top 10 processes of each GPU");
    assert_eq!(engines % GPUS, 0);
    assert_eq!(groups % GPUS, 0);
    for (family, n) in &f {
        let in_default = d.get(family).copied().unwrap_or(0);
        match expected.get(family.as_str()) {
            Some(want) => {
                assert_eq!(in_default, 0, "{family} is detail");
                assert_eq!(n, want, "series of {family} with detail");
            }
            None => assert_eq!(in_default, *n, "{family} is in both"),
        }
    }
    assert!(d.keys().all(|k| f.contains_key(k)));
    assert_eq!(
        f.values().sum::<usize>() - d.values().sum::<usize>(),
        expected.values().sum::<usize>(),
        "full = default + the detail sets"
    );
}
