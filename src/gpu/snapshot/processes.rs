//! Who uses a GPU: processes with a context on it, what /proc and the
//! cgroup tell about them, MIG instances, and the Kubernetes containers the
//! kubelet allocated the GPU to.

use std::sync::Arc;

use serde::Serialize;

/// Whether a process holds a compute or a graphics context (or both).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessKind {
    /// A CUDA / compute context.
    #[default]
    Compute,
    /// A graphics context.
    Graphics,
    /// Both kinds of context.
    ComputeAndGraphics,
}

impl ProcessKind {
    /// The `type` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessKind::Compute => "compute",
            ProcessKind::Graphics => "graphics",
            ProcessKind::ComputeAndGraphics => "compute_graphics",
        }
    }
}

/// The process name of the MPS server (one per GPU set, started by
/// nvidia-cuda-mps-control); its clients run their kernels through it.
pub const MPS_SERVER_NAME: &str = "nvidia-cuda-mps-server";

impl GpuProcess {
    /// Whether this is an MPS server.
    pub fn is_mps_server(&self) -> bool {
        self.name.as_deref() == Some(MPS_SERVER_NAME)
    }
}

/// A process with a context on a GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GpuProcess {
    /// Process id (in the host's PID namespace).
    pub pid: u32,
    /// Short name (from /proc, or NVML where /proc has none).
    pub name: Option<String>,
    /// Context kind.
    pub kind: ProcessKind,
    /// GPU memory the process uses, bytes; absent where the driver cannot tell.
    pub used_memory_bytes: Option<u64>,
    /// What /proc says about the process (command, user, container); absent
    /// where /proc does not show it (another PID namespace, the simulator).
    pub host: Option<Arc<HostProcess>>,
    /// Share of the last process interval in which the process ran a kernel
    /// on the SMs, 0..1 (nvmlDeviceGetProcessUtilization).
    pub sm_utilization_ratio: Option<f64>,
    /// Share of the last process interval in which the process read or
    /// wrote device memory, 0..1.
    pub memory_utilization_ratio: Option<f64>,
    /// MIG GPU instance the process runs in, where MIG is on.
    pub gpu_instance_id: Option<u32>,
    /// MIG compute instance the process runs in, where MIG is on.
    pub compute_instance_id: Option<u32>,
    /// Whether NVML lists the process as a client of an MPS server.
    pub mps_client: bool,
    /// The Kubernetes container the process belongs to, by the kubelet's
    /// device allocations (see [`crate::kubernetes::attribute()`]).
    pub pod: Option<Arc<PodContainer>>,
    /// The Slurm job the HPC job mapping directory names for the process's
    /// GPU (or MIG instance), when it names exactly one and the process
    /// shows none of its own.
    pub mapped_job: Option<String>,
    /// The DRA resource claim through which the process's pod holds its
    /// GPU (or MIG instance), when the pod got it by DRA and through one
    /// claim.
    pub dra_claim: Option<Arc<DraClaim>>,
}

/// A DRA (Dynamic Resource Allocation) resource claim's device, as the
/// kubelet's pod-resources API reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct DraClaim {
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The DRA driver, e.g. `gpu.nvidia.com`.
    pub driver: String,
    /// The driver's resource pool.
    pub pool: String,
    /// The device in the pool, e.g. `gpu-0`.
    pub device: String,
}

/// A job an HPC job mapping directory names for a GPU or MIG instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MappedJob {
    /// The MIG GPU instance, for an instance's file.
    pub gpu_instance_id: Option<u32>,
    /// The job id as written.
    pub job: String,
}

/// A Kubernetes container by name, as the kubelet reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PodContainer {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container's name; empty for a process when several containers
    /// of its pod share the GPU and which one it belongs to is not known.
    pub container: String,
}

/// A device of a GPU that the kubelet allocated to a container.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct PodAllocation {
    /// The container holding it.
    pub owner: Arc<PodContainer>,
    /// The extended resource, e.g. `nvidia.com/gpu` or `nvidia.com/mig-1g.10gb`.
    pub resource: String,
    /// The MIG GPU instance allocated, for a MIG device; `None` for the whole
    /// GPU (or, with time-slicing, a share of it).
    pub gpu_instance_id: Option<u32>,
    /// The DRA claim the device was allocated through; `None` for a device
    /// plugin's allocation.
    pub claim: Option<Arc<DraClaim>>,
}

/// One MIG GPU instance (read through its MIG device handle).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigInstance {
    /// GPU instance id: the `gpu_instance` label, and what processes name.
    pub gpu_instance_id: u32,
    /// The MIG device's UUID (`MIG-...`).
    pub uuid: String,
    /// Profile name as nvidia-smi and dcgm-exporter write it ("1g.10gb"),
    /// from the MIG device's attributes; `None` when NVML cannot tell.
    pub profile: Option<String>,
    /// Memory of the instance, bytes.
    pub memory_total_bytes: u64,
    /// Memory in use, bytes.
    pub memory_used_bytes: u64,
}

/// What /proc tells about a process: for people asking "who is this?".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostProcess {
    /// Command line, arguments joined by spaces, secrets masked, cut at 256
    /// characters; `None` unless `sampler.process_command_line` is on.
    pub command: Option<String>,
    /// User name of the real uid, or the uid as a number when the passwd
    /// file does not know it.
    pub user: Option<String>,
    /// The container the process runs in, from its cgroup.
    pub container: Option<Container>,
    /// The Slurm job the process runs in, from its cgroup or (where the
    /// cgroups do not show it) its environment.
    pub slurm: Option<SlurmJob>,
}

/// A Slurm job, as a process on the node shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlurmJob {
    /// The job id (`SLURM_JOB_ID`, or `job_<J>` in the cgroup path).
    pub job_id: u64,
    /// The step (`batch`, `extern`, `0`, ...), where known.
    pub step: Option<String>,
    /// The job's user, from the environment.
    pub user: Option<String>,
    /// The job's account, from the environment.
    pub account: Option<String>,
    /// The job's partition, from the environment.
    pub partition: Option<String>,
}

/// A container runtime recognised from a cgroup path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContainerRuntime {
    /// Docker (dockerd / moby).
    Docker,
    /// containerd (CRI or plain).
    Containerd,
    /// CRI-O.
    CriO,
    /// Podman (libpod).
    Podman,
}

impl ContainerRuntime {
    /// The `container_runtime` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ContainerRuntime::Docker => "docker",
            ContainerRuntime::Containerd => "containerd",
            ContainerRuntime::CriO => "cri-o",
            ContainerRuntime::Podman => "podman",
        }
    }
}

/// The container a process runs in, as its cgroup path tells.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Container {
    /// Full container id (64 hex digits for the usual runtimes).
    pub id: String,
    /// The runtime, where the path names it; a Kubernetes cgroup without a
    /// runtime prefix (cgroup v1 cgroupfs driver) leaves it absent.
    pub runtime: Option<ContainerRuntime>,
    /// Kubernetes pod UID (dashes, as the API shows it), for pods.
    pub pod_uid: Option<String>,
}
