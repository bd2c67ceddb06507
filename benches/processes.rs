//! Process-tier cost with 8 GPUs × 30 processes on the NVML simulator.
//!
//! Prints medians:
//! - CPU per process on the process tier, excluding NVML: (agent tick with
//!   the process tier − agent fast tick − the same process-tier NVML calls
//!   made raw through nvml-wrapper) / processes, names and host facts cached
//!   as in steady state (target ≤ 5 µs per process);
//! - CPU per process to read /proc for a process seen for the first time
//!   (comm, cmdline, status, cgroup, from a fixture tree of 240 pids);
//! - /metrics size and render time with the top-N cap (10 per GPU, the
//!   default) against no cap (all 30), with three capacity profiles;
//! - CPU per process to match processes to Kubernetes pods (the kubelet's
//!   allocations: every GPU held by one pod, and every GPU time-sliced
//!   between 30 pods), and the wall time of one pod-resources `List` call
//!   over a unix socket to a stand-in kubelet (tonic) answering 240 pods.
//!
//! Run: `cargo bench --bench processes` (add `-- --quick` for fewer rounds).

#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/common/kubelet.rs"]
mod kubelet;

use common::{median, percentile, run_size, thread_cpu};

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use gpuwatch::capacity::{CapacityConfig, Profile};
use gpuwatch::exporter::process_metrics::ProcessExport;
use gpuwatch::exporter::{Exporter, Format};
use gpuwatch::gpu::nvml::Driver;
use gpuwatch::gpu::GpuSnapshot;
use gpuwatch::kubernetes::{self, PodAllocations};
use gpuwatch::sampler::procnames::ProcessNames;
use gpuwatch::sampler::reader::{NodeReader, Tiers};
use nvml_wrapper::Nvml;

const GPUS: u32 = 8;
const PER_GPU: u32 = 30;

/// 8 H100s, each with a pool of 30 long-lived processes (pids 100000 +
/// 10000 × GPU + 30 + slot in the first generation).
fn scenario() -> String {
    let mut text = String::from("name = \"bench-processes\"\nseed = 3\n");
    for _ in 0..GPUS {
        text.push_str(&format!(
            "[[gpu]]\nname = \"NVIDIA H100 80GB HBM3\"\n[gpu.metrics]\nutilization_gpu = 70\n\
             [gpu.process_pool]\ncount = {PER_GPU}\nmin_mib = 500\nmax_mib = 2500\nlifetime = \"1000h\"\nnames = [\"python3\", \"tritonserver\"]\n"
        ));
    }
    text
}

/// A /proc tree with every pid of the scenario in a container.
fn proc_tree(root: &std::path::Path, pids: &[u32]) -> std::path::PathBuf {
    let proc = root.join("proc");
    std::fs::create_dir_all(root.join("etc")).expect("mkdir");
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\nalice:x:1001:1001::/home/alice:/bin/sh\n",
    )
    .expect("passwd");
    for pid in pids {
        let dir = proc.join(pid.to_string());
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("comm"), "python3\n").expect("comm");
        std::fs::write(dir.join("cmdline"), b"python3\0serve.py\0--port\08000\0").expect("cmdline");
        std::fs::write(
            dir.join("status"),
            "Name:\tpython3\nUid:\t1001\t1001\t1001\t1001\n",
        )
        .expect("status");
        std::fs::write(
            dir.join("cgroup"),
            format!("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1c6f1a2e_7b3d_4e5f_9a8b_0c1d2e3f4a5b.slice/cri-containerd-{pid:064x}.scope\n"),
        )
        .expect("cgroup");
    }
    proc
}

fn main() {
    let (smoke, quick) = run_size();
    let rounds = if smoke {
        10
    } else if quick {
        200
    } else {
        2000
    };
    let data = tempfile::tempdir().expect("temp dir");
    let scenario_path = data.path().join("bench.toml");
    std::fs::write(&scenario_path, scenario()).expect("scenario");
    std::env::set_var(nvml_sim::ENV_SCENARIO, &scenario_path);
    let library = gpuwatch::sim::locate_library()
        .expect("build the simulator first: cargo build --workspace");
    let driver = Driver::open(Some(&library)).expect("open the simulator");

    // Discover the pids, then build the /proc tree for them.
    let mut probe = NodeReader::new(&driver, "bench".into(), ProcessNames::new(None));
    let first = probe.tick(Tiers::ALL, None);
    let pids: Vec<u32> = first
        .gpus
        .iter()
        .flat_map(|g| g.processes.iter().map(|p| p.pid))
        .collect();
    let processes = pids.len() as f64;
    assert_eq!(pids.len(), (GPUS * PER_GPU) as usize, "8 × 30 processes");
    let proc = proc_tree(data.path(), &pids);
    let mut reader = NodeReader::new(
        &driver,
        "bench".into(),
        ProcessNames::new(Some(proc.clone())).with_command_lines(true),
    );
    let snapshot = reader.tick(Tiers::ALL, None);
    assert!(
        snapshot.gpus[0].processes[0]
            .host
            .as_ref()
            .and_then(|h| h.container.as_ref())
            .is_some(),
        "host facts are read from the tree"
    );
    println!("{GPUS} GPUs × {PER_GPU} processes, {rounds} rounds");

    // Process tier: agent vs the same NVML calls made raw, interleaved.
    let nvml = Nvml::builder()
        .lib_path(library.as_os_str())
        .init()
        .expect("open the simulator through nvml-wrapper");
    let devices: Vec<_> = (0..GPUS)
        .map(|i| nvml.device_by_index(i).expect("device"))
        .collect();
    let only_processes = Tiers {
        slow: false,
        processes: true,
    };
    let (mut with_tier, mut fast_only, mut raw) = (Vec::new(), Vec::new(), Vec::new());
    let mut last_seen = 0u64;
    for _ in 0..rounds {
        let c0 = thread_cpu();
        std::hint::black_box(reader.tick(only_processes, None));
        with_tier.push((thread_cpu() - c0).as_secs_f64() * 1e6);
        let c0 = thread_cpu();
        std::hint::black_box(reader.tick(Tiers::default(), None));
        fast_only.push((thread_cpu() - c0).as_secs_f64() * 1e6);
        let c0 = thread_cpu();
        for d in &devices {
            let samples = d.process_utilization_stats(last_seen).unwrap_or_default();
            last_seen = samples
                .iter()
                .map(|s| s.timestamp)
                .max()
                .unwrap_or(last_seen);
            std::hint::black_box((
                d.running_compute_processes().ok(),
                d.running_graphics_processes().ok(),
                d.mps_running_compute_processes().ok(),
                samples,
            ));
        }
        raw.push((thread_cpu() - c0).as_secs_f64() * 1e6);
    }
    let (t, f, r) = (
        median(&mut with_tier),
        median(&mut fast_only),
        median(&mut raw),
    );
    let own = (t - f - r).max(0.0) / processes;
    println!(
        "process tier CPU (median): tick with it {t:.0} us, fast tick alone {f:.0} us, its NVML calls raw {r:.0} us \
         => agent's own {own:.2} us per process (target <= 5 us)"
    );

    // First sight of a process: the /proc reads.
    let mut cold = Vec::new();
    for _ in 0..rounds.min(200) {
        // Command lines on: the dearer case (one more file, and masking).
        let mut names = ProcessNames::new(Some(proc.clone())).with_command_lines(true);
        let c0 = thread_cpu();
        for &pid in &pids {
            std::hint::black_box(names.lookup(pid, |_| None));
        }
        cold.push((thread_cpu() - c0).as_secs_f64() * 1e6 / processes);
    }
    println!(
        "first sight of a process (/proc comm, cmdline, status, cgroup + parsing), CPU (median): {:.1} us per process",
        median(&mut cold)
    );

    // /metrics with and without the top-N cap.
    let (tx, rx) = tokio::sync::watch::channel(None);
    let mut snapshot = reader.tick(Tiers::ALL, None);
    snapshot.taken_at = SystemTime::now();
    tx.send_replace(Some(Arc::new(snapshot)));
    let capacity = Arc::new(CapacityConfig {
        profiles: ["small", "medium", "large"]
            .iter()
            .zip([2u64, 12, 40])
            .map(|(name, gib)| Profile {
                name: name.to_string(),
                memory_bytes: gib << 30,
                sm_share: Some(0.1),
                model: None,
            })
            .collect(),
        memory_margin_bytes: 1 << 30,
        alert_for: Duration::ZERO,
    });
    for (label, top_n) in [
        ("top 10 per GPU (default)", 10),
        ("no cap (30 per GPU)", usize::MAX),
    ] {
        let exporter = Exporter::with_processes(
            rx.clone(),
            Duration::from_secs(3600),
            ProcessExport {
                process_top_n: top_n,
                capacity: capacity.clone(),
            },
        );
        let text = exporter.render(Format::Prometheus).expect("render");
        let series = text.lines().filter(|l| !l.starts_with('#')).count();
        let mut render = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t0 = Instant::now();
            std::hint::black_box(exporter.render(Format::Prometheus).expect("render"));
            render.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        println!(
            "/metrics, {label}: {} bytes, {series} series, render p50 {:.0} us, p99 {:.0} us",
            text.len(),
            percentile(&mut render, 0.5),
            percentile(&mut render, 0.99)
        );
    }

    kubernetes_figures(&reader.tick(Tiers::ALL, None).gpus, rounds, data.path());
}

/// Pod matching and the kubelet call.
fn kubernetes_figures(gpus: &[GpuSnapshot], rounds: usize, dir: &std::path::Path) {
    let processes: usize = gpus.iter().map(|g| g.processes.len()).sum();
    // Every GPU held by one pod; then every GPU time-sliced between 30 pods.
    let exclusive: Vec<kubelet::Pod> = gpus
        .iter()
        .map(|g| {
            (
                "ml",
                "train",
                vec![("main", "nvidia.com/gpu", vec![g.uuid.clone()])],
            )
        })
        .collect();
    let names: Vec<String> = (0..PER_GPU).map(|i| format!("infer-{i}")).collect();
    let mut shared: Vec<kubelet::Pod> = Vec::new();
    for g in gpus {
        for (i, name) in names.iter().enumerate() {
            shared.push((
                "serving",
                name.as_str(),
                vec![("model", "nvidia.com/gpu", vec![format!("{}::{i}", g.uuid)])],
            ));
        }
    }
    let response = |pods: Vec<kubelet::Pod>| match kubelet::pods(pods) {
        kubelet::Answer::Pods(response) => response,
        kubelet::Answer::Fail(..) => unreachable!("pods() answers pods"),
    };
    let (exclusive, shared) = (response(exclusive), response(shared));
    for (label, answer) in [
        ("each GPU held by one pod", &exclusive),
        ("each GPU time-sliced between 30 pods", &shared),
    ] {
        let allocations = PodAllocations::from_response(answer);
        let mut cpu = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let mut copy = gpus.to_vec();
            let c0 = thread_cpu();
            kubernetes::attribute(&mut copy, &allocations);
            cpu.push((thread_cpu() - c0).as_secs_f64() * 1e6 / processes as f64);
            std::hint::black_box(copy);
        }
        println!(
            "pod matching, {label}: CPU (median) {:.2} us per process",
            median(&mut cpu)
        );
    }

    let socket = dir.join("kubelet.sock");
    let _kubelet = kubelet::FakeKubelet::start(&socket, kubelet::Answer::Pods(shared.clone()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut wall = Vec::new();
    for _ in 0..rounds.min(500) {
        let t0 = Instant::now();
        let answer = runtime
            .block_on(kubernetes::client::list(&socket, Duration::from_secs(2)))
            .expect("the stand-in kubelet answers");
        wall.push(t0.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(answer);
    }
    println!(
        "pod-resources List over a unix socket ({} pods, new connection each call): wall p50 {:.0} us, p99 {:.0} us",
        shared.pod_resources.len(),
        percentile(&mut wall, 0.5),
        percentile(&mut wall, 0.99)
    );
}
