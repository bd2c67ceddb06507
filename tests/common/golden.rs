//! The golden scenario with every source of metrics wired: a fixture /proc
//! tree, a stand-in kubelet, a kernel log, a PCI tree and the history. The
//! golden test compares its /metrics with tests/golden; the docs test
//! renders the metrics reference from it.

use std::path::PathBuf;
use std::time::Duration;

use super::kubelet::FakeKubelet;
use super::{fixture, Agent, Metrics};

/// An agent on the golden scenario, settled: every family it exports is out.
pub struct GoldenAgent {
    /// The running agent.
    pub agent: Agent,
    /// Its /metrics once settled (Prometheus text).
    pub metrics: Metrics,
    _kubelet: FakeKubelet,
    _dir: tempfile::TempDir,
}

/// The golden scenario's /metrics with the detail sets `detail` (a TOML
/// list's items, e.g. `"full"`; empty for the default).
pub fn scrape(detail: &str) -> Metrics {
    start(detail, &[]).metrics
}

/// Starts the agent on the golden scenario with the detail sets `detail`
/// (a TOML list's items, e.g. `"full"`; empty for the default) and the
/// `gpuwatch run` flags `args` (e.g. `--metrics-compat dcgm`), and waits
/// until every family is out.
pub fn start(detail: &str, args: &[&str]) -> GoldenAgent {
    let scenario = fixture("scenarios/golden-full.toml");
    // History commits every second, so its metrics have values too.
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("gpuwatch.toml");
    // Host facts for the scenario's pids come from a fixture /proc tree; one
    // process per GPU gets its own series, the rest are summed (pid="other").
    let proc_root = fixture("fixtures/proc-golden/proc");
    // A stand-in kubelet gives MIG instance 2 (tritonserver's) to a pod.
    let socket = dir.path().join("kubelet.sock");
    let kubelet = FakeKubelet::golden_triton(&socket);
    // A kernel log the agent follows: one NVSwitch SXid line is appended
    // once it reads the log.
    let kmsg = dir.path().join("kmsg");
    std::fs::write(&kmsg, "").expect("kmsg");
    // A PCI tree with the scenario's GPUs (all listed by NVML) and an NVSwitch.
    let pci: PathBuf = dir.path().join("pci");
    for (address, class) in [
        ("0000:07:00.0", "0x030200"),
        ("0000:65:00.0", "0x030200"),
        ("0000:05:00.0", "0x068000"),
    ] {
        std::fs::create_dir_all(pci.join(address)).expect("pci");
        std::fs::write(pci.join(address).join("vendor"), "0x10de\n").expect("vendor");
        std::fs::write(pci.join(address).join("class"), format!("{class}\n")).expect("class");
    }
    // Acting on health is off here: its families have their own table
    // (docs/health.md), checked against a real Slurm (tests/remediation_slurm.rs).
    std::fs::write(
        &config,
        format!(
            "[exporter]\ndetail = [{detail}]\n[history]\nbatch_interval = \"1s\"\n[sampler]\nproc_root = {:?}\nprocess_top_n = 1\nprocess_command_line = true\n\
             [kubernetes]\npod_resources_socket = {:?}\n\
             [health]\nkernel_log = {:?}\npci_devices = {:?}\n\
             [capacity]\nmemory_margin = \"1GiB\"\n\
             [[profiles]]\nname = \"small\"\nmemory = \"2GiB\"\n\
             [[profiles]]\nname = \"a100-big\"\nmemory = \"30GiB\"\nmodel = \"A100\"\n\
             [remediation]\nmode = \"off\"\n",
            proc_root.to_str().expect("utf-8 path"),
            socket.to_str().expect("utf-8 path"),
            kmsg.to_str().expect("utf-8 path"),
            pci.to_str().expect("utf-8 path"),
        ),
    )
    .expect("config");
    let mut all_args = vec!["--config", config.to_str().expect("utf-8 path")];
    all_args.extend_from_slice(args);
    let agent = Agent::in_process_with_args(
        scenario.to_str().expect("utf-8 path"),
        &all_args,
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    agent.wait_for("the kernel log opened", Duration::from_secs(20), |m| {
        m.value("gpuwatch_kernel_log_up", &[]) == Some(1.0)
    });
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(&kmsg)
        .expect("kmsg");
    std::io::Write::write_all(
        &mut log,
        b"3,1005,9000000,-;nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 12 LTSSM Fault Up\n",
    )
    .expect("append to kmsg");
    let metrics = agent.wait_for(
        "three samples, both Xid codes, the processes and a history commit",
        Duration::from_secs(20),
        |m| {
            m.value("gpuwatch_samples_total", &[])
                .is_some_and(|n| n >= 3.0)
                && m.find("gpuwatch_xid_errors_total", &[]).len() == 2
                && m.find("gpuwatch_gpu_processes", &[]).len() == 2
                && m.value("gpuwatch_history_rows_written_total", &[])
                    .is_some_and(|v| v > 0.0)
                && m.has("gpuwatch_gpu_pod_info")
                && m.has("gpuwatch_gpm_mig_sm_active_ratio")
                && m.has("gpuwatch_sxid_errors_total")
                && m.has("gpuwatch_pci_gpus")
        },
    );
    GoldenAgent {
        agent,
        metrics,
        _kubelet: kubelet,
        _dir: dir,
    }
}
