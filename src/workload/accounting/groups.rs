//! One GPU's processes grouped by workload and device: built again only
//! when the GPU's process list changed (the sampler shares an unchanged
//! list between snapshots, so a pointer comparison tells), so that the
//! fold of a tick between process reads builds no key and hashes no
//! string.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use super::super::identity::of_process;
use crate::gpu::{Device, GpuProcess, GpuSnapshot, WorkloadAttributes, WorkloadKey};

/// Where a GPU's counters stood at its previous snapshot.
#[derive(Debug, Clone, Copy)]
pub(super) struct GpuMark {
    pub at: SystemTime,
    pub energy_joules: Option<f64>,
    pub xid_total: u64,
}

/// SM-active seconds that wait for GPM's next figure: the held seconds ×
/// the workload's share, and the utilization to use if GPM stays silent.
#[derive(Debug)]
pub(super) struct PendingSm {
    pub key: WorkloadKey,
    pub device: Device,
    pub weight: f64,
    pub fallback: f64,
}

/// What the accounting keeps of one GPU between snapshots.
#[derive(Debug, Default)]
pub(super) struct GpuState {
    /// Its counters at its previous snapshot.
    pub mark: Option<GpuMark>,
    /// The process list `groups` were made from (`None` before the first).
    processes: Option<Arc<Vec<GpuProcess>>>,
    /// Its workloads, sorted by (key, device).
    pub groups: Vec<Group>,
    /// With GPM: intervals charged before GPM measured them.
    pub pending: Vec<PendingSm>,
    /// With GPM: ticks in a row without GPM's SM activity.
    pub gpm_gaps: u32,
}

/// One workload's processes on one device, as of the GPU's process list.
#[derive(Debug)]
pub(super) struct Group {
    pub key: WorkloadKey,
    pub device: Device,
    pub attributes: WorkloadAttributes,
    /// Its share of the GPU's SM time (of its processes' per-process SM
    /// utilization; equal shares where the driver reports none).
    pub share: f64,
    /// Sum of its processes' memory, bytes.
    pub memory: u64,
    /// Whether it was on the GPU at the GPU's previous snapshot too: only
    /// then is the interval charged to it.
    pub was_present: bool,
    /// Its account's place among the live ones (`None`: left out), as of
    /// the accounts' last resolution.
    pub account: Option<usize>,
}

impl GpuState {
    /// Groups `gpu`'s processes again when its process list is not the one
    /// the groups were made from; true when it did.
    pub fn regroup_if_changed(&mut self, gpu: &GpuSnapshot) -> bool {
        if self
            .processes
            .as_ref()
            .is_some_and(|p| Arc::ptr_eq(p, &gpu.processes))
        {
            return false;
        }
        let groups = group(gpu, &self.groups);
        self.groups = groups;
        // Held, so that its address cannot be reused by another list.
        self.processes = Some(gpu.processes.clone());
        true
    }
}

/// `gpu`'s processes grouped by workload and device, sorted; `before` are
/// the groups of its previous snapshot.
fn group(gpu: &GpuSnapshot, before: &[Group]) -> Vec<Group> {
    struct Sum {
        attributes: WorkloadAttributes,
        sm: f64,
        memory: u64,
    }
    let mut sums: BTreeMap<(WorkloadKey, Device), Sum> = BTreeMap::new();
    for process in gpu.processes.iter() {
        let (key, attributes) = of_process(process);
        let device = Device {
            gpu: gpu.index,
            gpu_instance_id: process.gpu_instance_id,
        };
        let sum = sums.entry((key, device)).or_insert_with(|| Sum {
            attributes,
            sm: 0.0,
            memory: 0,
        });
        sum.sm += process
            .sm_utilization_ratio
            .filter(|r| r.is_finite() && *r > 0.0)
            .unwrap_or(0.0);
        sum.memory = sum
            .memory
            .saturating_add(process.used_memory_bytes.unwrap_or(0));
    }
    let sm_total: f64 = sums.values().map(|s| s.sm).sum();
    let count = sums.len() as f64;
    sums.into_iter()
        .map(|((key, device), sum)| {
            let was_present = before
                .binary_search_by(|g| (&g.key, g.device).cmp(&(&key, device)))
                .is_ok();
            Group {
                share: if sm_total > 0.0 {
                    sum.sm / sm_total
                } else {
                    1.0 / count
                },
                key,
                device,
                attributes: sum.attributes,
                memory: sum.memory,
                was_present,
                account: None,
            }
        })
        .collect()
}
