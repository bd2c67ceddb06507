//! NVLink, the driver's recovery action and PCIe links end to end on the
//! simulator: `GpuNvlinkDown`, `GpuRecoveryActionRequired` and
//! `GpuPcieDegraded` fire where the scenario breaks them and stay quiet
//! elsewhere. (Split from tests/health.rs.)

mod common;

use std::time::Duration;

use common::Agent;

const LONG: Duration = Duration::from_secs(60);

fn firing(m: &common::Metrics, alert: &str, gpu: &str) -> bool {
    m.value(
        "gpuwatch_alerts",
        &[("alertname", alert), ("gpu", gpu), ("state", "firing")],
    ) == Some(1.0)
}

#[test]
fn nvlink_down_and_a_recovery_action_fire_their_rules() {
    // 2 min 5 s in: GPU 1's link 3 is down (2-4 min) and has counted CRC
    // errors since 1 min.
    let agent = Agent::start(
        "health",
        &["--metrics-detail", "nvlink_links"],
        &[("GPUWATCH_SIM_START", "125")],
    );
    // Both in one scrape: the alert is in the live part of /metrics, the
    // link in the snapshot's; on a loaded machine a slow tick can miss its
    // NVLink reading (absent, not 0) while the alert, fired a tick earlier,
    // still fires.
    let metrics = agent.wait_for("GpuNvlinkDown on GPU 1 and its link 3 down", LONG, |m| {
        firing(m, "GpuNvlinkDown", "1")
            && m.value("gpuwatch_nvlink_up", &[("gpu", "1"), ("link", "3")]) == Some(0.0)
    });
    assert_eq!(
        metrics.find("gpuwatch_nvlink_up", &[("gpu", "0")]).len(),
        18
    );
    assert!(metrics
        .find("gpuwatch_nvlink_up", &[("gpu", "0")])
        .iter()
        .all(|s| s.value == 1.0));
    assert!(
        metrics
            .value(
                "gpuwatch_nvlink_errors_total",
                &[("gpu", "1"), ("link", "3"), ("type", "crc_flit")]
            )
            .is_some_and(|v| v > 0.0),
        "{}",
        metrics.text
    );
    assert!(!firing(&metrics, "GpuNvlinkDown", "0"));
    // The per-GPU totals agree with the links.
    assert_eq!(
        metrics.value("gpuwatch_nvlink_links_down", &[("gpu", "1")]),
        Some(1.0)
    );
    let per_link: f64 = metrics
        .find("gpuwatch_nvlink_errors_total", &[("gpu", "1")])
        .iter()
        .map(|s| s.value)
        .sum();
    assert_eq!(
        metrics.value("gpuwatch_nvlink_gpu_errors_total", &[("gpu", "1")]),
        Some(per_link)
    );
    assert_eq!(
        metrics.value(
            "gpuwatch_recovery_action",
            &[("gpu", "3"), ("action", "none")]
        ),
        Some(1.0)
    );
    assert!(!firing(&metrics, "GpuRecoveryActionRequired", "3"));
    // One verdict per GPU: GPU 1 unhealthy for its link, GPU 0 healthy.
    assert_eq!(
        metrics.value(
            "gpuwatch_gpu_health",
            &[("gpu", "1"), ("state", "unhealthy")]
        ),
        Some(1.0)
    );
    assert_eq!(
        metrics.value("gpuwatch_gpu_health", &[("gpu", "1"), ("state", "healthy")]),
        Some(0.0)
    );
    assert_eq!(
        metrics.value("gpuwatch_gpu_health", &[("gpu", "0"), ("state", "healthy")]),
        Some(1.0)
    );
    let (status, body) = agent.get("/api/v1/health");
    assert_eq!(status, 200, "{body}");
    let health: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(health["state"], "unhealthy", "{health}");
    let gpu1 = &health["gpus"][1];
    assert_eq!(
        (gpu1["gpu"].as_u64(), gpu1["state"].as_str()),
        (Some(1), Some("unhealthy")),
        "{health}"
    );
    assert_eq!(gpu1["reasons"][0]["source"], "nvlink", "{health}");
    assert!(
        gpu1["reasons"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains('3')),
        "{health}"
    );
    assert_eq!(health["gpus"][0]["state"], "healthy", "{health}");
    assert_eq!(
        health["gpus"][0]["reasons"].as_array().map(Vec::len),
        Some(0)
    );
    assert!(agent.terminate().success());

    // 5 min 5 s in: GPU 3's Xid 95 asks for a GPU reset; the links are up.
    let agent = Agent::start("health", &[], &[("GPUWATCH_SIM_START", "305")]);
    let metrics = agent.wait_for("GpuRecoveryActionRequired on GPU 3", LONG, |m| {
        firing(m, "GpuRecoveryActionRequired", "3")
    });
    assert_eq!(
        metrics.value(
            "gpuwatch_recovery_action",
            &[("gpu", "3"), ("action", "gpu_reset")]
        ),
        Some(1.0),
        "{}",
        metrics.text
    );
    assert_eq!(
        metrics
            .find("gpuwatch_recovery_action", &[("gpu", "3")])
            .len(),
        1
    );
    let (_, body) = agent.get("/api/v1/health");
    let health: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let reasons = health["gpus"][3]["reasons"]
        .as_array()
        .expect("reasons")
        .clone();
    assert!(
        reasons
            .iter()
            .any(|r| r["source"] == "recovery_action" && r["action"] == "gpu_reset"),
        "{health}"
    );
    assert!(!firing(&metrics, "GpuNvlinkDown", "1"), "{}", metrics.text);
    assert!(agent.terminate().success());
}

#[test]
fn a_busy_gpu_on_a_narrowed_pcie_link_fires_gpu_pcie_degraded_and_an_idle_one_does_not() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("gpuwatch.toml");
    // The built-in hold is 5 minutes; the test tunes it away.
    std::fs::write(
        &config,
        "[[rules]]\nname = \"GpuPcieDegraded\"\nfor = \"0s\"\n",
    )
    .expect("config");
    let scenario = common::fixture("scenarios/pcie-degraded.toml");
    let agent = Agent::start(
        scenario.to_str().expect("utf-8"),
        &["--config", config.to_str().expect("utf-8")],
        &[],
    );
    let metrics = agent.wait_for("GpuPcieDegraded on GPU 0", LONG, |m| {
        firing(m, "GpuPcieDegraded", "0")
            && m.value("gpuwatch_samples_total", &[])
                .is_some_and(|n| n >= 3.0)
    });
    assert!(
        !firing(&metrics, "GpuPcieDegraded", "1"),
        "idle and downshifted"
    );
    assert!(
        !firing(&metrics, "GpuPcieDegraded", "2"),
        "busy at full link"
    );
    assert!(agent.terminate().success());
}

#[test]
fn a_recovery_action_beyond_nvmls_makes_the_gpu_unhealthy_with_its_raw_value() {
    // Field 230 answers 7 (GPU 0) and 4294967295 (GPU 1): before, both
    // dropped the series and left the GPUs healthy.
    let scenario = common::fixture("scenarios/recovery-unknown.toml");
    let agent = Agent::start(scenario.to_str().expect("utf-8"), &[], &[]);
    let metrics = agent.wait_for("GpuRecoveryActionRequired on GPUs 0 and 1", LONG, |m| {
        firing(m, "GpuRecoveryActionRequired", "0") && firing(m, "GpuRecoveryActionRequired", "1")
    });
    for (gpu, raw) in [("0", "7"), ("1", "4294967295")] {
        assert_eq!(
            metrics.value(
                "gpuwatch_recovery_action",
                &[("gpu", gpu), ("action", "unknown"), ("value", raw)]
            ),
            Some(1.0),
            "{}",
            metrics.text
        );
        assert_eq!(
            metrics.value(
                "gpuwatch_gpu_health",
                &[("gpu", gpu), ("state", "unhealthy")]
            ),
            Some(1.0)
        );
    }
    assert_eq!(
        metrics.value(
            "gpuwatch_recovery_action",
            &[("gpu", "2"), ("action", "none")]
        ),
        Some(1.0)
    );
    assert!(!firing(&metrics, "GpuRecoveryActionRequired", "2"));
    let (status, body) = agent.get("/api/v1/health");
    assert_eq!(status, 200, "{body}");
    let health: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    for (gpu, raw) in [(0, "7"), (1, "4294967295")] {
        let reason = &health["gpus"][gpu]["reasons"][0];
        assert_eq!(health["gpus"][gpu]["state"], "unhealthy", "{health}");
        assert_eq!(
            (reason["source"].as_str(), reason["action"].as_str()),
            (Some("recovery_action"), Some("unknown")),
            "{health}"
        );
        assert!(
            reason["text"]
                .as_str()
                .is_some_and(|t| t.contains(&format!("value {raw}"))),
            "{health}"
        );
    }
    assert_eq!(health["gpus"][2]["state"], "healthy", "{health}");
    assert!(agent.terminate().success());
}

/// At the default /metrics (no per-link series), a link that is down or
/// counting errors is still found: per GPU on /metrics, by link in
/// /api/v1/gpus.
#[test]
fn the_default_metrics_count_links_down_and_errors_per_gpu_and_the_api_names_the_link() {
    let agent = Agent::start("health", &[], &[("GPUWATCH_SIM_START", "125")]);
    let metrics = agent.wait_for("GPU 1 with a link down", LONG, |m| {
        m.value("gpuwatch_nvlink_links_down", &[("gpu", "1")]) == Some(1.0)
            && firing(m, "GpuNvlinkDown", "1")
    });
    assert_eq!(
        metrics.value("gpuwatch_nvlink_links_down", &[("gpu", "0")]),
        Some(0.0)
    );
    assert!(
        metrics
            .value("gpuwatch_nvlink_gpu_errors_total", &[("gpu", "1")])
            .is_some_and(|v| v > 0.0),
        "{}",
        metrics.text
    );
    for family in ["gpuwatch_nvlink_up", "gpuwatch_nvlink_errors_total"] {
        assert!(metrics.find(family, &[]).is_empty(), "{family} is detail");
    }
    let (status, body) = agent.get("/api/v1/gpus");
    assert_eq!(status, 200, "{body}");
    let doc: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let nvlink = &doc["gpus"][1]["nvlink"];
    assert_eq!(nvlink["links"], 18, "{nvlink}");
    assert_eq!(nvlink["down"], serde_json::json!([3]), "{nvlink}");
    assert!(
        nvlink["errors"].as_array().is_some_and(|e| e
            .iter()
            .any(|l| l["link"] == 3 && l["errors"]["crc_flit"].as_u64() > Some(0))),
        "{nvlink}"
    );
    assert_eq!(doc["gpus"][0]["nvlink"]["down"], serde_json::json!([]));
    assert!(agent.terminate().success());
}
