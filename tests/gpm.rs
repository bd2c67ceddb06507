//! GPM end to end (issue 12): the agent on the simulator with time frozen,
//! so each GPM figure is exactly its scenario value. `golden` has GPM on
//! GPU 0 (round values) and none on GPU 1; `tests/scenarios/golden-full.toml`
//! has GPM on a MIG GPU with two GPU instances and two NVLink links.

mod common;

use std::time::Duration;

use common::{fixture, Agent, Metrics};
use gpuwatch::sampler::procnames::ProcessNames;
use gpuwatch::sampler::reader::{NodeReader, Tiers};

const LONG: Duration = Duration::from_secs(20);
const MIB: f64 = 1048576.0;

/// An agent on `scenario` with time frozen, exporting every detail set
/// (the per-pipe, per-engine, per-link and per-group GPM families these
/// tests read).
fn frozen(scenario: &str, args: &[&str]) -> Agent {
    let mut args = args.to_vec();
    args.extend(["--metrics-detail", "full"]);
    Agent::start(scenario, &args, &[("GPUWATCH_SIM_TIME", "10")])
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn settled(agent: &Agent, family: &str) -> Metrics {
    agent.wait_for(family, LONG, |m| m.has(family))
}

#[test]
fn gpm_figures_are_exact_per_gpu_and_absent_without_gpm() {
    let agent = frozen("golden", &["--metrics-compat", "dcgm"]);
    let m = settled(&agent, "gpuwatch_gpm_sm_active_ratio");
    let gpu0 = [("gpu", "0")];
    let gpu1 = [("gpu", "1")];
    let v = |name: &str, labels: &[(&str, &str)]| m.value(name, labels);
    // nvml-sim/scenarios/golden.toml, GPU 0's [gpu.gpm], % → ratio.
    assert_eq!(v("gpuwatch_gpm_supported", &gpu0), Some(1.0));
    assert_eq!(v("gpuwatch_gpm_sm_active_ratio", &gpu0), Some(0.6));
    assert_eq!(v("gpuwatch_gpm_sm_occupancy_ratio", &gpu0), Some(0.3));
    assert_eq!(v("gpuwatch_gpm_tensor_active_ratio", &gpu0), Some(0.4));
    assert_eq!(v("gpuwatch_gpm_dram_active_ratio", &gpu0), Some(0.4));
    // gr_engine_active defaults to utilization_gpu (75).
    assert_eq!(
        v("gpuwatch_gpm_graphics_engine_active_ratio", &gpu0),
        Some(0.75)
    );
    let pipe = |p: &str| {
        v(
            "gpuwatch_gpm_pipe_active_ratio",
            &[("gpu", "0"), ("pipe", p)],
        )
    };
    assert_eq!(pipe("fp32"), Some(0.1));
    assert_eq!(pipe("tensor_hmma"), Some(0.4));
    assert_eq!(pipe("fp64"), Some(0.0));
    // PCIe: MiB/s in nvml.h, bytes/s here.
    let pcie = |d: &str| {
        v(
            "gpuwatch_gpm_pcie_bytes_per_second",
            &[("gpu", "0"), ("direction", d)],
        )
    };
    assert_eq!(pcie("tx"), Some(100.0 * MIB));
    assert_eq!(pcie("rx"), Some(200.0 * MIB));
    // Media engines that exist (5 NVDEC, 1 NVJPG, 1 NVOFA); no others.
    let engines = m.find("gpuwatch_gpm_media_engine_active_ratio", &gpu0);
    assert_eq!(engines.len(), 5 + 1 + 1, "{engines:?}");
    // No NVLink on this GPU: absent, not 0.
    assert!(!m.has("gpuwatch_gpm_nvlink_bytes_per_second"));

    // GPU 1 (no GPM): says so, and has no GPM figure at all.
    assert_eq!(v("gpuwatch_gpm_supported", &gpu1), Some(0.0));
    let gpm_on_gpu1: Vec<&str> = m
        .samples
        .iter()
        .filter(|s| s.name.starts_with("gpuwatch_gpm_") && s.name != "gpuwatch_gpm_supported")
        .filter(|s| s.labels.get("gpu").map(String::as_str) == Some("1"))
        .map(|s| s.name.as_str())
        .collect();
    assert!(gpm_on_gpu1.is_empty(), "{gpm_on_gpu1:?}");

    // dcgm-exporter's names: ratios (not %), bytes/s.
    assert_eq!(v("DCGM_FI_PROF_SM_ACTIVE", &gpu0), Some(0.6));
    assert_eq!(v("DCGM_FI_PROF_SM_OCCUPANCY", &gpu0), Some(0.3));
    assert_eq!(v("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", &gpu0), Some(0.4));
    assert_eq!(v("DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", &gpu0), Some(0.4));
    assert_eq!(v("DCGM_FI_PROF_DRAM_ACTIVE", &gpu0), Some(0.4));
    assert_eq!(v("DCGM_FI_PROF_GR_ENGINE_ACTIVE", &gpu0), Some(0.75));
    assert_eq!(v("DCGM_FI_PROF_PIPE_FP32_ACTIVE", &gpu0), Some(0.1));
    assert_eq!(v("DCGM_FI_PROF_PCIE_TX_BYTES", &gpu0), Some(100.0 * MIB));
    assert_eq!(v("DCGM_FI_PROF_PCIE_RX_BYTES", &gpu0), Some(200.0 * MIB));
    assert_eq!(v("DCGM_FI_PROF_SM_ACTIVE", &gpu1), None);
    assert_eq!(
        m.types.get("DCGM_FI_PROF_SM_ACTIVE").map(String::as_str),
        Some("gauge")
    );
    // The labels are dcgm-exporter's (no GPU_I_ID without MIG).
    let sample = &m.find("DCGM_FI_PROF_SM_ACTIVE", &gpu0)[0];
    assert!(sample.labels.contains_key("UUID") && sample.labels.contains_key("modelName"));
    assert!(!sample.labels.contains_key("GPU_I_ID"));
    assert!(!sample.labels.contains_key("GPU_I_PROFILE"));
    // The start-up line names the GPUs with GPM (colours stripped).
    let log = agent.wait_for_log("gpus_without_gpm", LONG);
    let plain = strip_ansi(&log);
    assert!(
        plain.contains("gpus_with_gpm=[0] gpus_without_gpm=[1]"),
        "{plain}"
    );
}

#[test]
fn gpm_figures_are_exact_per_mig_instance_and_nvlink_link() {
    let scenario = fixture("scenarios/golden-full.toml");
    let agent = frozen(
        scenario.to_str().expect("utf-8 path"),
        &["--metrics-compat", "dcgm,nvidia_smi"],
    );
    let m = settled(&agent, "gpuwatch_gpm_mig_sm_active_ratio");
    let v = |name: &str, labels: &[(&str, &str)]| m.value(name, labels);
    let gi = |id: &'static str| [("gpu", "0"), ("gpu_instance", id)];
    // tests/scenarios/golden-full.toml: instance 1 and 2's [gpu.mig_instances.gpm].
    assert_eq!(v("gpuwatch_gpm_mig_sm_active_ratio", &gi("1")), Some(0.8));
    assert_eq!(
        v("gpuwatch_gpm_mig_sm_occupancy_ratio", &gi("1")),
        Some(0.4)
    );
    assert_eq!(
        v("gpuwatch_gpm_mig_tensor_active_ratio", &gi("1")),
        Some(0.5)
    );
    assert_eq!(v("gpuwatch_gpm_mig_dram_active_ratio", &gi("1")), Some(0.3));
    assert_eq!(v("gpuwatch_gpm_mig_sm_active_ratio", &gi("2")), Some(0.2));
    assert_eq!(m.find("gpuwatch_gpm_mig_sm_active_ratio", &[]).len(), 2);
    // The whole GPU keeps its own figures.
    assert_eq!(
        v("gpuwatch_gpm_sm_active_ratio", &[("gpu", "0")]),
        Some(0.6)
    );
    let pipe = |p: &str| {
        v(
            "gpuwatch_gpm_pipe_active_ratio",
            &[("gpu", "0"), ("pipe", p)],
        )
    };
    assert_eq!(pipe("tensor_imma"), Some(0.1));
    assert_eq!(pipe("integer"), Some(0.25));
    assert_eq!(pipe("fp16"), Some(0.15));
    // NVLink: 2 links at 1000 MiB/s out, 3000 in.
    let link = |l: &str, d: &str| {
        v(
            "gpuwatch_gpm_nvlink_link_bytes_per_second",
            &[("gpu", "0"), ("link", l), ("direction", d)],
        )
    };
    assert_eq!(link("0", "tx"), Some(1000.0 * MIB));
    assert_eq!(link("1", "rx"), Some(3000.0 * MIB));
    assert_eq!(
        m.find("gpuwatch_gpm_nvlink_link_bytes_per_second", &[])
            .len(),
        4
    );
    let total = |d: &str| {
        v(
            "gpuwatch_gpm_nvlink_bytes_per_second",
            &[("gpu", "0"), ("direction", d)],
        )
    };
    assert_eq!(total("tx"), Some(2000.0 * MIB));
    assert_eq!(total("rx"), Some(6000.0 * MIB));
    // The RTX 3090 and the lost GPU have none.
    assert!(m
        .find("gpuwatch_gpm_sm_active_ratio", &[("gpu", "1")])
        .is_empty());
    assert!(m.find("gpuwatch_gpm_supported", &[("gpu", "2")]).is_empty());

    // dcgm: a MIG GPU's activity is per GPU instance (GPU_I_ID), its
    // traffic per GPU; the NVLink total is DCGM's MiB/s figure.
    let dcgm_gi = |id: &'static str| [("gpu", "0"), ("GPU_I_ID", id)];
    assert_eq!(v("DCGM_FI_PROF_SM_ACTIVE", &dcgm_gi("1")), Some(0.8));
    assert_eq!(
        v("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", &dcgm_gi("1")),
        Some(0.5)
    );
    assert_eq!(v("DCGM_FI_PROF_SM_ACTIVE", &dcgm_gi("2")), Some(0.2));
    assert_eq!(m.find("DCGM_FI_PROF_SM_ACTIVE", &[("gpu", "0")]).len(), 2);
    // With the instance's profile, as dcgm-exporter labels it.
    let profile = |id: &'static str, profile: &'static str| {
        [("gpu", "0"), ("GPU_I_ID", id), ("GPU_I_PROFILE", profile)]
    };
    assert_eq!(
        v("DCGM_FI_PROF_SM_ACTIVE", &profile("1", "3g.20gb")),
        Some(0.8)
    );
    assert_eq!(
        v("DCGM_FI_PROF_SM_ACTIVE", &profile("2", "2g.10gb")),
        Some(0.2)
    );
    assert_eq!(
        v("DCGM_FI_PROF_NVLINK_TX_BYTES", &[("gpu", "0")]),
        Some(2000.0 * MIB)
    );
    assert_eq!(
        v("DCGM_FI_PROF_NVLINK_RX_BYTES", &[("gpu", "0")]),
        Some(6000.0 * MIB)
    );
    assert_eq!(
        v("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", &[("gpu", "0")]),
        Some(8000.0)
    );
    assert_eq!(
        m.types
            .get("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")
            .map(String::as_str),
        Some("untyped")
    );
    // nvidia_gpu_exporter's MIG activity families.
    let smi = |id: &'static str| [("gpu_instance_id", id)];
    assert_eq!(v("nvidia_smi_mig_sm_activity_ratio", &smi("1")), Some(0.8));
    assert_eq!(
        v("nvidia_smi_mig_tensor_activity_ratio", &smi("1")),
        Some(0.5)
    );
}

/// The first tick has one GPM sample only: every figure absent (not 0);
/// the second computes them from the pair. In process, on the simulator.
#[test]
fn the_first_tick_has_no_gpm_figures_and_the_second_has() {
    let (_library, driver) = common::frozen_simulator("scenarios/golden-full.toml");
    let mut reader = NodeReader::new(&driver, "test".into(), ProcessNames::new(None));
    let first = reader.tick(Tiers::ALL, None);
    let gpu0 = &first.gpus[0].gpm;
    assert_eq!(gpu0.supported, Some(true));
    assert_eq!(gpu0.gpu, None);
    assert!(gpu0.instances.is_empty());
    assert_eq!(first.gpus[1].gpm.supported, Some(false));
    let second = reader.tick(Tiers::default(), None);
    let gpu0 = &second.gpus[0].gpm;
    assert_eq!(gpu0.sm_active_ratio(), Some(0.6));
    // MIG instances found on the first tick's process tier were sampled on
    // it too: their figures come on the second.
    let ids: Vec<u32> = second.gpus[0]
        .gpm
        .instances
        .iter()
        .map(|i| i.gpu_instance_id)
        .collect();
    assert_eq!(ids, [1, 2]);
    assert_eq!(second.gpus[1].gpm.gpu, None);
}

/// SM activity is in the history's tiers, `gpuwatch history --metric
/// sm_active` shows it, and a GPU without GPM has no points for it.
#[test]
fn sm_activity_is_recorded_in_history_and_shown_by_the_cli() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("gpuwatch.toml");
    std::fs::write(
        &config,
        "[sampler]\ninterval = \"250ms\"\n[history]\nbatch_interval = \"1s\"\n",
    )
    .expect("config");
    let db = dir.path().join("history.db");
    let db_arg = db.to_str().expect("utf-8").to_string();
    let agent = frozen(
        "golden",
        &[
            "--config",
            config.to_str().expect("utf-8"),
            "--history-db",
            &db_arg,
        ],
    );
    let history = |gpu: &str, metric: &str| {
        let (code, out, stderr) = common::run_cli(
            &[
                "history", "--db", &db_arg, "--gpu", gpu, "--metric", metric, "--since", "1h",
                "--step", "1s", "--format", "json",
            ],
            &[],
        );
        if code != 0 {
            // Before the first commit the database knows no GPU yet.
            assert!(stderr.contains("no such GPU"), "{stderr}");
            return serde_json::Value::Null;
        }
        serde_json::from_str::<serde_json::Value>(&out).expect("json")
    };
    let deadline = std::time::Instant::now() + LONG;
    let points = loop {
        let v = history("0", "sm_active");
        let points: Vec<f64> = v["points"]
            .as_array()
            .map(|p| p.iter().filter_map(|p| p["avg"].as_f64()).collect())
            .unwrap_or_default();
        if points.len() >= 2 {
            break points;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no sm_active points: {v}\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    // golden.toml GPU 0: sm_active = 60 (%), every sample.
    assert!(points.iter().all(|p| *p == 60.0), "{points:?}");
    for (metric, value) in [
        ("sm_occupancy", 30.0),
        ("tensor_active", 40.0),
        ("dram_active", 40.0),
    ] {
        let v = history("0", metric);
        let last = v["points"].as_array().and_then(|p| p.last()).cloned();
        assert_eq!(
            last.and_then(|p| p["avg"].as_f64()),
            Some(value),
            "{metric}: {v}"
        );
    }
    let v = history("1", "sm_active");
    let with_values = v["points"].as_array().map_or(0, |p| {
        p.iter().filter(|p| p["avg"].as_f64().is_some()).count()
    });
    assert_eq!(with_values, 0, "GPU 1 has no GPM: {v}");
}

/// `gpuwatch status` samples twice where a GPU has GPM, so it shows the
/// figures; a GPU without GPM says so.
#[test]
fn status_shows_gpm_figures_and_which_gpus_lack_gpm() {
    let env = [("GPUWATCH_SIM_TIME", "10")];
    let (code, table, stderr) = common::run_cli(&["status", "--simulate", "golden"], &env);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        table.contains(
            "GPM SM active 60%  occupancy 30%  tensor 40%  DRAM 40%  PCIe tx/rx 100/200 MiB/s"
        ),
        "{table}"
    );
    assert!(table.contains("GPM not supported"), "{table}");
    let (code, json, stderr) = common::run_cli(&["status", "--simulate", "golden", "--json"], &env);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(
        v["gpus"][0]["gpm"]["gpu"]["sm_active_ratio"].as_f64(),
        Some(0.6)
    );
    assert_eq!(v["gpus"][1]["gpm"]["supported"].as_bool(), Some(false));
    assert!(v["gpus"][1]["gpm"]["gpu"].is_null());
}

/// On `workloads` (one GPU per kind of job), the two GPM rules fire on the
/// starved GPU and the held-but-idle GPU only; their holds are tuned down
/// to 1 s from the config, as any built-in rule can be.
#[test]
fn starved_and_held_but_idle_gpus_are_alerted_and_no_other() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("gpuwatch.toml");
    std::fs::write(
        &config,
        "[sampler]\ninterval = \"250ms\"\nprocess_interval = \"250ms\"\n\n\
         [[rules]]\nname = \"GpuBusyButStarved\"\nfor = \"1s\"\n\n\
         [[rules]]\nname = \"GpuHeldButIdle\"\nfor = \"1s\"\n",
    )
    .expect("config");
    let config = config.to_str().expect("utf-8");
    let (code, out, _) = common::run_cli(&["validate", "--config", config], &[]);
    assert_eq!(code, 0, "{out}");
    let agent = frozen("workloads", &["--config", config]);
    let firing = |m: &Metrics, rule: &str| -> Vec<String> {
        let mut gpus: Vec<String> = m
            .find(
                "gpuwatch_alerts",
                &[("alertname", rule), ("state", "firing")],
            )
            .iter()
            .filter_map(|s| s.labels.get("gpu").cloned())
            .collect();
        gpus.sort();
        gpus
    };
    let m = agent.wait_for("both GPM alerts firing", LONG, |m| {
        !firing(m, "GpuBusyButStarved").is_empty() && !firing(m, "GpuHeldButIdle").is_empty()
    });
    // Let every GPU be evaluated a few more times: still only those two.
    std::thread::sleep(Duration::from_secs(2));
    let m2 = agent.wait_for("another scrape", LONG, |_| true);
    for m in [&m, &m2] {
        assert_eq!(firing(m, "GpuBusyButStarved"), ["2"], "{}", m.text);
        assert_eq!(firing(m, "GpuHeldButIdle"), ["3"], "{}", m.text);
        assert!(m
            .find("gpuwatch_alerts", &[("alertname", "GpuBusyButStarved")])
            .iter()
            .all(|s| s.labels.get("gpu").map(String::as_str) == Some("2")));
    }
}

/// Capacity: where a GPU has GPM, a profile's SM share is bounded by the
/// measured SM activity (per MIG instance with MIG on), and the table says
/// so; without GPM it falls back to the processes' SM utilization.
#[test]
fn capacity_takes_sm_headroom_from_measured_sm_activity() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("gpuwatch.toml");
    std::fs::write(
        &config,
        "[capacity]\nmemory_margin = \"0GiB\"\n\
         [[profiles]]\nname = \"quarter\"\nmemory = \"4GiB\"\nsm_share = 0.25\n",
    )
    .expect("config");
    let config = config.to_str().expect("utf-8");
    let env = [("GPUWATCH_SIM_TIME", "10")];
    let rows = |scenario: &str| -> Vec<(String, String, String)> {
        let (code, out, stderr) = common::run_cli(
            &["capacity", "--simulate", scenario, "--config", config],
            &env,
        );
        assert_eq!(code, 0, "{stderr}");
        out.lines()
            .filter(|l| l.starts_with("quarter "))
            .map(|l| {
                let gpu = l.split_whitespace().nth(1).unwrap_or("").to_string();
                // Fits follows the free GiB (the only number with a point);
                // on the node total it is the last word.
                let words: Vec<&str> = l.split_whitespace().collect();
                let fits = words
                    .iter()
                    .position(|w| w.contains('.'))
                    .and_then(|i| words.get(i + 1))
                    .or(words.last())
                    .unwrap_or(&"")
                    .to_string();
                let source = if l.contains("gpm sm active") {
                    "gpm"
                } else if l.contains("process sm") {
                    "processes"
                } else {
                    "-"
                };
                (gpu, fits, source.to_string())
            })
            .collect()
    };
    let row = |gpu: &str, fits: &str, source: &str| (gpu.into(), fits.into(), source.into());
    // workloads: SM active 90 %, 30 %, 12 %, 0 % → ⌊(1 − a) / 0.25⌋ = 0, 2, 3, 4.
    // GPU 4 (MIG): instance 1 at 80 % takes 0, instance 2 (idle, 31 GiB
    // free) 4: 4 in all, where memory alone would give 2 + 7.
    assert_eq!(
        rows("workloads"),
        vec![
            row("0", "0", "gpm"),
            row("1", "2", "gpm"),
            row("2", "3", "gpm"),
            row("3", "4", "gpm"),
            row("4", "4", "gpm"),
            row("all", "13", "-"),
        ]
    );
    // golden: GPU 0 has GPM (60 % → 1); GPU 1 has none: its processes' SM.
    assert_eq!(
        rows("golden"),
        vec![
            row("0", "1", "gpm"),
            row("1", "4", "processes"),
            row("all", "5", "-")
        ]
    );
}

/// `sampler.gpm = false`: no GPM call, no GPM family, and the log says so.
#[test]
fn gpm_can_be_turned_off() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("gpuwatch.toml");
    std::fs::write(&config, "[sampler]\ngpm = false\ninterval = \"250ms\"\n").expect("config");
    let config = config.to_str().expect("utf-8");
    let agent = frozen("golden", &["--config", config, "--metrics-compat", "dcgm"]);
    let m = agent.wait_for("a few samples", LONG, |m| {
        m.value("gpuwatch_samples_total", &[])
            .is_some_and(|n| n >= 3.0)
    });
    let gpm: Vec<&str> = m
        .samples
        .iter()
        .filter(|s| s.name.starts_with("gpuwatch_gpm_") || s.name.starts_with("DCGM_FI_PROF_"))
        .map(|s| s.name.as_str())
        .collect();
    assert!(gpm.is_empty(), "{gpm:?}");
    assert!(m
        .find("gpuwatch_collector_success", &[("group", "gpm")])
        .is_empty());
    assert!(m
        .find("gpuwatch_nvml_errors_total", &[])
        .iter()
        .all(|s| !s.labels["function"].contains("Gpm")));
    agent.wait_for_log("sampler.gpm = false", LONG);
}
