//! Drop-in metric names (`--metrics-compat`): the real binary on the golden
//! scenario (time frozen at 10 s) must export dcgm-exporter's and
//! nvidia_gpu_exporter's families with the scenario's values in their units
//! and labels, keep every gpuwatch_* family, pass promtool with exactly the
//! complaints the original exporters' output draws, and match the mapping
//! tables of docs/compat.md. Without the flag or the config key, none appears.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use common::{fixture, run_cli, Agent, Metrics};

const MIB: f64 = 1048576.0;
const GPU0_UUID: &str = "GPU-a0000000-0000-4000-8000-000000000000";
const HOST: &str = "golden-node";

fn is_compat(name: &str) -> bool {
    name.starts_with("DCGM_") || name.starts_with("nvidia_smi_")
}

/// A config file in a fresh temporary directory.
fn config(name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpuwatch-compat-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("gpuwatch.toml");
    std::fs::write(&path, body).expect("write config");
    path
}

/// Starts the agent in this process (the scenario's time is frozen, so
/// in-process agents one after another see the same GPUs).
fn start(args: &[&str]) -> Agent {
    let scenario = fixture("scenarios/golden-full.toml");
    Agent::in_process_with_args(
        scenario.to_str().expect("utf-8 path"),
        args,
        &[("GPUWATCH_SIM_TIME", "10")],
    )
}

fn settled(agent: &Agent) -> Metrics {
    agent.wait_for(
        "both Xid codes, the processes and per-instance GPM",
        Duration::from_secs(20),
        |m| {
            m.find("gpuwatch_xid_errors_total", &[]).len() == 2
                && m.find("gpuwatch_gpu_processes", &[]).len() == 2
                && m.has("gpuwatch_gpm_mig_sm_active_ratio")
        },
    )
}

fn compat_families(metrics: &Metrics) -> BTreeSet<String> {
    metrics
        .samples
        .iter()
        .filter(|s| is_compat(&s.name))
        .map(|s| s.name.clone())
        .collect()
}

#[test]
fn dcgm_and_nvidia_smi_names_carry_the_scenario_in_their_units() {
    let cfg = config("both", &format!("[sampler]\nhostname = \"{HOST}\"\n"));
    let agent = start(&[
        "--config",
        cfg.to_str().expect("utf-8"),
        "--metrics-compat",
        "dcgm,nvidia_smi",
    ]);
    let m = settled(&agent);

    // dcgm-exporter: labels exactly as it writes them.
    let sample = m.find("DCGM_FI_DEV_GPU_TEMP", &[("gpu", "0")]);
    assert_eq!(sample.len(), 1, "{}", m.text);
    let expected: BTreeMap<String, String> = [
        ("gpu", "0"),
        ("UUID", GPU0_UUID),
        ("pci_bus_id", "00000000:07:00.0"),
        ("device", "nvidia0"),
        ("modelName", "NVIDIA A100-SXM4-40GB"),
        ("Hostname", HOST),
        ("DCGM_FI_DRIVER_VERSION", "550.54.15"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(sample[0].labels, expected);

    // Values from tests/scenarios/golden-full.toml, in dcgm's units.
    let gpu0 = [("gpu", "0")];
    let gpu1 = [("gpu", "1")];
    let dcgm = |name: &str, labels: &[(&str, &str)]| m.value(name, labels);
    // GPU 0: 40960 MiB, 512 reserved, processes of 10240 + 4096 MiB.
    assert_eq!(dcgm("DCGM_FI_DEV_FB_USED", &gpu0), Some(10240.0 + 4096.0));
    assert_eq!(
        dcgm("DCGM_FI_DEV_FB_FREE", &gpu0),
        Some(40960.0 - 512.0 - 10240.0 - 4096.0)
    );
    assert_eq!(dcgm("DCGM_FI_DEV_FB_RESERVED", &gpu0), Some(512.0));
    assert_eq!(dcgm("DCGM_FI_DEV_GPU_UTIL", &gpu0), Some(75.0));
    assert_eq!(dcgm("DCGM_FI_DEV_MEM_COPY_UTIL", &gpu0), Some(40.0));
    assert_eq!(dcgm("DCGM_FI_DEV_GPU_UTIL", &gpu1), Some(30.0));
    assert_eq!(dcgm("DCGM_FI_DEV_ENC_UTIL", &gpu1), Some(10.0));
    assert_eq!(dcgm("DCGM_FI_DEV_DEC_UTIL", &gpu1), Some(5.0));
    assert_eq!(dcgm("DCGM_FI_DEV_GPU_TEMP", &gpu0), Some(60.0));
    assert_eq!(dcgm("DCGM_FI_DEV_MEMORY_TEMP", &gpu0), Some(65.0));
    assert_eq!(dcgm("DCGM_FI_DEV_POWER_USAGE", &gpu0), Some(250.0));
    // 250 W for the 10 simulated seconds, in mJ.
    assert_eq!(
        dcgm("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", &gpu0),
        Some(250.0 * 10.0 * 1000.0)
    );
    assert_eq!(dcgm("DCGM_FI_DEV_SM_CLOCK", &gpu0), Some(1410.0));
    assert_eq!(dcgm("DCGM_FI_DEV_MEM_CLOCK", &gpu0), Some(1215.0));
    assert_eq!(dcgm("DCGM_FI_DEV_SM_CLOCK", &gpu1), Some(1695.0));
    assert_eq!(
        dcgm("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", &gpu0),
        Some(f64::from(0x14))
    );
    // Xid 13 at 5 s, then 31 at 6 s: dcgm reports the last code.
    assert_eq!(dcgm("DCGM_FI_DEV_XID_ERRORS", &gpu0), Some(31.0));
    // None yet: 0, as dcgm-exporter reports it.
    assert_eq!(dcgm("DCGM_FI_DEV_XID_ERRORS", &gpu1), Some(0.0));
    // GPU 0's two NVLink links and the RTX 3090's two bridge links count no
    // errors: the per-GPU totals are 0 (absent without NVLink: GPU 3 of
    // tests/nvlink_traffic.rs).
    for field in [
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    ] {
        assert_eq!(dcgm(field, &gpu0), Some(0.0), "{field}");
        assert_eq!(dcgm(field, &gpu1), Some(0.0), "{field}");
    }
    assert_eq!(dcgm("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", &gpu0), Some(3.0));
    assert_eq!(dcgm("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", &gpu0), Some(0.0));
    assert_eq!(dcgm("DCGM_FI_DEV_ROW_REMAP_PENDING", &gpu0), Some(1.0));
    assert_eq!(dcgm("DCGM_FI_DEV_ROW_REMAP_FAILURE", &gpu0), Some(0.0));
    assert_eq!(dcgm("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", &gpu0), Some(3.0));
    // Absent stays absent: no memory temperature or ECC on the RTX 3090,
    // nothing from the lost GPU 2.
    assert_eq!(dcgm("DCGM_FI_DEV_MEMORY_TEMP", &gpu1), None);
    assert_eq!(dcgm("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", &gpu1), None);
    assert!(m
        .samples
        .iter()
        .filter(|s| s.name.starts_with("DCGM_"))
        .all(|s| s.labels.get("gpu").map(String::as_str) != Some("2")));
    // dcgm's counters keep their exact names (no `_total`), untyped.
    assert_eq!(
        m.types
            .get("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
            .map(String::as_str),
        Some("untyped")
    );
    assert_eq!(
        m.types.get("DCGM_FI_DEV_GPU_TEMP").map(String::as_str),
        Some("gauge")
    );

    // nvidia_gpu_exporter: uuid lower case without "GPU-", ratios, bytes, Hz.
    let u0 = [("uuid", "a0000000-0000-4000-8000-000000000000")];
    let u1 = [("uuid", "b1111111-1111-4111-8111-111111111111")];
    let smi = |name: &str, labels: &[(&str, &str)]| m.value(name, labels);
    assert_eq!(smi("nvidia_smi_utilization_gpu_ratio", &u0), Some(0.75));
    assert_eq!(smi("nvidia_smi_utilization_memory_ratio", &u0), Some(0.4));
    assert_eq!(
        smi("nvidia_smi_memory_used_bytes", &u0),
        Some((10240.0 + 4096.0) * MIB)
    );
    assert_eq!(
        smi("nvidia_smi_memory_total_bytes", &u0),
        Some(40960.0 * MIB)
    );
    assert_eq!(smi("nvidia_smi_temperature_gpu", &u0), Some(60.0));
    assert_eq!(smi("nvidia_smi_power_draw_watts", &u0), Some(250.0));
    assert_eq!(
        smi("nvidia_smi_power_default_limit_watts", &u1),
        Some(370.0)
    );
    assert_eq!(
        smi("nvidia_smi_enforced_power_limit_watts", &u1),
        Some(350.0)
    );
    assert_eq!(
        smi("nvidia_smi_clocks_current_sm_clock_hz", &u0),
        Some(1410e6)
    );
    assert_eq!(
        smi("nvidia_smi_clocks_max_memory_clock_hz", &u1),
        Some(9751e6)
    );
    assert_eq!(
        smi("nvidia_smi_clocks_current_graphics_clock_hz", &u1),
        Some(2100e6)
    );
    assert_eq!(
        smi("nvidia_smi_clocks_current_video_clock_hz", &u1),
        Some(1755e6)
    );
    assert_eq!(
        smi("nvidia_smi_clocks_max_graphics_clock_hz", &u0),
        Some(1410e6)
    );
    assert_eq!(smi("nvidia_smi_fan_speed_ratio", &u1), Some(0.45));
    assert_eq!(smi("nvidia_smi_fan_speed_ratio", &u0), None);
    assert_eq!(smi("nvidia_smi_pstate", &u1), Some(2.0));
    assert_eq!(smi("nvidia_smi_compute_mode", &u0), Some(3.0));
    assert_eq!(
        smi("nvidia_smi_clocks_event_reasons_sw_power_cap", &u0),
        Some(1.0)
    );
    assert_eq!(
        smi("nvidia_smi_clocks_event_reasons_hw_slowdown", &u0),
        Some(0.0)
    );
    assert_eq!(smi("nvidia_smi_pcie_link_width_current", &u1), Some(8.0));
    assert_eq!(
        smi("nvidia_smi_ecc_errors_corrected_volatile_total", &u0),
        Some(3.0)
    );
    assert_eq!(smi("nvidia_smi_temperature_memory", &u1), None);
    let info = m.find("nvidia_smi_gpu_info", &u1);
    assert_eq!(info.len(), 1);
    assert_eq!(info[0].labels["name"], "NVIDIA GeForce RTX 3090");
    assert_eq!(info[0].labels["driver_version"], "550.54.15");
    assert_eq!(info[0].labels["index"], "1");
    // The families nvidia_gpu_exporter adds beside the query fields.
    assert_eq!(smi("nvidia_smi_index", &u1), Some(1.0));
    assert_eq!(smi("nvidia_smi_energy_joules_total", &u0), Some(2500.0));
    let python = [("uuid", u0[0].1), ("pid", "4242")];
    assert_eq!(
        smi("nvidia_smi_compute_app_used_memory_bytes", &python),
        Some(10240.0 * MIB)
    );
    assert_eq!(smi("nvidia_smi_compute_app_info", &python), Some(1.0));
    assert_eq!(smi("nvidia_smi_compute_apps", &u0), Some(2.0));
    assert_eq!(smi("nvidia_smi_compute_apps", &u1), Some(0.0));
    assert_eq!(
        smi("nvidia_smi_compute_apps_last_collect_success", &[]),
        Some(1.0)
    );
    assert_eq!(
        smi(
            "nvidia_smi_xid_errors_total",
            &[("uuid", u0[0].1), ("xid", "13")]
        ),
        Some(1.0)
    );
    assert_eq!(
        smi(
            "nvidia_smi_mig_memory_used_bytes",
            &[("uuid", u0[0].1), ("gpu_instance_id", "2")]
        ),
        Some(4096.0 * MIB)
    );
    assert_eq!(m.find("nvidia_smi_mig_info", &u0).len(), 2);

    // gpuwatch's own families are all still there.
    for name in [
        "gpuwatch_gpu_info",
        "gpuwatch_gpu_utilization_ratio",
        "gpuwatch_memory_used_bytes",
        "gpuwatch_energy_consumption_joules_total",
        "gpuwatch_xid_errors_total",
        "gpuwatch_up",
        "process_cpu_seconds_total",
    ] {
        assert!(m.has(name), "{name} is missing with --metrics-compat");
    }
    assert_eq!(
        m.value("gpuwatch_gpu_utilization_ratio", &[("gpu", "0")]),
        Some(0.75)
    );

    // OpenMetrics keeps the dcgm names too (a counter would become *_total).
    let om = agent
        .get_with(
            "/metrics",
            &[("Accept", "application/openmetrics-text; version=1.0.0")],
        )
        .expect("OpenMetrics scrape");
    assert!(om
        .body
        .contains("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION unknown\n"));
    assert!(om.body.contains("\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{"));
    assert!(!om
        .body
        .contains("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total"));

    check_promtool(&m);
    check_docs_tables(&m);
}

/// promtool's complaints, one line each, deduplicated (it repeats a
/// complaint for every series).
fn promtool_complaints(text: &str) -> BTreeSet<String> {
    let (_, said) = common::promtool_check_metrics(text);
    said.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

fn check_promtool(m: &Metrics) {
    let complaints = promtool_complaints(&m.text);
    let mut expected = BTreeSet::new();
    // dcgm-exporter's own output draws this for every family: its
    // `modelName` label is camelCase. (Its counters would also draw
    // "counter metrics should have "_total" suffix"; here they are untyped.)
    let dcgm: Vec<&String> = m.types.keys().filter(|n| n.starts_with("DCGM_")).collect();
    assert_eq!(dcgm.len(), 31 + 16, "DCGM families: {dcgm:?}");
    for name in dcgm {
        expected.insert(format!(
            "{name} label names should be written in 'snake_case' not 'camelCase'"
        ));
    }
    // dcgm-exporter's field name itself says "COUNTER".
    expected.insert(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'".to_string(),
    );
    // nvidia_gpu_exporter exports these nvidia-smi fields as gauges too,
    // names included, so its output draws the same.
    for name in [
        "nvidia_smi_ecc_errors_corrected_aggregate_total",
        "nvidia_smi_ecc_errors_corrected_volatile_total",
        "nvidia_smi_ecc_errors_uncorrected_aggregate_total",
        "nvidia_smi_ecc_errors_uncorrected_volatile_total",
    ] {
        expected.insert(format!(
            "{name} non-counter metrics should not have \"_total\" suffix"
        ));
    }
    for name in [
        "nvidia_smi_retired_pages_double_bit_count",
        "nvidia_smi_retired_pages_single_bit_ecc_count",
    ] {
        expected.insert(format!(
            "{name} non-histogram and non-summary metrics should not have \"_count\" suffix"
        ));
    }
    assert_eq!(
        complaints, expected,
        "promtool's complaints differ from the expected list"
    );
}

fn check_docs_tables(m: &Metrics) {
    let page = common::docs_page("compat.md");
    let dcgm_labels = "gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION";
    let mut documented = common::Documented::new();
    for marker in ["compat-dcgm-table", "compat-nvidia-smi-table"] {
        for row in common::docs_marked(&page, "compat.md", marker)
            .lines()
            .filter(|l| l.starts_with("| `"))
        {
            let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
            let name = cells[0].trim_matches('`').to_string();
            let kind = cells[1].split_whitespace().next().unwrap_or("").to_string();
            let labels = cells[3].replace("*dcgm*", dcgm_labels);
            let labels: BTreeSet<String> = labels
                .split(',')
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty() && l != "–")
                .collect();
            assert!(
                documented.insert(name.clone(), (kind, labels)).is_none(),
                "{name} is in docs/compat.md twice"
            );
        }
    }
    common::assert_documented(
        m,
        &documented,
        is_compat,
        "the drop-in tables of docs/compat.md",
    );
}

#[test]
fn no_compat_family_without_the_flag_and_the_flag_overrides_the_config() {
    // Neither flag nor config: gpuwatch_* only.
    let plain = settled(&start(&[]));
    assert!(plain.has("gpuwatch_gpu_utilization_ratio"));
    assert_eq!(compat_families(&plain), BTreeSet::new());

    // The config key alone.
    let cfg = config("smi", "[server]\nmetrics_compat = [\"nvidia_smi\"]\n");
    let cfg = cfg.to_str().expect("utf-8");
    let from_config = settled(&start(&["--config", cfg]));
    let families = compat_families(&from_config);
    assert!(families.contains("nvidia_smi_utilization_gpu_ratio"));
    assert!(families.iter().all(|n| n.starts_with("nvidia_smi_")));

    // The flag replaces the config's list; "none" empties it.
    let overridden = settled(&start(&["--config", cfg, "--metrics-compat", "dcgm"]));
    let families = compat_families(&overridden);
    assert!(families.contains("DCGM_FI_DEV_GPU_UTIL"));
    assert!(families.iter().all(|n| n.starts_with("DCGM_")));
    let none = settled(&start(&["--config", cfg, "--metrics-compat", "none"]));
    assert_eq!(compat_families(&none), BTreeSet::new());
}

#[test]
fn unknown_sets_are_rejected_by_the_flag_and_by_validate() {
    let (code, _, stderr) = run_cli(
        &[
            "run",
            "--simulate",
            "golden",
            "--listen",
            "127.0.0.1:0",
            "--metrics-compat",
            "dcgm,prometheus",
        ],
        &[],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("--metrics-compat"), "{stderr}");
    assert!(stderr.contains("\"prometheus\""), "{stderr}");

    let cfg = config("bad", "[server]\nmetrics_compat = [\"dcgm\", \"dgcm\"]\n");
    let (code, stdout, _) = run_cli(&["validate", "--config", cfg.to_str().expect("utf-8")], &[]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(":2:")
            && stdout.contains("server.metrics_compat")
            && stdout.contains("\"dgcm\""),
        "{stdout}"
    );
}
