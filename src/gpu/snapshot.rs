//! The snapshot: one owned, immutable reading of every GPU on the node.
//!
//! Every consumer (exporter, `status`, and later history and rules) reads
//! these types and nothing else. Each reading is an `Option`: absent means the
//! GPU or driver could not give it, never zero.

pub(crate) use super::unix_time::unix_seconds;
pub use super::unix_time::{now_ms, unix_ms, unix_seconds_f64};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;

/// One complete reading of the node, published by the sampler after each tick.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// When the tick that produced this snapshot started.
    #[serde(serialize_with = "unix_seconds")]
    pub taken_at: SystemTime,
    /// The node's host name, for humans and for alert labels.
    pub hostname: String,
    /// Driver-wide facts (versions).
    pub system: Arc<SystemInfo>,
    /// Every GPU NVML enumerated, lost ones included.
    pub gpus: Vec<GpuSnapshot>,
    /// How the collection itself went.
    pub collection: CollectionStats,
    /// How asking the kubelet which pod holds which GPU goes; `None` where
    /// that is off or there is no kubelet socket.
    pub kubelet: Option<KubeletStatus>,
}

/// How the kubelet's pod-resources socket answers: feeds the self metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KubeletStatus {
    /// Whether the last `List` call succeeded.
    pub up: bool,
    /// Failed calls since the agent started.
    pub errors: u64,
}

/// Driver-wide facts read on the slow tier.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SystemInfo {
    /// Kernel driver version, e.g. "550.54.15".
    pub driver_version: Option<String>,
    /// NVML library version.
    pub nvml_version: Option<String>,
    /// CUDA version the driver supports, e.g. "12.4".
    pub cuda_driver_version: Option<String>,
}

/// How the sampler is doing: feeds the self metrics.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CollectionStats {
    /// Wall time the tick took.
    #[serde(serialize_with = "seconds")]
    pub sample_duration: Duration,
    /// Ticks completed since start.
    pub ticks: u64,
    /// NVML errors since start, by (NVML function, error name). Unsupported
    /// readings are not errors and are not counted here. In JSON a list of
    /// `{function, error, count}` (a JSON object's keys cannot be pairs).
    #[serde(serialize_with = "error_counts")]
    pub nvml_errors: Arc<BTreeMap<(String, String), u64>>,
    /// What the hardware-health readers found: the kernel log, the PCI bus
    /// (default where they do not run).
    pub health: super::node_health::NodeHealth,
}

/// Whether a GPU answered on this tick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum GpuStatus {
    /// The GPU answered.
    Up,
    /// The GPU stopped answering; it stays in the snapshot so that it is
    /// reported, not silently dropped.
    Lost {
        /// The NVML error that says why, e.g. "gpu_lost".
        reason: String,
    },
}

/// Everything known about one GPU at one tick.
#[derive(Debug, Clone, Serialize)]
pub struct GpuSnapshot {
    /// NVML index: the `gpu` label.
    pub index: u32,
    /// NVML UUID: the `uuid` label; empty only if NVML never gave one.
    pub uuid: String,
    /// Up or lost.
    pub status: GpuStatus,
    /// Static facts, refreshed on the slow tier.
    pub identity: Arc<GpuIdentity>,
    /// Fast-tier readings (every interval).
    pub readings: FastReadings,
    /// Slow-tier readings (ECC, PCIe, limits, ...).
    pub health: Arc<SlowReadings>,
    /// Processes using the GPU, refreshed on the process interval.
    pub processes: Arc<Vec<GpuProcess>>,
    /// MIG GPU instances while MIG is on, refreshed on the process interval.
    pub mig_instances: Arc<Vec<MigInstance>>,
    /// Kubernetes containers the kubelet allocated this GPU (or one of its
    /// MIG instances) to, refreshed on the process interval.
    pub pods: Arc<Vec<PodAllocation>>,
    /// Xid errors seen since the agent started, by code.
    pub xid_errors: Arc<Vec<XidCount>>,
    /// Which field groups succeeded on their last read.
    pub groups: BTreeMap<FieldGroup, bool>,
    /// GPM figures (SM activity, pipes, DRAM, PCIe, NVLink), per GPU and MIG instance.
    pub gpm: Arc<crate::gpu::gpm::GpmReadings>,
}

/// Facts about a GPU that rarely change.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct GpuIdentity {
    /// Product name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: Option<String>,
    /// Board serial number.
    pub serial: Option<String>,
    /// PCI bus id, e.g. "00000000:18:00.0".
    pub pci_bus_id: Option<String>,
    /// Combined PCI device and vendor id.
    pub pci_device_id: Option<u32>,
    /// Temperature at which the GPU starts to slow down, °C.
    pub temperature_slowdown_celsius: Option<f64>,
    /// Temperature at which the GPU shuts down, °C.
    pub temperature_shutdown_celsius: Option<f64>,
    /// Maximum GPU temperature before thermal management, °C.
    pub temperature_gpu_max_celsius: Option<f64>,
    /// Maximum memory temperature, °C.
    pub temperature_memory_max_celsius: Option<f64>,
    /// Maximum SM clock, Hz.
    pub max_sm_clock_hertz: Option<f64>,
    /// Maximum memory clock, Hz.
    pub max_memory_clock_hertz: Option<f64>,
    /// Maximum graphics clock, Hz.
    pub max_graphics_clock_hertz: Option<f64>,
    /// Maximum PCIe link generation.
    pub pcie_max_link_gen: Option<u32>,
    /// Maximum PCIe link width (lanes).
    pub pcie_max_link_width: Option<u32>,
}

/// Memory as NVML reports it, in bytes.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct MemoryReading {
    /// Installed frame buffer.
    pub total_bytes: u64,
    /// Allocated.
    pub used_bytes: u64,
    /// Unallocated.
    pub free_bytes: u64,
    /// Set aside by the driver.
    pub reserved_bytes: u64,
}

/// Readings taken on every fast tick.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FastReadings {
    /// Share of time a kernel ran, 0..1.
    pub utilization_gpu_ratio: Option<f64>,
    /// Share of time device memory was read or written, 0..1.
    pub utilization_memory_ratio: Option<f64>,
    /// Frame buffer memory.
    pub memory: Option<MemoryReading>,
    /// GPU die temperature, °C.
    pub temperature_gpu_celsius: Option<f64>,
    /// Memory (HBM) temperature, °C.
    pub temperature_memory_celsius: Option<f64>,
    /// Power draw, W.
    pub power_watts: Option<f64>,
    /// Energy used since the driver loaded, J.
    pub energy_joules: Option<f64>,
    /// SM clock, Hz.
    pub sm_clock_hertz: Option<f64>,
    /// Memory clock, Hz.
    pub memory_clock_hertz: Option<f64>,
    /// Graphics clock, Hz.
    pub graphics_clock_hertz: Option<f64>,
    /// Video (encoder/decoder) clock, Hz.
    pub video_clock_hertz: Option<f64>,
    /// Active clock-event reasons, as NVML's bit mask.
    pub clock_event_reasons: Option<u64>,
    /// Cumulative time spent in each reason that NVML keeps a counter for,
    /// seconds, keyed by reason name.
    pub clock_event_seconds: BTreeMap<&'static str, f64>,
}

/// Readings taken on the slow tier.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SlowReadings {
    /// Enforced power limit, W.
    pub power_limit_watts: Option<f64>,
    /// Default power limit, W.
    pub power_default_limit_watts: Option<f64>,
    /// Performance state: 0 (max) .. 15 (min).
    pub performance_state: Option<u32>,
    /// Fan speed of each fan as a share of its maximum, 0..1.
    pub fan_speed_ratio: Vec<Option<f64>>,
    /// Current PCIe link generation.
    pub pcie_link_gen: Option<u32>,
    /// Current PCIe link width (lanes).
    pub pcie_link_width: Option<u32>,
    /// PCIe replays (link-level retransmissions) since the driver loaded.
    pub pcie_replay_errors: Option<u64>,
    /// Whether ECC is enabled.
    pub ecc_enabled: Option<bool>,
    /// ECC error counters.
    pub ecc: EccCounters,
    /// Pages retired for single-bit errors.
    pub retired_pages_single_bit: Option<u64>,
    /// Pages retired for double-bit errors.
    pub retired_pages_double_bit: Option<u64>,
    /// Whether a page retirement waits for a reboot.
    pub retired_pages_pending: Option<bool>,
    /// Rows remapped for correctable errors.
    pub remapped_rows_correctable: Option<u64>,
    /// Rows remapped for uncorrectable errors.
    pub remapped_rows_uncorrectable: Option<u64>,
    /// Whether a row remap waits for a GPU reset.
    pub remapped_rows_pending: Option<bool>,
    /// Whether a row remap failed.
    pub remapped_rows_failure: Option<bool>,
    /// Video encoder utilization, 0..1.
    pub encoder_utilization_ratio: Option<f64>,
    /// Video decoder utilization, 0..1.
    pub decoder_utilization_ratio: Option<f64>,
    /// Compute mode: "default", "exclusive_thread", "prohibited", "exclusive_process".
    pub compute_mode: Option<&'static str>,
    /// Whether MIG mode is enabled.
    pub mig_enabled: Option<bool>,
    /// NVLink links and the recovery action.
    pub links: super::links::LinkHealth,
    /// NVLink fabric registration; `None` without a fabric.
    pub fabric: Option<super::fabric::FabricReading>,
}

/// ECC error counts.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct EccCounters {
    /// Corrected since the last driver load.
    pub corrected_volatile: Option<u64>,
    /// Uncorrected since the last driver load.
    pub uncorrected_volatile: Option<u64>,
    /// Corrected over the board's life.
    pub corrected_aggregate: Option<u64>,
    /// Uncorrected over the board's life.
    pub uncorrected_aggregate: Option<u64>,
}

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
    /// device allocations (see [`crate::kubernetes::attribute`]).
    pub pod: Option<Arc<PodContainer>>,
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
}

/// One MIG GPU instance (read through its MIG device handle).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigInstance {
    /// GPU instance id: the `gpu_instance` label, and what processes name.
    pub gpu_instance_id: u32,
    /// The MIG device's UUID (`MIG-...`).
    pub uuid: String,
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

/// How often one Xid code was seen on a GPU, and when last.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct XidCount {
    /// The Xid code, e.g. 79 ("GPU has fallen off the bus").
    pub code: u64,
    /// Events seen since the agent started.
    pub count: u64,
    /// When the last one arrived.
    #[serde(serialize_with = "unix_seconds")]
    pub last_seen: SystemTime,
}

/// A group of readings collected together; each can fail alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldGroup {
    /// Name, serial, PCI, thresholds, max clocks.
    Identity,
    /// GPU and memory utilization.
    Utilization,
    /// Frame buffer memory.
    Memory,
    /// Temperatures.
    Thermal,
    /// Power and energy.
    Power,
    /// Clocks and clock-event reasons.
    Clocks,
    /// ECC, retired pages, remapped rows.
    Ecc,
    /// PCIe link.
    Pcie,
    /// Performance state, fans, encoder/decoder, compute and MIG mode, limits.
    Device,
    /// Processes.
    Processes,
    /// GPM samples and metrics.
    Gpm,
}

impl FieldGroup {
    /// The `group` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldGroup::Identity => "identity",
            FieldGroup::Utilization => "utilization",
            FieldGroup::Memory => "memory",
            FieldGroup::Thermal => "thermal",
            FieldGroup::Power => "power",
            FieldGroup::Clocks => "clocks",
            FieldGroup::Ecc => "ecc",
            FieldGroup::Pcie => "pcie",
            FieldGroup::Device => "device",
            FieldGroup::Processes => "processes",
            FieldGroup::Gpm => "gpm",
        }
    }
}

impl GpuIdentity {
    /// This identity updated with every fact `newer` knows; facts `newer`
    /// lacks (a GPU lost halfway through the slow tier) are kept.
    pub fn updated_with(&self, newer: GpuIdentity) -> GpuIdentity {
        GpuIdentity {
            name: newer.name.or_else(|| self.name.clone()),
            serial: newer.serial.or_else(|| self.serial.clone()),
            pci_bus_id: newer.pci_bus_id.or_else(|| self.pci_bus_id.clone()),
            pci_device_id: newer.pci_device_id.or(self.pci_device_id),
            temperature_slowdown_celsius: newer
                .temperature_slowdown_celsius
                .or(self.temperature_slowdown_celsius),
            temperature_shutdown_celsius: newer
                .temperature_shutdown_celsius
                .or(self.temperature_shutdown_celsius),
            temperature_gpu_max_celsius: newer
                .temperature_gpu_max_celsius
                .or(self.temperature_gpu_max_celsius),
            temperature_memory_max_celsius: newer
                .temperature_memory_max_celsius
                .or(self.temperature_memory_max_celsius),
            max_sm_clock_hertz: newer.max_sm_clock_hertz.or(self.max_sm_clock_hertz),
            max_memory_clock_hertz: newer.max_memory_clock_hertz.or(self.max_memory_clock_hertz),
            max_graphics_clock_hertz: newer
                .max_graphics_clock_hertz
                .or(self.max_graphics_clock_hertz),
            pcie_max_link_gen: newer.pcie_max_link_gen.or(self.pcie_max_link_gen),
            pcie_max_link_width: newer.pcie_max_link_width.or(self.pcie_max_link_width),
        }
    }
}

impl GpuSnapshot {
    /// Whether the GPU answered on this tick.
    pub fn is_up(&self) -> bool {
        self.status == GpuStatus::Up
    }
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// One NVML error count in JSON.
#[derive(Serialize)]
struct ErrorCount<'a> {
    function: &'a str,
    error: &'a str,
    count: u64,
}

fn error_counts<S: serde::Serializer>(
    errors: &Arc<BTreeMap<(String, String), u64>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(errors.iter().map(|((function, error), count)| ErrorCount {
        function,
        error,
        count: *count,
    }))
}
