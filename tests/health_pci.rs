//! GPUs the driver never saw, end to end on the simulator: a fixture sysfs
//! PCI tree with a GPU NVML does not list fires `GpuMissingFromDriver`;
//! one where NVML lists every GPU stays quiet. (Split from tests/health.rs.)

mod common;

use std::time::Duration;

use common::Agent;

const LONG: Duration = Duration::from_secs(60);

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

#[test]
fn a_fifo_as_a_vendor_file_does_not_hang_gpuwatch_status() {
    // Before, `gpuwatch status --config` opened the FIFO blocking and
    // waited for a writer forever; now the device is skipped.
    let dir = tempfile::tempdir().expect("temp dir");
    let tree = dir.path().join("pci");
    pci_tree(&tree, &["0000:9a:00.0"]);
    let odd = tree.join("0000:9b:00.0");
    std::fs::create_dir_all(&odd).expect("mkdir");
    let made = std::process::Command::new("mkfifo")
        .arg(odd.join("vendor"))
        .status()
        .expect("mkfifo (coreutils) runs");
    assert!(made.success(), "mkfifo failed");
    std::fs::write(odd.join("class"), "0x030200\n").expect("class");
    let config = pci_config(dir.path(), &tree);
    let mut child = std::process::Command::new(common::binary())
        .args(["status", "--simulate", "health", "--config"])
        .arg(&config)
        .env("XDG_STATE_HOME", dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run gpuwatch status");
    let deadline = std::time::Instant::now() + LONG;
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gpuwatch status still runs after {LONG:?}: the PCI scan hangs on the FIFO");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("output");
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{out}");
    assert!(
        out.contains("PCI bus: 5 NVIDIA GPUs; missing from the driver: 0000:9a:00.0"),
        "{out}"
    );
}
