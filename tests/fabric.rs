//! NVLink fabric registration end to end on the simulator
//! (`tests/scenarios/fabric.toml`, four HGX H200s: one in the fabric, one
//! stuck registering, one whose registration failed, one at limited fabric
//! capacity; an H200 NVL without a fabric; two GPUs answering as older
//! drivers do, with the v2 struct and with the unversioned call only): the
//! `gpuwatch_fabric_*` families per GPU, the `GpuFabricNotRegistered` rule
//! firing and staying quiet (in its grace period too), the health verdict's reasons, `nvidia_smi_fabric_state`,
//! and nothing at all on PCIe cards (the call answering NOT_SUPPORTED, or
//! state NOT_SUPPORTED).

mod common;

use std::time::Duration;

use common::{fixture, Agent, Metrics};

const LONG: Duration = Duration::from_secs(60);

/// A configuration that sets `GpuFabricNotRegistered`'s hold (`None`: the
/// built-in 5 minutes).
fn config(dir: &std::path::Path, hold: Option<&str>) -> std::path::PathBuf {
    let path = dir.join("gpuwatch.toml");
    let text = match hold {
        Some(hold) => format!("[[rules]]\nname = \"GpuFabricNotRegistered\"\nfor = \"{hold}\"\n"),
        None => String::new(),
    };
    std::fs::write(&path, text).expect("write config");
    path
}

fn start(scenario: &str, config: &std::path::Path) -> Agent {
    let scenario = fixture(scenario);
    Agent::start(
        scenario.to_str().expect("utf-8"),
        &[
            "--config",
            config.to_str().expect("utf-8"),
            "--metrics-compat",
            "nvidia_smi",
        ],
        &[],
    )
}

fn alert(m: &Metrics, gpu: &str, state: &str) -> bool {
    m.value(
        "gpuwatch_alerts",
        &[
            ("alertname", "GpuFabricNotRegistered"),
            ("gpu", gpu),
            ("state", state),
        ],
    ) == Some(1.0)
}

/// The one state (or health) series at 1 of a one-series-at-1 family,
/// after checking there is one series per value.
fn current(m: &Metrics, family: &str, label: &str, gpu: &str, values: usize) -> String {
    let series = m.find(family, &[("gpu", gpu)]);
    assert_eq!(series.len(), values, "{family} of GPU {gpu}: {series:?}");
    let on: Vec<_> = series.iter().filter(|s| s.value == 1.0).collect();
    assert_eq!(on.len(), 1, "{family} of GPU {gpu}: {series:?}");
    assert!(series.iter().all(|s| s.value == 0.0 || s.value == 1.0));
    on[0].labels[label].clone()
}

#[test]
fn fabric_state_per_gpu_fires_the_rule_and_sets_the_verdict() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config(dir.path(), Some("0s"));
    let agent = start("scenarios/fabric.toml", &config);
    let m = agent.wait_for("GpuFabricNotRegistered on GPUs 1, 2 and 6", LONG, |m| {
        alert(m, "1", "firing")
            && alert(m, "2", "firing")
            && alert(m, "6", "firing")
            && m.value("gpuwatch_samples_total", &[])
                .is_some_and(|n| n >= 3.0)
    });
    let log = agent.log();
    // Registration progress and result, per GPU.
    let states: Vec<String> = ["0", "1", "2", "3", "5", "6"]
        .iter()
        .map(|gpu| current(&m, "gpuwatch_fabric_state", "state", gpu, 3))
        .collect();
    assert_eq!(
        states,
        [
            "completed",
            "in_progress",
            "completed",
            "completed",
            "completed",
            "in_progress"
        ],
        "{log}"
    );
    let registered: Vec<_> = ["0", "1", "2", "3", "5", "6"]
        .iter()
        .map(|gpu| m.value("gpuwatch_fabric_registered", &[("gpu", gpu)]))
        .collect();
    assert_eq!(
        registered,
        [
            Some(1.0),
            Some(0.0),
            Some(0.0),
            Some(1.0),
            Some(1.0),
            Some(0.0)
        ],
        "{}",
        m.text
    );
    let info = |gpu: &str| {
        let series = m.find("gpuwatch_fabric_info", &[("gpu", gpu)]);
        assert_eq!(series.len(), 1, "{series:?}");
        assert_eq!(series[0].value, 1.0);
        let l = &series[0].labels;
        (
            l["clique_id"].clone(),
            l["cluster_uuid"].clone(),
            l["status"].clone(),
        )
    };
    assert_eq!(
        info("0"),
        (
            "7".into(),
            "8e2f4c1a-3b5d-4e6f-9a0b-1c2d3e4f5a6b".into(),
            "success".into()
        )
    );
    assert_eq!(info("1").2, "not_ready");
    assert_eq!(info("2").2, "insufficient_resources");
    // The fabric's health summary and flags.
    let health: Vec<String> = ["0", "1", "2", "3"]
        .iter()
        .map(|gpu| current(&m, "gpuwatch_fabric_health", "health", gpu, 3))
        .collect();
    assert_eq!(
        health,
        ["healthy", "healthy", "unhealthy", "limited_capacity"]
    );
    let issue =
        |gpu: &str, name: &str| m.value("gpuwatch_fabric_issue", &[("gpu", gpu), ("issue", name)]);
    assert_eq!(issue("0", "degraded_bandwidth"), Some(0.0));
    assert_eq!(issue("0", "route_unhealthy"), Some(0.0));
    assert_eq!(issue("0", "route_recovery"), None, "unsupported: absent");
    assert_eq!(issue("3", "degraded_bandwidth"), Some(1.0));
    assert!(m.find("gpuwatch_fabric_issue", &[("gpu", "1")]).is_empty());
    // An older driver: the v2 struct has the health mask but no summary; the
    // unversioned call has neither.
    assert_eq!(info("5").0, "3");
    assert_eq!(issue("5", "degraded_bandwidth"), Some(1.0));
    assert!(m.find("gpuwatch_fabric_health", &[("gpu", "5")]).is_empty());
    assert_eq!(
        info("6"),
        (
            "3".into(),
            "8e2f4c1a-3b5d-4e6f-9a0b-1c2d3e4f5a6b".into(),
            "not_ready".into()
        )
    );
    assert!(m.find("gpuwatch_fabric_issue", &[("gpu", "6")]).is_empty());
    assert!(m.find("gpuwatch_fabric_health", &[("gpu", "6")]).is_empty());
    // GPU 4 answers with state NOT_SUPPORTED: no fabric series at all.
    for family in [
        "gpuwatch_fabric_state",
        "gpuwatch_fabric_registered",
        "gpuwatch_fabric_info",
        "gpuwatch_fabric_health",
        "gpuwatch_fabric_issue",
    ] {
        assert!(m.find(family, &[("gpu", "4")]).is_empty(), "{family}");
    }
    // The rule: quiet on the GPUs in the fabric.
    for gpu in ["0", "3", "4", "5"] {
        assert!(
            !alert(&m, gpu, "firing") && !alert(&m, gpu, "pending"),
            "{gpu}"
        );
    }
    // The verdict: stuck registering degrades, a failed registration (and
    // an unhealthy fabric) is unhealthy, limited capacity degrades.
    let verdicts: Vec<String> = ["0", "1", "2", "3", "4", "5", "6"]
        .iter()
        .map(|gpu| current(&m, "gpuwatch_gpu_health", "state", gpu, 3))
        .collect();
    assert_eq!(
        verdicts,
        [
            "healthy",
            "degraded",
            "unhealthy",
            "degraded",
            "healthy",
            "degraded",
            "degraded"
        ]
    );
    let (status, body) = agent.get("/api/v1/health");
    assert_eq!(status, 200, "{body}");
    let health: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let first = |gpu: usize| health["gpus"][gpu]["reasons"][0].clone();
    assert_eq!(first(1)["source"], "fabric", "{health}");
    assert!(
        first(1)["text"]
            .as_str()
            .is_some_and(|t| t.contains("in progress")),
        "{health}"
    );
    assert_eq!(first(2)["source"], "fabric", "{health}");
    assert!(
        first(2)["text"]
            .as_str()
            .is_some_and(|t| t.contains("insufficient_resources")),
        "{health}"
    );
    assert!(
        first(2)["action"]
            .as_str()
            .is_some_and(|a| a.contains("fabricmanager")),
        "{health}"
    );
    assert_eq!(
        health["gpus"][0]["reasons"].as_array().map(Vec::len),
        Some(0),
        "{health}"
    );
    // nvidia_gpu_exporter's names: NVML's state number and the clique.
    let smi: Vec<_> = m
        .find("nvidia_smi_fabric_state", &[])
        .iter()
        .map(|s| s.value)
        .collect();
    assert_eq!(smi, [3.0, 2.0, 3.0, 3.0, 3.0, 2.0], "{}", m.text);
    let cliques: Vec<_> = m
        .find("nvidia_smi_fabric_clique_id", &[])
        .iter()
        .map(|s| s.value)
        .collect();
    assert_eq!(cliques, [7.0, 0.0, 0.0, 7.0, 3.0, 3.0]);
    assert!(m
        .find("nvidia_smi_fabric_state", &[])
        .iter()
        .all(|s| s.labels.keys().eq(["uuid"].iter())));
    assert!(agent.terminate().success());
}

#[test]
fn the_built_in_hold_gives_registration_its_grace() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config(dir.path(), None);
    let agent = start("scenarios/fabric.toml", &config);
    let m = agent.wait_for("GpuFabricNotRegistered pending on GPU 1", LONG, |m| {
        alert(m, "1", "pending") && alert(m, "2", "pending")
    });
    assert!(!alert(&m, "1", "firing"), "{}", m.text);
    assert!(!alert(&m, "2", "firing"), "{}", m.text);
    assert!(agent.terminate().success());
}

#[test]
fn pcie_cards_have_no_fabric_series_and_the_rule_stays_quiet() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config(dir.path(), Some("0s"));
    let agent = start("scenarios/pcie-degraded.toml", &config);
    let m = agent.wait_for("a few samples", LONG, |m| {
        m.value("gpuwatch_samples_total", &[])
            .is_some_and(|n| n >= 3.0)
            && m.has("gpuwatch_pcie_link_width")
    });
    for family in [
        "gpuwatch_fabric_state",
        "gpuwatch_fabric_registered",
        "gpuwatch_fabric_info",
        "gpuwatch_fabric_health",
        "gpuwatch_fabric_issue",
        "nvidia_smi_fabric_state",
        "nvidia_smi_fabric_clique_id",
    ] {
        assert!(!m.has(family), "{family} without a fabric:\n{}", m.text);
    }
    assert!(
        m.find(
            "gpuwatch_alerts",
            &[("alertname", "GpuFabricNotRegistered")]
        )
        .is_empty(),
        "{}",
        m.text
    );
    let (_, body) = agent.get("/api/v1/health");
    assert!(!body.contains("\"fabric\""), "{body}");
    assert!(agent.terminate().success());
}
