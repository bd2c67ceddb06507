//! One pass over every GPU: turns NVML readings into a [`Snapshot`].
//!
//! The reader keeps what the slow tiers last read (identity, health,
//! processes) and re-uses it on fast ticks, so a snapshot is always complete.
#![allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "runs on the sampler's blocking thread: std time and std sleep are its clock"
)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::hpc_jobs::HpcJobs;
use crate::gpu::nvml::{Driver, GpuDevice, Tally};
use crate::gpu::{
    CollectionStats, FastReadings, FieldGroup, GpuIdentity, GpuProcess, GpuSnapshot, GpuStatus,
    PodAllocation, SlowReadings, Snapshot, SystemInfo, XidCount,
};
use crate::kubernetes::PodAllocations;

use super::procnames::ProcessNames;
use super::xid::XidTable;

/// Which tiers a tick reads besides the fast one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tiers {
    /// Identity and health counters.
    pub slow: bool,
    /// The process lists.
    pub processes: bool,
}

impl Tiers {
    /// Every tier: the first tick, and `gpuwatch status`.
    pub const ALL: Tiers = Tiers {
        slow: true,
        processes: true,
    };
}

/// How often the readings that need not be read on every fast tick are
/// read, in fast ticks (issue 23: at most 8 NVML calls per GPU per second
/// at the default 1 s tick). Between reads the last readings are carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    /// The clocks and clock-event reasons (5 calls per GPU).
    pub clocks_every: u64,
    /// GPM (2 calls per GPU and MIG instance; its figures average the time
    /// between two samples, so a longer window leaves no time unobserved).
    pub gpm_every: u64,
}

impl Cadence {
    /// Everything on every tick: `gpuwatch status`, tests and benchmarks
    /// that read tick by tick.
    pub const EVERY_TICK: Cadence = Cadence {
        clocks_every: 1,
        gpm_every: 1,
    };

    /// How often the sampler reads the clocks and clock-event reasons.
    pub const CLOCKS_PERIOD: Duration = Duration::from_secs(5);

    /// How often the sampler takes a GPM sample.
    pub const GPM_PERIOD: Duration = Duration::from_secs(2);

    /// The sampler's cadence at fast-tier period `interval`: the periods
    /// above in whole ticks, at least every tick.
    pub fn for_interval(interval: Duration) -> Cadence {
        let ticks = |period: Duration| {
            let interval = interval.as_nanos().max(1);
            (period.as_nanos().div_ceil(interval) as u64).max(1)
        };
        Cadence {
            clocks_every: ticks(Self::CLOCKS_PERIOD),
            gpm_every: ticks(Self::GPM_PERIOD),
        }
    }
}

/// Whether a reading last read on tick `last` is due on tick `now`.
fn due(last: Option<u64>, now: u64, every: u64) -> bool {
    last.is_none_or(|last| now.saturating_sub(last) >= every)
}

struct GpuSlot<'d> {
    device: GpuDevice<'d>,
    /// Ticks of the last clock and GPM reads (`None`: read on the next tick).
    clocks_read: Option<u64>,
    gpm_read: Option<u64>,
    /// The GPM readings of the last read, carried between reads.
    gpm: Arc<crate::gpu::gpm::GpmReadings>,
    uuid: String,
    identity: Arc<GpuIdentity>,
    health: Arc<SlowReadings>,
    processes: Arc<Vec<GpuProcess>>,
    mig_instances: Arc<Vec<crate::gpu::MigInstance>>,
    pods: Arc<Vec<PodAllocation>>,
    /// The jobs the HPC job mapping directory names for this GPU.
    hpc_jobs: Arc<Vec<crate::gpu::MappedJob>>,
    /// Timestamp (µs) of the newest process-utilization sample seen.
    utilization_seen: u64,
    groups: BTreeMap<FieldGroup, bool>,
}

/// Reads all GPUs of one NVML session.
pub struct NodeReader<'d> {
    driver: &'d Driver,
    hostname: String,
    system: Arc<SystemInfo>,
    slots: Vec<GpuSlot<'d>>,
    /// GPUs NVML counts but gives no handle for, with the error's name.
    missing: Vec<(u32, String)>,
    names: ProcessNames,
    /// The kubelet's latest device allocations, where it is asked.
    pods: Option<Arc<PodAllocations>>,
    /// Whether they changed since processes were last matched to them.
    pods_changed: bool,
    /// The HPC job mapping directory's latest contents, where one is read.
    hpc: Option<Arc<HpcJobs>>,
    /// Whether they changed since processes were last matched to them.
    hpc_changed: bool,
    tally: Tally,
    ticks: u64,
    /// Whether GPM is sampled (`sampler.gpm`).
    gpm: bool,
    /// How often clocks and GPM are read.
    cadence: Cadence,
}

impl<'d> NodeReader<'d> {
    /// Enumerates the GPUs of `driver`, with GPM sampled where a GPU has it.
    pub fn new(driver: &'d Driver, hostname: String, names: ProcessNames) -> Self {
        Self::with_gpm(driver, hostname, names, true)
    }

    /// Enumerates the GPUs of `driver`; `gpm` off (`sampler.gpm = false`)
    /// makes no GPM call at all.
    pub fn with_gpm(driver: &'d Driver, hostname: String, names: ProcessNames, gpm: bool) -> Self {
        let mut tally = Tally::default();
        let count = driver.device_count(&mut tally).unwrap_or(0);
        let mut reader = NodeReader {
            driver,
            hostname,
            system: Arc::default(),
            slots: Vec::with_capacity(count as usize),
            missing: Vec::new(),
            names,
            pods: None,
            pods_changed: false,
            hpc: None,
            hpc_changed: false,
            tally,
            ticks: 0,
            gpm,
            cadence: Cadence::EVERY_TICK,
        };
        for index in 0..count {
            reader.attach(index);
        }
        reader.announce_gpm();
        reader
    }

    /// Sets how often clocks and GPM are read (the sampler's
    /// [`Cadence::for_interval`]; [`Cadence::EVERY_TICK`] until set).
    pub fn set_cadence(&mut self, cadence: Cadence) {
        self.cadence = cadence;
    }

    /// One info line at start (and after a driver re-init): which GPUs
    /// have GPM, so SM activity and the other GPM figures are read there.
    fn announce_gpm(&self) {
        if !self.gpm {
            tracing::info!("GPM is not read (sampler.gpm = false): no SM activity figures.");
            return;
        }
        let with: Vec<u32> = self
            .slots
            .iter()
            .filter(|s| s.device.gpm_supported() == Some(true))
            .map(|s| s.device.index())
            .collect();
        let without: Vec<u32> = self
            .slots
            .iter()
            .filter(|s| s.device.gpm_supported() != Some(true))
            .map(|s| s.device.index())
            .collect();
        tracing::info!(gpus_with_gpm = ?with, gpus_without_gpm = ?without,
            "GPM (SM activity, tensor and FP pipes, DRAM, PCIe, NVLink) is read on the GPUs that have it.");
    }

    /// Gets a handle for GPU `index`; a GPU that gives none is kept as
    /// missing (reported lost) and retried on the slow tier.
    fn attach(&mut self, index: u32) {
        self.tally.begin_gpu(index);
        match self.driver.device(index, &mut self.tally) {
            Ok(mut device) => {
                if self.gpm {
                    device.probe_gpm(&mut self.tally);
                }
                let uuid = device.uuid(&mut self.tally).unwrap_or_default();
                let slot = GpuSlot {
                    device,
                    clocks_read: None,
                    gpm_read: None,
                    gpm: Arc::default(),
                    uuid,
                    identity: Arc::default(),
                    health: Arc::default(),
                    processes: Arc::default(),
                    mig_instances: Arc::default(),
                    pods: Arc::default(),
                    hpc_jobs: Arc::default(),
                    utilization_seen: 0,
                    groups: BTreeMap::new(),
                };
                let at = self.slots.partition_point(|s| s.device.index() < index);
                self.slots.insert(at, slot);
            }
            Err(no_handle) => self.missing.push((index, no_handle.reason.to_string())),
        }
    }

    /// The NVML indices of the GPUs this reader found.
    pub fn indices(&self) -> Vec<u32> {
        self.slots.iter().map(|s| s.device.index()).collect()
    }

    /// How many GPUs NVML counted, those without a handle included.
    pub fn gpu_count(&self) -> usize {
        self.slots.len() + self.missing.len()
    }

    /// Set when NVML stopped working as a whole; the session should restart.
    pub fn driver_failure(&self) -> Option<&str> {
        self.tally.driver_failed.as_deref()
    }

    /// Whether NVML now reports a different number of GPUs than were enumerated.
    pub fn device_count_changed(&mut self) -> bool {
        match self.driver.device_count(&mut self.tally) {
            Some(count) => count as usize != self.gpu_count(),
            None => false,
        }
    }

    /// Sets the kubelet's device allocations; the next tick matches the
    /// processes to them when they changed.
    pub fn set_pod_allocations(&mut self, pods: Arc<PodAllocations>) {
        if !self.pods.as_ref().is_some_and(|p| Arc::ptr_eq(p, &pods)) {
            self.pods = Some(pods);
            self.pods_changed = true;
        }
    }

    /// Sets what the HPC job mapping directory says; the next tick matches
    /// the processes to it when it changed.
    pub fn set_hpc_jobs(&mut self, jobs: Arc<HpcJobs>) {
        if self.hpc.as_deref() != Some(&*jobs) {
            self.hpc = Some(jobs);
            self.hpc_changed = true;
        }
    }

    /// Reads every tier once (`gpuwatch status`, `capacity`); where a GPU
    /// has GPM, reads the fast tier again `window` later, since GPM figures
    /// come from two samples.
    pub fn sample_once(&mut self, window: std::time::Duration) -> Snapshot {
        let first = self.tick(Tiers::ALL, None);
        let any_gpm = self
            .slots
            .iter()
            .any(|s| s.device.gpm_supported() == Some(true));
        if !any_gpm {
            return first;
        }
        std::thread::sleep(window);
        self.tick(Tiers::default(), None)
    }

    /// Reads every GPU and returns the snapshot.
    pub fn tick(&mut self, tiers: Tiers, xid: Option<&XidTable>) -> Snapshot {
        let started = Instant::now();
        let taken_at = SystemTime::now();
        if tiers.slow {
            self.system = Arc::new(self.driver.system_info(&mut self.tally));
            for (index, _) in std::mem::take(&mut self.missing) {
                self.attach(index);
            }
        }
        let xid_counts = xid.map(XidTable::counts).unwrap_or_default();
        let mut gpus = Vec::with_capacity(self.slots.len());
        for slot in &mut self.slots {
            let index = slot.device.index();
            self.tally.begin_gpu(index);
            if slot.uuid.is_empty() {
                slot.uuid = slot.device.uuid(&mut self.tally).unwrap_or_default();
            }
            if tiers.slow {
                let (identity, health) = slot.device.read_slow(&mut self.tally);
                if *slot.identity != identity {
                    slot.identity = Arc::new(slot.identity.updated_with(identity));
                }
                if self.tally.lost.is_none() {
                    slot.health = Arc::new(health);
                }
            }
            let readings = if self.tally.lost.is_none() {
                let clocks = due(slot.clocks_read, self.ticks, self.cadence.clocks_every);
                if clocks {
                    slot.clocks_read = Some(self.ticks);
                }
                slot.device.read_fast(clocks, &mut self.tally)
            } else {
                // Back from lost: read everything on the next tick.
                slot.clocks_read = None;
                slot.gpm_read = None;
                FastReadings::default()
            };
            if tiers.processes && self.tally.lost.is_none() {
                if let Some(mut list) = slot.device.read_processes(&mut self.tally) {
                    let driver = self.driver;
                    for process in &mut list {
                        (process.name, process.host) = self
                            .names
                            .lookup(process.pid, |pid| driver.process_name(pid));
                    }
                    let utilization = slot
                        .device
                        .read_process_utilization(slot.utilization_seen, &mut self.tally);
                    if let Some((by_pid, newest)) = utilization {
                        slot.utilization_seen = newest;
                        apply_utilization(&mut list, &by_pid);
                    }
                    slot.processes = Arc::new(list);
                }
                slot.mig_instances = if slot.health.mig_enabled == Some(true) {
                    slot.device
                        .read_mig_instances(&slot.mig_instances, &mut self.tally)
                        .map(Arc::new)
                        .unwrap_or_default()
                } else {
                    Arc::default()
                };
            }
            // After the process tier, so MIG instances found on this tick
            // are sampled on it too.
            let gpm = if self.gpm && self.tally.lost.is_none() {
                if due(slot.gpm_read, self.ticks, self.cadence.gpm_every) {
                    let instances: Vec<u32> = slot
                        .mig_instances
                        .iter()
                        .map(|m| m.gpu_instance_id)
                        .collect();
                    slot.gpm = Arc::new(slot.device.read_gpm(&instances, &mut self.tally));
                    slot.gpm_read = Some(self.ticks);
                }
                slot.gpm.clone()
            } else {
                Arc::default()
            };
            let status = match &self.tally.lost {
                Some(reason) => GpuStatus::Lost {
                    reason: reason.clone(),
                },
                None => GpuStatus::Up,
            };
            slot.groups
                .extend(self.tally.groups.iter().map(|(g, ok)| (*g, *ok)));
            let xids = xid_counts.get(&index);
            let xid_errors: Arc<Vec<XidCount>> =
                xids.map(|x| Arc::new(x.codes.clone())).unwrap_or_default();
            let xid_other = xids.and_then(|x| x.other);
            gpus.push(GpuSnapshot {
                index,
                uuid: slot.uuid.clone(),
                status,
                identity: slot.identity.clone(),
                readings,
                health: slot.health.clone(),
                processes: if self.tally.lost.is_none() {
                    slot.processes.clone()
                } else {
                    Arc::default()
                },
                mig_instances: slot.mig_instances.clone(),
                pods: slot.pods.clone(),
                hpc_jobs: slot.hpc_jobs.clone(),
                xid_errors,
                xid_other,
                groups: slot.groups.clone(),
                gpm,
            });
        }
        if tiers.processes || self.pods_changed {
            if let Some(pods) = &self.pods {
                self.pods_changed = false;
                crate::kubernetes::attribute(&mut gpus, pods);
                // `gpus` is still in slot order here. A lost GPU shows no
                // processes; its slot keeps the last list for when it is back.
                for (slot, gpu) in self.slots.iter_mut().zip(&gpus) {
                    slot.pods = gpu.pods.clone();
                    if gpu.is_up() {
                        slot.processes = gpu.processes.clone();
                    }
                }
            }
        }
        if tiers.processes || self.hpc_changed {
            if let Some(jobs) = &self.hpc {
                self.hpc_changed = false;
                for (slot, gpu) in self.slots.iter_mut().zip(&mut gpus) {
                    super::hpc_jobs::attribute(gpu, jobs);
                    slot.hpc_jobs = gpu.hpc_jobs.clone();
                    if gpu.is_up() {
                        slot.processes = gpu.processes.clone();
                    }
                }
            }
        }
        for (index, reason) in &self.missing {
            let status = GpuStatus::Lost {
                reason: reason.clone(),
            };
            gpus.push(GpuSnapshot::bare(*index, String::new(), status));
        }
        gpus.sort_by_key(|g| g.index);
        if tiers.processes {
            let slots = &self.slots;
            self.names.retain(|pid| {
                slots
                    .iter()
                    .any(|s| s.processes.iter().any(|p| p.pid == pid))
            });
        }
        self.ticks += 1;
        Snapshot {
            taken_at,
            hostname: self.hostname.clone(),
            system: self.system.clone(),
            gpus,
            workloads: Default::default(),
            collection: CollectionStats {
                sample_duration: started.elapsed(),
                ticks: self.ticks,
                nvml_errors: Arc::new(self.tally.errors.clone()),
                health: xid.map(XidTable::node_health).unwrap_or_default(),
            },
            kubelet: self.pods.as_ref().and_then(|p| p.status),
        }
    }
}

/// Sets each process's SM and memory utilization from the per-pid samples of
/// this interval; a process without a sample was idle (0), since the call
/// itself worked.
pub fn apply_utilization(list: &mut [GpuProcess], by_pid: &BTreeMap<u32, (f64, f64)>) {
    for process in list {
        let (sm, mem) = by_pid.get(&process.pid).copied().unwrap_or((0.0, 0.0));
        process.sm_utilization_ratio = Some(sm);
        process.memory_utilization_ratio = Some(mem);
    }
}
