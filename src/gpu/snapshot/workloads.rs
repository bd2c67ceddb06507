//! Workloads as the snapshot carries them: who used each GPU (a Slurm job,
//! a Kubernetes pod, a container, a plain process) and what they used.
//! Computed by [`crate::workload`]; every reader takes them from here.

use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;

pub use super::device_usages::DeviceUsages;

/// What kind of thing a workload is; the most specific one known wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    /// A Slurm job (id: the job id).
    SlurmJob,
    /// A Kubernetes pod (id: `namespace/name`).
    Pod,
    /// A container outside Kubernetes (id: the container id).
    Container,
    /// A plain process (id: the pid).
    Process,
}

impl WorkloadKind {
    /// Every kind, for `--kind` and the API's `kind=`.
    pub const ALL: [WorkloadKind; 4] = [
        WorkloadKind::SlurmJob,
        WorkloadKind::Pod,
        WorkloadKind::Container,
        WorkloadKind::Process,
    ];

    /// The name used in labels, the CLI and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::SlurmJob => "slurm_job",
            WorkloadKind::Pod => "pod",
            WorkloadKind::Container => "container",
            WorkloadKind::Process => "process",
        }
    }

    /// The kind a name names (`slurm_job`, `pod`, `container`, `process`).
    pub fn parse(name: &str) -> Option<WorkloadKind> {
        WorkloadKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// One workload: its kind and id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct WorkloadKey {
    /// The kind.
    pub kind: WorkloadKind,
    /// The id within the kind.
    pub id: String,
}

/// What is known of a workload besides its key: shown, never part of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WorkloadAttributes {
    /// The user (Slurm's job user, else the process's user).
    pub user: Option<String>,
    /// Slurm: the account.
    pub account: Option<String>,
    /// Slurm: the partition.
    pub partition: Option<String>,
    /// Kubernetes: the namespace.
    pub namespace: Option<String>,
    /// Kubernetes: the pod's name.
    pub pod: Option<String>,
    /// A plain process's or a container's first process's name.
    pub command: Option<String>,
    /// Kubernetes: the DRA claims through which the pod holds its GPUs
    /// (sorted; empty without DRA).
    pub dra_claims: Vec<super::DraClaim>,
}

impl WorkloadAttributes {
    /// The DRA claims of both, sorted and without duplicates, at most
    /// [`MAX_DRA_CLAIMS`] (a pod holds few claims; the bound keeps a
    /// workload's attributes small whatever the kubelet says).
    pub fn merge_dra_claims(&mut self, other: Vec<super::DraClaim>) {
        self.dra_claims.extend(other);
        self.dra_claims.sort();
        self.dra_claims.dedup();
        self.dra_claims.truncate(MAX_DRA_CLAIMS);
    }

    /// `namespace/name` of each DRA claim (devices of one claim once).
    pub fn dra_claim_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .dra_claims
            .iter()
            .map(|c| format!("{}/{}", c.namespace, c.name))
            .collect();
        names.dedup();
        names
    }
}

/// The most DRA claim devices kept for one workload.
pub const MAX_DRA_CLAIMS: usize = 16;

/// A workload's use of one GPU (or MIG instance), summed since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Usage {
    /// Seconds it had a context on the GPU.
    pub gpu_seconds: f64,
    /// Seconds × SM activity × its share of SM time.
    pub sm_active_seconds: f64,
    /// Its share of the GPU's energy, joules.
    pub energy_joules: f64,
    /// The most memory its processes held at once, bytes.
    pub peak_memory_bytes: u64,
    /// Xid errors counted on the GPU while it ran.
    pub xid_errors: u64,
    /// Seconds the GPU throttled while it ran.
    pub throttle_seconds: f64,
}

impl Usage {
    /// SM-active seconds per GPU-second held, 0..1; `None` before any
    /// second was held.
    pub fn efficiency(&self) -> Option<f64> {
        (self.gpu_seconds > 0.0)
            .then(|| (self.sm_active_seconds / self.gpu_seconds).clamp(0.0, 1.0))
    }

    /// Adds `other` (peak memory: the larger).
    pub fn add(&mut self, other: &Usage) {
        self.gpu_seconds += other.gpu_seconds;
        self.sm_active_seconds += other.sm_active_seconds;
        self.energy_joules += other.energy_joules;
        self.peak_memory_bytes = self.peak_memory_bytes.max(other.peak_memory_bytes);
        self.xid_errors += other.xid_errors;
        self.throttle_seconds += other.throttle_seconds;
    }
}

/// A GPU, or a MIG instance of it, that a workload used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Device {
    /// NVML index.
    pub gpu: u32,
    /// The MIG GPU instance, where MIG is on.
    pub gpu_instance_id: Option<u32>,
}

/// Who a workload is: kind, id, what is known of it, since when. Changes
/// rarely (when its processes do), so snapshots share it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadIdentity {
    /// Kind and id.
    pub key: WorkloadKey,
    /// User, account, namespace, ... as last seen.
    pub attributes: WorkloadAttributes,
    /// First seen on a GPU.
    #[serde(serialize_with = "super::unix_seconds")]
    pub started: SystemTime,
}

/// One workload: who, since when, and what it used of each device. Reads
/// through to its [`WorkloadIdentity`] (`workload.key`,
/// `workload.attributes`, `workload.started`), which is shared between
/// snapshots and copied on write.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    /// Kind, id, attributes, start.
    #[serde(flatten)]
    pub identity: Arc<WorkloadIdentity>,
    /// Last seen on a GPU (its end, once it ended).
    #[serde(serialize_with = "super::unix_seconds")]
    pub last_seen: SystemTime,
    /// Use per device.
    pub devices: DeviceUsages,
}

impl std::ops::Deref for Workload {
    type Target = WorkloadIdentity;

    fn deref(&self) -> &WorkloadIdentity {
        &self.identity
    }
}

impl std::ops::DerefMut for Workload {
    /// Its own identity, copied first where a snapshot shares it.
    fn deref_mut(&mut self) -> &mut WorkloadIdentity {
        Arc::make_mut(&mut self.identity)
    }
}

impl Workload {
    /// A workload from its parts.
    pub fn new(
        key: WorkloadKey,
        attributes: WorkloadAttributes,
        started: SystemTime,
        last_seen: SystemTime,
        devices: impl Into<DeviceUsages>,
    ) -> Workload {
        Workload {
            identity: Arc::new(WorkloadIdentity {
                key,
                attributes,
                started,
            }),
            last_seen,
            devices: devices.into(),
        }
    }

    /// Use summed over its devices (the peak memory is the largest of one
    /// device's).
    pub fn total(&self) -> Usage {
        let mut total = Usage::default();
        for usage in self.devices.values() {
            total.add(usage);
        }
        total
    }
}

/// The workloads at one snapshot.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkloadTable {
    /// Running now.
    pub live: Vec<Workload>,
    /// Ended recently (kept a few minutes, so that their last figures are
    /// scraped and recorded), newest last.
    pub ended: Vec<Workload>,
    /// Workloads never followed because the live set was full.
    pub left_out: u64,
}

impl WorkloadTable {
    /// What each running workload holds of GPU `index` (the whole GPU or a
    /// MIG instance of it), with its use so far: one entry per device.
    pub fn on_gpu(&self, index: u32) -> impl Iterator<Item = (&Workload, &Device, &Usage)> {
        self.live.iter().flat_map(move |w| {
            w.devices
                .iter()
                .filter(move |(d, _)| d.gpu == index)
                .map(move |(d, usage)| (w, d, usage))
        })
    }
}
