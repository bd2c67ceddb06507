//! Acting on health against a real Slurm (issue 25 §4): a one-node Slurm
//! on loopback ([`common::slurm::SlurmCluster`]) and the real agent on the
//! simulator, whose GPU 0 asks for a reset (NVML field 230) for a while
//! and then recovers. No fake `scontrol`: the agent runs Debian's.

mod common;

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::slurm::SlurmCluster;
use common::{run_cli, Agent, Metrics};

const LONG: Duration = Duration::from_secs(90);

/// One cluster at a time: each test starts its own daemons, and two at
/// once on two CPUs make slurmctld's answers slow.
static SERIAL: Mutex<()> = Mutex::new(());

/// A scenario: GPU 0 asks for a reset from `from` to `until` (seconds of
/// simulated time since the agent started).
fn scenario(dir: &Path, from: u64, until: u64) -> String {
    let path = dir.join("reset.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"reset\"\ndescription = \"GPU 0 needs a reset for a while\"\n\n\
             [[gpu]]\nname = \"NVIDIA H100 80GB HBM3\"\nmemory_total_mib = 81559\npower_limit_w = 700\n\
             recovery_action = [[\"0s\", \"none\"], [\"{from}s\", \"gpu_reset\"], [\"{until}s\", \"none\"]]\n\n\
             [[gpu]]\nname = \"NVIDIA H100 80GB HBM3\"\nmemory_total_mib = 81559\npower_limit_w = 700\nrecovery_action = \"none\"\n"
        ),
    )
    .expect("scenario");
    path.to_str().expect("utf-8").to_string()
}

/// The agent on `scenario` with `remediation` (the `[remediation]` table's
/// body, or `None` for no table at all: the defaults) against `cluster`.
fn agent(dir: &Path, scenario: &str, cluster: &SlurmCluster, remediation: Option<&str>) -> Agent {
    let config = dir.join("gpuwatch.toml");
    let table = match remediation {
        Some(body) => format!(
            "[remediation]\n{body}\n\n[remediation.slurm]\nslurm_conf = \"{}\"\ntimeout = \"5s\"\n",
            cluster.conf.display()
        ),
        None => String::new(),
    };
    std::fs::write(
        &config,
        format!("[sampler]\nslow_interval = \"1s\"\n\n{table}"),
    )
    .expect("config");
    // SLURM_CONF in the agent's environment too: a fresh install's
    // defaults find the cluster the way `sinfo` on the node does.
    let conf = cluster.conf.to_str().expect("utf-8").to_string();
    Agent::start(
        scenario,
        &["--config", config.to_str().expect("utf-8")],
        &[("SLURM_CONF", &conf)],
    )
}

fn counted(m: &Metrics, action: &str, result: &str) -> f64 {
    m.value(
        "gpuwatch_remediation_actions_total",
        &[("action", action), ("result", result)],
    )
    .unwrap_or(0.0)
}

/// The remediation events in the agent's history, as text.
fn events(agent: &Agent) -> Vec<String> {
    let db = agent.history.to_str().expect("utf-8");
    let (code, out, err) = run_cli(
        &[
            "events",
            "--db",
            db,
            "--since",
            "1h",
            "--kind",
            "remediation",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let body: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    body["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            assert_eq!(e["kind"], "remediation");
            e["detail"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

fn wait(what: &str, cluster: &SlurmCluster, agent: &Agent, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + LONG;
    while Instant::now() < deadline {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!(
        "timed out waiting for {what}\nsinfo: {:?}\nagent log:\n{}\nslurm:\n{}",
        cluster.sinfo(),
        agent.log(),
        cluster.logs()
    );
}

fn uuid_of_gpu0(agent: &Agent) -> String {
    let (_, body) = agent.get("/api/v1/health");
    let health: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    health["gpus"][0]["uuid"]
        .as_str()
        .expect("uuid")
        .to_string()
}

#[test]
fn a_gpu_that_needs_a_reset_drains_the_node_and_its_recovery_resumes_it() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = SlurmCluster::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = agent(
        dir.path(),
        &scenario(dir.path(), 3, 12),
        &cluster,
        Some("mode = \"on\"\nresume_after = \"3s\""),
    );
    let node = cluster.node.clone();
    wait("the node drained", &cluster, &agent, || {
        cluster
            .node_state(&node)
            .is_some_and(|(s, _)| s.starts_with("drain"))
    });
    let uuid = uuid_of_gpu0(&agent);
    let (_, reason) = cluster.node_state(&node).expect("listed");
    assert_eq!(
        reason,
        format!("gpuwatch: GPU 0 {uuid} needs RESET_GPU (the driver asks for a recovery action: gpu_reset)")
    );
    let m = agent.wait_for("the drain counted", LONG, |m| {
        counted(m, "drain", "done") == 1.0
    });
    assert_eq!(
        m.value(
            "gpuwatch_remediation_state",
            &[("mode", "on"), ("state", "drained")]
        ),
        Some(1.0)
    );
    wait("the node resumed", &cluster, &agent, || {
        cluster.node_state(&node).is_some_and(|(s, _)| s == "idle")
    });
    agent.wait_for("the resume counted", LONG, |m| {
        counted(m, "resume", "done") == 1.0
    });
    // Once each, in history, in order.
    wait("both events stored", &cluster, &agent, || {
        events(&agent).len() >= 2
    });
    let stored = events(&agent);
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert!(
        stored[0].starts_with(&format!(
            "drained node {node}: gpuwatch: GPU 0 {uuid} needs RESET_GPU"
        )),
        "{stored:?}"
    );
    assert!(
        stored[1].starts_with(&format!("resumed node {node}")),
        "{stored:?}"
    );
    let log = agent.log();
    assert!(log.contains("Remediation: drained node"), "{log}");
}

#[test]
fn an_operators_drain_is_neither_overwritten_nor_resumed() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = SlurmCluster::start();
    let node = cluster.node.clone();
    cluster.drain(&node, "bad DIMM, ticket 4711");
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = agent(
        dir.path(),
        &scenario(dir.path(), 2, 6),
        &cluster,
        Some("mode = \"on\"\nresume_after = \"2s\""),
    );
    agent.wait_for("the drain left alone", LONG, |m| {
        counted(m, "drain", "left_alone") == 1.0
    });
    agent.wait_for_log("left node", LONG);
    // GPU 0 recovers at 6 s; gpuwatch would resume its own drain 2 s later.
    std::thread::sleep(Duration::from_secs(10));
    let (state, reason) = cluster.node_state(&node).expect("listed");
    assert!(state.starts_with("drain"), "{state}");
    assert_eq!(reason, "bad DIMM, ticket 4711");
    let m = agent.metrics();
    assert_eq!(counted(&m, "drain", "done"), 0.0);
    assert_eq!(counted(&m, "resume", "done"), 0.0);
    assert_eq!(
        counted(&m, "drain", "left_alone"),
        1.0,
        "recorded once, not per tick"
    );
    let stored = events(&agent);
    assert!(
        stored
            .iter()
            .any(|e| e.contains("bad DIMM, ticket 4711")
                && e.contains("neither overwrites nor resumes")),
        "{stored:?}"
    );
}

#[test]
fn the_breaker_refuses_to_drain_past_max_drained_nodes() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = SlurmCluster::start();
    // Another node drained by gpuwatch: with five nodes the default allows
    // one (10 %, at least 1), so this node may not be drained.
    cluster.drain(
        "fake1",
        "gpuwatch: GPU 2 GPU-other needs RESET_GPU (elsewhere)",
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = agent(
        dir.path(),
        &scenario(dir.path(), 2, 600),
        &cluster,
        Some("mode = \"on\"\nretry_min = \"1s\"\nretry_max = \"2s\""),
    );
    let m = agent.wait_for("the drain refused twice", LONG, |m| {
        counted(m, "drain", "refused") >= 2.0
    });
    assert_eq!(
        m.value("gpuwatch_remediation_drained_nodes", &[]),
        Some(1.0)
    );
    assert_eq!(counted(&m, "drain", "done"), 0.0);
    let (state, _) = cluster.node_state(&cluster.node).expect("listed");
    assert_eq!(state, "idle");
    let stored = events(&agent);
    assert_eq!(stored.len(), 1, "one event per streak: {stored:?}");
    assert!(
        stored[0].contains("refused to drain") && stored[0].contains("at most 1"),
        "{stored:?}"
    );
    // Once the other node is back, the breaker lets the drain through.
    cluster.scontrol(&["update", "nodename=fake1", "state=resume"]);
    let node = cluster.node.clone();
    wait("the node drained", &cluster, &agent, || {
        cluster
            .node_state(&node)
            .is_some_and(|(s, _)| s.starts_with("drain"))
    });
}

#[test]
fn slurmctld_stopped_midway_is_an_error_retried_until_it_is_back() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut cluster = SlurmCluster::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = agent(
        dir.path(),
        &scenario(dir.path(), 4, 600),
        &cluster,
        Some("mode = \"on\"\nretry_min = \"1s\"\nretry_max = \"2s\""),
    );
    agent.wait_for("remediation running", LONG, |m| {
        m.value(
            "gpuwatch_remediation_state",
            &[("mode", "on"), ("state", "ok")],
        ) == Some(1.0)
    });
    cluster.stop_controller();
    let m = agent.wait_for("scheduler errors", LONG, |m| {
        counted(m, "drain", "error") >= 2.0
    });
    assert!(m
        .value("gpuwatch_remediation_last_error_timestamp_seconds", &[])
        .is_some());
    let log = agent.log();
    assert!(
        log.contains("slurmctld"),
        "the error says where to look: {log}"
    );
    cluster.start_controller();
    let node = cluster.node.clone();
    wait("the node drained", &cluster, &agent, || {
        cluster
            .node_state(&node)
            .is_some_and(|(s, _)| s.starts_with("drain"))
    });
    let m = agent.wait_for("the drain counted", LONG, |m| {
        counted(m, "drain", "done") == 1.0
    });
    // Every remediation family is out now: each documented in the
    // remediation table of docs/health.md, and promtool-clean.
    common::assert_documented(
        &m,
        &common::docs_metric_table("health.md", "remediation-metrics-table"),
        |name| name.starts_with("gpuwatch_remediation_"),
        "the remediation metrics table of docs/health.md",
    );
    let (ok, said) = common::promtool_check_metrics(&m.text);
    assert!(ok && said.trim().is_empty(), "promtool: {said}");
    let stored = events(&agent);
    assert!(
        stored[0].starts_with(&format!("cannot drain node {node}")),
        "{stored:?}"
    );
    assert!(
        stored.iter().any(|e| e.starts_with("drained node")),
        "{stored:?}"
    );
}

#[test]
fn a_fresh_install_runs_dry_and_changes_nothing() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = SlurmCluster::start();
    let dir = tempfile::tempdir().expect("temp dir");
    // No [remediation] table: the defaults (dry-run, resume after 5 min).
    let agent = agent(dir.path(), &scenario(dir.path(), 2, 600), &cluster, None);
    let m = agent.wait_for("a would-drain", LONG, |m| {
        counted(m, "drain", "would") == 1.0
    });
    assert_eq!(
        m.value(
            "gpuwatch_remediation_state",
            &[("mode", "dry-run"), ("state", "drained")]
        ),
        Some(1.0)
    );
    std::thread::sleep(Duration::from_secs(3));
    let node = cluster.node.clone();
    assert_eq!(
        cluster.node_state(&node),
        Some(("idle".to_string(), "none".to_string())),
        "a dry run changes nothing in Slurm"
    );
    let uuid = uuid_of_gpu0(&agent);
    wait("the event stored", &cluster, &agent, || {
        !events(&agent).is_empty()
    });
    let stored = events(&agent);
    assert_eq!(
        stored,
        [format!("dry-run: would drain node {node}: gpuwatch: GPU 0 {uuid} needs RESET_GPU (the driver asks for a recovery action: gpu_reset)")]
    );
    assert_eq!(
        counted(&agent.metrics(), "drain", "would"),
        1.0,
        "once, not per tick"
    );
}
