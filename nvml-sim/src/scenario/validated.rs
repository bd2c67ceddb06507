//! The validated parts of a scenario that the engine runs: each GPU's
//! resolved configuration and the faults.

use super::schema::GpuSpec;
use super::Feature;
use nvml_wrapper_sys::bindings::nvmlReturn_t;

/// One GPU after replication, with its resolved identity.
#[derive(Debug, Clone)]
pub struct GpuConfig {
    /// NVML index.
    pub index: usize,
    /// UUID string.
    pub uuid: String,
    /// Board serial.
    pub serial: String,
    /// PCI bus id.
    pub pci_bus_id: String,
    /// Device node minor number (`nvmlDeviceGetMinorNumber`).
    pub minor_number: u32,
    /// PCI bus number.
    pub bus: u32,
    /// The `[[gpu]]` entry this GPU came from.
    pub spec: GpuSpec,
}

/// A validated fault.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// Start time, seconds.
    pub at: f64,
    /// End time, seconds (None: forever).
    pub until: Option<f64>,
    /// Affected GPU (None only for init errors).
    pub gpu: Option<usize>,
    /// What happens.
    pub effect: FaultEffect,
}

impl Fault {
    /// Whether the fault is in effect at `t`.
    pub fn active(&self, t: f64) -> bool {
        t >= self.at && self.until.is_none_or(|u| t < u)
    }
}

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FaultEffect {
    /// Calls return GPU_IS_LOST.
    Lost,
    /// An Xid event with this code.
    Xid(u64),
    /// This many uncorrected ECC errors.
    EccUncorrected(u64),
    /// This many corrected ECC errors.
    EccCorrected(u64),
    /// A remapping is pending.
    RemapPending,
    /// A remapping failed.
    RemapFailure,
    /// A feature returns NOT_SUPPORTED.
    NotSupported(Feature),
    /// Every call sleeps this many milliseconds.
    Slow(u64),
    /// Every call blocks until the fault ends.
    Hang,
    /// nvmlInit fails with this code.
    InitError(nvmlReturn_t),
    /// Every call fails with DRIVER_NOT_LOADED.
    DriverUnloaded,
    /// This NVLink link is down.
    NvlinkDown(u32),
}
