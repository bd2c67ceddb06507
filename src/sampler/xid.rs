//! Xid critical errors: a dedicated thread waits on an NVML event set and
//! counts each (GPU, Xid code) with the time it was last seen.
#![allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the Xid event thread blocks in NVML: std time and std sleep are its clock"
)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

use crate::gpu::node_health::{NodeHealth, SxidCount, XidOccurrence, XidSource};
use crate::gpu::nvml::{Driver, XidWait};
use crate::gpu::{XidCount, XidFolded};

/// How many recent Xid occurrences the table keeps for consumers (history
/// events, the event list): far more than arrive between two snapshots.
pub const RECENT_XID: usize = 256;
/// An NVML event and a kernel-log line of the same (GPU, code) this close in
/// time are one error, counted once.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(10);
/// Occurrences of folded codes kept to pair NVML's and the kernel log's
/// reports of one error (a few seconds' worth of a flood).
const RECENT_FOLDED: usize = 64;
/// Distinct Xid codes outside NVIDIA's catalog counted on their own per GPU;
/// Xids of further unknown codes are counted together (`xid="other"`).
/// Real Xid codes are a few hundred numbers, all in the catalog: a GPU with
/// more than this many unknown codes is being fed made-up ones.
pub const MAX_UNKNOWN_XID_CODES: usize = 32;
/// NVSwitches whose SXids are counted on their own (a node has a handful);
/// SXids of further switches are counted together (`switch="other"`).
pub const MAX_SXID_SWITCHES: usize = 16;
/// Distinct SXid codes counted on their own per switch; further codes are
/// counted together (`sxid="other"`).
pub const MAX_SXID_CODES: usize = 32;

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

/// One GPU's Xid counts, as the sampler puts them in a snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuXids {
    /// Per code, ascending: catalog codes and the first unknown ones.
    pub codes: Vec<XidCount>,
    /// The unknown codes past [`MAX_UNKNOWN_XID_CODES`], together.
    pub other: Option<XidFolded>,
}

/// One GPU's counts in the table.
#[derive(Debug, Default)]
struct GpuCounts {
    codes: BTreeMap<u64, XidCount>,
    /// How many of `codes` the catalog does not know.
    unknown: usize,
    other: Option<XidFolded>,
}

/// One entry of the recent occurrences.
#[derive(Debug)]
struct Recent {
    occurrence: XidOccurrence,
    /// The other source has reported it too.
    confirmed: bool,
}

#[derive(Debug, Default)]
struct State {
    counts: HashMap<u32, GpuCounts>,
    /// Recent occurrences consumers see (history events, the event list),
    /// oldest first: all but the occurrences of folded codes after a GPU's
    /// first.
    recent: VecDeque<Recent>,
    /// Recent occurrences of folded codes that consumers do not see, kept
    /// only to pair the two sources' reports of one error.
    folded_recent: VecDeque<Recent>,
    next_seq: u64,
    kernel_log_up: Option<bool>,
    pci_gpus: Option<Arc<Vec<String>>>,
    sxid: BTreeMap<(Option<String>, Option<u64>), SxidCount>,
    /// Codes counted on their own per switch counted on its own.
    sxid_switches: HashMap<String, usize>,
    xid_folded: u64,
    sxid_folded: u64,
    boot_id: Option<Arc<str>>,
    /// Kernel-log records the reader left out, by reason.
    kernel_log_dropped: BTreeMap<&'static str, u64>,
    /// Kernel-log bytes skipped to catch up with a flood.
    kernel_log_skipped_bytes: u64,
    /// Whether NVIDIA's catalog knows a code (set by the agent; until then
    /// every code counts against the bound on unknown codes).
    known: Option<fn(u64) -> bool>,
}

/// What counting one Xid did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    /// Under its own code.
    Own,
    /// In the GPU's "other" bucket, the first time for this GPU.
    FirstFolded,
    /// In the GPU's "other" bucket, again.
    Folded,
}

impl State {
    fn count(&mut self, gpu: u32, code: u64, at: SystemTime) -> Counted {
        let known = self.known.is_some_and(|known| known(code));
        let counts = self.counts.entry(gpu).or_default();
        if !counts.codes.contains_key(&code) && !known {
            if counts.unknown >= MAX_UNKNOWN_XID_CODES {
                self.xid_folded += 1;
                let first = counts.other.is_none();
                let other = counts.other.get_or_insert(XidFolded {
                    count: 0,
                    last_seen: at,
                });
                other.count += 1;
                other.last_seen = other.last_seen.max(at);
                if first {
                    warn!(
                        gpu,
                        xid = code,
                        bound = MAX_UNKNOWN_XID_CODES,
                        "An Xid code outside NVIDIA's catalog arrived on a GPU that already has the most unknown codes counted on their own; this and later unknown codes are counted together as xid=\"other\"."
                    );
                    return Counted::FirstFolded;
                }
                return Counted::Folded;
            }
            counts.unknown += 1;
        }
        let entry = counts.codes.entry(code).or_insert(XidCount {
            code,
            count: 0,
            last_seen: at,
        });
        entry.count += 1;
        entry.last_seen = entry.last_seen.max(at);
        Counted::Own
    }

    fn push(&mut self, occurrence: XidOccurrence, shown: bool) {
        // Folded occurrences have a ring of their own: a flood of made-up
        // codes must not push the shown ones out before consumers read them.
        let (ring, bound) = if shown {
            (&mut self.recent, RECENT_XID)
        } else {
            (&mut self.folded_recent, RECENT_FOLDED)
        };
        if ring.len() >= bound {
            ring.pop_front();
        }
        ring.push_back(Recent {
            occurrence,
            confirmed: false,
        });
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
    ) -> Option<&mut Recent> {
        self.recent
            .iter_mut()
            .rev()
            .chain(self.folded_recent.iter_mut().rev())
            .find(|r| {
                let o = &r.occurrence;
                !r.confirmed
                    && !o.backlog
                    && o.source != from
                    && o.gpu == gpu
                    && o.code == code
                    && distance(o.at, at) <= DEDUP_WINDOW
            })
    }

    /// Counts one SXid, within the bounds on switches and codes.
    fn count_sxid(&mut self, switch_pci: String, code: u64, at: SystemTime) {
        let switches = self.sxid_switches.len();
        let key = match self.sxid_switches.get_mut(&switch_pci) {
            Some(codes) => {
                if self
                    .sxid
                    .contains_key(&(Some(switch_pci.clone()), Some(code)))
                {
                    (Some(switch_pci), Some(code))
                } else if *codes < MAX_SXID_CODES {
                    *codes += 1;
                    (Some(switch_pci), Some(code))
                } else {
                    (Some(switch_pci), None)
                }
            }
            None if switches < MAX_SXID_SWITCHES => {
                self.sxid_switches.insert(switch_pci.clone(), 1);
                (Some(switch_pci), Some(code))
            }
            None => (None, None),
        };
        if key.1.is_none() {
            if self.sxid_folded == 0 {
                warn!(
                    switch = key.0.as_deref().unwrap_or("other"),
                    sxid = code,
                    switches = MAX_SXID_SWITCHES,
                    codes = MAX_SXID_CODES,
                    "An SXid came past the bounds on NVSwitches or codes per switch; such SXids are counted together as \"other\"."
                );
            }
            self.sxid_folded += 1;
        }
        let entry = self.sxid.entry(key.clone()).or_insert(SxidCount {
            switch_pci: key.0,
            code: key.1,
            count: 0,
            last_seen: at,
        });
        entry.count += 1;
        entry.last_seen = entry.last_seen.max(at);
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
        if let Some(partner) = state.partner(XidSource::Nvml, gpu, code, at) {
            partner.confirmed = true;
            return;
        }
        let shown = state.count(gpu, code, at) != Counted::Folded;
        let seq = state.seq();
        state.push(
            XidOccurrence {
                seq,
                gpu,
                code,
                at,
                source: XidSource::Nvml,
                pid: None,
                process: None,
                text: None,
                backlog: false,
            },
            shown,
        );
    }

    /// Records one kernel-log Xid. A live one is counted unless NVML
    /// already reported the same error (then it only adds its details); a
    /// backlog one is kept for history only.
    pub fn record_kernel(&self, xid: KernelXid) {
        let mut state = self.state();
        let mut shown = true;
        if !xid.backlog {
            if let Some(partner) = state.partner(XidSource::KernelLog, xid.gpu, xid.code, xid.at) {
                partner.confirmed = true;
                partner.occurrence.pid = xid.pid;
                partner.occurrence.process = xid.process;
                partner.occurrence.text = Some(xid.text);
                return;
            }
            shown = state.count(xid.gpu, xid.code, xid.at) != Counted::Folded;
        }
        let seq = state.seq();
        state.push(
            XidOccurrence {
                seq,
                gpu: xid.gpu,
                code: xid.code,
                at: xid.at,
                source: XidSource::KernelLog,
                pid: xid.pid,
                process: xid.process,
                text: Some(xid.text),
                backlog: xid.backlog,
            },
            shown,
        );
    }

    /// Counts one SXid of the NVSwitch at `switch_pci` (live ones only),
    /// within the bounds on switches ([`MAX_SXID_SWITCHES`]) and codes per
    /// switch ([`MAX_SXID_CODES`]).
    pub fn record_sxid(&self, switch_pci: String, code: u64, at: SystemTime) {
        self.state().count_sxid(switch_pci, code, at);
    }

    /// Sets how to tell an Xid code NVIDIA's catalog knows (counted on its
    /// own whatever the bound) from an unknown one (at most
    /// [`MAX_UNKNOWN_XID_CODES`] per GPU on their own). The agent sets
    /// `crate::health::catalog`'s lookup; until then every code counts as
    /// unknown.
    pub fn set_known_codes(&self, known: fn(u64) -> bool) {
        self.state().known = Some(known);
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
    pub fn counts(&self) -> HashMap<u32, GpuXids> {
        let state = self.state();
        state
            .counts
            .iter()
            .map(|(gpu, counts)| {
                let xids = GpuXids {
                    codes: counts.codes.values().cloned().collect(),
                    other: counts.other,
                };
                (*gpu, xids)
            })
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
            xid_folded: state.xid_folded,
            sxid_folded: state.sxid_folded,
            recent_xid: Arc::new(state.recent.iter().map(|r| r.occurrence.clone()).collect()),
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
mod tests;
