//! Xid critical errors: a dedicated thread waits on an NVML event set and
//! counts each (GPU, Xid code) with the time it was last seen.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

use crate::gpu::node_health::{NodeHealth, SxidCount, XidOccurrence, XidSource};
use crate::gpu::nvml::{Driver, XidWait};
use crate::gpu::XidCount;

/// How many recent Xid occurrences the table keeps for consumers (history
/// events, the event list): far more than arrive between two snapshots.
pub const RECENT_XID: usize = 256;
/// An NVML event and a kernel-log line of the same (GPU, code) this close in
/// time are one error, counted once.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(10);

/// An Xid the kernel log reported.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelXid {
    /// NVML index of the GPU.
    pub gpu: u32,
    /// The Xid code.
    pub code: u64,
    /// When it was logged.
    pub at: SystemTime,
    /// Channel owner's pid, where the driver said.
    pub pid: Option<u32>,
    /// Its name, where the driver said.
    pub process: Option<String>,
    /// The driver's text.
    pub text: String,
    /// Logged before the agent started.
    pub backlog: bool,
}

#[derive(Debug, Default)]
struct State {
    counts: HashMap<u32, BTreeMap<u64, XidCount>>,
    /// Recent occurrences, and whether the other source has confirmed each.
    recent: VecDeque<(XidOccurrence, bool)>,
    next_seq: u64,
    kernel_log_up: Option<bool>,
    pci_gpus: Option<Arc<Vec<String>>>,
    sxid: BTreeMap<(String, u64), SxidCount>,
    boot_id: Option<Arc<str>>,
    /// Kernel-log records the reader left out, by reason.
    kernel_log_dropped: BTreeMap<&'static str, u64>,
    /// Kernel-log bytes skipped to catch up with a flood.
    kernel_log_skipped_bytes: u64,
}

impl State {
    fn count(&mut self, gpu: u32, code: u64, at: SystemTime) {
        let entry = self
            .counts
            .entry(gpu)
            .or_default()
            .entry(code)
            .or_insert(XidCount {
                code,
                count: 0,
                last_seen: at,
            });
        entry.count += 1;
        entry.last_seen = entry.last_seen.max(at);
    }

    fn push(&mut self, occurrence: XidOccurrence) {
        if self.recent.len() >= RECENT_XID {
            self.recent.pop_front();
        }
        self.recent.push_back((occurrence, false));
    }

    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// The unconfirmed live occurrence of (gpu, code) from the other source
    /// within the window of `at`.
    fn partner(
        &mut self,
        from: XidSource,
        gpu: u32,
        code: u64,
        at: SystemTime,
    ) -> Option<&mut (XidOccurrence, bool)> {
        self.recent.iter_mut().rev().find(|(o, confirmed)| {
            !confirmed
                && !o.backlog
                && o.source != from
                && o.gpu == gpu
                && o.code == code
                && distance(o.at, at) <= DEDUP_WINDOW
        })
    }
}

fn distance(a: SystemTime, b: SystemTime) -> Duration {
    a.duration_since(b)
        .or_else(|_| b.duration_since(a))
        .unwrap_or_default()
}

/// Xid counts per GPU index, the recent occurrences, and what the kernel-log
/// reader found, shared between the event thread and the kernel-log reader
/// (writers) and the sampler (reader). A plain mutex: every side holds it
/// for microseconds.
#[derive(Debug, Clone, Default)]
pub struct XidTable {
    inner: Arc<Mutex<State>>,
}

impl XidTable {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records one NVML event: counted unless the kernel log already
    /// reported the same error.
    pub fn record(&self, gpu: u32, code: u64, at: SystemTime) {
        let mut state = self.state();
        if let Some((_, confirmed)) = state.partner(XidSource::Nvml, gpu, code, at) {
            *confirmed = true;
            return;
        }
        state.count(gpu, code, at);
        let seq = state.seq();
        state.push(XidOccurrence {
            seq,
            gpu,
            code,
            at,
            source: XidSource::Nvml,
            pid: None,
            process: None,
            text: None,
            backlog: false,
        });
    }

    /// Records one kernel-log Xid. A live one is counted unless NVML
    /// already reported the same error (then it only adds its details); a
    /// backlog one is kept for history only.
    pub fn record_kernel(&self, xid: KernelXid) {
        let mut state = self.state();
        if !xid.backlog {
            if let Some((occurrence, confirmed)) =
                state.partner(XidSource::KernelLog, xid.gpu, xid.code, xid.at)
            {
                *confirmed = true;
                occurrence.pid = xid.pid;
                occurrence.process = xid.process;
                occurrence.text = Some(xid.text);
                return;
            }
            state.count(xid.gpu, xid.code, xid.at);
        }
        let seq = state.seq();
        state.push(XidOccurrence {
            seq,
            gpu: xid.gpu,
            code: xid.code,
            at: xid.at,
            source: XidSource::KernelLog,
            pid: xid.pid,
            process: xid.process,
            text: Some(xid.text),
            backlog: xid.backlog,
        });
    }

    /// Counts one SXid of the NVSwitch at `switch_pci` (live ones only).
    pub fn record_sxid(&self, switch_pci: String, code: u64, at: SystemTime) {
        let mut state = self.state();
        let entry = state
            .sxid
            .entry((switch_pci.clone(), code))
            .or_insert(SxidCount {
                switch_pci,
                code,
                count: 0,
                last_seen: at,
            });
        entry.count += 1;
        entry.last_seen = entry.last_seen.max(at);
    }

    /// Sets the NVIDIA GPUs found on the PCI bus (`None`: not counted).
    pub fn set_pci_gpus(&self, gpus: Option<Vec<String>>) {
        self.state().pci_gpus = gpus.map(Arc::new);
    }

    /// Sets the kernel's boot id (`None`: not read).
    pub fn set_boot_id(&self, boot_id: Option<String>) {
        self.state().boot_id = boot_id.map(Arc::from);
    }

    /// Sets whether the kernel log is being read (`None`: off).
    pub fn set_kernel_log_up(&self, up: Option<bool>) {
        self.state().kernel_log_up = up;
    }

    /// Counts `records` kernel-log records the reader left out for `reason`
    /// (`gpuwatch_kernel_log_dropped_total{reason}`).
    pub fn add_kernel_log_dropped(&self, reason: &'static str, records: u64) {
        *self.state().kernel_log_dropped.entry(reason).or_default() += records;
    }

    /// Counts kernel-log bytes skipped to catch up with a flood.
    pub fn add_kernel_log_skipped_bytes(&self, bytes: u64) {
        self.state().kernel_log_skipped_bytes += bytes;
    }

    /// A copy of the counts, per GPU, codes ascending.
    pub fn counts(&self) -> HashMap<u32, Vec<XidCount>> {
        let state = self.state();
        state
            .counts
            .iter()
            .map(|(gpu, codes)| (*gpu, codes.values().cloned().collect()))
            .collect()
    }

    /// What the health readers found, for the snapshot.
    pub fn node_health(&self) -> NodeHealth {
        let state = self.state();
        NodeHealth {
            kernel_log_up: state.kernel_log_up,
            kernel_log_dropped: Arc::new(
                state
                    .kernel_log_dropped
                    .iter()
                    .map(|(reason, n)| (*reason, *n))
                    .collect(),
            ),
            kernel_log_skipped_bytes: state.kernel_log_skipped_bytes,
            pci_gpus: state.pci_gpus.clone(),
            boot_id: state.boot_id.clone(),
            sxid: Arc::new(state.sxid.values().cloned().collect()),
            recent_xid: Arc::new(state.recent.iter().map(|(o, _)| o.clone()).collect()),
        }
    }
}

/// The running event thread; stops when dropped.
pub struct XidWatcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How long one wait blocks: also how soon the thread notices it should stop
/// (within the sampler's 2 s stop grace). An event ends the wait at once, so
/// this does not delay Xid errors; each timeout costs a thread wake-up, so
/// it is no shorter than it needs to be.
const WAIT_MS: u32 = 1000;

impl XidWatcher {
    /// Starts waiting for Xid events on the GPUs in `indices`.
    pub fn start(driver: Arc<Driver>, indices: Vec<u32>, table: XidTable) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("gpuwatch-xid".into())
            .spawn(move || watch(&driver, &indices, &table, &flag))?;
        Ok(XidWatcher {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for XidWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            // The thread wakes at least every WAIT_MS; a hung driver would
            // keep it, so never wait for it longer than a few waits.
            let deadline =
                std::time::Instant::now() + Duration::from_millis(u64::from(WAIT_MS) * 4);
            while !thread.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}

fn watch(driver: &Driver, indices: &[u32], table: &XidTable, stop: &AtomicBool) {
    let listener = match driver.xid_listener(indices) {
        Ok(listener) => listener,
        Err(error) => {
            warn!(error = %error, "Cannot listen for Xid events; Xid errors will not be counted.");
            return;
        }
    };
    info!(gpus = ?listener.registered(), "Listening for Xid events.");
    let mut failures = 0u32;
    while !stop.load(Ordering::Relaxed) {
        match listener.wait(WAIT_MS) {
            XidWait::Event { gpu, code } => {
                warn!(gpu, xid = code, "Xid error reported by the driver.");
                table.record(gpu, code, SystemTime::now());
                failures = 0;
            }
            XidWait::Timeout => failures = 0,
            XidWait::Failed(error) => {
                failures += 1;
                if failures == 1 {
                    warn!(error = %error, "Waiting for Xid events failed; retrying.");
                }
                std::thread::sleep(Duration::from_millis(u64::from(WAIT_MS)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_gpu_and_code() {
        let table = XidTable::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(10);
        let t1 = t0 + Duration::from_secs(5);
        table.record(1, 79, t0);
        table.record(1, 79, t1);
        table.record(1, 13, t0);
        table.record(2, 94, t0);
        let counts = table.counts();
        let gpu1 = &counts[&1];
        assert_eq!(gpu1.len(), 2);
        assert_eq!((gpu1[0].code, gpu1[0].count), (13, 1));
        assert_eq!(
            (gpu1[1].code, gpu1[1].count, gpu1[1].last_seen),
            (79, 2, t1)
        );
        assert_eq!(counts[&2][0].code, 94);
    }

    fn kernel(gpu: u32, code: u64, at: SystemTime, backlog: bool) -> KernelXid {
        KernelXid {
            gpu,
            code,
            at,
            pid: Some(1234),
            process: Some("python3".into()),
            text: "GPU has fallen off the bus.".into(),
            backlog,
        }
    }

    fn count(table: &XidTable, gpu: u32, code: u64) -> u64 {
        table
            .counts()
            .get(&gpu)
            .and_then(|c| c.iter().find(|x| x.code == code).map(|x| x.count))
            .unwrap_or(0)
    }

    #[test]
    fn one_error_seen_by_both_sources_counts_once_either_order() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let table = XidTable::default();
        table.record(0, 79, t0);
        table.record_kernel(kernel(0, 79, t0 + Duration::from_secs(2), false));
        assert_eq!(count(&table, 0, 79), 1);
        let log = table.node_health();
        assert_eq!(log.recent_xid.len(), 1);
        let first = &log.recent_xid[0];
        assert_eq!(first.source, XidSource::Nvml);
        assert_eq!(
            (first.pid, first.text.as_deref()),
            (Some(1234), Some("GPU has fallen off the bus."))
        );

        let table = XidTable::default();
        table.record_kernel(kernel(0, 79, t0, false));
        table.record(0, 79, t0 + Duration::from_secs(1));
        assert_eq!(count(&table, 0, 79), 1);
        assert_eq!(
            table.node_health().recent_xid[0].source,
            XidSource::KernelLog
        );
    }

    #[test]
    fn distinct_errors_are_not_merged() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let table = XidTable::default();
        table.record(0, 79, t0);
        // Another GPU, another code, too far apart, or a second NVML event.
        table.record_kernel(kernel(1, 79, t0, false));
        table.record_kernel(kernel(0, 13, t0, false));
        table.record_kernel(kernel(0, 79, t0 + DEDUP_WINDOW * 2, false));
        table.record(0, 79, t0);
        assert_eq!(count(&table, 1, 79), 1);
        assert_eq!(count(&table, 0, 13), 1);
        // The NVML event at t0 pairs with nothing new: the kernel line of
        // t0 + 2 windows is too far; the second NVML event at t0 pairs with
        // nothing either (same source).
        assert_eq!(count(&table, 0, 79), 3);
        // One kernel line confirms one NVML event, not two.
        let table = XidTable::default();
        table.record(0, 48, t0);
        table.record(0, 48, t0);
        table.record_kernel(kernel(0, 48, t0, false));
        assert_eq!(count(&table, 0, 48), 2);
    }

    #[test]
    fn backlog_is_kept_for_history_but_not_counted() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let table = XidTable::default();
        table.record_kernel(kernel(2, 79, t0, true));
        assert_eq!(count(&table, 2, 79), 0);
        // A live NVML event right after is a new error, not the backlog one.
        table.record(2, 79, t0 + Duration::from_secs(1));
        assert_eq!(count(&table, 2, 79), 1);
        let log = table.node_health();
        assert_eq!(log.recent_xid.len(), 2);
        assert!(log.recent_xid[0].backlog && !log.recent_xid[1].backlog);
        assert!(log.recent_xid[0].seq < log.recent_xid[1].seq);
    }

    #[test]
    fn recent_occurrences_and_sxid_are_bounded_and_counted() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let table = XidTable::default();
        for i in 0..(RECENT_XID as u64 + 10) {
            table.record(0, 13, t0 + Duration::from_secs(i * 100));
        }
        let log = table.node_health();
        assert_eq!(log.recent_xid.len(), RECENT_XID);
        assert_eq!(count(&table, 0, 13), RECENT_XID as u64 + 10);
        table.record_sxid("0000:05:00.0".into(), 20034, t0);
        table.record_sxid("0000:05:00.0".into(), 20034, t0);
        table.record_sxid("0000:06:00.0".into(), 12028, t0);
        table.set_kernel_log_up(Some(true));
        let log = table.node_health();
        assert_eq!(log.kernel_log_up, Some(true));
        let sxid: Vec<_> = log
            .sxid
            .iter()
            .map(|s| (s.switch_pci.as_str(), s.code, s.count))
            .collect();
        assert_eq!(
            sxid,
            [("0000:05:00.0", 20034, 2), ("0000:06:00.0", 12028, 1)]
        );
    }
}
