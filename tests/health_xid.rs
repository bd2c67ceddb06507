//! Xid escalation end to end (issue 13 §2): the same reset-class Xid on
//! the same GPU, from the kernel log the agent follows, coming back after
//! `[health] xid_escalate_after` node reboots (a new boot id in the file
//! `[health] boot_id` names) raises `GpuXidRecurring`; agent restarts
//! within one boot do not count as reboots.

mod common;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use common::Agent;

const LONG: Duration = Duration::from_secs(60);

/// One boot of the node: the agent (re)started with `boot_id`, reading a
/// fresh kernel log (a new boot's), then Xid 79 on GPU 0 appended live.
/// Checks that `GpuXidRecurring` fires on GPU 0 (`escalates`) or not.
fn boot_with_xid79(dir: &Path, boot_id: &str, escalates: bool) {
    let kmsg = dir.join("kmsg");
    let boot = dir.join("boot_id");
    std::fs::write(&boot, format!("{boot_id}\n")).expect("boot id");
    std::fs::write(&kmsg, "").expect("kmsg");
    let config = dir.join("gpuwatch.toml");
    std::fs::write(
        &config,
        format!(
            "[health]\nkernel_log = \"{}\"\nboot_id = \"{}\"\nxid_escalate_after = 2\n",
            kmsg.display(),
            boot.display()
        ),
    )
    .expect("config");
    let db = dir.join("history.db");
    let args = [
        "--config",
        config.to_str().expect("utf-8"),
        "--history-db",
        db.to_str().expect("utf-8"),
    ];
    let agent = Agent::start("health", &args, &[]);
    agent.wait_for("the kernel log read", LONG, |m| {
        m.value("gpuwatch_kernel_log_up", &[]) == Some(1.0)
    });
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&kmsg)
        .expect("kmsg");
    writeln!(
        file,
        "[  812.345678] NVRM: Xid (PCI:0000:18:00): 79, pid=4242, name=train.py, GPU has fallen off the bus."
    )
    .expect("write");
    drop(file);
    let recurring = |m: &common::Metrics| {
        m.value(
            "gpuwatch_alerts",
            &[
                ("alertname", "GpuXidRecurring"),
                ("gpu", "0"),
                ("state", "firing"),
            ],
        ) == Some(1.0)
    };
    if escalates {
        agent.wait_for("GpuXidRecurring on GPU 0", LONG, recurring);
        // The verdict follows the escalation: inspect the hardware, in
        // /api/v1/health and in the GPU list the web view reads.
        let (status, body) = agent.get("/api/v1/health");
        assert_eq!(status, 200, "{body}");
        let health: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let gpu0 = &health["gpus"][0];
        assert_eq!(gpu0["state"], "unhealthy", "{body}");
        let inspect = |reasons: &serde_json::Value| {
            reasons.as_array().into_iter().flatten().any(|r| {
                r["action"]
                    .as_str()
                    .is_some_and(|a| a.starts_with("INSPECT_HARDWARE"))
                    && r["text"].as_str().is_some_and(|t| t.contains("Xid 79"))
            })
        };
        assert!(inspect(&gpu0["reasons"]), "{body}");
        let (_, body) = agent.get("/api/v1/gpus");
        let gpus: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert!(inspect(&gpus["gpus"][0]["health"]["reasons"]), "{body}");
    } else {
        agent.wait_for("the live Xid 79 counted", LONG, |m| {
            m.value("gpuwatch_xid_errors_total", &[("gpu", "0"), ("xid", "79")]) == Some(1.0)
        });
        // Evaluated within a tick of the snapshot that counted it.
        std::thread::sleep(Duration::from_secs(3));
        let metrics = agent.metrics();
        assert!(!recurring(&metrics), "boot {boot_id}: {}", metrics.text);
    }
    let status = agent.terminate();
    assert!(status.success(), "{status:?}");
}

#[test]
fn an_xid_79_back_after_two_reboots_escalates_and_agent_restarts_do_not_count() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Agent restarts within one boot: never an escalation.
    for _ in 1..=3 {
        boot_with_xid79(dir.path(), "boot-a", false);
    }
    // The first reboot: seen in two boots, one reboot survived.
    boot_with_xid79(dir.path(), "boot-b", false);
    // The second: it survived two reboots, inspect the hardware.
    boot_with_xid79(dir.path(), "boot-c", true);
}
