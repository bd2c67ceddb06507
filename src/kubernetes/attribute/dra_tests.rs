//! Attribution through DRA claims: NVIDIA's driver's device names matched
//! to GPUs by minor number and to MIG instances by profile.

use std::sync::Arc;

use crate::gpu::{GpuIdentity, GpuSnapshot};
use crate::kubernetes::api::{
    ClaimResource, ContainerResources, DynamicResource, ListPodResourcesResponse, PodResources,
};
use crate::kubernetes::PodAllocations;

use super::attribute;
use super::tests::{gpu, owner_of, process};

/// A kubelet answer: per pod (namespace, name, container, claim name, the
/// claim's device names of `gpu.nvidia.com`).
fn kubelet(pods: &[(&str, &str, &str, &str, &[&str])]) -> PodAllocations {
    let response = ListPodResourcesResponse {
        pod_resources: pods
            .iter()
            .map(|(namespace, pod, container, claim, devices)| PodResources {
                name: pod.to_string(),
                namespace: namespace.to_string(),
                containers: vec![ContainerResources {
                    name: container.to_string(),
                    devices: Vec::new(),
                    dynamic_resources: vec![DynamicResource {
                        claim_name: claim.to_string(),
                        claim_namespace: namespace.to_string(),
                        claim_resources: devices
                            .iter()
                            .map(|device| ClaimResource {
                                cdi_devices: Vec::new(),
                                driver_name: "gpu.nvidia.com".into(),
                                pool_name: "node-a".into(),
                                device_name: device.to_string(),
                            })
                            .collect(),
                    }],
                }],
            })
            .collect(),
    };
    PodAllocations::from_response(&response)
}

fn with_minor(mut gpu: GpuSnapshot, minor: u32) -> GpuSnapshot {
    gpu.identity = Arc::new(GpuIdentity {
        minor_number: Some(minor),
        ..GpuIdentity::default()
    });
    gpu
}

fn with_profiles(mut gpu: GpuSnapshot, profiles: &[&str]) -> GpuSnapshot {
    for (instance, profile) in Arc::make_mut(&mut gpu.mig_instances)
        .iter_mut()
        .zip(profiles)
    {
        instance.profile = Some(profile.to_string());
    }
    gpu
}

fn claim_of(gpus: &[GpuSnapshot], pid: u32) -> String {
    let process = gpus
        .iter()
        .flat_map(|g| g.processes.iter())
        .find(|p| p.pid == pid)
        .unwrap_or_else(|| panic!("no process {pid}"));
    process.dra_claim.as_ref().map_or("-".into(), |c| {
        format!("{}/{} {} {}", c.namespace, c.name, c.pool, c.device)
    })
}

#[test]
fn a_whole_gpu_claim_meets_its_gpu_by_minor_number_not_index() {
    // NVML index 0 is /dev/nvidia3 and index 1 is /dev/nvidia0.
    let allocations = kubelet(&[("ml", "train-0", "trainer", "train-gpu", &["gpu-0"])]);
    let mut gpus = vec![
        with_minor(gpu(0, vec![process(10, Some("uid-a"), None)], &[]), 3),
        with_minor(gpu(1, vec![process(11, Some("uid-t"), None)], &[]), 0),
    ];
    attribute(&mut gpus, &allocations);
    assert_eq!(owner_of(&gpus, 11), "ml/train-0/trainer");
    assert_eq!(claim_of(&gpus, 11), "ml/train-gpu node-a gpu-0");
    assert_eq!(
        owner_of(&gpus, 10),
        "-",
        "GPU index 0 is minor 3: not claimed"
    );
    assert_eq!(claim_of(&gpus, 10), "-");
    assert!(gpus[0].pods.is_empty());
    let held = &gpus[1].pods[0];
    assert_eq!(held.resource, "gpu.nvidia.com");
    assert_eq!(
        held.claim.as_ref().map(|c| c.name.as_str()),
        Some("train-gpu")
    );
}

#[test]
fn a_gpu_without_a_known_minor_number_is_never_claimed() {
    let allocations = kubelet(&[("ml", "train-0", "trainer", "c", &["gpu-0"])]);
    let mut gpus = vec![gpu(0, vec![process(10, Some("uid-t"), None)], &[])];
    attribute(&mut gpus, &allocations);
    assert_eq!(owner_of(&gpus, 10), "-");
    assert!(gpus[0].pods.is_empty());
}

#[test]
fn a_mig_claim_meets_the_one_instance_of_its_profile() {
    let allocations = kubelet(&[
        ("ml", "small", "main", "small-mig", &["gpu-2-mig-19-0-1"]),
        ("ml", "big", "main", "big-mig", &["gpu-2-mig-3g40gb-4-4"]),
        ("ml", "odd", "main", "odd-mig", &["gpu-2-mig-14-2-2"]),
    ]);
    let mig = [(1, "MIG-1"), (2, "MIG-2"), (3, "MIG-3"), (4, "MIG-4")];
    let processes = vec![
        process(10, Some("uid-small"), Some(1)),
        process(11, Some("uid-big"), Some(2)),
        process(12, Some("uid-odd"), Some(3)),
    ];
    let mut gpus = vec![with_profiles(
        with_minor(gpu(0, processes, &mig), 2),
        &["1g.10gb", "3g.40gb", "2g.20gb", "2g.20gb"],
    )];
    attribute(&mut gpus, &allocations);
    assert_eq!(owner_of(&gpus, 10), "ml/small/main");
    assert_eq!(claim_of(&gpus, 10), "ml/small-mig node-a gpu-2-mig-19-0-1");
    assert_eq!(owner_of(&gpus, 11), "ml/big/main");
    // Two 2g.20gb instances: which one the claim holds is not guessed.
    assert_eq!(owner_of(&gpus, 12), "-");
    let instances: Vec<_> = gpus[0].pods.iter().map(|p| p.gpu_instance_id).collect();
    assert_eq!(instances, vec![Some(2), Some(1)]);
}

#[test]
fn a_time_sliced_gpu_claimed_by_two_pods_is_resolved_through_learned_uids() {
    // GPU minor 0 is shared by two pods' claims; pod a also holds minor 1 alone.
    let allocations = kubelet(&[
        ("serving", "a", "model", "a-gpus", &["gpu-0", "gpu-1"]),
        ("serving", "b", "model", "b-gpu", &["gpu-0"]),
    ]);
    let mut gpus = vec![
        with_minor(
            gpu(
                0,
                vec![
                    process(10, Some("uid-a"), None),
                    process(11, Some("uid-b"), None),
                ],
                &[],
            ),
            0,
        ),
        with_minor(gpu(1, vec![process(12, Some("uid-a"), None)], &[]), 1),
    ];
    attribute(&mut gpus, &allocations);
    assert_eq!(owner_of(&gpus, 12), "serving/a/model");
    assert_eq!(owner_of(&gpus, 10), "serving/a/model");
    assert_eq!(claim_of(&gpus, 10), "serving/a-gpus node-a gpu-0");
    assert_eq!(
        owner_of(&gpus, 11),
        "-",
        "pod b's uid is not known anywhere alone"
    );
}
