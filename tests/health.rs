//! The kernel-log reader end to end on the simulator: Xid lines from the
//! log counted once with NVML's own events, the backlog since boot kept in
//! history (with the driver's text) but not counted, SXid counts, a restart
//! that does not write the backlog twice, and a log that cannot be read.

mod common;

use std::io::Write;
use std::time::Duration;

use common::Agent;

const LONG: Duration = Duration::from_secs(60);

/// A configuration that commits history every second and reads
/// `kernel_log` (`None`: the default, which with `--simulate` is the log
/// the simulator writes, GPUWATCH_SIM_KMSG).
fn config(dir: &std::path::Path, kernel_log: Option<&std::path::Path>) -> std::path::PathBuf {
    let path = dir.join("gpuwatch.toml");
    let health = match kernel_log {
        Some(log) => format!("[health]\nkernel_log = \"{}\"\n\n", log.display()),
        None => String::new(),
    };
    std::fs::write(
        &path,
        format!("{health}[history]\nbatch_interval = \"1s\"\n"),
    )
    .expect("write config");
    path
}

fn events(agent: &Agent) -> Vec<serde_json::Value> {
    let (status, body) = agent.get("/api/v1/events?from=-1h&kind=xid");
    assert_eq!(status, 200, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).expect("json");
    body["events"].as_array().expect("events").clone()
}

fn wait_events(
    agent: &Agent,
    what: &str,
    check: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let list = events(agent);
        if check(&list) {
            return list;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}: {list:?}\nlog:\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn kernel_log_xid_is_counted_once_with_nvml_and_the_backlog_is_history_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let kmsg = dir.path().join("kmsg");
    let config = config(dir.path(), None);
    // Scenario time 290 s at start, 2x: GPU 3's Xid 95 (an NVML event and
    // a kernel-log line) comes 5 s in; the lines before 290 s (Xid 13 and
    // 48 "ago", Xid 74 and SXid 20034 at 2 min) are the backlog.
    let kmsg_arg = kmsg.display().to_string();
    let agent = Agent::start(
        "health",
        &["--config", config.to_str().expect("utf-8")],
        &[
            ("GPUWATCH_SIM_KMSG", kmsg_arg.as_str()),
            ("GPUWATCH_SIM_START", "290"),
            ("GPUWATCH_SIM_SPEED", "2"),
        ],
    );
    agent.wait_for("the Xid 95 of GPU 3", LONG, |m| {
        m.value("gpuwatch_xid_errors_total", &[("gpu", "3"), ("xid", "95")]) == Some(1.0)
    });
    // Both sources saw it; the kernel-log line is read within a poll.
    agent.wait_for_log("Xid error reported by the driver", LONG);
    agent.wait_for_log("Xid error in the kernel log", LONG);
    let list = wait_events(&agent, "the Xid 95 event with its text", |list| {
        list.iter()
            .any(|e| e["code"] == 95 && e["detail"].as_str().is_some_and(|d| !d.is_empty()))
    });
    let metrics = agent.metrics();
    assert_eq!(
        metrics.value("gpuwatch_xid_errors_total", &[("gpu", "3"), ("xid", "95")]),
        Some(1.0),
        "one error, two sources, one count\n{}",
        agent.log()
    );
    assert_eq!(metrics.value("gpuwatch_kernel_log_up", &[]), Some(1.0));
    // The backlog is not counted (not Xid 13, 48, 74, nor SXid 20034)...
    for code in ["13", "48", "74"] {
        assert_eq!(
            metrics.value("gpuwatch_xid_errors_total", &[("xid", code)]),
            None,
            "{code}"
        );
    }
    assert!(
        !metrics.has("gpuwatch_sxid_errors_total"),
        "{}",
        metrics.text
    );
    // ...but history has it, at its own time, with the driver's details.
    let xid95: Vec<_> = list.iter().filter(|e| e["code"] == 95).collect();
    assert_eq!(xid95.len(), 1, "{list:?}");
    let backlog13 = list
        .iter()
        .find(|e| e["code"] == 13)
        .unwrap_or_else(|| panic!("Xid 13 from the backlog: {list:?}"));
    assert_eq!(backlog13["gpu"], 0);
    let detail = backlog13["detail"].as_str().expect("detail");
    assert!(
        detail.contains("pid=2231") && detail.contains("name=python3"),
        "{detail}"
    );
    // NVIDIA's catalog: Xid 13 is a Graphics Engine Exception, restart the app.
    assert_eq!(backlog13["action"], "RESTART_APP", "{backlog13}");
    assert_eq!(backlog13["description"], "Graphics Engine Exception");
    let db = agent.history.display().to_string();
    let (code, out, stderr) = common::run_cli(
        &["events", "--db", &db, "--since", "1h", "--kind", "xid"],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        out.contains("RESTART_APP: Graphics Engine Exception (pid=2231, name=python3"),
        "{out}"
    );
    let logged_at = backlog13["t"].as_f64().expect("t");
    let xid95_at = xid95[0]["t"].as_f64().expect("t");
    // Logged 10 scenario minutes (at 2x: 5 real minutes) before the start.
    assert!(xid95_at - logged_at > 200.0, "{logged_at} vs {xid95_at}");
    assert!(
        list.iter().any(|e| e["code"] == 48 && e["gpu"] == 2),
        "{list:?}"
    );
    assert!(
        list.iter().any(|e| e["code"] == 74 && e["gpu"] == 1),
        "{list:?}"
    );
    let status = agent.terminate();
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_restart_sees_the_backlog_once_and_does_not_count_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let kmsg = dir.path().join("kmsg");
    let db = dir.path().join("history.db");
    let config = config(dir.path(), Some(&kmsg));
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .expect("/proc/uptime")
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .expect("uptime");
    // The Xid 79 that took GPU 0 off the bus a minute ago, before the
    // agent (re)started, as /dev/kmsg keeps it since boot.
    let ts = ((uptime - 60.0).max(1.0) * 1e6) as u64;
    let mut file = std::fs::File::create(&kmsg).expect("kmsg");
    writeln!(
        file,
        "6,990,{},-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module",
        ts / 2
    )
    .expect("write");
    writeln!(file, "4,991,{ts},-;NVRM: Xid (PCI:0000:18:00): 79, pid=4242, name=train.py, GPU has fallen off the bus.").expect("write");
    writeln!(file, " SUBSYSTEM=pci").expect("write");
    drop(file);
    let args = [
        "--config",
        config.to_str().expect("utf-8"),
        "--history-db",
        db.to_str().expect("utf-8"),
    ];
    for run in 1..=2 {
        let agent = Agent::start("health", &args, &[]);
        agent.wait_for("the kernel log read", LONG, |m| {
            m.value("gpuwatch_kernel_log_up", &[]) == Some(1.0)
        });
        let list = wait_events(&agent, "the backlog's Xid 79", |list| {
            list.iter().any(|e| e["code"] == 79)
        });
        // Committed every second: give a second run's duplicate the time to
        // show up if it were written.
        std::thread::sleep(Duration::from_secs(3));
        let list = if run == 2 { events(&agent) } else { list };
        let xid79: Vec<_> = list.iter().filter(|e| e["code"] == 79).collect();
        assert_eq!(xid79.len(), 1, "run {run}: {list:?}");
        assert_eq!(xid79[0]["gpu"], 0, "{list:?}");
        assert!(
            xid79[0]["detail"]
                .as_str()
                .is_some_and(|d| d.contains("name=train.py")),
            "{list:?}"
        );
        let metrics = agent.metrics();
        assert_eq!(
            metrics.value("gpuwatch_xid_errors_total", &[("xid", "79")]),
            None,
            "run {run}: the backlog is not counted, so nothing fires again\n{}",
            metrics.text
        );
        assert_eq!(
            metrics
                .value("gpuwatch_alerts", &[("alertname", "GpuXidFatal")])
                .unwrap_or(0.0),
            0.0
        );
        let status = agent.terminate();
        assert!(status.success(), "{status:?}");
    }
}

#[test]
fn an_unreadable_kernel_log_is_one_warning_and_nvml_xid_still_counts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("no-such-kmsg");
    let config = config(dir.path(), Some(&missing));
    let agent = Agent::start(
        "health",
        &["--config", config.to_str().expect("utf-8")],
        &[("GPUWATCH_SIM_START", "295"), ("GPUWATCH_SIM_SPEED", "2")],
    );
    agent.wait_for("NVML's Xid 95", LONG, |m| {
        m.value("gpuwatch_xid_errors_total", &[("gpu", "3"), ("xid", "95")]) == Some(1.0)
    });
    let metrics = agent.metrics();
    assert_eq!(metrics.value("gpuwatch_kernel_log_up", &[]), Some(0.0));
    let log = agent.log();
    assert_eq!(
        log.matches("cannot read the kernel log").count(),
        1,
        "{log}"
    );
    assert!(log.contains(&missing.display().to_string()), "{log}");
    let status = agent.terminate();
    assert!(status.success(), "{status:?}");
}

/// A sysfs PCI tree: the health scenario's four GPUs, `extra` more NVIDIA
/// GPUs NVML does not list, their audio function, an NVSwitch and a NIC.
fn pci_tree(root: &std::path::Path, extra: &[&str]) {
    let gpus = [
        "0000:18:00.0",
        "0000:2a:00.0",
        "0000:3a:00.0",
        "0000:5d:00.0",
    ];
    let devices = gpus
        .iter()
        .chain(extra)
        .map(|a| (a.to_string(), "0x10de", "0x030200"))
        .chain([
            ("0000:18:00.1".to_string(), "0x10de", "0x040300"),
            ("0000:05:00.0".to_string(), "0x10de", "0x068000"),
            ("0000:3b:00.0".to_string(), "0x15b3", "0x020000"),
        ]);
    for (address, vendor, class) in devices {
        let dir = root.join(address);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("vendor"), format!("{vendor}\n")).expect("vendor");
        std::fs::write(dir.join("class"), format!("{class}\n")).expect("class");
    }
}

fn pci_config(dir: &std::path::Path, tree: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("gpuwatch.toml");
    std::fs::write(
        &path,
        format!("[health]\npci_devices = \"{}\"\n", tree.display()),
    )
    .expect("write config");
    path
}

#[test]
fn a_gpu_on_the_bus_that_nvml_does_not_list_fires_gpu_missing_from_driver() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tree = dir.path().join("pci");
    pci_tree(&tree, &["0000:9a:00.0"]);
    let config = pci_config(dir.path(), &tree);
    let config_arg = config.to_str().expect("utf-8");
    let agent = Agent::start("health", &["--config", config_arg], &[]);
    let metrics = agent.wait_for("the missing GPU's alert", LONG, |m| {
        m.value(
            "gpuwatch_alerts",
            &[("alertname", "GpuMissingFromDriver"), ("state", "firing")],
        ) == Some(1.0)
    });
    assert_eq!(metrics.value("gpuwatch_pci_gpus", &[]), Some(5.0));
    assert_eq!(metrics.value("gpuwatch_gpus", &[]), Some(4.0));
    let (status, body) = agent.get("/api/v1/alerts");
    assert_eq!(status, 200, "{body}");
    let alerts: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let missing = alerts["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .find(|a| a["alertname"] == "GpuMissingFromDriver")
        .unwrap_or_else(|| panic!("listed: {alerts}"));
    assert_eq!(missing["labels"]["severity"], "critical", "{missing}");
    let description = missing["annotations"]["description"]
        .as_str()
        .expect("description");
    assert!(description.contains("0000:9a:00.0"), "{description}");
    assert!(
        !description.contains("0000:05:00.0"),
        "an NVSwitch is no GPU: {description}"
    );
    let status = agent.terminate();
    assert!(status.success(), "{status:?}");
    // `gpuwatch status` lists the missing address.
    let (code, out, stderr) = common::run_cli(
        &["status", "--simulate", "health", "--config", config_arg],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        out.contains("PCI bus: 5 NVIDIA GPUs; missing from the driver: 0000:9a:00.0"),
        "{out}"
    );
}

#[test]
fn every_gpu_on_the_bus_listed_by_nvml_stays_quiet() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tree = dir.path().join("pci");
    pci_tree(&tree, &[]);
    let config = pci_config(dir.path(), &tree);
    let agent = Agent::start(
        "health",
        &["--config", config.to_str().expect("utf-8")],
        &[],
    );
    let metrics = agent.wait_for("the bus counted", LONG, |m| {
        m.value("gpuwatch_pci_gpus", &[]) == Some(4.0)
            && m.value("gpuwatch_samples_total", &[])
                .is_some_and(|n| n >= 3.0)
    });
    assert_eq!(
        metrics.value("gpuwatch_alerts", &[("alertname", "GpuMissingFromDriver")]),
        None,
        "{}",
        metrics.text
    );
    let status = agent.terminate();
    assert!(status.success(), "{status:?}");
}

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
    let agent = Agent::start("health", &[], &[("GPUWATCH_SIM_START", "125")]);
    let metrics = agent.wait_for("GpuNvlinkDown on GPU 1", LONG, |m| {
        firing(m, "GpuNvlinkDown", "1")
    });
    assert_eq!(
        metrics.value("gpuwatch_nvlink_up", &[("gpu", "1"), ("link", "3")]),
        Some(0.0)
    );
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
