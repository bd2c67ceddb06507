//! The NVML field-value ids gpuwatch reads, and the fast tier's batch of
//! them (the batch call itself is `batch`).

use std::time::Duration;

use super::batch::Field;

/// Hertz per megahertz: NVML reports clocks in MHz.
pub(super) const MHZ: f64 = 1_000_000.0;

/// Field ids from `nvml.h` (v12), named as NVML names them. The per-link
/// ids (asked with the link as `scopeId`) are [`LinkFieldId`]s, built here
/// at compile time: an id the rule refuses fails the build.
///
/// [`LinkFieldId`]: super::batch::LinkFieldId
pub(super) mod id {
    use super::super::batch::{link_field, LinkFieldId};

    /// NVML_FI_DEV_ECC_SBE_VOL_TOTAL: corrected ECC errors since the last driver load.
    pub const ECC_SBE_VOL: u32 = 3;
    /// NVML_FI_DEV_ECC_DBE_VOL_TOTAL: uncorrected ECC errors since the last driver load.
    pub const ECC_DBE_VOL: u32 = 4;
    /// NVML_FI_DEV_ECC_SBE_AGG_TOTAL: corrected ECC errors over the GPU's life.
    pub const ECC_SBE_AGG: u32 = 5;
    /// NVML_FI_DEV_ECC_DBE_AGG_TOTAL: uncorrected ECC errors over the GPU's life.
    pub const ECC_DBE_AGG: u32 = 6;
    /// NVML_FI_DEV_RETIRED_SBE: pages retired for single-bit errors.
    pub const RETIRED_SBE: u32 = 29;
    /// NVML_FI_DEV_RETIRED_DBE: pages retired for double-bit errors.
    pub const RETIRED_DBE: u32 = 30;
    /// NVML_FI_DEV_RETIRED_PENDING: a retirement waits for the next reset.
    pub const RETIRED_PENDING: u32 = 31;
    /// NVML_FI_DEV_PERF_POLICY_POWER: power-cap violation time (ns).
    pub const VIOLATION_POWER: u32 = 74;
    /// NVML_FI_DEV_PERF_POLICY_SYNC_BOOST: sync-boost violation time (ns).
    pub const VIOLATION_SYNC_BOOST: u32 = 76;
    /// NVML_FI_DEV_MEMORY_TEMP: HBM temperature (°C).
    pub const MEMORY_TEMP: u32 = 82;
    /// NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: energy since driver load (mJ).
    pub const TOTAL_ENERGY: u32 = 83;
    /// NVML_FI_DEV_PCIE_REPLAY_COUNTER: PCIe replays.
    pub const PCIE_REPLAY: u32 = 94;
    /// NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_L0 (L1..L5 follow).
    pub const NVLINK_CRC_DATA_L0: u32 = 39;
    /// NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_L6 (L7..L11 follow).
    pub const NVLINK_CRC_DATA_L6: u32 = 102;
    /// NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY: replays on the link `scopeId`.
    pub const NVLINK_ERROR_DL_REPLAY: LinkFieldId = link_field(161);
    /// NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY: recoveries on the link `scopeId`.
    pub const NVLINK_ERROR_DL_RECOVERY: LinkFieldId = link_field(162);
    /// NVML_FI_DEV_NVLINK_ERROR_DL_CRC: CRC flit errors on the link `scopeId`.
    pub const NVLINK_ERROR_DL_CRC: LinkFieldId = link_field(163);
    /// NVML_FI_DEV_NVLINK_GET_STATE: 1 when the link `scopeId` is active.
    pub const NVLINK_GET_STATE: LinkFieldId = link_field(165);
    /// NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: KiB sent on the link `scopeId`.
    pub const NVLINK_DATA_TX: LinkFieldId = link_field(138);
    /// NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: KiB received on the link `scopeId`.
    pub const NVLINK_DATA_RX: LinkFieldId = link_field(139);
    /// NVML_FI_DEV_REMAPPED_COR: rows remapped for correctable errors.
    pub const REMAPPED_COR: u32 = 142;
    /// NVML_FI_DEV_REMAPPED_UNC: rows remapped for uncorrectable errors.
    pub const REMAPPED_UNC: u32 = 143;
    /// NVML_FI_DEV_REMAPPED_PENDING: a remap waits for the next reset.
    pub const REMAPPED_PENDING: u32 = 144;
    /// NVML_FI_DEV_REMAPPED_FAILURE: a remap failed.
    pub const REMAPPED_FAILURE: u32 = 145;
    /// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: what the GPU needs (0 none .. 4).
    pub const RECOVERY_ACTION: u32 = 230;
    /// NVML_FI_DEV_POWER_INSTANT: instantaneous power (mW).
    pub const POWER_INSTANT: u32 = 186;
    /// NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERMAL_SLOWDOWN: time (ns).
    pub const VIOLATION_SW_THERMAL: u32 = 251;
    /// NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERMAL_SLOWDOWN: time (ns).
    pub const VIOLATION_HW_THERMAL: u32 = 252;
    /// NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN: time (ns).
    pub const VIOLATION_HW_POWER_BRAKE: u32 = 253;
}

/// The clock-event reasons whose violation counters the fast tier reads,
/// with their field ids (a test checks them against `CLOCK_EVENT_REASONS`).
pub(super) const VIOLATION_REASONS: [(&str, u32); 5] = [
    ("sw_power_cap", id::VIOLATION_POWER),
    ("sync_boost", id::VIOLATION_SYNC_BOOST),
    ("sw_thermal_slowdown", id::VIOLATION_SW_THERMAL),
    ("hw_thermal_slowdown", id::VIOLATION_HW_THERMAL),
    ("hw_power_brake_slowdown", id::VIOLATION_HW_POWER_BRAKE),
];

/// The one `nvmlDeviceGetFieldValues` batch of the fast tier (v12 ids):
/// power, memory temperature, then the violation counters of
/// `VIOLATION_REASONS`. Public so benchmarks make exactly the same call.
pub const FAST_FIELD_IDS: [u32; 7] = [
    id::POWER_INSTANT,
    id::MEMORY_TEMP,
    id::VIOLATION_POWER,
    id::VIOLATION_SYNC_BOOST,
    id::VIOLATION_SW_THERMAL,
    id::VIOLATION_HW_THERMAL,
    id::VIOLATION_HW_POWER_BRAKE,
];

/// [`FAST_FIELD_IDS`] plus the energy counter, read once every
/// [`ENERGY_EVERY`].
pub const FAST_FIELD_IDS_WITH_ENERGY: [u32; 8] = {
    let mut ids = [id::TOTAL_ENERGY; 8];
    let mut i = 0;
    while i < FAST_FIELD_IDS.len() {
        ids[i] = FAST_FIELD_IDS[i];
        i += 1;
    }
    ids
};

/// [`FAST_FIELD_IDS`] as the fields of the batch (device-wide, scope 0).
pub(super) const FAST_FIELDS: [Field; 7] = device_fields(FAST_FIELD_IDS);

/// [`FAST_FIELD_IDS_WITH_ENERGY`] as the fields of the batch.
pub(super) const FAST_FIELDS_WITH_ENERGY: [Field; 8] = device_fields(FAST_FIELD_IDS_WITH_ENERGY);

const fn device_fields<const N: usize>(ids: [u32; N]) -> [Field; N] {
    let mut fields = [Field::device(0); N];
    let mut i = 0;
    while i < N {
        fields[i] = Field::device(ids[i]);
        i += 1;
    }
    fields
}

/// How often the energy counter is read. On a real H200 (driver 580) it
/// costs ~3 ms a read against ~0.1 ms for the rest of the fast tick; a
/// counter for `rate()` over minutes loses nothing at 5 s.
pub const ENERGY_EVERY: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::reasons::CLOCK_EVENT_REASONS;

    #[test]
    fn the_energy_batch_is_the_fast_batch_plus_energy() {
        assert_eq!(FAST_FIELD_IDS_WITH_ENERGY[..7], FAST_FIELD_IDS);
        assert_eq!(FAST_FIELD_IDS_WITH_ENERGY[7], id::TOTAL_ENERGY);
    }

    #[test]
    fn the_fast_batch_reads_every_violation_counter_in_order() {
        let expected: Vec<(&str, u32)> = CLOCK_EVENT_REASONS
            .iter()
            .filter_map(|r| r.violation_field.map(|f| (r.name, f)))
            .collect();
        assert_eq!(VIOLATION_REASONS.to_vec(), expected);
        let batch: Vec<u32> = VIOLATION_REASONS.iter().map(|(_, id)| *id).collect();
        assert_eq!(FAST_FIELD_IDS[2..], batch);
    }
}
