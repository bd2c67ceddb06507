//! The rules engine inside the running agent: built-in rules fire on the
//! simulator's faults, show in `gpuwatch_alerts` and `/api/v1/alerts`, are
//! stored with their transitions, survive a kill -9 without firing again,
//! and can be tuned from the config (checked by `gpuwatch validate`).

mod common;

use std::time::Duration;

use common::{run_cli, Agent};
use gpuwatch::history::Store;

const LONG: Duration = Duration::from_secs(30);

fn firing(m: &common::Metrics, alert: &str, gpu: &str) -> bool {
    m.value(
        "gpuwatch_alerts",
        &[("alertname", alert), ("gpu", gpu), ("state", "firing")],
    ) == Some(1.0)
}

fn transitions(db: &std::path::Path, alert: &str) -> Vec<(String, String)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = Store::open_read_only(db).await.expect("open");
        sqlx::query_as(
            "SELECT from_state, to_state FROM alert_transition WHERE alertname = ? ORDER BY id",
        )
        .bind(alert)
        .fetch_all(&store.pool)
        .await
        .expect("transitions")
    })
}

#[test]
fn faults_fire_alerts_that_survive_a_restart_without_firing_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let db_arg = db.to_str().expect("utf-8");
    // Scenario time from 55 s, 5x: GPU 1 is lost with Xid 79 at 60 s.
    let env = [("GPUWATCH_SIM_START", "55"), ("GPUWATCH_SIM_SPEED", "5")];
    let agent = Agent::start("faults", &["--history-db", db_arg], &env);
    let m = agent.wait_for("GPU 1 lost and Xid 79 alerts", LONG, |m| {
        firing(m, "GpuLost", "1")
            && firing(m, "GpuXidFatal", "1")
            && firing(m, "GpuXidContained", "2")
    });
    assert!(!firing(&m, "GpuLost", "0"), "only the lost GPU");
    let (status, body) = agent.get("/api/v1/alerts");
    assert_eq!(status, 200);
    let alerts: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let lost = alerts["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .find(|a| a["alertname"] == "GpuLost")
        .expect("GpuLost listed");
    assert_eq!(lost["state"], "firing");
    assert_eq!(lost["labels"]["severity"], "critical");
    assert!(
        lost["annotations"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("GPU 1")),
        "{lost}"
    );
    assert!(agent.log().contains("Alert firing."), "{}", agent.log());

    // kill -9, then the same database: the firing alerts are restored, not new.
    let stored = || transitions(&db, "GpuLost");
    let deadline = std::time::Instant::now() + LONG;
    while stored().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the transition was never stored"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(agent);
    let env = [("GPUWATCH_SIM_START", "70"), ("GPUWATCH_SIM_SPEED", "5")];
    let agent = Agent::start("faults", &["--history-db", db_arg], &env);
    agent.wait_for("the restored alert", LONG, |m| firing(m, "GpuLost", "1"));
    std::thread::sleep(Duration::from_secs(2));
    let status = agent.terminate();
    assert!(status.success(), "{status:?}");
    assert_eq!(
        stored(),
        vec![("inactive".to_string(), "firing".to_string())],
        "one transition to firing across the restart"
    );
}

/// A built-in rule turned off stays quiet while its fault happens: GPU 1
/// of `faults` is lost at 60 s, and through evaluations after that
/// `GpuLost`, disabled, is nowhere: not evaluated, not in
/// `gpuwatch_alerts`, not in `/api/v1/alerts`, not among the stored
/// transitions.
#[test]
fn a_disabled_rule_stays_quiet_while_its_fault_happens() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("gpuwatch.toml");
    std::fs::write(
        &config,
        "[history]\nbatch_interval = \"1s\"\n\n[[rules]]\nname = \"GpuLost\"\nenabled = false\n",
    )
    .expect("config");
    let db = dir.path().join("history.db");
    let env = [("GPUWATCH_SIM_START", "55"), ("GPUWATCH_SIM_SPEED", "5")];
    let agent = Agent::start(
        "faults",
        &[
            "--config",
            config.to_str().expect("utf-8"),
            "--history-db",
            db.to_str().expect("utf-8"),
            "--metrics-detail",
            "rule_values",
        ],
        &env,
    );
    // A rule checked on every GPU at every evaluation, as a clock.
    let checks = |m: &common::Metrics| {
        m.value(
            "gpuwatch_rule_values_total",
            &[("rule", "GpuTemperatureNearSlowdown")],
        )
        .unwrap_or(0.0)
    };
    let m = agent.wait_for("GPU 1 lost", LONG, |m| {
        m.value("gpuwatch_gpu_up", &[("gpu", "1")]) == Some(0.0)
    });
    let before = checks(&m);
    // Two more evaluations at least (three GPUs answer), GPU 1 still lost.
    let m = agent.wait_for("evaluations with GPU 1 lost", LONG, |m| {
        checks(m) >= before + 6.0
    });
    assert_eq!(m.value("gpuwatch_gpu_up", &[("gpu", "1")]), Some(0.0));
    assert!(
        m.find("gpuwatch_alerts", &[("alertname", "GpuLost")])
            .is_empty(),
        "GpuLost is disabled:\n{}",
        m.text
    );
    assert!(
        m.find("gpuwatch_rule_values_total", &[("rule", "GpuLost")])
            .is_empty(),
        "a disabled rule is not evaluated:\n{}",
        m.text
    );
    let (status, body) = agent.get("/api/v1/alerts");
    assert_eq!(status, 200);
    let alerts: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let names: Vec<&str> = alerts["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .filter_map(|a| a["alertname"].as_str())
        .collect();
    assert!(!names.contains(&"GpuLost"), "{names:?}");
    let status = agent.terminate();
    assert!(status.success(), "{status:?}");
    assert_eq!(transitions(&db, "GpuLost"), Vec::new());
}

#[test]
fn built_in_rules_are_tuned_from_the_config_and_validated() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("gpuwatch.toml");
    // memory-pressure: GPU 0's memory climbs to 98 % over the scenario.
    std::fs::write(
        &config,
        // (`enabled = false` is accepted here; that a disabled rule stays
        // quiet is checked where its fault happens, above.)
        "[sampler]\ninterval = \"250ms\"\n\n[[rules]]\nname = \"GpuMemoryPressure\"\nfor = \"1s\"\n\n[[rules]]\nname = \"GpuLost\"\nenabled = false\n",
    )
    .expect("config");
    let config_arg = config.to_str().expect("utf-8");
    let (code, out, _) = run_cli(&["validate", "--config", config_arg], &[]);
    assert_eq!(code, 0, "{out}");
    let agent = Agent::start(
        "memory-pressure",
        &["--config", config_arg],
        &[("GPUWATCH_SIM_SPEED", "60")],
    );
    agent.wait_for(
        "memory pressure on the filling GPU",
        Duration::from_secs(60),
        |m| {
            m.find(
                "gpuwatch_alerts",
                &[("alertname", "GpuMemoryPressure"), ("state", "firing")],
            )
            .len()
                == 1
        },
    );

    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[rules]]\nname = \"HotGpu\"\ncondition = \"temperature >>> 80\"\nfor = \"soon\"\nseverity = \"catastrophic\"\n",
    )
    .expect("bad config");
    let bad_arg = bad.to_str().expect("utf-8");
    let (code, out, _) = run_cli(&["validate", "--config", bad_arg], &[]);
    assert_eq!(code, 1, "{out}");
    for field in ["rules[0].condition", "rules[0].for", "rules[0].severity"] {
        assert!(
            out.contains(&format!("{bad_arg}:")) && out.contains(field),
            "{field} in: {out}"
        );
    }
}
