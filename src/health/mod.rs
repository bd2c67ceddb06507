//! Hardware health beyond NVML's readings: the kernel log's Xid and SXid
//! lines ([`reader`] follows the log, [`parse`] reads its lines, [`pci`]
//! matches the driver's PCI addresses to NVML's GPUs) and NVIDIA's Xid
//! catalog ([`catalog`]).
//!
//! One thread follows the log and writes into the sampler's Xid table,
//! which de-duplicates against NVML's own Xid events; the sampler then
//! carries counts, SXid counts and recent occurrences in each snapshot.

pub mod catalog;
pub mod escalation;
pub mod parse;
pub mod pci_scan;
#[cfg(test)]
mod proptests;
pub mod reader;
pub mod settings;
pub mod verdict;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use tracing::{debug, info, warn};

use crate::sampler::xid::{KernelXid, XidTable};
use crate::sampler::{Sampler, SnapshotReceiver};
use settings::HealthConfig;

use crate::gpu::pci_address::PciAddress;
use parse::{KernelEvent, XidReport};
use reader::{Follower, ReadLine};

/// How often the log is polled: also the longest delay of a kernel-log Xid.
const POLL: Duration = Duration::from_millis(500);
/// How often an unreadable log is tried again.
const RETRY: Duration = Duration::from_secs(30);
/// Xid lines kept while no snapshot says which GPU has which PCI address.
const MAX_UNRESOLVED: usize = 1024;

/// The running kernel-log reader; stops when dropped.
pub struct HealthReader {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How often the PCI bus is counted.
const PCI_EVERY: Duration = Duration::from_secs(30);

/// Whether the agent runs on simulated GPUs (`--simulate`): then the host's
/// kernel log and PCI bus do not describe them.
fn simulated() -> bool {
    std::env::var_os(crate::sim::ENV_SCENARIO).is_some()
}

/// The PCI tree to count GPUs in: with `--simulate`, only one the file names.
fn pci_path(config: &HealthConfig, simulated: bool) -> Option<PathBuf> {
    if simulated && !config.pci_devices_explicit {
        return None;
    }
    config.pci_devices.clone()
}

/// Starts the hardware-health readers the configuration asks for; `None`
/// when all are off. Keep the handle for as long as the agent runs.
pub fn start(config: &HealthConfig, sampler: &Sampler) -> Option<HealthReader> {
    let kernel_log = kernel_log_path(config, simulated(), std::env::var_os(crate::sim::ENV_KMSG));
    let pci = pci_path(config, simulated());
    let table = sampler.xid_table();
    table.set_boot_id(config.boot_id.as_deref().and_then(read_boot_id));
    if kernel_log.is_none() && pci.is_none() {
        return None;
    }
    if kernel_log.is_some() {
        table.set_kernel_log_up(Some(false));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let snapshots = sampler.snapshots();
    let spawned = std::thread::Builder::new()
        .name("gpuwatch-health".into())
        .spawn(move || run(kernel_log, pci, &table, &snapshots, &flag));
    match spawned {
        Ok(thread) => Some(HealthReader {
            stop,
            thread: Some(thread),
        }),
        Err(error) => {
            warn!(error = %error, "Cannot start the hardware-health thread; Xid errors are counted from NVML events only and GPUs on the PCI bus are not counted.");
            None
        }
    }
}

/// Counts the GPUs on the PCI bus into a one-off sample (`gpuwatch status`).
pub fn count_pci_into(config: &HealthConfig, snapshot: &mut crate::gpu::Snapshot) {
    let Some(path) = pci_path(config, simulated()) else {
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
        if let Some(thread) = self.thread.take() {
            let deadline = std::time::Instant::now() + POLL * 4;
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
fn kernel_log_path(
    config: &HealthConfig,
    simulated: bool,
    sim_kmsg: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    if simulated && !config.kernel_log_explicit {
        return sim_kmsg.filter(|p| !p.is_empty()).map(PathBuf::from);
    }
    config.kernel_log.clone()
}

/// The kernel's boot id from `path` (a reboot changes it, an agent restart
/// does not); `None`, with a warning, when it cannot be read.
pub fn read_boot_id(path: &std::path::Path) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => Some(text.trim().to_string()),
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

/// When the machine booted: kernel-log times count from there.
pub fn boot_time() -> SystemTime {
    let uptime = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(0.0);
    SystemTime::now()
        .checked_sub(Duration::from_secs_f64(uptime))
        .unwrap_or(SystemTime::UNIX_EPOCH)
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

fn run(
    kernel_log: Option<PathBuf>,
    pci: Option<PathBuf>,
    table: &XidTable,
    snapshots: &SnapshotReceiver,
    stop: &AtomicBool,
) {
    let mut log = kernel_log.map(|path| LogState {
        path,
        follower: None,
        retry_at: std::time::Instant::now(),
        warned: false,
        router: Router::new(boot_time()),
        lines: Vec::new(),
    });
    let mut pci = pci.map(|path| (path, std::time::Instant::now(), false));
    loop {
        if let Some((path, next, warned)) = &mut pci {
            if std::time::Instant::now() >= *next {
                count_pci(path, table, warned);
                *next = std::time::Instant::now() + PCI_EVERY;
            }
        }
        if let Some(log) = &mut log {
            log.step(table, snapshots);
        }
        if sleep_or_stop(stop, POLL) {
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
}

impl LogState {
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
            if let Err(error) = follower.poll(&mut self.lines) {
                warn!(path = %self.path.display(), error = %error, "Reading the kernel log failed; opening it again.");
                table.set_kernel_log_up(Some(false));
                self.follower = None;
                self.retry_at = std::time::Instant::now() + POLL;
            }
        }
        for line in self.lines.drain(..) {
            self.router.line(&line, table);
        }
        self.router.resolve(snapshots, table);
    }
}

/// Turns lines into table entries, holding Xid lines until a snapshot says
/// which GPU sits at their PCI address.
struct Router {
    boot: SystemTime,
    unresolved: Vec<(XidReport, SystemTime, bool)>,
    /// Addresses NVML does not list, already logged.
    unknown: std::collections::BTreeSet<PciAddress>,
}

impl Router {
    fn new(boot: SystemTime) -> Self {
        Router {
            boot,
            unresolved: Vec::new(),
            unknown: Default::default(),
        }
    }

    fn line(&mut self, line: &ReadLine, table: &XidTable) {
        let Some(split) = parse::split_line(&line.text) else {
            return;
        };
        let Some(event) = parse::kernel_event(&split) else {
            return;
        };
        let at = split
            .since_boot_us
            .and_then(|us| self.boot.checked_add(Duration::from_micros(us)))
            .unwrap_or_else(SystemTime::now);
        match event {
            KernelEvent::Xid(report) => {
                if self.unresolved.len() >= MAX_UNRESOLVED {
                    self.unresolved.remove(0);
                }
                self.unresolved.push((report, at, line.backlog));
            }
            // The backlog is not counted again: after a restart the
            // counters start over, and an old error must not look new.
            KernelEvent::Sxid { pci, code, text } if line.backlog => {
                debug!(switch = %pci, sxid = code, text = %text, "SXid error from before the agent started.");
            }
            KernelEvent::Sxid { pci, code, text } => {
                warn!(switch = %pci, sxid = code, text = %text, "SXid error reported by the NVSwitch driver.");
                table.record_sxid(pci.to_string(), code, at);
            }
        }
    }

    fn resolve(&mut self, snapshots: &SnapshotReceiver, table: &XidTable) {
        if self.unresolved.is_empty() {
            return;
        }
        let Some(snapshot) = snapshots.borrow().clone() else {
            return;
        };
        let gpus: Vec<(u32, PciAddress)> = snapshot
            .gpus
            .iter()
            .filter_map(|g| {
                let address = PciAddress::parse(g.identity.pci_bus_id.as_deref()?)?;
                Some((g.index, address))
            })
            .collect();
        if gpus.is_empty() {
            return; // identities not read yet
        }
        for (report, at, backlog) in self.unresolved.drain(..) {
            let Some((gpu, _)) = gpus.iter().find(|(_, a)| a.same_device(&report.pci)) else {
                if self.unknown.insert(report.pci) {
                    warn!(pci = %report.pci, xid = report.code, "Xid error on a PCI device NVML does not list; it is not counted.");
                }
                continue;
            };
            if backlog {
                debug!(
                    gpu,
                    xid = report.code,
                    "Xid error from before the agent started."
                );
            } else {
                warn!(gpu, xid = report.code, text = %report.text, "Xid error in the kernel log.");
            }
            table.record_kernel(KernelXid {
                gpu: *gpu,
                code: report.code,
                at,
                pid: report.pid,
                process: report.process,
                text: report.text,
                backlog,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_gpus_do_not_read_the_hosts_kernel_log_unless_told() {
        let default = crate::config::Config::default().health;
        assert_eq!(
            default.kernel_log.as_deref(),
            Some(std::path::Path::new("/dev/kmsg"))
        );
        assert_eq!(
            kernel_log_path(&default, false, None),
            Some("/dev/kmsg".into())
        );
        assert_eq!(kernel_log_path(&default, true, None), None);
        assert_eq!(
            kernel_log_path(&default, true, Some("/tmp/sim-kmsg".into())),
            Some("/tmp/sim-kmsg".into())
        );
        let explicit = HealthConfig {
            kernel_log: Some("/var/log/replay".into()),
            kernel_log_explicit: true,
            pci_devices: None,
            pci_devices_explicit: false,
            boot_id: None,
            xid_escalate_after: 2,
        };
        assert_eq!(
            kernel_log_path(&explicit, true, Some("/tmp/sim-kmsg".into())),
            Some("/var/log/replay".into())
        );
        let off = HealthConfig {
            kernel_log: None,
            kernel_log_explicit: true,
            pci_devices: None,
            pci_devices_explicit: false,
            boot_id: None,
            xid_escalate_after: 2,
        };
        assert_eq!(kernel_log_path(&off, false, None), None);
    }
}
