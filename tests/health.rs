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
