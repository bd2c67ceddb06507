//! Hardware health beyond NVML's readings: the kernel log's Xid and SXid
//! lines ([`reader`] follows the log, [`tail`] a regular file across
//! rotations, [`parse`] reads its lines and decides which the kernel wrote,
//! [`router`] matches the driver's PCI addresses to NVML's GPUs), the GPUs
//! on the PCI bus ([`pci_scan`]) and NVIDIA's Xid catalog ([`catalog`]).
//!
//! One thread follows the log and writes into the sampler's Xid table,
//! which de-duplicates against NVML's own Xid events; another counts the
//! GPUs on the PCI bus, so that neither can hold up the other. The sampler
//! carries counts, SXid counts and recent occurrences in each snapshot.
#![allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the kernel-log reader is a blocking thread: std time and std sleep are its clock"
)]

pub mod action_class;
pub mod catalog;
pub mod escalation;
pub mod parse;
pub mod pci_scan;
#[cfg(test)]
mod proptests;
pub mod reader;
pub mod router;
pub mod settings;
pub mod tail;
pub mod verdict;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

use crate::sampler::xid::XidTable;
use crate::sampler::{Sampler, SnapshotReceiver};
use settings::HealthConfig;

use crate::escape::control_chars;
use crate::gpu::pci_address::PciAddress;
use reader::{Follower, ReadLine};
use router::{RateLimit, Router};

/// How often the log is polled: also the longest delay of a kernel-log Xid.
const POLL: Duration = Duration::from_millis(500);
/// How often an unreadable log is tried again.
const RETRY: Duration = Duration::from_secs(30);

/// The running hardware-health readers (the kernel-log thread and the PCI
/// scan thread, apart so that neither can hold up the other); stop when
/// dropped.
pub struct HealthReader {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// How often the PCI bus is counted.
const PCI_EVERY: Duration = Duration::from_secs(30);

/// The PCI tree to count GPUs in: on simulated GPUs, only one the file names.
fn pci_path(config: &HealthConfig) -> Option<PathBuf> {
    if config.simulated.is_some() && !config.pci_devices_explicit {
        return None;
    }
    config.pci_devices.clone()
}

/// Starts the hardware-health readers the configuration asks for; `None`
/// when all are off. Keep the handle for as long as the agent runs.
pub fn start(config: &HealthConfig, sampler: &Sampler) -> Option<HealthReader> {
    let kernel_log = kernel_log_path(config);
    let pci = pci_path(config);
    let table = sampler.xid_table();
    table.set_boot_id(config.boot_id.as_deref().and_then(read_boot_id));
    if kernel_log.is_none() && pci.is_none() {
        return None;
    }
    if kernel_log.is_some() {
        table.set_kernel_log_up(Some(false));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    if let Some(path) = kernel_log {
        let (log_table, snapshots, flag) = (table.clone(), sampler.snapshots(), stop.clone());
        let spawned = std::thread::Builder::new()
            .name("gpuwatch-kmsg".into())
            .spawn(move || run_kernel_log(path, &log_table, &snapshots, &flag));
        match spawned {
            Ok(thread) => threads.push(thread),
            Err(error) => {
                warn!(error = %error, "Cannot start the kernel-log thread; Xid errors are counted from NVML events only.");
                table.set_kernel_log_up(Some(false));
            }
        }
    }
    if let Some(path) = pci {
        let flag = stop.clone();
        let spawned = std::thread::Builder::new()
            .name("gpuwatch-pci".into())
            .spawn(move || run_pci(path, &table, &flag));
        match spawned {
            Ok(thread) => threads.push(thread),
            Err(error) => {
                warn!(error = %error, "Cannot start the PCI scan thread; GPUs on the PCI bus are not counted.");
            }
        }
    }
    if threads.is_empty() {
        return None;
    }
    Some(HealthReader { stop, threads })
}

/// Counts the GPUs on the PCI bus into a one-off sample (`gpuwatch status`).
pub fn count_pci_into(config: &HealthConfig, snapshot: &mut crate::gpu::Snapshot) {
    let Some(path) = pci_path(config) else {
        return;
    };
    match pci_scan::scan(&path) {
        Ok(gpus) => snapshot.collection.health.pci_gpus = Some(Arc::new(gpus)),
        Err(error) => warn!(error = %error, "GPUs on the PCI bus are not counted."),
    }
}

impl Drop for HealthReader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // One deadline for all: a thread stuck in a read is left behind.
        let deadline = std::time::Instant::now() + POLL * 4;
        for thread in self.threads.drain(..) {
            while !thread.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}

/// The kernel log to follow. On simulated GPUs (`--simulate`) the host's
/// log does not describe them: unless the file names a log, the one the
/// simulator writes (`GPUWATCH_SIM_KMSG`) is followed, or none.
fn kernel_log_path(config: &HealthConfig) -> Option<PathBuf> {
    match &config.simulated {
        Some(simulated) if !config.kernel_log_explicit => simulated.kernel_log.clone(),
        _ => config.kernel_log.clone(),
    }
}

/// The kernel's boot id from `path` (a reboot changes it, an agent restart
/// does not); `None`, with a warning, when it cannot be read. At most
/// [`BOOT_ID_MAX_BYTES`] are read, never blocking: a FIFO, a device or a
/// huge file in its place is refused, not waited on.
pub fn read_boot_id(path: &std::path::Path) -> Option<String> {
    let read = crate::files::read_prefix(path, BOOT_ID_MAX_BYTES)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    match read {
        Ok(text) if !text.trim().is_empty() => {
            Some(crate::escape::control_chars(text.trim()).into_owned())
        }
        Ok(_) => {
            warn!(path = %path.display(), "The boot id file is empty; a returning Xid escalates after GPU resets only, not after reboots. Set [health] boot_id to the file that holds it.");
            None
        }
        Err(error) => {
            warn!(path = %path.display(), error = %error, "Cannot read the boot id; a returning Xid escalates after GPU resets only, not after reboots. Set [health] boot_id to a readable file (\"\" turns this off).");
            None
        }
    }
}

/// Most bytes of the boot id file read (the kernel's is a 36-character
/// UUID and a newline).
pub const BOOT_ID_MAX_BYTES: u64 = 128;

/// When the machine booted: kernel-log times count from there. Now when
/// `/proc/uptime` cannot be read.
pub fn boot_time() -> SystemTime {
    known_boot_time().unwrap_or_else(SystemTime::now)
}

/// When the machine booted, from `/proc/uptime` (sub-second, unlike
/// `/proc/stat`'s `btime`); `None` where it cannot be read. The one boot
/// clock of the agent: the kernel log, history and the agent's own start
/// time all count from it.
pub fn known_boot_time() -> Option<SystemTime> {
    let uptime = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)?;
    SystemTime::now().checked_sub(Duration::from_secs_f64(uptime))
}

/// Sleeps `period` in short steps; true when asked to stop.
fn sleep_or_stop(stop: &AtomicBool, period: Duration) -> bool {
    let deadline = std::time::Instant::now() + period;
    while std::time::Instant::now() < deadline {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        std::thread::sleep(POLL.min(deadline - std::time::Instant::now()));
    }
    stop.load(Ordering::Relaxed)
}

/// The kernel-log thread: polls the log every [`POLL`].
fn run_kernel_log(
    path: PathBuf,
    table: &XidTable,
    snapshots: &SnapshotReceiver,
    stop: &AtomicBool,
) {
    let mut log = LogState::new(path, boot_time());
    loop {
        log.step(table, snapshots);
        if sleep_or_stop(stop, POLL) {
            return;
        }
    }
}

/// The PCI scan thread: counts the GPUs on the bus every [`PCI_EVERY`].
fn run_pci(path: PathBuf, table: &XidTable, stop: &AtomicBool) {
    let mut warned = false;
    loop {
        count_pci(&path, table, &mut warned);
        if sleep_or_stop(stop, PCI_EVERY) {
            return;
        }
    }
}

fn count_pci(path: &std::path::Path, table: &XidTable, warned: &mut bool) {
    match pci_scan::scan(path) {
        Ok(gpus) => {
            *warned = false;
            table.set_pci_gpus(Some(gpus));
        }
        Err(error) => {
            if !*warned {
                warn!(error = %error, "GPUs on the PCI bus are not counted.");
                *warned = true;
            }
            table.set_pci_gpus(None);
        }
    }
}

/// The NVML index and PCI address of each GPU in the latest snapshot.
fn gpu_addresses(snapshots: &SnapshotReceiver) -> Vec<(u32, PciAddress)> {
    let Some(snapshot) = snapshots.borrow().clone() else {
        return Vec::new();
    };
    snapshot
        .gpus
        .iter()
        .filter_map(|g| {
            let address = PciAddress::parse(g.identity.pci_bus_id.as_deref()?)?;
            Some((g.index, address))
        })
        .collect()
}

/// The kernel log being followed (or waited for).
struct LogState {
    path: PathBuf,
    follower: Option<Follower>,
    /// When to try opening it again.
    retry_at: std::time::Instant,
    /// An open failure was logged (once per outage).
    warned: bool,
    router: Router,
    lines: Vec<ReadLine>,
    /// Warnings for records left out (a flood), at most one per episode
    /// and [`router::WARN_EVERY`].
    dropped_warning: RateLimit,
    /// Whether the last poll left records out (an episode under way).
    dropping: bool,
}

impl LogState {
    fn new(path: PathBuf, boot: SystemTime) -> Self {
        LogState {
            path,
            follower: None,
            retry_at: std::time::Instant::now(),
            warned: false,
            router: Router::new(boot),
            lines: Vec::new(),
            dropped_warning: RateLimit::default(),
            dropping: false,
        }
    }

    fn step(&mut self, table: &XidTable, snapshots: &SnapshotReceiver) {
        if self.follower.is_none() {
            if std::time::Instant::now() < self.retry_at {
                return;
            }
            match Follower::open(&self.path) {
                Ok(follower) => {
                    table.set_kernel_log_up(Some(true));
                    info!(path = %self.path.display(), "Reading Xid and SXid errors from the kernel log.");
                    self.warned = false;
                    self.follower = Some(follower);
                }
                Err(error) => {
                    table.set_kernel_log_up(Some(false));
                    if !self.warned {
                        warn!(error = %error, "Xid errors are still counted from NVML events, without their text; SXid errors and Xid errors logged before the agent started are not seen.");
                        self.warned = true;
                    }
                    self.retry_at = std::time::Instant::now() + RETRY;
                    return;
                }
            }
        }
        if let Some(follower) = &mut self.follower {
            match follower.poll(&mut self.lines) {
                Ok(dropped) => self.count_dropped(dropped, table),
                Err(error) => {
                    warn!(path = %self.path.display(), error = %error, "Reading the kernel log failed; opening it again.");
                    table.set_kernel_log_up(Some(false));
                    self.follower = None;
                    self.retry_at = std::time::Instant::now() + POLL;
                }
            }
        }
        if !self.lines.is_empty() || self.router_waits() {
            self.router.set_gpus(gpu_addresses(snapshots), table);
        }
        for line in self.lines.drain(..) {
            self.router.line(&line, table);
        }
    }

    /// Whether the router still waits for the GPUs' addresses.
    fn router_waits(&self) -> bool {
        self.router.waiting()
    }

    fn count_dropped(&mut self, dropped: reader::Dropped, table: &XidTable) {
        if dropped.kmsg_overwritten > 0 {
            table.add_kernel_log_dropped("kmsg_overwritten", dropped.kmsg_overwritten);
        }
        if dropped.skipped_bytes > 0 {
            table.add_kernel_log_skipped_bytes(dropped.skipped_bytes);
        }
        let dropping = dropped != reader::Dropped::default();
        if dropping && !self.dropping {
            if let Some(held_back) = self.dropped_warning.ready(std::time::Instant::now()) {
                warn!(
                    path = %control_chars(&self.path.display().to_string()),
                    overwritten_records = dropped.kmsg_overwritten,
                    skipped_bytes = dropped.skipped_bytes,
                    held_back,
                    "The kernel log is flooded (or was far ahead of the reader when opened): the reader skips ahead to the newest lines and counts what it leaves out (gpuwatch_kernel_log_dropped_total, gpuwatch_kernel_log_skipped_bytes_total)."
                );
            }
        }
        self.dropping = dropping;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO, `/dev/zero` or a huge file named as the boot id is refused
    /// at once (the agent's start-up used to wait on the FIFO for ever).
    #[test]
    fn the_boot_id_is_read_bounded_and_never_waited_on() {
        let dir = tempfile::tempdir().expect("temp dir");
        let id = dir.path().join("boot_id");
        std::fs::write(&id, "1b2c3d4e-0000-4000-8000-000000000000\n").expect("write");
        assert_eq!(
            read_boot_id(&id).as_deref(),
            Some("1b2c3d4e-0000-4000-8000-000000000000")
        );
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a node.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(read_boot_id(&fifo));
        });
        let answer = wait
            .recv_timeout(Duration::from_secs(5))
            .expect("a FIFO as the boot id must not hang");
        assert_eq!(answer, None);
        assert_eq!(read_boot_id(std::path::Path::new("/dev/zero")), None);
        let long = dir.path().join("long");
        std::fs::write(&long, "x".repeat(1 << 20)).expect("write");
        assert_eq!(
            read_boot_id(&long).map(|id| id.len()),
            Some(BOOT_ID_MAX_BYTES as usize)
        );
    }

    #[test]
    fn simulated_gpus_do_not_read_the_hosts_kernel_log_unless_told() {
        use super::settings::SimulatedInputs;
        let default = crate::config::Config::default().health;
        assert_eq!(
            default.kernel_log.as_deref(),
            Some(std::path::Path::new("/dev/kmsg"))
        );
        let simulated = |kernel_log: Option<&str>, config: &HealthConfig| HealthConfig {
            simulated: Some(SimulatedInputs {
                kernel_log: kernel_log.map(PathBuf::from),
            }),
            ..config.clone()
        };
        assert_eq!(kernel_log_path(&default), Some("/dev/kmsg".into()));
        assert_eq!(kernel_log_path(&simulated(None, &default)), None);
        assert_eq!(
            kernel_log_path(&simulated(Some("/tmp/sim-kmsg"), &default)),
            Some("/tmp/sim-kmsg".into())
        );
        assert_eq!(pci_path(&default), Some("/sys/bus/pci/devices".into()));
        assert_eq!(pci_path(&simulated(None, &default)), None);
        let explicit = HealthConfig {
            kernel_log: Some("/var/log/replay".into()),
            kernel_log_explicit: true,
            pci_devices: Some("/tmp/pci".into()),
            pci_devices_explicit: true,
            ..default.clone()
        };
        assert_eq!(
            kernel_log_path(&simulated(Some("/tmp/sim-kmsg"), &explicit)),
            Some("/var/log/replay".into())
        );
        assert_eq!(
            pci_path(&simulated(None, &explicit)),
            Some("/tmp/pci".into())
        );
        let off = HealthConfig {
            kernel_log: None,
            kernel_log_explicit: true,
            ..default
        };
        assert_eq!(kernel_log_path(&off), None);
    }
}
