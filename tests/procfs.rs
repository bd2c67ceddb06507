//! Container attribution on fixture /proc trees (`tests/fixtures/proc-*`),
//! one per runtime and cgroup layout, read through the same resolver the
//! sampler uses; and command lines, off by default and masked when on, end
//! to end through `/metrics` and the JSON API.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::Agent;
use gpuwatch::gpu::ContainerRuntime;
use gpuwatch::sampler::procnames::ProcessNames;

const DOCKER_ID: &str = "4f1c2b7a9e8d4c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b";
const POD_ID: &str = "9a8b7c6d5e4f30211203f4e5d6c7b8a99a8b7c6d5e4f30211203f4e5d6c7b8a9";
const POD_UID: &str = "1c6f1a2e-7b3d-4e5f-9a8b-0c1d2e3f4a5b";

struct Expected {
    tree: &'static str,
    pid: u32,
    name: &'static str,
    user: &'static str,
    command: &'static str,
    id: &'static str,
    runtime: Option<ContainerRuntime>,
    pod_uid: Option<&'static str>,
}

fn tree(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .join("proc")
}

#[test]
fn every_runtime_and_cgroup_layout_is_attributed() {
    let train = "python3 train.py --model resnet50";
    let serve = "tritonserver --model-repository=/models";
    let cases = [
        Expected {
            tree: "proc-docker",
            pid: 4242,
            name: "python3",
            user: "alice",
            command: train,
            id: DOCKER_ID,
            runtime: Some(ContainerRuntime::Docker),
            pod_uid: None,
        },
        Expected {
            tree: "proc-docker-v1",
            pid: 4242,
            name: "python3",
            user: "alice",
            command: train,
            id: DOCKER_ID,
            runtime: Some(ContainerRuntime::Docker),
            pod_uid: None,
        },
        Expected {
            tree: "proc-podman",
            pid: 4242,
            name: "python3",
            user: "bob",
            command: train,
            id: DOCKER_ID,
            runtime: Some(ContainerRuntime::Podman),
            pod_uid: None,
        },
        Expected {
            tree: "proc-containerd",
            pid: 4343,
            name: "tritonserver",
            user: "root",
            command: serve,
            id: POD_ID,
            runtime: Some(ContainerRuntime::Containerd),
            pod_uid: Some(POD_UID),
        },
        Expected {
            tree: "proc-crio",
            pid: 4343,
            name: "tritonserver",
            user: "root",
            command: serve,
            id: POD_ID,
            runtime: Some(ContainerRuntime::CriO),
            pod_uid: Some(POD_UID),
        },
        // cgroup v1 with the cgroupfs driver: the path does not name the runtime.
        Expected {
            tree: "proc-k8s-v1",
            pid: 4343,
            name: "tritonserver",
            user: "root",
            command: serve,
            id: POD_ID,
            runtime: None,
            pod_uid: Some(POD_UID),
        },
    ];
    for case in cases {
        let mut names = ProcessNames::new(Some(tree(case.tree))).with_command_lines(true);
        let (name, host) = names.lookup(case.pid, |_| None);
        let host = host.unwrap_or_else(|| panic!("{}: no host facts", case.tree));
        assert_eq!(name.as_deref(), Some(case.name), "{}", case.tree);
        assert_eq!(host.user.as_deref(), Some(case.user), "{}", case.tree);
        assert_eq!(host.command.as_deref(), Some(case.command), "{}", case.tree);
        let container = host
            .container
            .clone()
            .unwrap_or_else(|| panic!("{}: no container", case.tree));
        assert_eq!(container.id, case.id, "{}", case.tree);
        assert_eq!(container.runtime, case.runtime, "{}", case.tree);
        assert_eq!(container.pod_uid.as_deref(), case.pod_uid, "{}", case.tree);
    }
}

#[test]
fn a_host_process_with_an_unknown_uid_shows_the_number() {
    let mut names = ProcessNames::new(Some(tree("proc-golden"))).with_command_lines(true);
    let (name, host) = names.lookup(5151, |_| None);
    let host = host.expect("host facts");
    assert_eq!(name.as_deref(), Some("blender"));
    assert_eq!(host.user.as_deref(), Some("4242"));
    assert_eq!(host.container, None);
    assert_eq!(host.command.as_deref(), Some("blender -b scene.blend"));
}

/// A /proc tree where pid 4242 (the golden scenario's python3) was started
/// with secrets on its command line; every secret holds "hunter2".
fn tree_with_secrets(root: &Path) -> PathBuf {
    let proc = root.join("proc");
    let dir = proc.join("4242");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("comm"), "python3\n").expect("comm");
    std::fs::write(dir.join("status"), "Name:\tpython3\nUid:\t0\t0\t0\t0\n").expect("status");
    std::fs::write(dir.join("cgroup"), "0::/user.slice\n").expect("cgroup");
    let args = [
        "python3",
        "train.py",
        "--password=hunter2pw",
        "--db",
        "postgres://u:hunter2db@h/x",
        "-H",
        "Authorization: Bearer hunter2tok",
        "--epochs",
        "3",
    ];
    let cmdline: Vec<u8> = args.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::write(dir.join("cmdline"), cmdline).expect("cmdline");
    proc
}

#[test]
fn command_lines_are_off_by_default_and_masked_when_on() {
    let scenario = common::fixture("scenarios/golden-full.toml");
    for on in [None, Some(false), Some(true)] {
        let dir = tempfile::tempdir().expect("temp dir");
        let proc = tree_with_secrets(dir.path());
        let config = dir.path().join("gpuwatch.toml");
        let switch = on.map_or(String::new(), |on| format!("process_command_line = {on}\n"));
        std::fs::write(
            &config,
            format!(
                "[exporter]\ndetail = [\"processes\"]\n[sampler]\nproc_root = {:?}\n{switch}",
                proc.to_str().expect("utf-8 path")
            ),
        )
        .expect("config");
        let agent = Agent::in_process_with_args(
            scenario.to_str().expect("utf-8 path"),
            &[
                "--config",
                config.to_str().expect("utf-8 path"),
                "--no-history",
            ],
            &[("GPUWATCH_SIM_TIME", "10")],
        );
        let metrics = agent.wait_for("process_info of pid 4242", Duration::from_secs(20), |m| {
            !m.find("gpuwatch_process_info", &[("pid", "4242")])
                .is_empty()
        });
        let (status, snapshot) = agent.get("/api/v1/snapshot");
        assert_eq!(status, 200, "{snapshot}");
        assert!(
            !metrics.text.contains("hunter2"),
            "{on:?}: {}",
            metrics.text
        );
        assert!(!snapshot.contains("hunter2"), "{on:?}: {snapshot}");

        let info = metrics.find("gpuwatch_process_info", &[("pid", "4242")]);
        let command = info[0].labels.get("command").map(String::as_str);
        let snapshot: serde_json::Value = serde_json::from_str(&snapshot).expect("JSON");
        let process = snapshot["gpus"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["processes"].as_array().into_iter().flatten())
            .find(|p| p["pid"] == 4242)
            .expect("pid 4242 in the snapshot");
        if on == Some(true) {
            let masked = "python3 train.py --password=*** --db postgres://u:***@h/x -H Authorization: Bearer *** --epochs 3";
            assert_eq!(command, Some(masked));
            assert_eq!(process["host"]["command"], masked);
        } else {
            assert_eq!(command, Some(""), "{on:?}: only the name by default");
            assert_eq!(
                process["host"]["command"],
                serde_json::Value::Null,
                "{on:?}"
            );
            assert_eq!(process["name"], "python3");
        }
        assert_eq!(info[0].labels["process_name"], "python3");
    }
}
