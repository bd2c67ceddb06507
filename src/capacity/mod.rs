//! Capacity: how many more instances of a workload profile fit on each GPU
//! now, and on the node.
//!
//! A pure function of one snapshot and the configured `[[profiles]]`; the
//! exporter, `gpuwatch capacity` and the rules engine all call it, so they
//! agree. Per GPU and profile:
//!
//! - a lost GPU, a GPU in the `prohibited` compute mode, or an
//!   exclusive-mode GPU that already has a compute process takes 0 (an idle
//!   exclusive GPU takes at most 1; one whose only compute process is an
//!   MPS server takes as many MPS clients as memory allows);
//! - with MIG on, each GPU instance counts alone: ⌊(its free memory −
//!   margin) / profile memory⌋, summed over instances;
//! - otherwise ⌊(free memory − margin) / profile memory⌋;
//! - a profile with an SM share also needs that share of SM time free:
//!   ⌊(1 − SM share in use) / sm_share⌋, where the share in use is the
//!   GPU's measured SM activity where it has GPM (Hopper and newer), else
//!   the sum of the processes' SM utilization (else the GPU's utilization);
//!   [`SmSource`] says which. With MIG on and GPM, each instance's own SM
//!   activity bounds its count, `sm_share` then being a share of the
//!   instance.
//!
//! A profile whose model filter does not match a GPU's name gives no value
//! for that GPU; a GPU whose memory is unknown gives none either.
//!
//! With no profiles configured, [`running`] makes one of each running
//! workload (its measured peak memory and SM share).

pub mod running;
pub mod table;

use crate::gpu::{GpuProcess, GpuSnapshot, ProcessKind, Snapshot};

/// A workload profile: what one instance of a job needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Its name: the `profile` label.
    pub name: String,
    /// GPU memory one instance needs, bytes.
    pub memory_bytes: u64,
    /// Share of the SMs one instance keeps busy, 0..1, when that matters.
    pub sm_share: Option<f64>,
    /// Only GPUs whose name contains this (case-insensitive) take it.
    pub model: Option<String>,
}

/// The capacity settings: profiles and the memory kept free on each GPU.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CapacityConfig {
    /// `[[profiles]]`.
    pub profiles: Vec<Profile>,
    /// Memory kept free on each GPU (each MIG instance), bytes.
    pub memory_margin_bytes: u64,
    /// How long a profile must fit nowhere before its alert fires.
    pub alert_for: std::time::Duration,
}

/// What limits a GPU's count for a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Free memory.
    Memory,
    /// Free SM share.
    Sm,
    /// The free memory of its MIG instances.
    Mig,
    /// Exclusive-process mode with a process already on it.
    ExclusiveBusy,
    /// Exclusive-process mode, idle: one at most.
    ExclusiveIdle,
    /// Compute mode prohibited.
    Prohibited,
    /// The GPU is lost.
    Lost,
}

impl Limit {
    /// A word for the `capacity` table.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Memory => "memory",
            Limit::Sm => "sm share",
            Limit::Mig => "mig instances",
            Limit::ExclusiveBusy => "exclusive, busy",
            Limit::ExclusiveIdle => "exclusive",
            Limit::Prohibited => "prohibited",
            Limit::Lost => "lost",
        }
    }
}

/// Where the SM share in use came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmSource {
    /// GPM's measured SM activity (per MIG instance with MIG on).
    Gpm,
    /// The sum of the processes' SM utilization (nvmlDeviceGetProcessUtilization).
    Processes,
    /// The GPU's utilization: the driver gives neither of the above.
    Utilization,
}

impl SmSource {
    /// A word for the `capacity` table.
    pub fn as_str(self) -> &'static str {
        match self {
            SmSource::Gpm => "gpm sm active",
            SmSource::Processes => "process sm",
            SmSource::Utilization => "utilization",
        }
    }
}

/// How many more instances of one profile fit on one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuFit {
    /// NVML index.
    pub gpu: u32,
    /// UUID.
    pub uuid: String,
    /// Profile name.
    pub profile: String,
    /// Instances that fit now.
    pub fits: u64,
    /// What bounds `fits`.
    pub limit: Limit,
    /// Where the SM share in use came from, for a profile with `sm_share`.
    pub sm_source: Option<SmSource>,
}

impl Profile {
    /// Whether the profile's model filter admits a GPU named `name`.
    pub fn applies_to(&self, name: Option<&str>) -> bool {
        match &self.model {
            None => true,
            Some(model) => name.is_some_and(|n| n.to_lowercase().contains(&model.to_lowercase())),
        }
    }
}

/// How many instances of `profile` fit on `gpu` now; `None` when the profile
/// does not apply to it or its memory is unknown.
pub fn gpu_fit(gpu: &GpuSnapshot, profile: &Profile, margin: u64) -> Option<GpuFit> {
    if !profile.applies_to(gpu.identity.name.as_deref()) {
        return None;
    }
    let mut sm_source = None;
    let fit = |fits: u64, limit: Limit, sm_source: Option<SmSource>| GpuFit {
        gpu: gpu.index,
        uuid: gpu.uuid.clone(),
        profile: profile.name.clone(),
        fits,
        limit,
        sm_source,
    };
    if !gpu.is_up() {
        return Some(fit(0, Limit::Lost, None));
    }
    let per = profile.memory_bytes.max(1);
    let share = profile.sm_share.filter(|s| *s > 0.0);
    let by_sm = |in_use: f64, share: f64| ((1.0 - in_use).max(0.0) / share + 1e-9).floor() as u64;
    let (mut fits, mut limit) = if gpu.health.mig_enabled == Some(true) {
        let mut limit = Limit::Mig;
        let sum = gpu
            .mig_instances
            .iter()
            .map(|m| {
                let free = m.memory_total_bytes.saturating_sub(m.memory_used_bytes);
                let by_memory = free.saturating_sub(margin) / per;
                let active = gpu
                    .gpm
                    .instances
                    .iter()
                    .find(|i| i.gpu_instance_id == m.gpu_instance_id)
                    .and_then(|i| i.metrics.sm_active_ratio);
                match (share, active) {
                    (Some(share), Some(active)) => {
                        sm_source = Some(SmSource::Gpm);
                        let by_sm = by_sm(active, share);
                        if by_sm < by_memory {
                            limit = Limit::Sm;
                        }
                        by_sm.min(by_memory)
                    }
                    _ => by_memory,
                }
            })
            .sum();
        (sum, limit)
    } else {
        let free = gpu.readings.memory?.free_bytes;
        (free.saturating_sub(margin) / per, Limit::Memory)
    };
    if let (Some(share), None) = (share, sm_source) {
        let (in_use, source) = sm_in_use_from(gpu);
        sm_source = Some(source);
        let by_sm = by_sm(in_use, share);
        if by_sm < fits {
            (fits, limit) = (by_sm, Limit::Sm);
        }
    }
    // Under exclusive mode an MPS server is the one process, and its
    // clients share it: only a process outside MPS makes the GPU busy.
    let busy = gpu
        .processes
        .iter()
        .any(|p| p.kind != ProcessKind::Graphics && !p.mps_client && !p.is_mps_server());
    let mps = gpu.processes.iter().any(GpuProcess::is_mps_server);
    match gpu.health.compute_mode {
        Some("prohibited") => (fits, limit) = (0, Limit::Prohibited),
        Some("exclusive_process" | "exclusive_thread") if mps && !busy => {}
        Some("exclusive_process" | "exclusive_thread") if busy => {
            (fits, limit) = (0, Limit::ExclusiveBusy)
        }
        Some("exclusive_process" | "exclusive_thread") if fits > 1 => {
            (fits, limit) = (1, Limit::ExclusiveIdle)
        }
        _ => {}
    }
    Some(fit(fits, limit, sm_source))
}

/// Share of SM time in use, 0..1, and where it came from: GPM's measured
/// SM activity where the GPU has it, else the processes' sum where the
/// driver gives per-process figures, else the GPU's utilization (0 when
/// unknown).
pub fn sm_in_use_from(gpu: &GpuSnapshot) -> (f64, SmSource) {
    if let Some(active) = gpu.gpm.sm_active_ratio() {
        return (active.clamp(0.0, 1.0), SmSource::Gpm);
    }
    let per_process: Option<f64> = gpu
        .processes
        .iter()
        .map(|p| p.sm_utilization_ratio)
        .sum::<Option<f64>>()
        .filter(|_| !gpu.processes.is_empty());
    let (value, source) = match per_process {
        Some(sum) => (sum, SmSource::Processes),
        None => (
            gpu.readings.utilization_gpu_ratio.unwrap_or(0.0),
            SmSource::Utilization,
        ),
    };
    (value.clamp(0.0, 1.0), source)
}

/// Every (GPU, profile) fit of `snapshot`, GPU by GPU in profile order.
pub fn fits(snapshot: &Snapshot, config: &CapacityConfig) -> Vec<GpuFit> {
    snapshot
        .gpus
        .iter()
        .flat_map(|gpu| {
            config
                .profiles
                .iter()
                .filter_map(|p| gpu_fit(gpu, p, config.memory_margin_bytes))
        })
        .collect()
}

/// Instances of `profile` that fit on the whole node now (0 when it applies
/// to no GPU).
pub fn node_total(snapshot: &Snapshot, profile: &Profile, margin: u64) -> u64 {
    snapshot
        .gpus
        .iter()
        .filter_map(|gpu| gpu_fit(gpu, profile, margin))
        .map(|f| f.fits)
        .sum()
}

#[cfg(test)]
mod running_tests;
#[cfg(test)]
mod tests;
