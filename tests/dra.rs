//! GPUs given to pods by DRA (Dynamic Resource Allocation), end to end: the
//! agent on `tests/scenarios/dra.toml` (device node minor numbers apart
//! from the NVML indexes, a time-sliced GPU of two pods, MIG) with the
//! fixture /proc tree `tests/fixtures/proc-k8s-node` and a stand-in kubelet
//! answering pod-resources `List` with `dynamic_resources` over real gRPC.
//! Also dcgm-exporter's workload labels on `--metrics-compat dcgm`:
//! `dra_*` with DRA claims, `hpc_job` only when switched on.

mod common;

use std::path::Path;
use std::time::Duration;

use common::kubelet::{dra_pods, DraPod, FakeKubelet};
use common::{allocations, fixture, owner, Agent, Metrics};

const LONG: Duration = Duration::from_secs(30);
const DRIVER: &str = "gpu.nvidia.com";
const POOL: &str = "node-a";

fn scenario() -> String {
    fixture("scenarios/dra.toml")
        .to_str()
        .expect("utf-8 path")
        .to_string()
}

/// The node's claims. NVIDIA's driver names GPUs by minor number: `gpu-2`
/// is NVML index 0 (time-sliced by ml/solo and research/notebook-7),
/// `gpu-0` index 1 (solo's alone), `gpu-3` index 3 (the notebook's alone),
/// `gpu-1-mig-…` the MIG instances of index 2 (profile id 9 is 3g, instance
/// 1; `1g10gb` is instance 3). One name is no device name of the driver.
fn node() -> Vec<DraPod<'static>> {
    vec![
        (
            "ml",
            "solo",
            "main",
            "solo-gpus",
            vec![(DRIVER, POOL, "gpu-0"), (DRIVER, POOL, "gpu-2")],
        ),
        (
            "research",
            "notebook-7",
            "kernel",
            "notebook-gpus",
            vec![(DRIVER, POOL, "gpu-2"), (DRIVER, POOL, "gpu-3")],
        ),
        (
            "ml",
            "mig-trainer",
            "trainer",
            "mig-big",
            vec![(DRIVER, POOL, "gpu-1-mig-9-0-4")],
        ),
        (
            "ml",
            "mig-small",
            "worker",
            "mig-small",
            vec![(DRIVER, POOL, "gpu-1-mig-1g10gb-6-1")],
        ),
        (
            "ml",
            "odd",
            "main",
            "odd",
            vec![
                (DRIVER, POOL, "gpu-1-mig-"),
                ("compute-domain.nvidia.com", POOL, "channel-0"),
            ],
        ),
    ]
}

fn write_config(dir: &Path, socket: &Path, extra: &str) -> String {
    let proc_root = fixture("fixtures/proc-k8s-node/proc");
    let path = dir.join("gpuwatch.toml");
    std::fs::write(
        &path,
        format!(
            "[history]\nbatch_interval = \"1s\"\n[sampler]\ninterval = \"200ms\"\nslow_interval = \"500ms\"\nprocess_interval = \"200ms\"\nproc_root = {:?}\n\
             [kubernetes]\npod_resources_socket = {:?}\nrefresh_interval = \"200ms\"\n{extra}",
            proc_root.to_str().expect("utf-8 path"),
            socket.to_str().expect("utf-8 path"),
        ),
    )
    .expect("config");
    path.to_str().expect("utf-8 path").to_string()
}

fn pod_series<'a>(m: &'a Metrics, family: &str, pod: &str, gpu: &str) -> &'a common::Sample {
    match m
        .find(family, &[("kind", "pod"), ("workload", pod), ("gpu", gpu)])
        .as_slice()
    {
        [one] => one,
        other => panic!("{family} of {pod} on GPU {gpu}: {other:?}\n{}", m.text),
    }
}

#[test]
fn dra_claims_name_the_pods_of_gpus_mig_instances_and_processes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("kubelet.sock");
    let kubelet = FakeKubelet::start(&socket, dra_pods(node()));
    let config = write_config(
        dir.path(),
        &socket,
        "[exporter]\ndetail = [\"processes\"]\n",
    );
    let agent = Agent::start(&scenario(), &["--config", &config], &[]);
    let m = agent.wait_for("processes named through DRA claims", LONG, |m| {
        owner(m, "0", "1000") == "ml/solo/main"
            && owner(m, "0", "1002") == "research/notebook-7/kernel"
            && owner(m, "2", "4001") == "ml/mig-small/worker"
            && !m
                .find(
                    "gpuwatch_workload_gpu_seconds_total",
                    &[("workload", "ml/solo"), ("gpu", "0")],
                )
                .is_empty()
    });

    // GPUs by minor number, not index; MIG instances by profile.
    assert_eq!(
        allocations(&m, "0"),
        vec![
            "ml/solo/main gpu.nvidia.com ",
            "research/notebook-7/kernel gpu.nvidia.com "
        ]
    );
    assert_eq!(allocations(&m, "1"), vec!["ml/solo/main gpu.nvidia.com "]);
    assert_eq!(
        allocations(&m, "2"),
        vec![
            "ml/mig-small/worker gpu.nvidia.com 3",
            "ml/mig-trainer/trainer gpu.nvidia.com 1"
        ]
    );
    assert_eq!(
        allocations(&m, "3"),
        vec!["research/notebook-7/kernel gpu.nvidia.com "]
    );
    assert_eq!(owner(&m, "1", "2000"), "ml/solo/main");
    assert_eq!(owner(&m, "2", "4000"), "ml/mig-trainer/trainer");
    assert_eq!(owner(&m, "3", "1012"), "research/notebook-7/kernel");

    // The pods' workload series carry their claims.
    let solo = pod_series(&m, "gpuwatch_workload_gpu_seconds_total", "ml/solo", "0");
    assert_eq!(solo.labels["dra_claim"], "solo-gpus");
    assert_eq!(solo.labels["namespace"], "ml");
    assert_eq!(solo.labels["pod"], "solo");
    let notebook = pod_series(
        &m,
        "gpuwatch_workload_sm_active_seconds_total",
        "research/notebook-7",
        "3",
    );
    assert_eq!(notebook.labels["dra_claim"], "notebook-gpus");

    // The workloads API names every claim device of a pod.
    let (status, body) = agent.get("/api/v1/workloads?kind=pod");
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let workloads = answer["workloads"].as_array().expect("workloads");
    let solo = workloads
        .iter()
        .find(|w| w["id"] == "ml/solo")
        .unwrap_or_else(|| panic!("no ml/solo in {body}"));
    let devices: Vec<String> = solo["dra_claims"]
        .as_array()
        .expect("dra_claims")
        .iter()
        .map(|c| {
            format!(
                "{}/{} {} {} {}",
                c["namespace"].as_str().unwrap_or("?"),
                c["name"].as_str().unwrap_or("?"),
                c["driver"].as_str().unwrap_or("?"),
                c["pool"].as_str().unwrap_or("?"),
                c["device"].as_str().unwrap_or("?")
            )
        })
        .collect();
    assert_eq!(
        devices,
        vec![
            "ml/solo-gpus gpu.nvidia.com node-a gpu-0",
            "ml/solo-gpus gpu.nvidia.com node-a gpu-2"
        ]
    );
    let mig = workloads
        .iter()
        .find(|w| w["id"] == "ml/mig-small")
        .unwrap_or_else(|| panic!("no ml/mig-small in {body}"));
    assert_eq!(mig["dra_claims"][0]["device"], "gpu-1-mig-1g10gb-6-1");
    assert_eq!(mig["gpus"], serde_json::json!(["2.3"]));

    // The snapshot API shows the claim of each allocation.
    let (status, body) = agent.get("/api/v1/snapshot");
    assert_eq!(status, 200);
    let snapshot: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(snapshot["gpus"][1]["pods"][0]["claim"]["name"], "solo-gpus");
    assert_eq!(snapshot["gpus"][1]["identity"]["minor_number"], 0);

    // The name that is no device name of the driver: logged once, however
    // often the kubelet repeats it.
    let calls = kubelet.calls();
    let deadline = std::time::Instant::now() + LONG;
    while kubelet.calls() < calls + 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the kubelet is not asked again"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = agent.log();
    assert_eq!(
        log.matches("DRA devices of gpu.nvidia.com whose names")
            .count(),
        1,
        "{log}"
    );
    assert!(log.contains("gpu-1-mig-"), "{log}");
    assert!(
        !log.contains("channel-0"),
        "other drivers' devices are not ours: {log}"
    );
    assert_eq!(agent.terminate().code(), Some(0));
}

#[test]
fn a_time_sliced_gpu_of_two_pods_is_split_by_their_sm_share() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("kubelet.sock");
    let _kubelet = FakeKubelet::start(&socket, dra_pods(node()));
    let config = write_config(dir.path(), &socket, "");
    let agent = Agent::start(&scenario(), &["--config", &config], &[]);
    let held = |m: &Metrics, pod: &str| {
        m.find(
            "gpuwatch_workload_gpu_seconds_total",
            &[("workload", pod), ("gpu", "0")],
        )
        .first()
        .map_or(0.0, |s| s.value)
    };
    let m = agent.wait_for("both pods held GPU 0 for 5 s", LONG, |m| {
        held(m, "ml/solo") >= 5.0 && held(m, "research/notebook-7") >= 5.0
    });
    let value = |family: &str, pod: &str| pod_series(&m, family, pod, "0").value;
    let (solo, notebook) = ("ml/solo", "research/notebook-7");
    let held_solo = value("gpuwatch_workload_gpu_seconds_total", solo);
    let held_notebook = value("gpuwatch_workload_gpu_seconds_total", notebook);
    // Held is held: both had a context on the GPU all along.
    assert!(
        (held_solo - held_notebook).abs() < 1e-6,
        "{held_solo} vs {held_notebook}"
    );
    let close = |got: f64, want: f64, what: &str| {
        assert!(
            (got - want).abs() <= 0.02 * want,
            "{what}: {got}, expected {want} ± 2 %\n{}",
            m.text
        );
    };
    // SM-active: the GPU's 80 % activity over the held seconds, split 60 : 20.
    let sm_solo = value("gpuwatch_workload_sm_active_seconds_total", solo);
    let sm_notebook = value("gpuwatch_workload_sm_active_seconds_total", notebook);
    close(
        sm_solo + sm_notebook,
        0.8 * held_solo,
        "SM-active seconds of both",
    );
    close(sm_solo / sm_notebook, 3.0, "SM-active ratio");
    close(sm_solo, 0.8 * 0.75 * held_solo, "solo's SM-active seconds");
    // Energy: the GPU's (400 W constant) over the held seconds, split alike.
    let energy_solo = value("gpuwatch_workload_energy_joules_total", solo);
    let energy_notebook = value("gpuwatch_workload_energy_joules_total", notebook);
    eprintln!(
        "GPU 0: held {held_solo:.3} s each; SM-active {sm_solo:.3} / {sm_notebook:.3} s; energy {energy_solo:.1} / {energy_notebook:.1} J"
    );
    close(
        energy_solo + energy_notebook,
        400.0 * held_solo,
        "energy of both",
    );
    close(energy_solo / energy_notebook, 3.0, "energy ratio");
    // Alone on its GPU, solo gets all of GPU 1's activity (95 %).
    let held_alone = value("gpuwatch_workload_gpu_seconds_total", solo);
    assert!(held_alone > 0.0);
    let alone = pod_series(&m, "gpuwatch_workload_sm_active_seconds_total", solo, "1").value;
    let held_1 = pod_series(&m, "gpuwatch_workload_gpu_seconds_total", solo, "1").value;
    close(alone, 0.95 * held_1, "SM-active seconds alone");
    assert_eq!(agent.terminate().code(), Some(0));
}

/// The `DCGM_FI_DEV_GPU_UTIL` series of GPU `gpu`, each as its workload
/// labels (`hpc_job`, `dra_*`), sorted.
fn dcgm_copies(m: &Metrics, gpu: &str) -> Vec<String> {
    let mut out: Vec<String> = m
        .find("DCGM_FI_DEV_GPU_UTIL", &[("gpu", gpu)])
        .iter()
        .map(|s| {
            s.labels
                .iter()
                .filter(|(k, _)| k.starts_with("dra_") || *k == "hpc_job")
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    out.sort();
    out
}

#[test]
fn dcgm_series_carry_dra_labels_and_hpc_job_only_when_switched_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("kubelet.sock");
    let _kubelet = FakeKubelet::start(&socket, dra_pods(node()));
    // A Slurm prolog's mapping files: two jobs on GPU 0, one on GPU 3.
    let mapping = dir.path().join("hpc-jobs");
    std::fs::create_dir(&mapping).expect("mapping dir");
    std::fs::write(mapping.join("0"), "9100002\n9100003\n").expect("mapping file");
    std::fs::write(mapping.join("3"), "9100001\n").expect("mapping file");
    let workloads = format!("[workloads]\nhpc_job_mapping_dir = {mapping:?}\n");
    let ready = |m: &Metrics| dcgm_copies(m, "0").len() >= 2 && dcgm_copies(m, "3").len() == 1;
    let dra = |claim: &str, device: &str| {
        format!("dra_claim_name={claim} dra_claim_namespace={} dra_device={device} dra_driver=gpu.nvidia.com dra_pool=node-a",
            if claim.starts_with("notebook") { "research" } else { "ml" })
    };

    // Off by default, as in dcgm-exporter: DRA labels only.
    let config = write_config(dir.path(), &socket, &workloads);
    let agent = Agent::start(
        &scenario(),
        &["--config", &config, "--metrics-compat", "dcgm"],
        &[],
    );
    let m = agent.wait_for("DCGM series with DRA labels", LONG, ready);
    assert_eq!(
        dcgm_copies(&m, "0"),
        vec![dra("notebook-gpus", "gpu-2"), dra("solo-gpus", "gpu-2")]
    );
    assert_eq!(dcgm_copies(&m, "1"), vec![dra("solo-gpus", "gpu-0")]);
    assert_eq!(dcgm_copies(&m, "3"), vec![dra("notebook-gpus", "gpu-3")]);
    // A MIG GPU's device-level series name no instance's claim.
    assert_eq!(dcgm_copies(&m, "2"), vec![String::new()]);
    assert!(!m.text.contains("hpc_job"), "{}", m.text);
    assert_eq!(agent.terminate().code(), Some(0));

    // Switched on: one copy per job on the GPU (times its claim devices).
    let config = write_config(
        dir.path(),
        &socket,
        &format!("{workloads}[exporter]\ncompat_hpc_job = true\n"),
    );
    let agent = Agent::start(
        &scenario(),
        &["--config", &config, "--metrics-compat", "dcgm"],
        &[],
    );
    let m = agent.wait_for("DCGM series with hpc_job", LONG, |m| {
        ready(m) && dcgm_copies(m, "0").len() == 4
    });
    assert_eq!(
        dcgm_copies(&m, "0"),
        vec![
            format!("{} hpc_job=9100002", dra("notebook-gpus", "gpu-2")),
            format!("{} hpc_job=9100003", dra("notebook-gpus", "gpu-2")),
            format!("{} hpc_job=9100002", dra("solo-gpus", "gpu-2")),
            format!("{} hpc_job=9100003", dra("solo-gpus", "gpu-2")),
        ]
    );
    assert_eq!(
        dcgm_copies(&m, "3"),
        vec![format!("{} hpc_job=9100001", dra("notebook-gpus", "gpu-3"))]
    );
    assert_eq!(dcgm_copies(&m, "1"), vec![dra("solo-gpus", "gpu-0")]);
    // Every DCGM_FI_* family is multiplied alike, not only utilization.
    assert_eq!(
        m.find("DCGM_FI_DEV_FB_USED", &[("gpu", "0")]).len(),
        4,
        "{}",
        m.text
    );
    // docs/compat.md names the labels and says they multiply the series.
    let compat_page = common::docs_page("compat.md");
    for label in [
        "hpc_job",
        "dra_claim_name",
        "dra_claim_namespace",
        "dra_driver",
        "dra_pool",
        "dra_device",
        "compat_hpc_job",
    ] {
        assert!(
            compat_page.contains(&format!("`{label}`")),
            "docs/compat.md lacks `{label}`"
        );
    }
    assert_eq!(agent.terminate().code(), Some(0));
}
