//! Turns kernel-log lines into Xid table entries: the GPU at each Xid's PCI
//! address (held, bounded, until the first snapshot says which GPU sits
//! where), the time clamped to when the line was read, and rate-limited,
//! escaped log lines for what is left out.
#![allow(
    clippy::disallowed_types,
    reason = "runs on the kernel-log reader's blocking thread: std time is its clock"
)]

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant, SystemTime};

use tracing::{debug, warn};

use super::parse::{self, KernelEvent, XidReport};
use super::reader::ReadLine;
use crate::escape::control_chars;
use crate::gpu::pci_address::PciAddress;
use crate::sampler::xid::{KernelXid, XidTable};

/// Xid lines kept while no snapshot says which GPU has which PCI address.
pub const MAX_UNRESOLVED: usize = 1024;
/// PCI addresses NVML does not list whose warnings are remembered.
pub const MAX_UNKNOWN: usize = 64;
/// How often one warning (an unknown address, a forged report, a dropped
/// record) is repeated at most; the rest are counted.
pub const WARN_EVERY: Duration = Duration::from_secs(600);

/// How often the warning for one (GPU, Xid code) is repeated at most: every
/// error is counted and kept in history, the log says it once a minute.
pub const XID_WARN_EVERY: Duration = Duration::from_secs(60);
/// (GPU, Xid code) pairs whose warnings are rate-limited one by one; the
/// rest share one limit.
pub const MAX_XID_WARNINGS: usize = 256;

/// At most one warning per period ([`WARN_EVERY`] unless made with
/// [`RateLimit::every`]); counts the ones held back.
#[derive(Debug, Default)]
pub struct RateLimit {
    last: Option<Instant>,
    held_back: u64,
    /// `None`: [`WARN_EVERY`].
    period: Option<Duration>,
}

impl RateLimit {
    /// At most one warning per `period`.
    pub fn every(period: Duration) -> Self {
        RateLimit {
            period: Some(period),
            ..RateLimit::default()
        }
    }

    /// `Some(held back since the last one)` when a warning may be logged now.
    pub fn ready(&mut self, now: Instant) -> Option<u64> {
        let period = self.period.unwrap_or(WARN_EVERY);
        if self
            .last
            .is_some_and(|last| now.duration_since(last) < period)
        {
            self.held_back += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.held_back))
    }
}

struct Pending {
    report: XidReport,
    at: SystemTime,
    backlog: bool,
}

/// Routes parsed lines to the table.
pub struct Router {
    boot: SystemTime,
    /// NVML index and PCI address of each GPU; empty until known.
    gpus: Vec<(u32, PciAddress)>,
    unresolved: VecDeque<Pending>,
    /// Addresses NVML does not list, with their warning's rate limit.
    unknown: HashMap<PciAddress, RateLimit>,
    /// Warnings for unknown addresses beyond [`MAX_UNKNOWN`].
    unknown_overflow: RateLimit,
    overflow: RateLimit,
    forged: RateLimit,
    /// Live Xid warnings per (GPU, code), and the shared one beyond
    /// [`MAX_XID_WARNINGS`].
    xid_warnings: HashMap<(u32, u64), RateLimit>,
    xid_overflow: RateLimit,
}

impl Router {
    /// A router for a machine that booted at `boot`.
    pub fn new(boot: SystemTime) -> Self {
        Router {
            boot,
            gpus: Vec::new(),
            unresolved: VecDeque::new(),
            unknown: HashMap::new(),
            unknown_overflow: RateLimit::default(),
            overflow: RateLimit::default(),
            forged: RateLimit::default(),
            xid_warnings: HashMap::new(),
            xid_overflow: RateLimit::every(XID_WARN_EVERY),
        }
    }

    /// Sets the GPUs' addresses (from the latest snapshot) and records the
    /// Xid lines held until they were known.
    pub fn set_gpus(&mut self, gpus: Vec<(u32, PciAddress)>, table: &XidTable) {
        if gpus.is_empty() {
            return; // identities not read yet: keep the last known
        }
        self.gpus = gpus;
        while let Some(pending) = self.unresolved.pop_front() {
            self.record(pending, table);
        }
    }

    /// The time of a line: its own (from boot), never later than when it was
    /// read nor earlier than boot; the read time when it has none.
    pub fn time(&self, since_boot_us: Option<u64>, read_at: SystemTime) -> SystemTime {
        let Some(us) = since_boot_us else {
            return read_at;
        };
        let at = self
            .boot
            .checked_add(Duration::from_micros(us))
            .unwrap_or(read_at);
        at.min(read_at).max(self.boot.min(read_at))
    }

    /// Handles one line.
    pub fn line(&mut self, line: &ReadLine, table: &XidTable) {
        let Some(split) = parse::split_line(&line.text) else {
            return;
        };
        let Some(event) = parse::kernel_event(&split) else {
            if !split.from_kernel && parse::parse_message(split.message).is_some() {
                table.add_kernel_log_dropped("not_from_kernel", 1);
                if let Some(held_back) = self.forged.ready(Instant::now()) {
                    warn!(line = %control_chars(&line.text), held_back, "A kernel-log line looks like an NVIDIA driver report but the kernel did not write it (user facility or program); it is not counted. Someone on this node may be forging Xid errors.");
                }
            }
            return;
        };
        let at = self.time(split.since_boot_us, line.read_at);
        match event {
            KernelEvent::Xid(report) => {
                let pending = Pending {
                    report,
                    at,
                    backlog: line.backlog,
                };
                if !self.gpus.is_empty() {
                    self.record(pending, table);
                    return;
                }
                if self.unresolved.len() >= MAX_UNRESOLVED {
                    self.unresolved.pop_front();
                    table.add_kernel_log_dropped("unresolved_overflow", 1);
                    if let Some(held_back) = self.overflow.ready(Instant::now()) {
                        warn!(
                            limit = MAX_UNRESOLVED,
                            held_back,
                            "More Xid lines arrived before the GPUs were known than are held; the oldest are dropped (gpuwatch_kernel_log_dropped_total{{reason=\"unresolved_overflow\"}})."
                        );
                    }
                }
                self.unresolved.push_back(pending);
            }
            // The backlog is not counted again: after a restart the
            // counters start over, and an old error must not look new.
            KernelEvent::Sxid { pci, code, text } if line.backlog => {
                debug!(switch = %pci, sxid = code, text = %control_chars(&text), "SXid error from before the agent started.");
            }
            KernelEvent::Sxid { pci, code, text } => {
                warn!(switch = %pci, sxid = code, text = %control_chars(&text), "SXid error reported by the NVSwitch driver.");
                table.record_sxid(pci.to_string(), code, at);
            }
        }
    }

    fn record(&mut self, pending: Pending, table: &XidTable) {
        let Pending {
            report,
            at,
            backlog,
        } = pending;
        let Some((gpu, _)) = self.gpus.iter().find(|(_, a)| a.same_device(&report.pci)) else {
            self.unknown_device(&report);
            table.add_kernel_log_dropped("unknown_device", 1);
            return;
        };
        if backlog {
            debug!(
                gpu,
                xid = report.code,
                "Xid error from before the agent started."
            );
        } else {
            let key = (*gpu, report.code);
            let limit = match self.xid_warnings.len() < MAX_XID_WARNINGS {
                true => self
                    .xid_warnings
                    .entry(key)
                    .or_insert_with(|| RateLimit::every(XID_WARN_EVERY)),
                false => match self.xid_warnings.get_mut(&key) {
                    Some(limit) => limit,
                    None => &mut self.xid_overflow,
                },
            };
            if let Some(held_back) = limit.ready(Instant::now()) {
                warn!(gpu, xid = report.code, text = %control_chars(&report.text), held_back, "Xid error in the kernel log.");
            }
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

    /// Warns about an Xid on an address NVML does not list: once per address
    /// per [`WARN_EVERY`], for at most [`MAX_UNKNOWN`] addresses.
    fn unknown_device(&mut self, report: &XidReport) {
        let now = Instant::now();
        let limit = match self.unknown.len() < MAX_UNKNOWN {
            true => self.unknown.entry(report.pci).or_default(),
            false => match self.unknown.get_mut(&report.pci) {
                Some(limit) => limit,
                None => &mut self.unknown_overflow,
            },
        };
        if let Some(held_back) = limit.ready(now) {
            warn!(pci = %report.pci, xid = report.code, held_back, "Xid error on a PCI device NVML does not list; it is not counted (gpuwatch_kernel_log_dropped_total{{reason=\"unknown_device\"}}).");
        }
    }

    /// Whether Xid lines wait for the GPUs' addresses.
    pub fn waiting(&self) -> bool {
        !self.unresolved.is_empty()
    }

    /// How many addresses the unknown-address warnings remember.
    #[cfg(test)]
    pub fn unknown_len(&self) -> usize {
        self.unknown.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: String, read_at: SystemTime) -> ReadLine {
        ReadLine {
            text,
            backlog: false,
            read_at,
        }
    }

    fn count(table: &XidTable, gpu: u32, code: u64) -> u64 {
        let counts = table.counts();
        let codes = counts
            .get(&gpu)
            .map(|g| g.codes.as_slice())
            .unwrap_or_default();
        codes.iter().find(|x| x.code == code).map_or(0, |x| x.count)
    }

    fn dropped(table: &XidTable, reason: &str) -> u64 {
        let health = table.node_health();
        let found = health.kernel_log_dropped.iter().find(|(r, _)| *r == reason);
        found.map_or(0, |(_, n)| *n)
    }

    fn gpu0() -> Vec<(u32, PciAddress)> {
        vec![(0, PciAddress::parse("0000:18:00.0").unwrap())]
    }

    #[test]
    fn thousands_of_xid_lines_at_once_are_all_counted() {
        let now = SystemTime::now();
        let table = XidTable::default();
        let mut router = Router::new(now - Duration::from_secs(3600));
        router.set_gpus(gpu0(), &table);
        for i in 0..3000u64 {
            // 10 min apart in kernel time: no two are one error.
            let text = format!(
                "4,{i},{},-;NVRM: Xid (PCI:0000:18:00): 13, pid=1, name=x, Graphics Exception",
                i * 1_000_000
            );
            router.line(&line(text, now), &table);
        }
        assert_eq!(count(&table, 0, 13), 3000);
        assert_eq!(dropped(&table, "unresolved_overflow"), 0);
        // One warning; the other 2999 held back, counted in the next one.
        assert_eq!(router.xid_warnings.len(), 1);
        assert_eq!(router.xid_warnings[&(0, 13)].held_back, 2999);
    }

    #[test]
    fn before_the_gpus_are_known_the_overflow_is_counted() {
        let now = SystemTime::now();
        let table = XidTable::default();
        let mut router = Router::new(now - Duration::from_secs(3600));
        for i in 0..3000u64 {
            let text = format!("4,{i},{i},-;NVRM: Xid (PCI:0000:18:00): 13, x");
            router.line(&line(text, now), &table);
        }
        router.set_gpus(gpu0(), &table);
        let counted = count(&table, 0, 13);
        let lost = dropped(&table, "unresolved_overflow");
        assert_eq!(
            (counted, lost),
            (MAX_UNRESOLVED as u64, 3000 - MAX_UNRESOLVED as u64)
        );
    }

    #[test]
    fn times_from_the_future_or_an_earlier_boot_are_clamped_to_the_read_time() {
        let boot = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let read_at = boot + Duration::from_secs(600);
        let router = Router::new(boot);
        // TS_USEC=900000000000000: 28 years after boot.
        assert_eq!(router.time(Some(900_000_000_000_000), read_at), read_at);
        assert_eq!(router.time(Some(u64::MAX), read_at), read_at);
        // An earlier boot's kern.log: uptime 2 h, now 10 min.
        assert_eq!(router.time(Some(7_200_000_000), read_at), read_at);
        assert_eq!(
            router.time(Some(5_000_000), read_at),
            boot + Duration::from_secs(5)
        );
        assert_eq!(router.time(None, read_at), read_at, "no time: when read");
        // End to end: the Xid's last-seen time is the read time.
        let table = XidTable::default();
        let mut router = Router::new(boot);
        router.set_gpus(gpu0(), &table);
        let text = "4,9,900000000000000,-;NVRM: Xid (PCI:0000:18:00): 79, x".to_string();
        router.line(&line(text, read_at), &table);
        let counts = table.counts();
        assert_eq!(counts[&0].codes[0].last_seen, read_at);
    }

    #[test]
    fn unknown_addresses_are_bounded_and_their_warnings_rate_limited() {
        let now = SystemTime::now();
        let table = XidTable::default();
        let mut router = Router::new(now - Duration::from_secs(3600));
        router.set_gpus(gpu0(), &table);
        for i in 0..5000u32 {
            let bus = i % 256;
            let domain = i / 256;
            let text = format!("4,{i},1,-;NVRM: Xid (PCI:{domain:04x}:{bus:02x}:01): 13, x");
            router.line(&line(text, now), &table);
        }
        assert_eq!(router.unknown_len(), MAX_UNKNOWN);
        assert_eq!(dropped(&table, "unknown_device"), 5000);
        assert_eq!(count(&table, 0, 13), 0);
        let mut limit = RateLimit::default();
        let t0 = Instant::now();
        assert_eq!(limit.ready(t0), Some(0));
        assert_eq!(limit.ready(t0 + Duration::from_secs(1)), None);
        assert_eq!(limit.ready(t0 + Duration::from_secs(2)), None);
        assert_eq!(limit.ready(t0 + WARN_EVERY), Some(2));
    }

    #[test]
    fn forged_reports_are_counted_as_dropped_not_as_xid() {
        let now = SystemTime::now();
        let table = XidTable::default();
        let mut router = Router::new(now - Duration::from_secs(3600));
        router.set_gpus(gpu0(), &table);
        let forged = "12,1,1,-;NVRM: Xid (PCI:0000:18:00): 79, \u{1b}]0;owned\u{7}".to_string();
        router.line(&line(forged, now), &table);
        let logger = "Dec  1 10:00:00 node1 alice: NVRM: Xid (PCI:0000:18:00): 79, x".to_string();
        router.line(&line(logger, now), &table);
        assert_eq!(count(&table, 0, 79), 0);
        assert_eq!(dropped(&table, "not_from_kernel"), 2);
    }
}
