//! What the hardware-health readers (`crate::health`) add to a snapshot:
//! whether the kernel log can be read, NVSwitch SXid counts, the latest Xid
//! occurrences with their details (for history events and the event list),
//! and the GPUs on the PCI bus.

use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;

use super::unix_time::unix_seconds;

/// Why the kernel-log reader leaves a record out (the `reason` label of
/// `gpuwatch_kernel_log_dropped_total`): Xid lines beyond the bound held
/// before the GPUs are known, records the kernel overwrote before they were
/// read, Xid on a PCI device NVML does not list, reports the kernel did not
/// write (forgeries).
pub const KERNEL_LOG_DROP_REASONS: [&str; 4] = [
    "unresolved_overflow",
    "kmsg_overwritten",
    "unknown_device",
    "not_from_kernel",
];

/// The node's hardware health as of one tick. `Default` is "not read"
/// (turned off, or a one-off sample that never starts the readers).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NodeHealth {
    /// `Some(true)` while the kernel log is being read, `Some(false)` when
    /// it cannot be (permissions), `None` when reading it is off.
    pub kernel_log_up: Option<bool>,
    /// Kernel-log records the reader left out since the agent started, by
    /// reason (`unresolved_overflow`, `kmsg_overwritten`, `unknown_device`,
    /// `not_from_kernel`), reasons ascending.
    pub kernel_log_dropped: Arc<Vec<(&'static str, u64)>>,
    /// Kernel-log bytes skipped to catch up with a flood.
    pub kernel_log_skipped_bytes: u64,
    /// SXid errors per NVSwitch (PCI address) and code, since the agent
    /// started.
    pub sxid: Arc<Vec<SxidCount>>,
    /// The most recent Xid occurrences, oldest first, from either source;
    /// bounded (see `crate::sampler::xid::RECENT_XID`).
    pub recent_xid: Arc<Vec<XidOccurrence>>,
    /// NVIDIA GPUs on the PCI bus (`0000:18:00.0`, ascending), whether the
    /// driver saw them or not; `None` when not counted (off, unreadable).
    pub pci_gpus: Option<Arc<Vec<String>>>,
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`), read once
    /// at start: a new one means the node rebooted (an agent restart keeps
    /// it). `None` when not read.
    pub boot_id: Option<Arc<str>>,
}

impl NodeHealth {
    /// The GPUs on the PCI bus that NVML does not list, given NVML's bus
    /// ids; empty when the bus is not counted.
    pub fn missing_from_driver<'a>(
        &self,
        nvml_bus_ids: impl Iterator<Item = &'a str> + Clone,
    ) -> Vec<String> {
        use super::pci_address::PciAddress;
        let Some(on_bus) = &self.pci_gpus else {
            return Vec::new();
        };
        on_bus
            .iter()
            .filter(|address| {
                let Some(address) = PciAddress::parse(address) else {
                    return false;
                };
                !nvml_bus_ids
                    .clone()
                    .filter_map(PciAddress::parse)
                    .any(|seen| seen.same_device(&address))
            })
            .cloned()
            .collect()
    }
}

/// Which source reported an Xid first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum XidSource {
    /// NVML's event API.
    Nvml,
    /// The kernel log.
    KernelLog,
}

/// One Xid error, as one or both sources reported it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct XidOccurrence {
    /// Increases by one per occurrence; consumers remember the last seen.
    pub seq: u64,
    /// NVML index of the GPU.
    pub gpu: u32,
    /// The Xid code.
    pub code: u64,
    /// When it happened (the kernel log's own time where it has one).
    #[serde(serialize_with = "unix_seconds")]
    pub at: SystemTime,
    /// The source that saw it first.
    pub source: XidSource,
    /// Process that owned the failing channel, where the driver said.
    pub pid: Option<u32>,
    /// Its name, where the driver said.
    pub process: Option<String>,
    /// The driver's text after the code (kernel log only).
    pub text: Option<String>,
    /// Logged before the agent started (read from the kernel log's backlog):
    /// recorded in history, not counted and not alerted on again.
    pub backlog: bool,
}

/// How often one SXid code was seen on one NVSwitch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SxidCount {
    /// The switch's PCI address, `0000:05:00.0`.
    pub switch_pci: String,
    /// SXid code.
    pub code: u64,
    /// Seen since the agent started.
    pub count: u64,
    /// When last seen.
    #[serde(serialize_with = "unix_seconds")]
    pub last_seen: SystemTime,
}
