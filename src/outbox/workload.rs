//! Who an alert is about, for notifications: the workload of a workload
//! alert (`GpuWorkloadIdle`), and the workloads on the GPU of a per-GPU
//! alert, from the snapshot's workload table at the transition. It travels
//! in each alert's `gpuwatch` member ([`super::Details`]) as
//! `workload` / `workloads`, so a webhook receiver gets the identity as
//! fields, and email shows it as lines.

use serde::{Deserialize, Serialize};

use crate::gpu::{Snapshot, Workload, WorkloadTable};
use crate::rules::workload::NAMED_ON_GPU;
use crate::rules::Target;

/// One workload's identity and use, as a notification carries it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadDetails {
    /// `slurm_job`, `pod`, `container` or `process`.
    pub kind: String,
    /// The id within the kind (job id, `namespace/pod`, container id, pid).
    pub id: String,
    /// The user, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Slurm: the account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// Slurm: the partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// Kubernetes: the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Kubernetes: the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// A plain process's or a container's command name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The GPU indexes it used.
    #[serde(default)]
    pub gpus: Vec<u32>,
    /// First seen on a GPU, Unix seconds.
    #[serde(default)]
    pub started: f64,
    /// Whether it had ended at the transition.
    #[serde(default)]
    pub ended: bool,
    /// GPU-seconds held so far.
    #[serde(default)]
    pub gpu_seconds: f64,
    /// SM-active seconds so far.
    #[serde(default)]
    pub sm_active_seconds: f64,
}

impl WorkloadDetails {
    /// The details of `workload` (`ended`: it is in the table's ended list).
    pub fn of(workload: &Workload, ended: bool) -> WorkloadDetails {
        let a = &workload.attributes;
        let total = workload.total();
        let mut gpus: Vec<u32> = workload.devices.keys().map(|d| d.gpu).collect();
        gpus.dedup();
        WorkloadDetails {
            kind: workload.key.kind.as_str().to_string(),
            id: workload.key.id.clone(),
            user: a.user.clone(),
            account: a.account.clone(),
            partition: a.partition.clone(),
            namespace: a.namespace.clone(),
            pod: a.pod.clone(),
            command: a.command.clone(),
            gpus,
            started: crate::gpu::unix_ms(workload.started) as f64 / 1000.0,
            ended,
            gpu_seconds: total.gpu_seconds,
            sm_active_seconds: total.sm_active_seconds,
        }
    }
}

/// The workload a workload alert's target names, live or recently ended.
pub fn of_target(snapshot: &Snapshot, target: &Target) -> Option<WorkloadDetails> {
    let Target::Workload { kind, id } = target else {
        return None;
    };
    let table = &snapshot.workloads;
    let named = |w: &&Workload| w.key.kind.as_str() == kind && w.key.id == *id;
    table
        .live
        .iter()
        .find(named)
        .map(|w| WorkloadDetails::of(w, false))
        .or_else(|| {
            table
                .ended
                .iter()
                .rev()
                .find(named)
                .map(|w| WorkloadDetails::of(w, true))
        })
}

/// The workloads on GPU `index` (running first, then recently ended, newest
/// first), at most [`NAMED_ON_GPU`] as the `workloads` annotation names.
pub fn on_gpu(table: &WorkloadTable, index: u32) -> Vec<WorkloadDetails> {
    let uses = |w: &&Workload| w.devices.keys().any(|d| d.gpu == index);
    let live = table.live.iter().filter(uses).map(|w| (w, false));
    let ended = table.ended.iter().rev().filter(uses).map(|w| (w, true));
    live.chain(ended)
        .take(NAMED_ON_GPU)
        .map(|(w, ended)| WorkloadDetails::of(w, ended))
        .collect()
}
