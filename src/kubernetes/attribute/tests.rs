use std::sync::Arc;

use crate::gpu::{
    testing, Container, ContainerRuntime, GpuProcess, GpuSnapshot, HostProcess, MigInstance,
};
use crate::kubernetes::api::{
    ContainerDevices, ContainerResources, ListPodResourcesResponse, PodResources,
};
use crate::kubernetes::PodAllocations;

use super::attribute;

/// A pod: (namespace, name, [(container, resource, device ids)]).
type Pod<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str, &'a [&'a str])]);

fn kubelet(pods: &[Pod]) -> PodAllocations {
    let response = ListPodResourcesResponse {
        pod_resources: pods
            .iter()
            .map(|(namespace, name, containers)| PodResources {
                name: name.to_string(),
                namespace: namespace.to_string(),
                containers: containers
                    .iter()
                    .map(|(container, resource, ids)| ContainerResources {
                        name: container.to_string(),
                        devices: vec![ContainerDevices {
                            resource_name: resource.to_string(),
                            device_ids: ids.iter().map(|s| s.to_string()).collect(),
                        }],
                        dynamic_resources: Vec::new(),
                    })
                    .collect(),
            })
            .collect(),
    };
    PodAllocations::from_response(&response)
}

/// A process; `pod_uid` "" for one in a plain docker container, `None` for
/// a host process.
pub(super) fn process(pid: u32, pod_uid: Option<&str>, gpu_instance_id: Option<u32>) -> GpuProcess {
    let container = pod_uid.map(|uid| Container {
        id: format!("{pid:064x}"),
        runtime: Some(ContainerRuntime::Containerd),
        pod_uid: (!uid.is_empty()).then(|| uid.to_string()),
    });
    GpuProcess {
        pid,
        host: Some(Arc::new(HostProcess {
            container,
            ..HostProcess::default()
        })),
        gpu_instance_id,
        ..GpuProcess::default()
    }
}

pub(super) fn gpu(index: u32, processes: Vec<GpuProcess>, mig: &[(u32, &str)]) -> GpuSnapshot {
    GpuSnapshot {
        identity: Arc::default(),
        processes: Arc::new(processes),
        mig_instances: Arc::new(
            mig.iter()
                .map(|(gi, uuid)| MigInstance {
                    gpu_instance_id: *gi,
                    uuid: uuid.to_string(),
                    memory_total_bytes: 10 << 30,
                    memory_used_bytes: 0,
                    profile: None,
                })
                .collect(),
        ),
        ..testing::gpu(index)
    }
}

/// "namespace/pod/container" of the process with `pid`, or "-".
pub(super) fn owner_of(gpus: &[GpuSnapshot], pid: u32) -> String {
    let process = gpus
        .iter()
        .flat_map(|g| g.processes.iter())
        .find(|p| p.pid == pid)
        .unwrap_or_else(|| panic!("no process {pid}"));
    process.pod.as_ref().map_or("-".into(), |p| {
        format!("{}/{}/{}", p.namespace, p.pod, p.container)
    })
}

#[test]
fn a_pod_process_on_an_exclusive_gpu_gets_its_pod_and_container() {
    let allocations = kubelet(&[(
        "ml",
        "train-0",
        &[("trainer", "nvidia.com/gpu", &["GPU-0"])],
    )]);
    let mut gpus = vec![gpu(
        0,
        vec![
            process(10, Some("uid-train"), None),
            process(11, None, None),
            process(12, Some(""), None),
        ],
        &[],
    )];
    attribute(&mut gpus, &allocations);
    assert_eq!(owner_of(&gpus, 10), "ml/train-0/trainer");
    assert_eq!(owner_of(&gpus, 11), "-", "a host process is nobody's pod");
    assert_eq!(
        owner_of(&gpus, 12),
        "-",
        "a docker container outside Kubernetes"
    );
    assert_eq!(gpus[0].pods.len(), 1);
    assert_eq!(gpus[0].pods[0].resource, "nvidia.com/gpu");
    assert_eq!(gpus[0].pods[0].gpu_instance_id, None);
}

#[test]
fn a_shared_gpu_is_resolved_through_the_uid_learned_on_an_exclusive_one() {
    // GPU 1 is time-sliced between two pods; pod b also holds GPU 2 alone.
    let allocations = kubelet(&[
        (
            "serving",
            "a",
            &[("model", "nvidia.com/gpu", &["GPU-1::0"])],
        ),
        (
            "serving",
            "b",
            &[("model", "nvidia.com/gpu", &["GPU-1::1", "GPU-2"])],
        ),
    ]);
    let mut gpus = vec![
        gpu(
            1,
            vec![
                process(20, Some("uid-b"), None),
                process(21, Some("uid-a"), None),
            ],
            &[],
        ),
        gpu(2, vec![process(22, Some("uid-b"), None)], &[]),
    ];
    attribute(&mut gpus, &allocations);
    assert_eq!(owner_of(&gpus, 22), "serving/b/model");
    assert_eq!(owner_of(&gpus, 20), "serving/b/model", "learned from GPU 2");
    assert_eq!(
        owner_of(&gpus, 21),
        "-",
        "pod a holds no GPU alone: which of the two it is cannot be told"
    );
    assert_eq!(gpus[0].pods.len(), 2, "{:?}", gpus[0].pods);
}

#[test]
fn a_uid_seen_on_gpus_of_different_pods_is_not_trusted() {
    // A pod that sees every GPU (NVIDIA_VISIBLE_DEVICES=all) runs on GPUs
    // that the kubelet gave to others.
    let allocations = kubelet(&[
        ("ml", "x", &[("c", "nvidia.com/gpu", &["GPU-0"])]),
        ("ml", "y", &[("c", "nvidia.com/gpu", &["GPU-1"])]),
        ("ml", "z", &[("c", "nvidia.com/gpu", &["GPU-2::0"])]),
        ("ml", "w", &[("c", "nvidia.com/gpu", &["GPU-2::1"])]),
    ]);
    let mut gpus = vec![
        gpu(0, vec![process(30, Some("uid-all"), None)], &[]),
        gpu(1, vec![process(31, Some("uid-all"), None)], &[]),
        gpu(2, vec![process(32, Some("uid-all"), None)], &[]),
    ];
    attribute(&mut gpus, &allocations);
    // On a GPU held by one pod the allocation is the best evidence there is.
    assert_eq!(owner_of(&gpus, 30), "ml/x/c");
    assert_eq!(owner_of(&gpus, 31), "ml/y/c");
    // But the UID is not taken as either pod on a shared GPU.
    assert_eq!(owner_of(&gpus, 32), "-");
}

#[test]
fn mig_devices_belong_to_their_instance() {
    let allocations = kubelet(&[
        (
            "ml",
            "small-a",
            &[("c", "nvidia.com/mig-1g.10gb", &["MIG-aaaa"])],
        ),
        (
            "ml",
            "small-b",
            &[("c", "nvidia.com/mig-1g.10gb", &["MIG-bbbb"])],
        ),
    ]);
    let mut gpus = vec![gpu(
        3,
        vec![
            process(40, Some("uid-b"), Some(2)),
            process(41, Some("uid-a"), Some(1)),
            process(42, Some("uid-q"), Some(7)),
        ],
        &[(1, "MIG-aaaa"), (2, "MIG-bbbb")],
    )];
    attribute(&mut gpus, &allocations);
    assert_eq!(owner_of(&gpus, 40), "ml/small-b/c");
    assert_eq!(owner_of(&gpus, 41), "ml/small-a/c");
    assert_eq!(owner_of(&gpus, 42), "-", "an instance nobody was given");
    let instances: Vec<_> = gpus[0].pods.iter().map(|a| a.gpu_instance_id).collect();
    assert_eq!(instances, vec![Some(1), Some(2)]);
}

#[test]
fn two_containers_of_one_pod_on_one_gpu_name_the_pod_only() {
    let allocations = kubelet(&[(
        "ml",
        "pair",
        &[
            ("left", "nvidia.com/gpu", &["GPU-0::0"]),
            ("right", "nvidia.com/gpu", &["GPU-0::1"]),
        ],
    )]);
    let mut gpus = vec![gpu(0, vec![process(50, Some("uid-pair"), None)], &[])];
    attribute(&mut gpus, &allocations);
    assert_eq!(owner_of(&gpus, 50), "ml/pair/");
}

#[test]
fn a_pod_that_left_is_forgotten() {
    let mut gpus = vec![gpu(0, vec![process(60, Some("uid-gone"), None)], &[])];
    attribute(
        &mut gpus,
        &kubelet(&[("ml", "gone", &[("c", "nvidia.com/gpu", &["GPU-0"])])]),
    );
    assert_eq!(owner_of(&gpus, 60), "ml/gone/c");
    attribute(&mut gpus, &kubelet(&[]));
    assert_eq!(owner_of(&gpus, 60), "-");
    assert!(gpus[0].pods.is_empty());
}

#[test]
fn index_device_ids_name_nvidia_gpus_only() {
    // NVIDIA's device plugin with --device-id-strategy=index: ids are NVML
    // indices; another vendor's "1" is not GPU 1.
    let allocations = kubelet(&[
        ("ml", "by-index", &[("c", "nvidia.com/gpu", &["0::2"])]),
        ("net", "nic", &[("c", "example.com/vf", &["1"])]),
    ]);
    let mut gpus = vec![
        gpu(0, vec![process(70, Some("uid-i"), None)], &[]),
        gpu(1, vec![process(71, Some("uid-n"), None)], &[]),
    ];
    attribute(&mut gpus, &allocations);
    assert_eq!(owner_of(&gpus, 70), "ml/by-index/c");
    assert_eq!(owner_of(&gpus, 71), "-");
    assert!(gpus[1].pods.is_empty());
}
