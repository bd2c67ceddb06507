//! Capacity with no `[[profiles]]`: the running workloads are the profiles.
//!
//! Each live workload of the snapshot's workload table becomes an implicit
//! profile: one instance needs the most memory it held on one GPU (its
//! measured peak) and the largest share of a GPU's SMs it kept busy
//! (SM-active seconds per GPU-second held on one device, i.e. its
//! efficiency there). [`super::gpu_fit`] then says how many more of it fit
//! on each GPU, as for a configured profile. And each GPU names whose
//! workloads fill it.
//!
//! Not exported as `gpuwatch_*_capacity_fits`: the names would be job ids,
//! unbounded; this answers a person at the command line.

use crate::gpu::{Snapshot, Workload, WorkloadKey};

use super::{gpu_fit, GpuFit, Profile};

/// One running workload as a profile, and how many more of it fit.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningFit {
    /// The workload.
    pub key: WorkloadKey,
    /// Its user (or namespace for a pod), for the table.
    pub owner: Option<String>,
    /// The implicit profile (`name` is `kind:id`); `None` when its memory
    /// is unknown (the driver gives no per-process memory), so nothing can
    /// be said of it.
    pub profile: Option<Profile>,
    /// Per GPU, where its profile applies.
    pub gpus: Vec<GpuFit>,
    /// On the node.
    pub node: u64,
}

/// One workload's hold on one GPU: who, and how much memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    /// The workload.
    pub key: WorkloadKey,
    /// Its user (or namespace for a pod).
    pub owner: Option<String>,
    /// The MIG instance it runs in, where MIG is on.
    pub gpu_instance_id: Option<u32>,
    /// The most memory it held there, bytes.
    pub peak_memory_bytes: u64,
}

/// The profile one instance of `workload` needs: its largest per-device
/// peak memory and SM share; `None` when no memory was measured.
pub fn implicit_profile(workload: &Workload) -> Option<Profile> {
    let memory = workload
        .devices
        .values()
        .map(|u| u.peak_memory_bytes)
        .max()
        .filter(|m| *m > 0)?;
    let sm_share = workload
        .devices
        .values()
        .filter_map(|u| u.efficiency())
        .fold(None, |most: Option<f64>, e| {
            Some(most.map_or(e, |m| m.max(e)))
        })
        .filter(|s| *s > 0.0);
    Some(Profile {
        name: format!("{}:{}", workload.key.kind.as_str(), workload.key.id),
        memory_bytes: memory,
        sm_share,
        model: None,
    })
}

fn owner(workload: &Workload) -> Option<String> {
    let a = &workload.attributes;
    match workload.key.kind {
        crate::gpu::WorkloadKind::Pod => a.namespace.clone().or_else(|| a.user.clone()),
        _ => a.user.clone(),
    }
}

/// How many more of each running workload fit on each GPU and on the node,
/// in the workload table's order, with `margin` bytes kept free per GPU.
pub fn running_fits(snapshot: &Snapshot, margin: u64) -> Vec<RunningFit> {
    snapshot
        .workloads
        .live
        .iter()
        .map(|workload| {
            let profile = implicit_profile(workload);
            let gpus: Vec<GpuFit> = profile
                .iter()
                .flat_map(|p| snapshot.gpus.iter().filter_map(|g| gpu_fit(g, p, margin)))
                .collect();
            RunningFit {
                key: workload.key.clone(),
                owner: owner(workload),
                node: gpus.iter().map(|f| f.fits).sum(),
                profile,
                gpus,
            }
        })
        .collect()
}

/// The running workloads on GPU `index` (whole or a MIG instance of it),
/// most memory first.
pub fn holders(snapshot: &Snapshot, index: u32) -> Vec<Holder> {
    let mut found: Vec<Holder> = snapshot
        .workloads
        .on_gpu(index)
        .map(|(w, d, usage)| Holder {
            key: w.key.clone(),
            owner: owner(w),
            gpu_instance_id: d.gpu_instance_id,
            peak_memory_bytes: usage.peak_memory_bytes,
        })
        .collect();
    found.sort_by(|a, b| {
        b.peak_memory_bytes
            .cmp(&a.peak_memory_bytes)
            .then_with(|| a.key.cmp(&b.key))
    });
    found
}
