//! What each workload used of each GPU, integrated on every snapshot: a
//! pure fold (previous totals + this snapshot → new totals), read by the
//! exporter, history, rules and the web view alike.
//!
//! For the interval between two snapshots of a GPU, each workload with a
//! process on it at both ends is charged (one that appears or goes within
//! an interval is not charged for that part of it: at most one tick, and
//! the process lists themselves are read every `process_interval`):
//! - **GPU-seconds held**: the interval, whole (a GPU shared by two
//!   workloads counts for both: held is held);
//! - **SM-active seconds**: the interval × the GPU's SM activity (GPM's
//!   SM-active ratio where the GPU has it, else NVML's utilization) × the
//!   workload's share of the GPU's SM time (its processes' share of the
//!   per-process SM utilization; an equal share each where the driver
//!   reports none, and all of it for a workload alone on the GPU). On a GPU
//!   with GPM, a tick without GPM's figure (the first after the agent
//!   starts, a failed sample) is charged with GPM's next figure, not with
//!   utilization — a different, usually higher measure — unless GPM stays
//!   silent for more than [`GPM_GAP_MAX`] ticks;
//! - **energy**: the GPU's energy counter's increase × the same share (the
//!   idle power of a shared GPU is so split by SM time, or equally while
//!   nothing runs: who holds a GPU pays for keeping it on);
//! - the peak of its processes' memory, the Xid errors counted on the GPU,
//!   and the seconds in which the GPU throttled (power cap, thermal,
//!   hardware slowdown, power brake).
//!
//! Intervals longer than [`MAX_INTERVAL`] (a hung driver, a stopped agent)
//! are not charged: nobody knows who ran then.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use super::identity::of_process;
use crate::gpu::{
    Device, GpuSnapshot, GpuStatus, Snapshot, Workload, WorkloadAttributes, WorkloadKey,
    WorkloadTable,
};

/// The longest interval between two snapshots that is charged.
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);

/// How long an ended workload stays in the snapshot's table: long enough
/// for four scrapes at Prometheus' usual 15 s (so `increase()` sees its
/// last figures) and for the history writer to record it, short enough
/// that series do not pile up with every job ever run.
pub const ENDED_KEEP: Duration = Duration::from_secs(120);

/// Most workloads followed at once; more are left out and counted
/// ([`Accounts::left_out`]), so a node running thousands of tiny jobs
/// cannot grow the agent without bound.
pub const MAX_LIVE: usize = 512;

/// Most ticks in a row a GPU with GPM may lack GPM's SM activity before
/// the SM-active seconds waiting for it are charged by utilization.
pub const GPM_GAP_MAX: u32 = 3;

/// Clock-event reasons that are throttling (NVML bits): SW power cap, HW
/// slowdown, SW thermal, HW thermal, HW power brake.
const THROTTLE_REASONS: u64 = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

/// Where a GPU's counters stood at its previous snapshot.
#[derive(Debug, Clone, Copy)]
struct GpuMark {
    at: SystemTime,
    energy_joules: Option<f64>,
    xid_total: u64,
}

/// The running totals of every live workload.
#[derive(Debug, Default)]
pub struct Accounts {
    live: BTreeMap<WorkloadKey, Workload>,
    /// Ended within [`ENDED_KEEP`], oldest first.
    ended: VecDeque<Workload>,
    marks: HashMap<u32, GpuMark>,
    /// The workloads on each GPU at its previous snapshot, sorted.
    present: HashMap<u32, Vec<(WorkloadKey, Device)>>,
    /// Per GPU with GPM: intervals charged before GPM measured them.
    pending: HashMap<u32, Vec<PendingSm>>,
    /// Per GPU with GPM: ticks in a row without GPM's SM activity.
    gpm_gaps: HashMap<u32, u32>,
    left_out: u64,
}

/// SM-active seconds that wait for GPM's next figure: the held seconds ×
/// the workload's share, and the utilization to use if GPM stays silent.
#[derive(Debug)]
struct PendingSm {
    key: WorkloadKey,
    device: Device,
    weight: f64,
    fallback: f64,
}

impl Accounts {
    /// Charges the interval since the previous snapshot to the workloads
    /// on each GPU, and returns the workloads that ended (seen before, on
    /// no GPU now), which are forgotten.
    pub fn step(&mut self, snapshot: &Snapshot) -> Vec<Workload> {
        let now = snapshot.taken_at;
        let mut seen: Vec<WorkloadKey> = Vec::new();
        for gpu in &snapshot.gpus {
            let mark = GpuMark {
                at: now,
                energy_joules: gpu.readings.energy_joules,
                xid_total: gpu.xid_errors.iter().map(|x| x.count).sum(),
            };
            let previous = self.marks.insert(gpu.index, mark);
            if gpu.status != GpuStatus::Up {
                continue;
            }
            let interval = previous.and_then(|p| now.duration_since(p.at).ok().map(|d| (p, d)));
            self.charge_gpu(gpu, now, interval, mark, &mut seen);
        }
        let current: std::collections::BTreeSet<u32> =
            snapshot.gpus.iter().map(|g| g.index).collect();
        self.marks.retain(|gpu, _| current.contains(gpu));
        self.present.retain(|gpu, _| current.contains(gpu));
        self.pending.retain(|gpu, _| current.contains(gpu));
        self.gpm_gaps.retain(|gpu, _| current.contains(gpu));
        seen.sort_unstable();
        seen.dedup();
        let ended: Vec<WorkloadKey> = self
            .live
            .keys()
            .filter(|k| seen.binary_search(k).is_err())
            .cloned()
            .collect();
        let ended: Vec<Workload> = ended
            .into_iter()
            .filter_map(|key| self.live.remove(&key))
            .collect();
        self.ended.extend(ended.iter().cloned());
        while self
            .ended
            .front()
            .is_some_and(|w| now.duration_since(w.last_seen).unwrap_or_default() > ENDED_KEEP)
        {
            self.ended.pop_front();
        }
        while self.ended.len() > MAX_LIVE {
            self.ended.pop_front();
        }
        ended
    }

    /// The table a snapshot carries: the live workloads and those ended
    /// within [`ENDED_KEEP`].
    pub fn table(&self) -> WorkloadTable {
        WorkloadTable {
            live: self.live.values().cloned().collect(),
            ended: self.ended.iter().cloned().collect(),
            left_out: self.left_out,
        }
    }

    fn charge_gpu(
        &mut self,
        gpu: &GpuSnapshot,
        now: SystemTime,
        interval: Option<(GpuMark, Duration)>,
        mark: GpuMark,
        seen: &mut Vec<WorkloadKey>,
    ) {
        // The GPU's processes, grouped by workload and device.
        let mut groups: BTreeMap<(WorkloadKey, Device), Group> = BTreeMap::new();
        for process in gpu.processes.iter() {
            let (key, attributes) = of_process(process);
            let device = Device {
                gpu: gpu.index,
                gpu_instance_id: process.gpu_instance_id,
            };
            let group = groups.entry((key, device)).or_insert_with(|| Group {
                attributes,
                sm: 0.0,
                memory: 0,
            });
            group.sm += process
                .sm_utilization_ratio
                .filter(|r| r.is_finite() && *r > 0.0)
                .unwrap_or(0.0);
            group.memory = group
                .memory
                .saturating_add(process.used_memory_bytes.unwrap_or(0));
        }
        let activity = self.sm_activity(gpu);
        let before = self.present.remove(&gpu.index).unwrap_or_default();
        self.present
            .insert(gpu.index, groups.keys().cloned().collect());
        if groups.is_empty() {
            return;
        }
        let sm_total: f64 = groups.values().map(|g| g.sm).sum();
        let count = groups.len() as f64;
        let fallback = ratio(gpu.readings.utilization_gpu_ratio).unwrap_or(0.0);
        let mut waiting = Vec::new();
        let throttling = gpu
            .readings
            .clock_event_reasons
            .is_some_and(|bits| bits & THROTTLE_REASONS != 0);
        for ((key, device), group) in groups {
            seen.push(key.clone());
            if !self.live.contains_key(&key) && self.live.len() >= MAX_LIVE {
                self.left_out += 1;
                continue;
            }
            let workload = self.live.entry(key.clone()).or_insert_with(|| Workload {
                key,
                attributes: WorkloadAttributes::default(),
                started: now,
                last_seen: now,
                devices: BTreeMap::new(),
            });
            // A pod's claims on its other GPUs stay: claims are fixed for
            // a pod's life, and each GPU's processes name only their own.
            let claims = std::mem::take(&mut workload.attributes.dra_claims);
            workload.attributes = group.attributes;
            workload.attributes.merge_dra_claims(claims);
            workload.last_seen = now;
            let usage = workload.devices.entry(device).or_default();
            usage.peak_memory_bytes = usage.peak_memory_bytes.max(group.memory);
            let Some((previous, elapsed)) = interval.filter(|(_, d)| *d <= MAX_INTERVAL) else {
                continue;
            };
            if !before
                .iter()
                .any(|(k, d)| *k == workload.key && *d == device)
            {
                continue;
            }
            let share = if sm_total > 0.0 {
                group.sm / sm_total
            } else {
                1.0 / count
            };
            let seconds = elapsed.as_secs_f64();
            usage.gpu_seconds += seconds;
            match activity {
                Some(activity) => usage.sm_active_seconds += seconds * activity * share,
                None => waiting.push(PendingSm {
                    key: workload.key.clone(),
                    device,
                    weight: seconds * share,
                    fallback,
                }),
            }
            if let (Some(before), Some(after)) = (previous.energy_joules, mark.energy_joules) {
                if after >= before && (after - before).is_finite() {
                    usage.energy_joules += (after - before) * share;
                }
            }
            usage.xid_errors += mark.xid_total.saturating_sub(previous.xid_total);
            if throttling {
                usage.throttle_seconds += seconds;
            }
        }
        if !waiting.is_empty() {
            self.pending.entry(gpu.index).or_default().extend(waiting);
        }
    }

    /// The GPU's SM activity for this tick's interval: GPM's figure (which
    /// also settles the intervals waiting for it), else utilization on a
    /// GPU without GPM or whose GPM stayed silent too long; `None` while a
    /// GPU with GPM waits for its next figure.
    fn sm_activity(&mut self, gpu: &GpuSnapshot) -> Option<f64> {
        let measured = ratio(gpu.gpm.sm_active_ratio());
        let fallback = ratio(gpu.readings.utilization_gpu_ratio).unwrap_or(0.0);
        let activity = match measured {
            Some(value) => {
                self.gpm_gaps.remove(&gpu.index);
                Some(value)
            }
            None if gpu.gpm.supported == Some(true) => {
                let gaps = self.gpm_gaps.entry(gpu.index).or_insert(0);
                *gaps = gaps.saturating_add(1);
                (*gaps > GPM_GAP_MAX).then_some(fallback)
            }
            None => Some(fallback),
        };
        if activity.is_some() {
            for waiting in self.pending.remove(&gpu.index).unwrap_or_default() {
                // Gone already (ended and handed to history): not charged.
                if let Some(workload) = self.live.get_mut(&waiting.key) {
                    let usage = workload.devices.entry(waiting.device).or_default();
                    usage.sm_active_seconds +=
                        waiting.weight * measured.unwrap_or(waiting.fallback);
                }
            }
        }
        activity
    }

    /// The workloads running now.
    pub fn live(&self) -> impl Iterator<Item = &Workload> {
        self.live.values()
    }

    /// Workloads never followed because [`MAX_LIVE`] were already.
    pub fn left_out(&self) -> u64 {
        self.left_out
    }
}

/// `value` as a ratio 0..1; `None` when absent or not a number.
fn ratio(value: Option<f64>) -> Option<f64> {
    value.filter(|r| r.is_finite()).map(|r| r.clamp(0.0, 1.0))
}

/// One workload's processes on one device at one snapshot.
struct Group {
    attributes: WorkloadAttributes,
    /// Sum of its processes' SM utilization.
    sm: f64,
    /// Sum of its processes' memory, bytes.
    memory: u64,
}

#[cfg(test)]
mod tests;
