//! Feature keys: groups of NVML calls that can be marked NOT_SUPPORTED.

use serde::Deserialize;

/// A feature that a GPU can lack (`unsupported = [...]`, `not_supported` faults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// Utilization rates.
    Utilization,
    /// Memory info.
    Memory,
    /// GPU temperature and thresholds.
    Temperature,
    /// Memory temperature field.
    MemoryTemperature,
    /// Power usage.
    Power,
    /// Total energy consumption.
    Energy,
    /// Power limits.
    PowerLimit,
    /// Current clocks.
    Clocks,
    /// Maximum clocks.
    MaxClocks,
    /// Clock event (throttle) reasons.
    ClocksEventReasons,
    /// Violation counters.
    Violation,
    /// Performance state.
    Pstate,
    /// Fans.
    Fan,
    /// PCIe link information.
    Pcie,
    /// ECC mode and counters.
    Ecc,
    /// Retired pages.
    RetiredPages,
    /// Remapped rows.
    RemappedRows,
    /// Encoder utilization.
    Encoder,
    /// Decoder utilization.
    Decoder,
    /// Compute mode.
    ComputeMode,
    /// MIG mode.
    Mig,
    /// Running process lists.
    Processes,
    /// Board serial number.
    Serial,
    /// GPM (nvmlGpm* calls on the GPU).
    Gpm,
    /// NVLink (nvmlDeviceGetNvLink* calls and NVLink fields).
    Nvlink,
    /// GPU fabric info.
    Fabric,
}
