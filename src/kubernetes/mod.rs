//! Which Kubernetes pod and container each GPU, and each process on it,
//! belongs to.
//!
//! The source is the kubelet's pod-resources socket
//! (`/var/lib/kubelet/pod-resources/kubelet.sock`, gRPC
//! `v1.PodResourcesLister/List`): a node-local API that needs no cluster
//! credentials, only the socket mounted into the agent. It names, per pod
//! (namespace, name) and container, the devices allocated to it; for
//! NVIDIA's device plugin those ids are GPU or MIG UUIDs. It does not know
//! pod UIDs or container ids, so processes are matched to pods through the
//! GPU they run on (see [`attribute()`]).
//!
//! Data flow: a [`watcher`] task asks the kubelet on a timer and publishes
//! [`PodAllocations`] through a `watch` channel; the sampler reads the
//! latest on its process tier and puts the result into the snapshot.

pub mod api;
pub mod attribute;
pub mod client;
pub mod dra;
pub mod watcher;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::gpu::{DraClaim, KubeletStatus, PodAllocation, PodContainer};

use dra::DraDevice;

/// How many distinct device names of NVIDIA's DRA driver that are not
/// GPU or MIG names one answer keeps (for the log), so that a flood of
/// odd names cannot grow it.
pub const MAX_UNMAPPED_DRA_NAMES: usize = 8;

pub use attribute::attribute;

/// Where the kubelet serves the pod-resources API on every node.
pub const DEFAULT_POD_RESOURCES_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// How to ask the kubelet (`[kubernetes]` in the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletSettings {
    /// The pod-resources socket.
    pub socket: PathBuf,
    /// Whether the configuration names the socket: then its absence is
    /// worth a warning, while the default path missing just means "not a
    /// Kubernetes node".
    pub explicit: bool,
    /// How often to ask.
    pub refresh_interval: Duration,
    /// Time limit of one call.
    pub timeout: Duration,
}

/// The kubelet's latest answer, by device id, and how asking went.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodAllocations {
    /// Device id (a time-slicing replica suffix `::N` removed) → the
    /// containers holding it (`gpu_instance_id` is set only once matched to
    /// a GPU's MIG instance).
    by_device: HashMap<String, Vec<PodAllocation>>,
    /// Devices allocated through DRA claims of NVIDIA's GPU driver, by the
    /// device their name names (matched to GPUs by minor number).
    dra: Vec<(DraDevice, PodAllocation)>,
    /// Device names of NVIDIA's GPU driver that name no GPU or MIG device
    /// (at most [`MAX_UNMAPPED_DRA_NAMES`], sorted): not mapped, logged.
    pub unmapped_dra_names: Vec<String>,
    /// How many DRA devices of NVIDIA's GPU driver were not mapped for
    /// their name, all counted (the names kept are bounded).
    pub unmapped_dra_devices: u64,
    /// `None` while there is no socket to ask (not a Kubernetes node).
    pub status: Option<KubeletStatus>,
}

impl PodAllocations {
    /// The allocations in a `List` answer. Device ids are kept whatever the
    /// resource: only those equal to a GPU's or MIG instance's UUID ever
    /// match, so other vendors' devices are ignored by construction.
    pub fn from_response(response: &api::ListPodResourcesResponse) -> PodAllocations {
        let mut allocations = PodAllocations::default();
        for pod in &response.pod_resources {
            for container in &pod.containers {
                let owner = Arc::new(PodContainer {
                    namespace: pod.namespace.clone(),
                    pod: pod.name.clone(),
                    container: container.name.clone(),
                });
                for devices in &container.devices {
                    for id in &devices.device_ids {
                        let holders = allocations
                            .by_device
                            .entry(device_uuid(id).to_string())
                            .or_default();
                        let holder = PodAllocation {
                            owner: owner.clone(),
                            resource: devices.resource_name.clone(),
                            gpu_instance_id: None,
                            claim: None,
                        };
                        if !holders.contains(&holder) {
                            holders.push(holder);
                        }
                    }
                }
                for claim in &container.dynamic_resources {
                    allocations.add_claim(&owner, claim);
                }
            }
        }
        allocations.unmapped_dra_names.sort();
        allocations
    }

    /// Adds the devices of NVIDIA's GPU driver in one DRA claim of `owner`.
    fn add_claim(&mut self, owner: &Arc<PodContainer>, claim: &api::DynamicResource) {
        for resource in &claim.claim_resources {
            if resource.driver_name != dra::NVIDIA_GPU_DRIVER {
                continue;
            }
            let Some(device) = dra::parse_device_name(&resource.device_name) else {
                self.unmapped_dra_devices += 1;
                let name = &resource.device_name;
                if self.unmapped_dra_names.len() < MAX_UNMAPPED_DRA_NAMES
                    && !self.unmapped_dra_names.contains(name)
                {
                    self.unmapped_dra_names.push(name.clone());
                }
                continue;
            };
            let holder = PodAllocation {
                owner: owner.clone(),
                resource: resource.driver_name.clone(),
                gpu_instance_id: None,
                claim: Some(Arc::new(DraClaim {
                    namespace: claim.claim_namespace.clone(),
                    name: claim.claim_name.clone(),
                    driver: resource.driver_name.clone(),
                    pool: resource.pool_name.clone(),
                    device: resource.device_name.clone(),
                })),
            };
            let entry = (device, holder);
            if !self.dra.contains(&entry) {
                self.dra.push(entry);
            }
        }
    }

    /// The devices allocated through DRA claims of NVIDIA's GPU driver.
    pub fn dra_holders(&self) -> &[(DraDevice, PodAllocation)] {
        &self.dra
    }

    /// Who holds the device with this UUID (GPU or MIG device).
    pub fn holders(&self, uuid: &str) -> &[PodAllocation] {
        self.by_device.get(uuid).map_or(&[], Vec::as_slice)
    }

    /// Whether the kubelet reported no allocation at all.
    pub fn is_empty(&self) -> bool {
        self.by_device.is_empty() && self.dra.is_empty()
    }
}

/// Asks the kubelet once: `Ok(None)` where its socket is not configured and
/// absent from the default path (not a Kubernetes node).
pub async fn ask_once(
    settings: &KubeletSettings,
) -> Result<Option<PodAllocations>, client::KubeletError> {
    if !settings.explicit && !settings.socket.exists() {
        return Ok(None);
    }
    let response = client::list(&settings.socket, settings.timeout).await?;
    Ok(Some(PodAllocations::from_response(&response)))
}

/// The UUID in a device id: NVIDIA's device plugin names time-slicing
/// replicas `GPU-<uuid>::<n>`.
fn device_uuid(id: &str) -> &str {
    id.split_once("::").map_or(id, |(uuid, _)| uuid)
}

#[cfg(test)]
mod tests {
    use super::api::*;
    use super::*;

    fn container(name: &str, resource: &str, ids: &[&str]) -> ContainerResources {
        ContainerResources {
            name: name.into(),
            devices: vec![ContainerDevices {
                resource_name: resource.into(),
                device_ids: ids.iter().map(|s| s.to_string()).collect(),
            }],
            dynamic_resources: Vec::new(),
        }
    }

    fn claim_resource(driver: &str, device: &str) -> ClaimResource {
        ClaimResource {
            cdi_devices: vec![CdiDevice {
                name: format!("k8s.{driver}/device={device}"),
            }],
            driver_name: driver.into(),
            pool_name: "node-1".into(),
            device_name: device.into(),
        }
    }

    #[test]
    fn dra_claims_of_nvidias_driver_are_kept_by_device_and_odd_names_counted() {
        let claim = DynamicResource {
            claim_name: "train-gpus".into(),
            claim_namespace: "ml".into(),
            claim_resources: vec![
                claim_resource("gpu.nvidia.com", "gpu-1"),
                claim_resource("gpu.nvidia.com", "gpu-0-mig-19-4-1"),
                claim_resource("gpu.nvidia.com", "gpu-x"),
                claim_resource("gpu.nvidia.com", "gpu-x"),
                claim_resource("compute-domain.nvidia.com", "channel-0"),
            ],
        };
        let response = ListPodResourcesResponse {
            pod_resources: vec![PodResources {
                name: "train-0".into(),
                namespace: "ml".into(),
                containers: vec![ContainerResources {
                    dynamic_resources: vec![claim],
                    ..container("trainer", "nvidia.com/gpu", &[])
                }],
            }],
        };
        // Through the wire format, as the kubelet sends it.
        let bytes = prost::Message::encode_to_vec(&response);
        let decoded: ListPodResourcesResponse =
            prost::Message::decode(bytes.as_slice()).expect("decodes");
        let allocations = PodAllocations::from_response(&decoded);
        let devices: Vec<_> = allocations
            .dra_holders()
            .iter()
            .map(|(d, _)| d.clone())
            .collect();
        assert_eq!(
            devices,
            vec![
                DraDevice::Gpu { minor: 1 },
                DraDevice::Mig {
                    minor: 0,
                    profile: "19".into(),
                    start: 4,
                    size: 1
                }
            ]
        );
        let claim = allocations.dra_holders()[0].1.claim.clone().expect("claim");
        assert_eq!(
            (
                claim.namespace.as_str(),
                claim.name.as_str(),
                claim.pool.as_str(),
                claim.device.as_str()
            ),
            ("ml", "train-gpus", "node-1", "gpu-1")
        );
        assert_eq!(allocations.dra_holders()[0].1.owner.container, "trainer");
        assert_eq!(allocations.unmapped_dra_names, vec!["gpu-x".to_string()]);
        assert_eq!(allocations.unmapped_dra_devices, 2);
        assert!(!allocations.is_empty());
    }

    #[test]
    fn replicas_fold_into_their_gpu_and_others_are_kept_apart() {
        let response = ListPodResourcesResponse {
            pod_resources: vec![
                PodResources {
                    name: "train-0".into(),
                    namespace: "ml".into(),
                    containers: vec![container("trainer", "nvidia.com/gpu", &["GPU-a", "GPU-b"])],
                },
                PodResources {
                    name: "infer-1".into(),
                    namespace: "serving".into(),
                    containers: vec![
                        container("model", "nvidia.com/gpu", &["GPU-c::0", "GPU-c::3"]),
                        container("nic", "example.com/sriov", &["0000:3b:00.2"]),
                    ],
                },
            ],
        };
        let allocations = PodAllocations::from_response(&response);
        assert_eq!(allocations.holders("GPU-a")[0].owner.pod, "train-0");
        assert_eq!(allocations.holders("GPU-b")[0].owner.container, "trainer");
        let c = allocations.holders("GPU-c");
        assert_eq!(
            c.len(),
            1,
            "two replicas of one GPU for one container: {c:?}"
        );
        assert_eq!(c[0].owner.namespace, "serving");
        assert_eq!(c[0].resource, "nvidia.com/gpu");
        assert!(allocations.holders("GPU-c::0").is_empty());
        assert_eq!(
            allocations.holders("0000:3b:00.2")[0].resource,
            "example.com/sriov"
        );
        assert!(allocations.holders("GPU-z").is_empty());
    }
}
