//! The sampler: a dedicated thread that owns NVML, reads every GPU on a
//! timer, and publishes each [`Snapshot`] through a `watch` channel (latest
//! wins). Nothing on the async runtime ever calls NVML.
//!
//! Tiers: the fast tier runs every `interval`; the slow tier (identity,
//! health counters) and the process lists run on their own, longer
//! intervals. A hung NVML call blocks only this thread: the last snapshot
//! keeps being served while its age grows, and the [`watchdog`] says so.
#![allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the sampler is a blocking thread that owns NVML: std time and std sleep are its clock"
)]

pub mod cgroup;
pub mod cmdline;
pub mod hpc_jobs;
pub mod procnames;
#[cfg(test)]
mod proptests;
pub mod reader;
pub mod slurm;
pub mod xid;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::gpu::nvml::Driver;
use crate::gpu::{FastReadings, GpuStatus, Snapshot};
use crate::workload::accounting::Accounts;
use hpc_jobs::HpcJobMap;

use procnames::ProcessNames;
use reader::{NodeReader, Tiers};
use xid::{XidTable, XidWatcher};

/// The latest snapshot; `None` until the first tick completes.
pub type SnapshotReceiver = watch::Receiver<Option<Arc<Snapshot>>>;

/// A consumer that needs every snapshot, not just the latest (history,
/// rules): a bounded queue the sampler never waits on. When it is full the
/// snapshot is dropped for that consumer and counted.
#[derive(Debug, Clone)]
pub struct SnapshotSink {
    /// The queue.
    pub sender: tokio::sync::mpsc::Sender<Arc<Snapshot>>,
    /// Snapshots dropped because the queue was full.
    pub dropped: Arc<std::sync::atomic::AtomicU64>,
}

impl SnapshotSink {
    /// Queues `snapshot` without waiting; when the queue is full, drops it
    /// and counts it in `dropped`.
    pub fn offer(&self, snapshot: &Arc<Snapshot>) {
        use tokio::sync::mpsc::error::TrySendError;
        if let Err(TrySendError::Full(_)) = self.sender.try_send(snapshot.clone()) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Where the sampler publishes: the latest-wins channel for /metrics, and
/// the queues of consumers that need every snapshot.
struct Outputs {
    latest: watch::Sender<Option<Arc<Snapshot>>>,
    sinks: Vec<SnapshotSink>,
}

impl Outputs {
    fn publish(&self, snapshot: Snapshot) {
        let snapshot = Arc::new(snapshot);
        for sink in &self.sinks {
            sink.offer(&snapshot);
        }
        self.latest.send_replace(Some(snapshot));
    }
}

/// How the sampler reads.
#[derive(Debug, Clone)]
pub struct SamplerSettings {
    /// NVML library to re-open after the driver fails (`None`: the system's).
    pub library: Option<PathBuf>,
    /// Fast-tier period.
    pub interval: Duration,
    /// Slow-tier period.
    pub slow_interval: Duration,
    /// Process-list period.
    pub process_interval: Duration,
    /// Where /proc is, for process names; `None` to ask NVML only.
    pub proc_root: Option<PathBuf>,
    /// Whether process command lines are read (masked) from /proc.
    pub command_lines: bool,
    /// Host name put into every snapshot.
    pub hostname: String,
    /// The kubelet's device allocations, where the kubelet is asked.
    pub pods: Option<crate::kubernetes::watcher::PodAllocationsReceiver>,
    /// Whether GPM is sampled (`sampler.gpm`).
    pub gpm: bool,
    /// dcgm-exporter's HPC job mapping directory, where one is read
    /// (`[workloads] hpc_job_mapping_dir`).
    pub hpc_job_mapping_dir: Option<PathBuf>,
}

/// When the current tick started (ms since the epoch), or 0 between ticks:
/// lets the watchdog see a tick that does not end.
#[derive(Debug, Default)]
pub struct Progress {
    busy_since_ms: AtomicU64,
}

impl Progress {
    fn begin(&self) {
        self.busy_since_ms.store(
            crate::gpu::unix_ms(SystemTime::now()) as u64,
            Ordering::Relaxed,
        );
    }

    fn end(&self) {
        self.busy_since_ms.store(0, Ordering::Relaxed);
    }

    /// How long the current tick has been running, if one is.
    pub fn busy_for(&self) -> Option<Duration> {
        match self.busy_since_ms.load(Ordering::Relaxed) {
            0 => None,
            since => Some(Duration::from_millis(
                (crate::gpu::unix_ms(SystemTime::now()) as u64).saturating_sub(since),
            )),
        }
    }
}

/// A running sampler thread.
pub struct Sampler {
    snapshots: SnapshotReceiver,
    xid: XidTable,
    progress: Arc<Progress>,
    stop: mpsc::Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling `driver` on its own thread, publishing to /metrics'
    /// latest-snapshot channel and to every sink.
    pub fn start(
        settings: SamplerSettings,
        driver: Driver,
        sinks: Vec<SnapshotSink>,
    ) -> std::io::Result<Sampler> {
        let (latest, snapshots) = watch::channel(None);
        let sender = Outputs { latest, sinks };
        let progress = Arc::new(Progress::default());
        let (stop, stop_rx) = mpsc::channel();
        let thread_progress = progress.clone();
        let xid = XidTable::default();
        let table = xid.clone();
        let thread = std::thread::Builder::new()
            .name("gpuwatch-sampler".into())
            .spawn(move || {
                run(
                    settings,
                    driver,
                    &table,
                    &sender,
                    &thread_progress,
                    &stop_rx,
                );
            })?;
        Ok(Sampler {
            snapshots,
            xid,
            progress,
            stop,
            thread: Some(thread),
        })
    }

    /// A receiver of the latest snapshot.
    pub fn snapshots(&self) -> SnapshotReceiver {
        self.snapshots.clone()
    }

    /// The Xid table the sampler reads each tick: the kernel-log reader
    /// writes into it too.
    pub fn xid_table(&self) -> XidTable {
        self.xid.clone()
    }

    /// The tick progress, for the watchdog.
    pub fn progress(&self) -> Arc<Progress> {
        self.progress.clone()
    }

    /// Stops the thread, waiting at most `grace` for it (a thread stuck in a
    /// hung driver call is left behind; the process is exiting anyway).
    pub fn stop(mut self, grace: Duration) {
        let _ = self.stop.send(());
        if let Some(thread) = self.thread.take() {
            let deadline = Instant::now() + grace;
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if thread.is_finished() {
                let _ = thread.join();
            } else {
                warn!("The sampler is stuck in an NVML call; exiting without it.");
            }
        }
    }
}

enum SessionEnd {
    Stop,
    Restart(String),
}

fn run(
    settings: SamplerSettings,
    driver: Driver,
    table: &XidTable,
    sender: &Outputs,
    progress: &Progress,
    stop: &mpsc::Receiver<()>,
) {
    let mut driver = Some(Arc::new(driver));
    let mut backoff = settings.interval.max(Duration::from_secs(1));
    // Kept across NVML sessions: a driver restart does not end a job.
    let mut accounts = Accounts::default();
    loop {
        let current = match driver.take() {
            Some(current) => current,
            None => match Driver::open(settings.library.as_deref()) {
                Ok(reopened) => {
                    info!("NVML is back; sampling again.");
                    backoff = settings.interval.max(Duration::from_secs(1));
                    Arc::new(reopened)
                }
                Err(error) => {
                    publish_unavailable(sender, &error.reason);
                    if sleep_or_stop(stop, backoff) {
                        return;
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(60));
                    continue;
                }
            },
        };
        match session(
            &settings,
            &mut accounts,
            &current,
            table,
            sender,
            progress,
            stop,
        ) {
            SessionEnd::Stop => return,
            SessionEnd::Restart(reason) => {
                error!(reason = %reason, "NVML stopped working; re-initialising it.");
                publish_unavailable(sender, &reason);
            }
        }
    }
}

fn session(
    settings: &SamplerSettings,
    accounts: &mut Accounts,
    driver: &Arc<Driver>,
    table: &XidTable,
    sender: &Outputs,
    progress: &Progress,
    stop: &mpsc::Receiver<()>,
) -> SessionEnd {
    let names =
        ProcessNames::new(settings.proc_root.clone()).with_command_lines(settings.command_lines);
    let mut reader = NodeReader::with_gpm(driver, settings.hostname.clone(), names, settings.gpm);
    reader.set_cadence(reader::Cadence::for_interval(settings.interval));
    if let Some(reason) = reader.driver_failure() {
        return SessionEnd::Restart(reason.to_string());
    }
    info!(gpus = reader.indices().len(), "Sampling started.");
    let _xid = match XidWatcher::start(driver.clone(), reader.indices(), table.clone()) {
        Ok(watcher) => Some(watcher),
        Err(error) => {
            warn!(error = %error, "Cannot start the Xid event thread; Xid errors will not be counted.");
            None
        }
    };
    let mut hpc = settings.hpc_job_mapping_dir.clone().map(HpcJobMap::new);
    let mut hpc_warned = false;
    let mut next_slow = Instant::now();
    let mut next_processes = Instant::now();
    let mut first = true;
    loop {
        let started = Instant::now();
        let tiers = Tiers {
            slow: started >= next_slow,
            processes: started >= next_processes,
        };
        if let Some(pods) = &settings.pods {
            reader.set_pod_allocations(pods.borrow().clone());
        }
        if let (true, Some(map)) = (tiers.processes, hpc.as_mut()) {
            match map.refresh() {
                Ok(jobs) => {
                    if !jobs.skipped.is_empty() && !hpc_warned {
                        warn!(skipped = ?jobs.skipped, "Some files of the HPC job mapping directory are not GPU job files; they are ignored.");
                    }
                    hpc_warned = !jobs.skipped.is_empty() || jobs.truncated;
                    reader.set_hpc_jobs(Arc::new(jobs));
                }
                Err(error) => {
                    if !hpc_warned {
                        warn!(error = %error, "Slurm jobs are not read from the HPC job mapping directory.");
                    }
                    hpc_warned = true;
                }
            }
        }
        progress.begin();
        if tiers.slow && !first && reader.device_count_changed() {
            progress.end();
            return SessionEnd::Restart("the number of GPUs changed".into());
        }
        let mut snapshot = reader.tick(tiers, Some(table));
        progress.end();
        accounts.step(&snapshot);
        snapshot.workloads = Arc::new(accounts.table());
        first = false;
        if tiers.slow {
            next_slow = started + settings.slow_interval;
        }
        if tiers.processes {
            next_processes = started + settings.process_interval;
        }
        sender.publish(snapshot);
        if let Some(reason) = reader.driver_failure() {
            return SessionEnd::Restart(reason.to_string());
        }
        let next_tick = started + settings.interval;
        if sleep_or_stop(stop, next_tick.saturating_duration_since(Instant::now())) {
            return SessionEnd::Stop;
        }
    }
}

/// Re-publishes the last snapshot with every GPU marked lost: NVML as a
/// whole is gone, and alerts must see that rather than stale values.
fn publish_unavailable(sender: &Outputs, reason: &str) {
    let previous = sender.latest.borrow().clone();
    if let Some(previous) = previous {
        let mut snapshot = (*previous).clone();
        snapshot.taken_at = SystemTime::now();
        for gpu in &mut snapshot.gpus {
            gpu.status = GpuStatus::Lost {
                reason: "nvml_unavailable".into(),
            };
            gpu.readings = FastReadings::default();
            gpu.processes = Arc::default();
            gpu.mig_instances = Arc::default();
        }
        sender.publish(snapshot);
    }
    warn!(reason = %reason, "NVML is unavailable.");
}

/// Sleeps for `period` unless asked to stop; true when asked to stop.
fn sleep_or_stop(stop: &mpsc::Receiver<()>, period: Duration) -> bool {
    match stop.recv_timeout(period) {
        Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
        Err(RecvTimeoutError::Timeout) => false,
    }
}

/// Logs when a tick runs longer than `timeout` (a hung driver) and when it
/// recovers. /metrics is unaffected: it serves the last snapshot, whose age
/// grows, and readiness fails.
pub async fn watchdog(
    progress: Arc<Progress>,
    timeout: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut stalled = false;
    // Only for the log: readiness and the age metric are computed at request
    // time. A quarter of the timeout is prompt enough and wakes rarely.
    let mut ticker = tokio::time::interval((timeout / 4).max(Duration::from_secs(1)));
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.changed() => return,
        }
        match progress.busy_for() {
            Some(busy) if busy > timeout && !stalled => {
                error!(blocked_for = ?busy,
                    "An NVML call has not returned; /metrics keeps serving the last snapshot and readiness fails until it does.");
                stalled = true;
            }
            Some(busy) if busy > timeout => {}
            _ if stalled => {
                info!("NVML answers again; sampling resumed.");
                stalled = false;
            }
            _ => {}
        }
    }
}
