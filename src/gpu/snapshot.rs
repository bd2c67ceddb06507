//! The snapshot: one owned, immutable reading of every GPU on the node.
//!
//! Every consumer (exporter, `status`, and later history and rules) reads
//! these types and nothing else. Each reading is an `Option`: absent means the
//! GPU or driver could not give it, never zero.
//!
//! This file holds the node and per-GPU frame; the readings of a GPU are in
//! `snapshot/readings.rs`, its processes, MIG instances and pods in
//! `snapshot/processes.rs` (both re-exported here).

pub(crate) use super::unix_time::unix_seconds;
pub use super::unix_time::{now_ms, unix_ms, unix_seconds_f64};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;

mod device_usages;
mod processes;
mod readings;
mod workloads;

pub use processes::*;
pub use readings::*;
pub use workloads::*;

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
    /// Who used the GPUs and how well (see [`crate::workload`]).
    pub workloads: Arc<WorkloadTable>,
    /// How the collection itself went.
    pub collection: CollectionStats,
    /// How asking the kubelet which pod holds which GPU goes; `None` where
    /// that is off or there is no kubelet socket.
    pub kubelet: Option<KubeletStatus>,
}

impl Snapshot {
    /// The PCI addresses of the NVIDIA GPUs on the bus that NVML does not
    /// list (empty where the PCI scan is off).
    pub fn missing_from_driver(&self) -> Vec<String> {
        self.collection.health.missing_from_driver(
            self.gpus
                .iter()
                .filter_map(|g| g.identity.pci_bus_id.as_deref()),
        )
    }
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
    /// The Slurm jobs an HPC job mapping directory names for this GPU
    /// (`gpu_instance_id` set for a MIG instance's file), where one is
    /// configured (`[workloads] hpc_job_mapping_dir`).
    pub hpc_jobs: Arc<Vec<MappedJob>>,
    /// Xid errors seen since the agent started, by code: every code NVIDIA's
    /// catalog knows and the first few unknown ones
    /// (`crate::sampler::xid::MAX_UNKNOWN_XID_CODES`).
    pub xid_errors: Arc<Vec<XidCount>>,
    /// Xid errors of the unknown codes past that bound, counted together
    /// (`xid="other"`), so that a flood of made-up codes cannot grow the
    /// series, the API or memory without bound. `None` until one arrives.
    pub xid_other: Option<XidFolded>,
    /// Which field groups succeeded on their last read.
    pub groups: BTreeMap<FieldGroup, bool>,
    /// GPM figures (SM activity, pipes, DRAM, PCIe, NVLink), per GPU and MIG instance.
    pub gpm: Arc<crate::gpu::gpm::GpmReadings>,
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

/// Xid errors of codes past a GPU's bound on distinct codes, counted
/// together: how many, and when the last arrived.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct XidFolded {
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

impl GpuSnapshot {
    /// A GPU known by its index, UUID and status only, nothing read: what a
    /// GPU NVML gave no handle for shows; others fill in the rest with
    /// struct update syntax (`..GpuSnapshot::bare(...)`).
    pub fn bare(index: u32, uuid: String, status: GpuStatus) -> GpuSnapshot {
        GpuSnapshot {
            index,
            uuid,
            status,
            identity: Arc::default(),
            readings: FastReadings::default(),
            health: Arc::default(),
            processes: Arc::default(),
            mig_instances: Arc::default(),
            pods: Arc::default(),
            hpc_jobs: Arc::default(),
            xid_errors: Arc::default(),
            xid_other: None,
            groups: BTreeMap::new(),
            gpm: Arc::default(),
        }
    }

    /// Whether the GPU answered on this tick.
    pub fn is_up(&self) -> bool {
        self.status == GpuStatus::Up
    }

    /// The id alerts, rule memories and Xid escalations key this GPU by:
    /// its UUID, or `index:N` while NVML gave none.
    pub fn alert_key(&self) -> String {
        if self.uuid.is_empty() {
            format!("index:{}", self.index)
        } else {
            self.uuid.clone()
        }
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
