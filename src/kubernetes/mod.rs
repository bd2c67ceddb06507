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
pub mod watcher;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::gpu::{KubeletStatus, PodAllocation, PodContainer};

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
    /// `None` while there is no socket to ask (not a Kubernetes node).
    pub status: Option<KubeletStatus>,
}

impl PodAllocations {
    /// The allocations in a `List` answer. Device ids are kept whatever the
    /// resource: only those equal to a GPU's or MIG instance's UUID ever
    /// match, so other vendors' devices are ignored by construction.
    pub fn from_response(response: &api::ListPodResourcesResponse) -> PodAllocations {
        let mut by_device: HashMap<String, Vec<PodAllocation>> = HashMap::new();
        for pod in &response.pod_resources {
            for container in &pod.containers {
                let owner = Arc::new(PodContainer {
                    namespace: pod.namespace.clone(),
                    pod: pod.name.clone(),
                    container: container.name.clone(),
                });
                for devices in &container.devices {
                    for id in &devices.device_ids {
                        let holders = by_device.entry(device_uuid(id).to_string()).or_default();
                        let holder = PodAllocation {
                            owner: owner.clone(),
                            resource: devices.resource_name.clone(),
                            gpu_instance_id: None,
                        };
                        if !holders.contains(&holder) {
                            holders.push(holder);
                        }
                    }
                }
            }
        }
        PodAllocations {
            by_device,
            status: None,
        }
    }

    /// Who holds the device with this UUID (GPU or MIG device).
    pub fn holders(&self, uuid: &str) -> &[PodAllocation] {
        self.by_device.get(uuid).map_or(&[], Vec::as_slice)
    }

    /// Whether the kubelet reported no allocation at all.
    pub fn is_empty(&self) -> bool {
        self.by_device.is_empty()
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
        }
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
