//! Container attribution on fixture /proc trees (`tests/fixtures/proc-*`),
//! one per runtime and cgroup layout, read through the same resolver the
//! sampler uses.

use std::path::PathBuf;

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
        let mut names = ProcessNames::new(Some(tree(case.tree)));
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
    let mut names = ProcessNames::new(Some(tree("proc-golden")));
    let (name, host) = names.lookup(5151, |_| None);
    let host = host.expect("host facts");
    assert_eq!(name.as_deref(), Some("blender"));
    assert_eq!(host.user.as_deref(), Some("4242"));
    assert_eq!(host.container, None);
    assert_eq!(host.command.as_deref(), Some("blender -b scene.blend"));
}
