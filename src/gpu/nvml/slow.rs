//! The slow tier: identity facts (name, serial, PCI, limits) and health
//! counters (power limits, P-state, PCIe link, fans, ECC, retired pages,
//! row remapping).

use nvml_wrapper::enum_wrappers::device::{
    Clock, ComputeMode, EccCounter, MemoryError, TemperatureThreshold,
};

use super::batch::{Field, FieldValues};
use super::fields::{id, MHZ};
use super::{GpuDevice, Tally};

/// The ECC, page-retirement and row-remapping fields, read in the slow
/// tier's batch when ECC is on.
const ECC_FIELDS: [u32; 11] = [
    id::ECC_SBE_VOL,
    id::ECC_DBE_VOL,
    id::ECC_SBE_AGG,
    id::ECC_DBE_AGG,
    id::RETIRED_SBE,
    id::RETIRED_DBE,
    id::RETIRED_PENDING,
    id::REMAPPED_COR,
    id::REMAPPED_UNC,
    id::REMAPPED_PENDING,
    id::REMAPPED_FAILURE,
];
use crate::gpu::snapshot::{EccCounters, FieldGroup, GpuIdentity, SlowReadings};

impl GpuDevice<'_> {
    /// Reads the slow tier: identity facts (on the handle's first slow tick
    /// only: they do not change) and health counters.
    pub fn read_slow(&mut self, tally: &mut Tally) -> (GpuIdentity, SlowReadings) {
        self.power_from_fields = true;
        let identity = match &self.identity {
            Some(identity) => identity.clone(),
            None => {
                let identity = self.read_identity(tally);
                if tally.lost.is_none() && identity.name.is_some() {
                    self.identity = Some(identity.clone());
                }
                identity
            }
        };
        if self.fans.is_none() && tally.lost.is_none() {
            self.fans = tally.call(FieldGroup::Device, "nvmlDeviceGetNumFans", || {
                self.device.num_fans()
            });
        }
        let slow = self.read_health(tally);
        (identity, slow)
    }

    /// The identity facts: name, serial, PCI, temperature thresholds,
    /// maximum clocks and PCIe link.
    fn read_identity(&self, tally: &mut Tally) -> GpuIdentity {
        let d = &self.device;
        let id = FieldGroup::Identity;
        let threshold = |tally: &mut Tally, which| {
            tally
                .call(id, "nvmlDeviceGetTemperatureThreshold", || {
                    d.temperature_threshold(which)
                })
                .map(f64::from)
        };
        let identity = GpuIdentity {
            name: tally.call(id, "nvmlDeviceGetName", || d.name()),
            serial: tally.call(id, "nvmlDeviceGetSerial", || d.serial()),
            pci_bus_id: None,
            pci_device_id: None,
            minor_number: tally.call(id, "nvmlDeviceGetMinorNumber", || d.minor_number()),
            temperature_slowdown_celsius: threshold(tally, TemperatureThreshold::Slowdown),
            temperature_shutdown_celsius: threshold(tally, TemperatureThreshold::Shutdown),
            temperature_gpu_max_celsius: threshold(tally, TemperatureThreshold::GpuMax),
            temperature_memory_max_celsius: threshold(tally, TemperatureThreshold::MemoryMax),
            max_sm_clock_hertz: tally
                .call(id, "nvmlDeviceGetMaxClockInfo", || {
                    d.max_clock_info(Clock::SM)
                })
                .map(|mhz| f64::from(mhz) * MHZ),
            max_memory_clock_hertz: tally
                .call(id, "nvmlDeviceGetMaxClockInfo", || {
                    d.max_clock_info(Clock::Memory)
                })
                .map(|mhz| f64::from(mhz) * MHZ),
            max_graphics_clock_hertz: tally
                .call(id, "nvmlDeviceGetMaxClockInfo", || {
                    d.max_clock_info(Clock::Graphics)
                })
                .map(|mhz| f64::from(mhz) * MHZ),
            pcie_max_link_gen: tally.call(
                FieldGroup::Pcie,
                "nvmlDeviceGetMaxPcieLinkGeneration",
                || d.max_pcie_link_gen(),
            ),
            pcie_max_link_width: tally.call(
                FieldGroup::Pcie,
                "nvmlDeviceGetMaxPcieLinkWidth",
                || d.max_pcie_link_width(),
            ),
        };
        match tally.call(id, "nvmlDeviceGetPciInfo_v3", || d.pci_info()) {
            Some(pci) => GpuIdentity {
                pci_bus_id: Some(pci.bus_id),
                pci_device_id: Some(pci.pci_device_id),
                ..identity
            },
            None => identity,
        }
    }

    fn read_health(&self, tally: &mut Tally) -> SlowReadings {
        let d = &self.device;
        let dev = FieldGroup::Device;
        let mut s = SlowReadings {
            power_limit_watts: tally
                .call(FieldGroup::Power, "nvmlDeviceGetEnforcedPowerLimit", || {
                    d.enforced_power_limit()
                })
                .map(|mw| f64::from(mw) / 1000.0),
            power_default_limit_watts: tally
                .call(
                    FieldGroup::Power,
                    "nvmlDeviceGetPowerManagementDefaultLimit",
                    || d.power_management_limit_default(),
                )
                .map(|mw| f64::from(mw) / 1000.0),
            performance_state: tally
                .call(dev, "nvmlDeviceGetPerformanceState", || {
                    d.performance_state()
                })
                .and_then(|p| known_pstate(p.as_c())),
            pcie_link_gen: tally.call(
                FieldGroup::Pcie,
                "nvmlDeviceGetCurrPcieLinkGeneration",
                || d.current_pcie_link_gen(),
            ),
            pcie_link_width: tally.call(FieldGroup::Pcie, "nvmlDeviceGetCurrPcieLinkWidth", || {
                d.current_pcie_link_width()
            }),
            encoder_utilization_ratio: tally
                .call(dev, "nvmlDeviceGetEncoderUtilization", || {
                    d.encoder_utilization()
                })
                .map(|u| f64::from(u.utilization) / 100.0),
            decoder_utilization_ratio: tally
                .call(dev, "nvmlDeviceGetDecoderUtilization", || {
                    d.decoder_utilization()
                })
                .map(|u| f64::from(u.utilization) / 100.0),
            compute_mode: tally
                .call(dev, "nvmlDeviceGetComputeMode", || d.compute_mode())
                .map(|mode| match mode {
                    ComputeMode::Default => "default",
                    ComputeMode::ExclusiveThread => "exclusive_thread",
                    ComputeMode::Prohibited => "prohibited",
                    ComputeMode::ExclusiveProcess => "exclusive_process",
                }),
            mig_enabled: tally
                .call(dev, "nvmlDeviceGetMigMode", || d.mig_mode())
                .map(|m| m.current == 1),
            ..SlowReadings::default()
        };
        if let Some(fans) = self.fans {
            s.fan_speed_ratio = (0..fans)
                .map(|fan| {
                    tally
                        .call(dev, "nvmlDeviceGetFanSpeed_v2", || d.fan_speed(fan))
                        .map(|pct| f64::from(pct) / 100.0)
                })
                .collect();
        }
        s.ecc_enabled = tally
            .call(FieldGroup::Ecc, "nvmlDeviceGetEccMode", || {
                d.is_ecc_enabled()
            })
            .map(|mode| mode.currently_enabled);
        // One field-value batch for the links, PCIe replays and ECC.
        let ecc = s.ecc_enabled == Some(true);
        let mut extra = vec![id::PCIE_REPLAY];
        if ecc {
            extra.extend(ECC_FIELDS);
        }
        let (links, traffic, values) = self.read_links(&extra, tally);
        (s.links, s.nvlink_traffic) = (links, traffic);
        if !values.answered() {
            // The batch failed as a whole: so did the PCIe and ECC reads.
            tally.groups.insert(FieldGroup::Pcie, false);
            if ecc {
                tally.groups.insert(FieldGroup::Ecc, false);
            }
        }
        s.fabric = self.read_fabric(tally);
        s.pcie_replay_errors = values.get(Field::device(id::PCIE_REPLAY)).map(|v| v as u64);
        if ecc {
            self.read_ecc(&values, tally, &mut s);
        }
        s
    }

    fn read_ecc(&self, v: &FieldValues, tally: &mut Tally, s: &mut SlowReadings) {
        let count = |field: u32| v.get(Field::device(field)).map(|x| x as u64);
        let flag = |field: u32| v.get(Field::device(field)).map(|x| x != 0.0);
        s.ecc = EccCounters {
            corrected_volatile: count(id::ECC_SBE_VOL),
            uncorrected_volatile: count(id::ECC_DBE_VOL),
            corrected_aggregate: count(id::ECC_SBE_AGG),
            uncorrected_aggregate: count(id::ECC_DBE_AGG),
        };
        if s.ecc.uncorrected_volatile.is_none() {
            // Older drivers lack the ECC fields: ask the classic calls.
            let d = &self.device;
            let total = |tally: &mut Tally, kind, counter| {
                tally.call(FieldGroup::Ecc, "nvmlDeviceGetTotalEccErrors", || {
                    d.total_ecc_errors(kind, counter)
                })
            };
            s.ecc = EccCounters {
                corrected_volatile: total(tally, MemoryError::Corrected, EccCounter::Volatile),
                uncorrected_volatile: total(tally, MemoryError::Uncorrected, EccCounter::Volatile),
                corrected_aggregate: total(tally, MemoryError::Corrected, EccCounter::Aggregate),
                uncorrected_aggregate: total(
                    tally,
                    MemoryError::Uncorrected,
                    EccCounter::Aggregate,
                ),
            };
        }
        s.retired_pages_single_bit = count(id::RETIRED_SBE);
        s.retired_pages_double_bit = count(id::RETIRED_DBE);
        s.retired_pages_pending = flag(id::RETIRED_PENDING);
        s.remapped_rows_correctable = count(id::REMAPPED_COR);
        s.remapped_rows_uncorrectable = count(id::REMAPPED_UNC);
        s.remapped_rows_pending = flag(id::REMAPPED_PENDING);
        s.remapped_rows_failure = flag(id::REMAPPED_FAILURE);
    }
}

/// A performance state NVML knows (P0 to P15); `None` for NVML's
/// "unknown" (32, `NVML_PSTATE_UNKNOWN`) and anything else beyond: absent,
/// not exported as `gpuwatch_performance_state 32` or shown as "P32".
fn known_pstate(value: u32) -> Option<u32> {
    (value <= 15).then_some(value)
}

#[cfg(test)]
mod pstate_tests {
    use super::known_pstate;

    #[test]
    fn the_unknown_performance_state_is_absent() {
        assert_eq!(known_pstate(0), Some(0));
        assert_eq!(known_pstate(15), Some(15));
        assert_eq!(known_pstate(32), None);
        assert_eq!(
            known_pstate(nvml_wrapper::enum_wrappers::device::PerformanceState::Unknown.as_c()),
            None
        );
    }
}
