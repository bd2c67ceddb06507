//! Kubernetes pod, namespace and container names from the kubelet's
//! pod-resources socket, end to end: the agent on
//! `tests/scenarios/sharing.toml` (time-sliced, exclusive, MPS and MIG GPUs)
//! with the fixture /proc tree `tests/fixtures/proc-k8s-node` (pods'
//! cgroups) and a stand-in kubelet serving the real gRPC API on a unix
//! socket.

mod common;

use std::path::Path;
use std::time::Duration;

use common::kubelet::{pods, Answer, FakeKubelet, Pod};
use common::{allocations, fixture, owner, run_cli, Agent};

const LONG: Duration = Duration::from_secs(30);

const GPU0: &str = "GPU-50000000-0000-4000-8000-000000000000";
const GPU1: &str = "GPU-51111111-1111-4111-8111-111111111111";
const GPU2: &str = "GPU-52222222-2222-4222-8222-222222222222";
/// The simulator names MIG devices `MIG-<parent without GPU->-<instance>`.
const MIG1: &str = "MIG-53333333-3333-4333-8333-333333333333-1";
const MIG3: &str = "MIG-53333333-3333-4333-8333-333333333333-3";
/// Pod UIDs in the fixture tree's cgroups.
const NOTEBOOK_UID: &str = "2a3b4c5d-0000-4000-8000-00000000000b";
const CLIENT_A_UID: &str = "2a3b4c5d-0000-4000-8000-00000000a00a";

fn scenario() -> String {
    fixture("scenarios/sharing.toml")
        .to_str()
        .expect("utf-8 path")
        .to_string()
}

/// The node: GPU 1 is ml/solo's alone, and solo also holds a time-slice of
/// GPU 0 (shared with a notebook); GPU 2 is shared by three MPS clients;
/// GPU 3's MIG instances 1 and 3 belong to two pods.
fn node(with_mig_small: bool) -> Vec<Pod<'static>> {
    let mut list: Vec<Pod> = vec![
        (
            "ml",
            "solo",
            vec![(
                "main",
                "nvidia.com/gpu",
                vec![GPU1.into(), format!("{GPU0}::0")],
            )],
        ),
        (
            "research",
            "notebook-7",
            vec![("kernel", "nvidia.com/gpu", vec![format!("{GPU0}::1")])],
        ),
        (
            "ml",
            "mig-trainer",
            vec![("trainer", "nvidia.com/mig-3g.40gb", vec![MIG1.into()])],
        ),
    ];
    for (i, name) in ["client-a", "client-b", "client-c"].into_iter().enumerate() {
        list.push((
            "serving",
            name,
            vec![("model", "nvidia.com/gpu", vec![format!("{GPU2}::{i}")])],
        ));
    }
    if with_mig_small {
        list.push((
            "ml",
            "mig-small",
            vec![("worker", "nvidia.com/mig-1g.10gb", vec![MIG3.into()])],
        ));
    }
    list
}

fn write_config(dir: &Path, socket: &Path) -> String {
    let proc_root = fixture("fixtures/proc-k8s-node/proc");
    let path = dir.join("gpuwatch.toml");
    std::fs::write(
        &path,
        format!(
            "[history]\nbatch_interval = \"1s\"\n[sampler]\ninterval = \"200ms\"\nslow_interval = \"500ms\"\nprocess_interval = \"200ms\"\nproc_root = {:?}\n\
             [kubernetes]\npod_resources_socket = {:?}\nrefresh_interval = \"200ms\"\n\
             [exporter]\ndetail = [\"processes\"]\n",
            proc_root.to_str().expect("utf-8 path"),
            socket.to_str().expect("utf-8 path"),
        ),
    )
    .expect("config");
    path.to_str().expect("utf-8 path").to_string()
}

#[test]
fn pods_and_containers_are_named_for_gpus_and_processes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("kubelet.sock");
    let kubelet = FakeKubelet::start(&socket, pods(node(true)));
    let config = write_config(dir.path(), &socket);
    let agent = Agent::start(&scenario(), &["--config", &config], &[]);
    let m = agent.wait_for("processes named by the kubelet", LONG, |m| {
        owner(m, "1", "2000") == "ml/solo/main" && owner(m, "3", "4001") == "ml/mig-small/worker"
    });

    // GPU-level: who holds each GPU, MIG instances apart.
    assert_eq!(
        allocations(&m, "0"),
        vec![
            "ml/solo/main nvidia.com/gpu ",
            "research/notebook-7/kernel nvidia.com/gpu "
        ]
    );
    assert_eq!(allocations(&m, "1"), vec!["ml/solo/main nvidia.com/gpu "]);
    assert_eq!(allocations(&m, "2").len(), 3);
    assert_eq!(
        allocations(&m, "3"),
        vec![
            "ml/mig-small/worker nvidia.com/mig-1g.10gb 3",
            "ml/mig-trainer/trainer nvidia.com/mig-3g.40gb 1"
        ]
    );

    // Processes: an exclusive GPU names its pod; solo's process on the
    // shared GPU 0 is known by its pod UID, learned on GPU 1.
    assert_eq!(owner(&m, "1", "2000"), "ml/solo/main");
    assert_eq!(owner(&m, "0", "1000"), "ml/solo/main");
    assert_eq!(owner(&m, "3", "4000"), "ml/mig-trainer/trainer");
    assert_eq!(owner(&m, "3", "4001"), "ml/mig-small/worker");
    // The notebook shares GPU 0 and holds nothing alone: which of the two
    // pods it is cannot be told, so only its pod UID is given.
    assert_eq!(owner(&m, "0", "1002"), "//");
    let notebook = m.find("gpuwatch_process_info", &[("gpu", "0"), ("pid", "1002")]);
    assert_eq!(notebook[0].labels["pod_uid"], NOTEBOOK_UID);
    // The same for MPS clients of one GPU, each in its own pod.
    assert_eq!(owner(&m, "2", "3001"), "//");
    let client = m.find("gpuwatch_process_info", &[("gpu", "2"), ("pid", "3001")]);
    assert_eq!(client[0].labels["pod_uid"], CLIENT_A_UID);
    // A host process (the MPS server, an inference server on the host) is
    // nobody's pod even on an allocated GPU.
    assert_eq!(owner(&m, "2", "3000"), "//");
    assert_eq!(owner(&m, "0", "1003"), "//");

    assert_eq!(m.value("gpuwatch_kubelet_up", &[]), Some(1.0));
    assert_eq!(m.value("gpuwatch_kubelet_errors_total", &[]), Some(0.0));
    assert!(kubelet.calls() >= 1);
    assert!(
        agent.log().contains("The kubelet answers"),
        "log:\n{}",
        agent.log()
    );

    // The snapshot API carries the same facts.
    let (status, body) = agent.get("/api/v1/snapshot");
    assert_eq!(status, 200);
    let snapshot: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let gpu1 = &snapshot["gpus"][1];
    assert_eq!(gpu1["pods"][0]["owner"]["pod"], "solo");
    assert_eq!(gpu1["pods"][0]["resource"], "nvidia.com/gpu");
    let solo = gpu1["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .find(|p| p["pid"] == 2000)
        .expect("pid 2000");
    assert_eq!(solo["pod"]["namespace"], "ml");
    assert_eq!(solo["pod"]["container"], "main");

    // The kubelet is asked before the first sample, so even the processes
    // running when the agent started are recorded with their pod.
    let deadline = std::time::Instant::now() + LONG;
    let detail = loop {
        let (status, body) = agent.get("/api/v1/events?from=-1h&kind=process_start");
        assert_eq!(status, 200, "{body}");
        let events: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let found = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .find(|e| e["code"] == 2000)
            .map(|e| e["detail"].as_str().unwrap_or("").to_string());
        if let Some(detail) = found {
            break detail;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no process_start for 2000: {body}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(
        detail,
        "solo in pod ml/solo container main (running when gpuwatch started)"
    );

    // `gpuwatch status` asks the kubelet once and shows the names.
    let (code, out, err) = run_cli(
        &["status", "--simulate", &scenario(), "--config", &config],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("allocated to pod ml/solo container main  nvidia.com/gpu"),
        "{out}"
    );
    assert!(
        out.contains("allocated (gi 3) to pod ml/mig-small container worker"),
        "{out}"
    );
    let solo_line = out
        .lines()
        .find(|l| l.contains("pid    2000"))
        .unwrap_or_else(|| panic!("no pid 2000 in:\n{out}"));
    assert!(
        solo_line.contains("pod ml/solo container main"),
        "{solo_line}"
    );
    let notebook_line = out
        .lines()
        .find(|l| l.contains("pid    1002"))
        .unwrap_or_else(|| panic!("no pid 1002 in:\n{out}"));
    assert!(
        notebook_line.contains(&format!("pod {NOTEBOOK_UID}")),
        "{notebook_line}"
    );
    assert_eq!(agent.terminate().code(), Some(0));
}

#[test]
fn pods_leaving_and_a_failing_or_restarting_kubelet_are_followed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("kubelet.sock");
    let mut kubelet = FakeKubelet::start(&socket, pods(node(true)));
    let config = write_config(dir.path(), &socket);
    let agent = Agent::start(&scenario(), &["--config", &config], &[]);
    agent.wait_for("mig-small named", LONG, |m| {
        owner(m, "3", "4001") == "ml/mig-small/worker"
    });

    // The pod leaves: its allocation and its process's name go.
    kubelet.set(pods(node(false)));
    let m = agent.wait_for("mig-small gone", LONG, |m| owner(m, "3", "4001") == "//");
    assert_eq!(
        allocations(&m, "3"),
        vec!["ml/mig-trainer/trainer nvidia.com/mig-3g.40gb 1"]
    );

    // The kubelet refuses (a permission problem): down, counted, and the
    // last answer is kept.
    kubelet.set(Answer::Fail(
        tonic::Code::PermissionDenied,
        "not allowed".into(),
    ));
    let m = agent.wait_for("kubelet down", LONG, |m| {
        m.value("gpuwatch_kubelet_up", &[]) == Some(0.0)
    });
    assert!(m.value("gpuwatch_kubelet_errors_total", &[]).unwrap_or(0.0) >= 1.0);
    assert_eq!(owner(&m, "1", "2000"), "ml/solo/main", "last answer kept");
    let log = agent.log();
    assert!(
        log.contains("Cannot ask the kubelet") && log.contains("not allowed"),
        "log:\n{log}"
    );

    // It exits (socket gone), then comes back with the pod again.
    kubelet.stop();
    std::thread::sleep(Duration::from_millis(600));
    let m = agent.metrics();
    assert_eq!(m.value("gpuwatch_kubelet_up", &[]), Some(0.0));
    kubelet.set(pods(node(true)));
    kubelet.restart();
    let m = agent.wait_for("kubelet back", LONG, |m| {
        m.value("gpuwatch_kubelet_up", &[]) == Some(1.0)
            && owner(m, "3", "4001") == "ml/mig-small/worker"
    });
    assert_eq!(allocations(&m, "3").len(), 2);
    // One warning for the whole outage, not one per attempt.
    assert_eq!(
        agent.log().matches("Cannot ask the kubelet").count(),
        1,
        "log:\n{}",
        agent.log()
    );
    assert_eq!(agent.terminate().code(), Some(0));
}

#[test]
fn a_named_socket_that_is_missing_is_reported_and_the_default_one_is_not() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Named in the configuration but absent: a warning that says what to do.
    let missing = dir.path().join("no-such.sock");
    let config = write_config(dir.path(), &missing);
    let agent = Agent::start(&scenario(), &["--config", &config], &[]);
    let m = agent.wait_for("kubelet reported down", LONG, |m| {
        m.value("gpuwatch_kubelet_up", &[]) == Some(0.0)
    });
    assert!(!m.has("gpuwatch_gpu_pod_info"));
    let log = agent.log();
    assert!(
        log.contains("cannot connect to the kubelet's pod-resources socket")
            && log.contains("/var/lib/kubelet/pod-resources"),
        "log:\n{log}"
    );
    assert_eq!(agent.terminate().code(), Some(0));

    // Not configured and no socket at the default path (this machine is no
    // Kubernetes node): no kubelet metrics, no warning, one line of info.
    let agent = Agent::start(&scenario(), &[], &[]);
    let m = agent.wait_for("a sample", LONG, |m| m.has("gpuwatch_gpu_processes"));
    assert!(!m.has("gpuwatch_kubelet_up"), "{}", m.text);
    let log = agent.log();
    assert!(
        log.contains("No kubelet pod-resources socket"),
        "log:\n{log}"
    );
    assert!(!log.contains("Cannot ask the kubelet"), "log:\n{log}");
    assert_eq!(agent.terminate().code(), Some(0));
}

#[test]
fn a_lost_gpu_of_a_pod_comes_back_with_its_process_still_running() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("kubelet.sock");
    let _kubelet = FakeKubelet::start(
        &socket,
        pods(vec![(
            "ml",
            "solo",
            vec![("main", "nvidia.com/gpu", vec![GPU1.into()])],
        )]),
    );
    let config = write_config(dir.path(), &socket);
    // Processes are read every 3 s: once during the loss (skipped), then
    // after it; fast ticks in between show the list kept from before.
    let config_text = std::fs::read_to_string(&config)
        .expect("config")
        .replace("process_interval = \"200ms\"", "process_interval = \"3s\"");
    std::fs::write(&config, config_text).expect("config");
    let scenario = fixture("scenarios/lost-pod-gpu.toml");
    let agent = Agent::start(
        scenario.to_str().expect("utf-8 path"),
        &["--config", &config],
        &[],
    );
    agent.wait_for("the GPU lost", LONG, |m| {
        m.value("gpuwatch_gpu_up", &[("gpu", "0")]) == Some(0.0)
    });
    agent.wait_for("the GPU back, its process named", LONG, |m| {
        m.value("gpuwatch_gpu_up", &[("gpu", "0")]) == Some(1.0)
            && owner(m, "0", "2000") == "ml/solo/main"
    });
    // Past the next process tier, and a history commit.
    std::thread::sleep(Duration::from_secs(4));
    let (status, body) = agent.get("/api/v1/events?from=-1h");
    assert_eq!(status, 200, "{body}");
    let events: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["code"] == 2000)
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert_eq!(kinds, vec!["process_start"], "{body}");
    assert_eq!(agent.terminate().code(), Some(0));
}
