//! Anomaly detection inside the running agent, on simulator scenarios: a
//! GPU with a failing fan (17 °C hotter than its neighbours at the same
//! load) raises `GpuHotterThanPeers` for that GPU alone; a node whose GPUs
//! only change load (training, bursty inference) raises no anomaly at all,
//! though the peer rule judged scores all along.

mod common;

use std::time::Duration;

use common::{fixture, Agent};
use gpuwatch::history::Store;

/// The anomaly rules with a short hold, so a test needs seconds, not minutes.
const SHORT_HOLDS: &str = "[history]\nbatch_interval = \"1s\"\n\n\
     [[rules]]\nname = \"GpuHotterThanPeers\"\nfor = \"3s\"\n\n\
     [[rules]]\nname = \"GpuTemperatureAnomaly\"\nfor = \"3s\"\n";

fn state(m: &common::Metrics, alert: &str, gpu: &str, state: &str) -> bool {
    m.value(
        "gpuwatch_alerts",
        &[("alertname", alert), ("gpu", gpu), ("state", state)],
    ) == Some(1.0)
}

/// Every stored transition of the anomaly rules: (alertname, target, to).
fn anomaly_transitions(db: &std::path::Path) -> Vec<(String, String, String)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = Store::open_read_only(db).await.expect("open the history");
        sqlx::query_as(
            "SELECT alertname, target, to_state FROM alert_transition \
             WHERE alertname IN ('GpuHotterThanPeers', 'GpuTemperatureAnomaly') ORDER BY id",
        )
        .fetch_all(&store.pool)
        .await
        .expect("transitions")
    })
}

fn config(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("gpuwatch.toml");
    std::fs::write(&path, SHORT_HOLDS).expect("write the config");
    path.to_str().expect("utf-8 path").to_string()
}

#[test]
fn a_failing_fan_makes_its_gpu_hotter_than_its_peers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = fixture("scenarios/failing-fan.toml");
    let agent = Agent::start(
        scenario.to_str().expect("utf-8 path"),
        &["--config", &config(&dir)],
        &[],
    );
    let m = agent.wait_for(
        "GpuHotterThanPeers firing for GPU 2",
        Duration::from_secs(30),
        |m| state(m, "GpuHotterThanPeers", "2", "firing"),
    );
    for gpu in ["0", "1", "3"] {
        for s in ["pending", "firing"] {
            assert!(
                !state(&m, "GpuHotterThanPeers", gpu, s),
                "GPU {gpu} runs with its peers yet is {s}"
            );
        }
    }
    // The alert says by how much: ~17 °C above its peers' median.
    let (status, body) = agent.get("/api/v1/alerts");
    assert_eq!(status, 200);
    let alerts: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let hot = alerts["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .find(|a| a["alertname"] == "GpuHotterThanPeers")
        .expect("the anomaly in /api/v1/alerts");
    let excess = hot["value"].as_f64().expect("a value");
    assert!(
        (12.0..=22.0).contains(&excess),
        "{excess} °C above its peers"
    );
    assert_eq!(hot["labels"]["severity"], "info");
    // Still 10 °C below its slowdown threshold: only the anomaly says so.
    assert!(!state(&m, "GpuTemperatureNearSlowdown", "2", "firing"));
}

#[test]
fn load_changes_alone_raise_no_anomaly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    // h100x8: six GPUs training, two serving bursty inference (a 45 s load
    // square wave); at 10x the scenario goes through ~6 bursts.
    let agent = Agent::start(
        "h100x8",
        &[
            "--config",
            &config(&dir),
            "--history-db",
            db.to_str().expect("utf-8"),
            "--metrics-detail",
            "rule_values",
        ],
        &[("GPUWATCH_SIM_SPEED", "10")],
    );
    let started = std::time::Instant::now();
    let mut scrapes = 0;
    while started.elapsed() < Duration::from_secs(30) {
        let m = agent.metrics();
        if m.value("gpuwatch_samples_total", &[]).unwrap_or(0.0) >= 1.0 {
            scrapes += 1;
        }
        for alert in ["GpuHotterThanPeers", "GpuTemperatureAnomaly"] {
            assert!(
                m.find("gpuwatch_alerts", &[("alertname", alert)])
                    .is_empty(),
                "{alert} raised on load changes alone:\n{}",
                m.text
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(scrapes >= 20, "the agent was sampling ({scrapes} scrapes)");
    // The quiet is the rules' verdict, not their absence. The peer rule
    // judged scores all along (the training GPUs are each other's peers).
    // The baseline rule was checked too, but judges a load bucket only
    // after 10 minutes of watching it (`anomaly::WARM_UP`, real time), so
    // within this test it never had a score; its no-false-alarm check over
    // hours of load changes is `rules::tests::anomaly_no_false_alarm_under_
    // normal_load_changes`, which asserts it judged.
    let m = agent.metrics();
    let judged = |rule| m.value("gpuwatch_rule_values_total", &[("rule", rule)]);
    let peers = judged("GpuHotterThanPeers").unwrap_or(0.0);
    assert!(
        peers >= 20.0,
        "GpuHotterThanPeers judged {peers} times:\n{}",
        m.text
    );
    assert_eq!(judged("GpuTemperatureAnomaly"), Some(0.0), "{}", m.text);
    let _ = agent.terminate();
    assert_eq!(anomaly_transitions(&db), Vec::new());
}
