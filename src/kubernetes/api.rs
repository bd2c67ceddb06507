//! The kubelet's pod-resources API (`k8s.io/kubelet/pkg/apis/podresources/v1`),
//! as much of it as gpuwatch reads: which container holds which device.
//!
//! Written out as prost messages rather than generated from the `.proto`:
//! eight small messages do not justify a protoc at build time, and fields
//! not declared here (CPU ids, memory, topology, DRA's deprecated
//! `class_name` and `share_id`) are skipped by the decoder. Field numbers
//! are the upstream ones (`pkg/apis/podresources/v1/api.proto`).

/// The gRPC method that lists every pod's resources.
pub const LIST_PATH: &str = "/v1.PodResourcesLister/List";

/// The gRPC service name (package `v1`, service `PodResourcesLister`).
pub const SERVICE_NAME: &str = "v1.PodResourcesLister";

/// `List`'s request: no fields.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesRequest {}

/// `List`'s answer: every pod on the node that holds resources.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesResponse {
    /// One entry per pod.
    #[prost(message, repeated, tag = "1")]
    pub pod_resources: Vec<PodResources>,
}

/// One pod and its containers.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodResources {
    /// Pod name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Pod namespace.
    #[prost(string, tag = "2")]
    pub namespace: String,
    /// The pod's containers.
    #[prost(message, repeated, tag = "3")]
    pub containers: Vec<ContainerResources>,
}

/// One container and the devices allocated to it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerResources {
    /// Container name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Devices, grouped by resource name.
    #[prost(message, repeated, tag = "2")]
    pub devices: Vec<ContainerDevices>,
    /// Devices allocated through DRA (Dynamic Resource Allocation)
    /// resource claims; Kubernetes 1.27+ behind a feature gate, on by
    /// default since 1.34.
    #[prost(message, repeated, tag = "5")]
    pub dynamic_resources: Vec<DynamicResource>,
}

/// One DRA resource claim a container uses, and the devices allocated to it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DynamicResource {
    /// The ResourceClaim's name.
    #[prost(string, tag = "2")]
    pub claim_name: String,
    /// The ResourceClaim's namespace.
    #[prost(string, tag = "3")]
    pub claim_namespace: String,
    /// The devices allocated to the claim on this node.
    #[prost(message, repeated, tag = "4")]
    pub claim_resources: Vec<ClaimResource>,
}

/// One device allocated to a DRA claim.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ClaimResource {
    /// CDI devices the driver prepared for it.
    #[prost(message, repeated, tag = "1")]
    pub cdi_devices: Vec<CdiDevice>,
    /// The DRA driver, e.g. `gpu.nvidia.com`.
    #[prost(string, tag = "2")]
    pub driver_name: String,
    /// The driver's resource pool (NVIDIA's driver: the node's name).
    #[prost(string, tag = "3")]
    pub pool_name: String,
    /// The device within the pool, e.g. `gpu-0` or `gpu-0-mig-19-0-1`.
    #[prost(string, tag = "4")]
    pub device_name: String,
}

/// A CDI device (Container Device Interface) by its fully qualified name.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CdiDevice {
    /// E.g. `k8s.gpu.nvidia.com/device=gpu-0`.
    #[prost(string, tag = "1")]
    pub name: String,
}

/// The devices of one resource (e.g. `nvidia.com/gpu`) given to a container.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerDevices {
    /// Extended resource name, e.g. `nvidia.com/gpu` or `nvidia.com/mig-1g.10gb`.
    #[prost(string, tag = "1")]
    pub resource_name: String,
    /// Device ids as the device plugin advertised them: for NVIDIA's plugin
    /// the GPU UUID (`GPU-...`), the MIG device UUID (`MIG-...`), or with
    /// time-slicing a replica id `GPU-...::N`.
    #[prost(string, repeated, tag = "2")]
    pub device_ids: Vec<String>,
}
