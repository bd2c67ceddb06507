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

//!
//! Cost: the processes are grouped into workloads (keys, attributes, the
//! SM shares) only when a GPU's process list changed — every
//! `sampler.process_interval`, or when the kubelet's or the HPC job
//! mapping's attribution changed (`groups`) — and the accounts are then
//! found by key; between those, a tick adds its seconds, SM-active seconds
//! and energy to the accounts by index. The table a snapshot carries shares
//! each workload's identity with the accounts and holds every workload's
//! use in one block ([`crate::gpu::DeviceUsages`]).

mod groups;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::gpu::{
    Device, DeviceUsages, GpuSnapshot, GpuStatus, Snapshot, Usage, Workload, WorkloadAttributes,
    WorkloadTable,
};
use groups::{GpuMark, GpuState, Group, PendingSm};

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

/// The running totals of every live workload.
#[derive(Debug, Default)]
pub struct Accounts {
    /// Sorted by key.
    live: Vec<Account>,
    /// Ended within [`ENDED_KEEP`], oldest first.
    ended: VecDeque<Workload>,
    /// Per GPU of the last snapshot.
    gpus: HashMap<u32, GpuState>,
    /// The GPUs of the last snapshot, and those of them that were up.
    gpu_list: Vec<u32>,
    up_list: Vec<u32>,
    /// Steps taken.
    steps: u64,
    /// Whether the live set changed since the groups found their accounts.
    unresolved: bool,
    left_out: u64,
}

/// A live workload.
#[derive(Debug)]
struct Account {
    workload: Workload,
    /// The step in which it was last on a GPU.
    seen: u64,
}

/// A GPU up in this snapshot, and the interval since its previous one.
struct UpGpu<'a> {
    gpu: &'a GpuSnapshot,
    interval: Option<(GpuMark, Duration)>,
    mark: GpuMark,
}

impl Accounts {
    /// Charges the interval since the previous snapshot to the workloads
    /// on each GPU, and returns the workloads that ended (seen before, on
    /// no GPU now), which are forgotten.
    pub fn step(&mut self, snapshot: &Snapshot) -> Vec<Workload> {
        let now = snapshot.taken_at;
        self.steps += 1;
        if !self
            .gpu_list
            .iter()
            .eq(snapshot.gpus.iter().map(|g| &g.index))
        {
            self.gpu_list = snapshot.gpus.iter().map(|g| g.index).collect();
            let current = &self.gpu_list;
            self.gpus.retain(|gpu, _| current.contains(gpu));
        }
        let mut regrouped = false;
        let mut up = Vec::with_capacity(snapshot.gpus.len());
        for gpu in &snapshot.gpus {
            let mark = GpuMark {
                at: now,
                energy_joules: gpu.readings.energy_joules,
                xid_total: gpu.xid_errors.iter().map(|x| x.count).sum(),
            };
            let state = self.gpus.entry(gpu.index).or_default();
            let previous = state.mark.replace(mark);
            if gpu.status != GpuStatus::Up {
                continue;
            }
            regrouped |= state.regroup_if_changed(gpu);
            let interval = previous.and_then(|p| now.duration_since(p.at).ok().map(|d| (p, d)));
            up.push(UpGpu {
                gpu,
                interval,
                mark,
            });
        }
        if !self.up_list.iter().eq(up.iter().map(|u| &u.gpu.index)) {
            self.up_list = up.iter().map(|u| u.gpu.index).collect();
            // Which GPU's attributes come last changed.
            regrouped = true;
        }
        if regrouped || self.unresolved {
            self.resolve(now);
        }
        for gpu in &up {
            self.charge_gpu(gpu, now);
        }
        self.end(now)
    }

    /// Finds (or opens) each group's account, in GPU and group order, and
    /// sets each account's attributes from its groups (the last GPU's win;
    /// DRA claims add up): what the fold did on every tick before, done
    /// only when the groups or the live set changed.
    fn resolve(&mut self, now: SystemTime) {
        let Accounts {
            live,
            gpus,
            up_list,
            ..
        } = self;
        let groups = || {
            up_list
                .iter()
                .filter_map(|i| gpus.get(i))
                .flat_map(|s| &s.groups)
        };
        for group in groups() {
            if let Err(at) = find(live, group) {
                if live.len() < MAX_LIVE {
                    live.insert(at, Account::open(group, now));
                }
            }
        }
        for index in up_list.iter() {
            let Some(state) = gpus.get_mut(index) else {
                continue;
            };
            for group in &mut state.groups {
                group.account = find(live, group).ok();
                if let Some(account) = group.account.map(|i| &mut live[i]) {
                    // A pod's claims on its other GPUs stay: claims are
                    // fixed for a pod's life, and each GPU's processes
                    // name only their own.
                    let mut attributes = group.attributes.clone();
                    attributes.merge_dra_claims(account.workload.attributes.dra_claims.clone());
                    if attributes != account.workload.attributes {
                        account.workload.attributes = attributes;
                    }
                }
            }
        }
        self.unresolved = false;
    }

    /// Adds the interval to the accounts of `up`'s groups, by index.
    fn charge_gpu(&mut self, up: &UpGpu, now: SystemTime) {
        let Accounts {
            live,
            gpus,
            steps,
            left_out,
            ..
        } = self;
        let Some(state) = gpus.get_mut(&up.gpu.index) else {
            return;
        };
        let activity = sm_activity(live, state, up.gpu);
        let fallback = ratio(up.gpu.readings.utilization_gpu_ratio).unwrap_or(0.0);
        let throttling = up
            .gpu
            .readings
            .clock_event_reasons
            .is_some_and(|bits| bits & THROTTLE_REASONS != 0);
        let interval = up.interval.filter(|(_, d)| *d <= MAX_INTERVAL);
        let mut waiting = Vec::new();
        for group in &mut state.groups {
            let charged = group.was_present;
            group.was_present = true;
            let Some(account) = group.account.map(|i| &mut live[i]) else {
                *left_out += 1;
                continue;
            };
            account.seen = *steps;
            account.workload.last_seen = now;
            let usage = account.workload.devices.usage_mut(group.device);
            usage.peak_memory_bytes = usage.peak_memory_bytes.max(group.memory);
            let (Some((previous, elapsed)), true) = (interval, charged) else {
                continue;
            };
            let seconds = elapsed.as_secs_f64();
            usage.gpu_seconds += seconds;
            match activity {
                Some(activity) => usage.sm_active_seconds += seconds * activity * group.share,
                None => waiting.push(PendingSm {
                    key: group.key.clone(),
                    device: group.device,
                    weight: seconds * group.share,
                    fallback,
                }),
            }
            if let (Some(before), Some(after)) = (previous.energy_joules, up.mark.energy_joules) {
                if after >= before && (after - before).is_finite() {
                    usage.energy_joules += (after - before) * group.share;
                }
            }
            usage.xid_errors += up.mark.xid_total.saturating_sub(previous.xid_total);
            if throttling {
                usage.throttle_seconds += seconds;
            }
        }
        state.pending.extend(waiting);
    }

    /// Forgets the workloads on no GPU in this step, keeps them a while
    /// among the ended, and returns them.
    fn end(&mut self, now: SystemTime) -> Vec<Workload> {
        let steps = self.steps;
        let mut ended = Vec::new();
        if self.live.iter().any(|a| a.seen != steps) {
            let (gone, staying) = std::mem::take(&mut self.live)
                .into_iter()
                .partition::<Vec<_>, _>(|a| a.seen != steps);
            self.live = staying;
            self.unresolved = true;
            ended = gone.into_iter().map(|a| a.workload).collect();
            self.ended.extend(ended.iter().map(frozen));
        }
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
    /// within [`ENDED_KEEP`]. Their identities are shared with the
    /// accounts, and their use is one block.
    pub fn table(&self) -> WorkloadTable {
        let block: Arc<[(Device, Usage)]> = self
            .live
            .iter()
            .flat_map(|a| a.workload.devices.as_slice().iter().copied())
            .collect::<Vec<_>>()
            .into();
        let mut at = 0;
        let live = self
            .live
            .iter()
            .map(|a| {
                let end = at + a.workload.devices.len();
                let workload = Workload {
                    identity: a.workload.identity.clone(),
                    last_seen: a.workload.last_seen,
                    devices: DeviceUsages::shared(&block, at..end),
                };
                at = end;
                workload
            })
            .collect();
        WorkloadTable {
            live,
            ended: self.ended.iter().cloned().collect(),
            left_out: self.left_out,
        }
    }

    /// The workloads running now.
    pub fn live(&self) -> impl Iterator<Item = &Workload> {
        self.live.iter().map(|a| &a.workload)
    }

    /// Workloads never followed because [`MAX_LIVE`] were already.
    pub fn left_out(&self) -> u64 {
        self.left_out
    }
}

impl Account {
    fn open(group: &Group, now: SystemTime) -> Account {
        Account {
            workload: Workload::new(
                group.key.clone(),
                WorkloadAttributes::default(),
                now,
                now,
                DeviceUsages::default(),
            ),
            seen: 0,
        }
    }
}

/// The GPU's SM activity for this tick's interval: GPM's figure (which
/// also settles the intervals waiting for it), else utilization on a
/// GPU without GPM or whose GPM stayed silent too long; `None` while a
/// GPU with GPM waits for its next figure.
fn sm_activity(live: &mut [Account], state: &mut GpuState, gpu: &GpuSnapshot) -> Option<f64> {
    let measured = ratio(gpu.gpm.sm_active_ratio());
    let fallback = ratio(gpu.readings.utilization_gpu_ratio).unwrap_or(0.0);
    let activity = match measured {
        Some(value) => {
            state.gpm_gaps = 0;
            Some(value)
        }
        None if gpu.gpm.supported == Some(true) => {
            state.gpm_gaps = state.gpm_gaps.saturating_add(1);
            (state.gpm_gaps > GPM_GAP_MAX).then_some(fallback)
        }
        None => Some(fallback),
    };
    if activity.is_some() {
        for waiting in std::mem::take(&mut state.pending) {
            // Gone already (ended and handed to history): not charged.
            let found = live.binary_search_by(|a| a.workload.key.cmp(&waiting.key));
            if let Ok(at) = found {
                let usage = live[at].workload.devices.usage_mut(waiting.device);
                usage.sm_active_seconds += waiting.weight * measured.unwrap_or(waiting.fallback);
            }
        }
    }
    activity
}

/// Where `group`'s account is among the sorted live ones, or would be.
fn find(live: &[Account], group: &Group) -> Result<usize, usize> {
    live.binary_search_by(|a| a.workload.key.cmp(&group.key))
}

/// An ended workload as the tables keep it: its use in a block of its own,
/// so that each table shares it rather than copies it.
fn frozen(workload: &Workload) -> Workload {
    let block: Arc<[(Device, Usage)]> = workload.devices.as_slice().into();
    Workload {
        identity: workload.identity.clone(),
        last_seen: workload.last_seen,
        devices: DeviceUsages::shared(&block, 0..block.len()),
    }
}

/// `value` as a ratio 0..1; `None` when absent or not a number.
fn ratio(value: Option<f64>) -> Option<f64> {
    value.filter(|r| r.is_finite()).map(|r| r.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests;
