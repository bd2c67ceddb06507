//! What the kernel-log reader (`crate::health`) adds to a snapshot: whether
//! it can read the log, NVSwitch SXid counts, and the latest Xid
//! occurrences with their details (for history events and the event list).

use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;

use super::snapshot::unix_seconds;

/// The kernel log as of one tick. `Default` is "not read" (turned off, or
/// a one-off sample that never starts the reader).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KernelLogStatus {
    /// `Some(true)` while the log is being read, `Some(false)` when it
    /// cannot be (permissions), `None` when reading it is off.
    pub up: Option<bool>,
    /// SXid errors per NVSwitch (PCI address) and code, since the agent
    /// started.
    pub sxid: Arc<Vec<SxidCount>>,
    /// The most recent Xid occurrences, oldest first, from either source;
    /// bounded (see `crate::sampler::xid::RECENT_XID`).
    pub recent_xid: Arc<Vec<XidOccurrence>>,
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
