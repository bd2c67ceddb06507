//! nvmlDeviceGetFieldValues: field ids mapped to engine readings.

use super::gpu::{reasons, GpuSim, Violation};
use super::Unavailable;
use crate::scenario::health::NvLinkCounter;
use nvml_wrapper_sys::bindings::field_id::*;

/// A field value, typed as NVML reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValue {
    /// NVML_VALUE_TYPE_UNSIGNED_INT.
    Uint(u32),
    /// NVML_VALUE_TYPE_UNSIGNED_LONG_LONG.
    Ull(u64),
}

/// Whether a driver version uses the CUDA 13.0 Update 1 field numbering
/// (clock-event violation fields at 269..=271 instead of 251..=253), exactly
/// as nvml-wrapper decides it.
pub fn uses_v13u1_field_ids(driver_version: &str) -> bool {
    let mut parts = driver_version.split('.');
    let major: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    major > 580 || (major == 580 && minor >= 82)
}

/// The per-link NVLink error fields that name their link in the id
/// (`NVML_FI_DEV_NVLINK_{CRC_FLIT,CRC_DATA,REPLAY,RECOVERY}_ERROR_COUNT_L0`..
/// `L11`): the counter and the link, or `None` for any other id.
pub fn legacy_link_field(id: u32) -> Option<(NvLinkCounter, u32)> {
    // (first id of links 0-5, first id of links 6-11, counter)
    const RANGES: [(u32, u32, NvLinkCounter); 4] = [
        (32, 96, NvLinkCounter::CrcFlit),
        (39, 102, NvLinkCounter::CrcData),
        (46, 108, NvLinkCounter::Replay),
        (53, 114, NvLinkCounter::Recovery),
    ];
    RANGES.iter().find_map(|&(low, high, counter)| {
        if (low..low + 6).contains(&id) {
            Some((counter, id - low))
        } else if (high..high + 6).contains(&id) {
            Some((counter, id - high + 6))
        } else {
            None
        }
    })
}

/// Reads field `id` of `gpu` at `t`; `scope` is the entry's scopeId (the
/// link of the NVLink throughput, state and scoped error fields,
/// `u32::MAX` for all links); `v13u1` selects the field numbering.
pub fn read(
    gpu: &GpuSim,
    id: u32,
    scope: u32,
    v13u1: bool,
    t: f64,
) -> Result<FieldValue, Unavailable> {
    use FieldValue::{Uint, Ull};
    let (sw_therm, hw_therm, hw_brake) = if v13u1 {
        (269, 270, 271)
    } else {
        (
            NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN,
            NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN,
            NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN,
        )
    };
    let violation = |bit| gpu.violation_ns(Violation::Reason(bit), t).map(Ull);
    let nvlink_total = |counter| gpu.nvlink_errors_total(counter, t).map(Ull);
    let link_errors = |link, counter: NvLinkCounter| gpu.nvlink_errors(link, counter.code(), t);
    if let Some((counter, link)) = legacy_link_field(id) {
        return link_errors(link, counter).map(Ull);
    }
    match id {
        NVML_FI_DEV_MEMORY_TEMP => gpu.memory_temperature(t).map(Uint),
        NVML_FI_DEV_PCIE_REPLAY_COUNTER => gpu.pcie_replays(t).map(Ull),
        NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION => gpu.energy_mj(t).map(Ull),
        NVML_FI_DEV_POWER_AVERAGE | NVML_FI_DEV_POWER_INSTANT => gpu.power_mw(t).map(Uint),
        NVML_FI_DEV_ECC_SBE_VOL_TOTAL | NVML_FI_DEV_ECC_SBE_AGG_TOTAL => {
            gpu.ecc(t).map(|e| Ull(e.corrected))
        }
        NVML_FI_DEV_ECC_DBE_VOL_TOTAL | NVML_FI_DEV_ECC_DBE_AGG_TOTAL => {
            gpu.ecc(t).map(|e| Ull(e.uncorrected))
        }
        NVML_FI_DEV_RETIRED_SBE => gpu.retired_pages(0, t).map(|p| Uint(p.len() as u32)),
        NVML_FI_DEV_RETIRED_DBE => gpu.retired_pages(1, t).map(|p| Uint(p.len() as u32)),
        NVML_FI_DEV_RETIRED_PENDING => gpu.retired_pending(t).map(|p| Uint(p.into())),
        NVML_FI_DEV_REMAPPED_COR => gpu.remapped_rows(t).map(|r| Uint(r.0)),
        NVML_FI_DEV_REMAPPED_UNC => gpu.remapped_rows(t).map(|r| Uint(r.1)),
        NVML_FI_DEV_REMAPPED_PENDING => gpu.remapped_rows(t).map(|r| Uint(r.2.into())),
        NVML_FI_DEV_REMAPPED_FAILURE => gpu.remapped_rows(t).map(|r| Uint(r.3.into())),
        NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT => gpu.temperature_threshold(0, t).map(Uint),
        NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT => gpu.temperature_threshold(1, t).map(Uint),
        NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP => violation(reasons::SW_POWER_CAP),
        NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST => violation(reasons::SYNC_BOOST),
        id if id == sw_therm => violation(reasons::SW_THERMAL),
        id if id == hw_therm => violation(reasons::HW_THERMAL),
        id if id == hw_brake => violation(reasons::HW_POWER_BRAKE),
        NVML_FI_DEV_NVLINK_LINK_COUNT => gpu.nvlink_link_count(t).map(Uint),
        NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL => nvlink_total(NvLinkCounter::Replay),
        NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL => nvlink_total(NvLinkCounter::Recovery),
        NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL => nvlink_total(NvLinkCounter::CrcFlit),
        NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL => nvlink_total(NvLinkCounter::CrcData),
        NVML_FI_DEV_NVLINK_ECC_DATA_ERROR_COUNT_TOTAL => nvlink_total(NvLinkCounter::EccData),
        NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX => gpu.nvlink_data_kib(scope, true, t).map(Ull),
        NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX => gpu.nvlink_data_kib(scope, false, t).map(Ull),
        // Scoped by link (scopeId), like nvmlDeviceGetNvLinkState and
        // nvmlDeviceGetNvLinkErrorCounter for the same link: one engine.
        NVML_FI_DEV_NVLINK_GET_STATE => gpu.nvlink_active(scope, t).map(|up| Uint(up.into())),
        NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY => link_errors(scope, NvLinkCounter::Replay).map(Ull),
        NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY => {
            link_errors(scope, NvLinkCounter::Recovery).map(Ull)
        }
        NVML_FI_DEV_NVLINK_ERROR_DL_CRC => link_errors(scope, NvLinkCounter::CrcFlit).map(Ull),
        NVML_FI_DEV_GET_GPU_RECOVERY_ACTION => gpu.recovery_action(t).map(Uint),
        _ => {
            gpu.check(None, t)?;
            Err(Unavailable::NotSupported)
        }
    }
}
