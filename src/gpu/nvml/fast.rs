//! The fast tier: what changes every tick (utilization, memory, temperature,
//! and one field-value batch for power, memory temperature, violation
//! counters and — every [`ENERGY_EVERY`] — energy), and the clock readings
//! (clocks and clock-event reasons) when the sampler says they are due.
#![allow(
    clippy::disallowed_types,
    reason = "runs on the sampler's blocking thread: std time is its clock"
)]

use std::time::Instant;

use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};

use super::batch::Field;
use super::fields::{
    id, ENERGY_EVERY, FAST_FIELDS, FAST_FIELDS_WITH_ENERGY, MHZ, VIOLATION_REASONS,
};
use super::{GpuDevice, Tally};
use crate::gpu::snapshot::{FastReadings, FieldGroup, MemoryReading};

/// The clock readings of one read: four clocks and the clock-event
/// reasons, 5 NVML calls (NVML has no field ids for current clocks).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct ClockReadings {
    sm: Option<f64>,
    memory: Option<f64>,
    graphics: Option<f64>,
    video: Option<f64>,
    reasons: Option<u64>,
}

impl GpuDevice<'_> {
    /// Reads the fast tier; the clocks and clock-event reasons are read when
    /// `clocks_due` (or never yet) and carried from the last read otherwise.
    pub fn read_fast(&mut self, clocks_due: bool, tally: &mut Tally) -> FastReadings {
        let d = &self.device;
        let mut r = FastReadings::default();
        if let Some(u) = tally.call(
            FieldGroup::Utilization,
            "nvmlDeviceGetUtilizationRates",
            || d.utilization_rates(),
        ) {
            r.utilization_gpu_ratio = Some(f64::from(u.gpu) / 100.0);
            r.utilization_memory_ratio = Some(f64::from(u.memory) / 100.0);
        }
        r.memory = tally
            .call(FieldGroup::Memory, "nvmlDeviceGetMemoryInfo_v2", || {
                d.memory_info()
            })
            .map(|m| MemoryReading {
                total_bytes: m.total,
                used_bytes: m.used,
                free_bytes: m.free,
                reserved_bytes: m.reserved,
            });
        r.temperature_gpu_celsius = tally
            .call(FieldGroup::Thermal, "nvmlDeviceGetTemperature", || {
                d.temperature(TemperatureSensor::Gpu)
            })
            .map(f64::from);
        let clocks = match self.clocks {
            Some(clocks) if !clocks_due => clocks,
            _ => {
                let clocks = self.read_clocks(tally);
                self.clocks = Some(clocks);
                clocks
            }
        };
        r.sm_clock_hertz = clocks.sm;
        r.memory_clock_hertz = clocks.memory;
        r.graphics_clock_hertz = clocks.graphics;
        r.video_clock_hertz = clocks.video;
        r.clock_event_reasons = clocks.reasons;
        self.read_fast_fields(tally, &mut r);
        r
    }

    /// The four clocks and the clock-event reasons.
    fn read_clocks(&self, tally: &mut Tally) -> ClockReadings {
        let d = &self.device;
        let clock = |tally: &mut Tally, which| {
            tally
                .call(FieldGroup::Clocks, "nvmlDeviceGetClockInfo", || {
                    d.clock_info(which)
                })
                .map(|mhz| f64::from(mhz) * MHZ)
        };
        ClockReadings {
            sm: clock(tally, Clock::SM),
            memory: clock(tally, Clock::Memory),
            graphics: clock(tally, Clock::Graphics),
            video: clock(tally, Clock::Video),
            reasons: tally.call(
                FieldGroup::Clocks,
                "nvmlDeviceGetCurrentClocksThrottleReasons",
                || d.current_throttle_reasons().map(|bits| bits.bits()),
            ),
        }
    }

    fn read_fast_fields(&mut self, tally: &mut Tally, r: &mut FastReadings) {
        let now = Instant::now();
        let energy_due = self
            .energy
            .is_none_or(|(read_at, _)| now.duration_since(read_at) >= ENERGY_EVERY);
        let fields: &[Field] = if energy_due {
            &FAST_FIELDS_WITH_ENERGY
        } else {
            &FAST_FIELDS
        };
        let values = self.field_values(FieldGroup::Power, fields, tally);
        values.report_unsupported(self.index, fields, tally);
        let power_mw = values.get(Field::device(id::POWER_INSTANT));
        match power_mw {
            Some(mw) => r.power_watts = Some(mw / 1000.0),
            None => self.power_from_fields = false,
        }
        r.temperature_memory_celsius = values.get(Field::device(id::MEMORY_TEMP));
        for (name, field) in VIOLATION_REASONS {
            if let Some(ns) = values.get(Field::device(field)) {
                r.clock_event_seconds.insert(name, ns / 1e9);
            }
        }
        if energy_due {
            let joules = values
                .get(Field::device(id::TOTAL_ENERGY))
                .map(|mj| mj / 1000.0);
            self.energy = Some((now, joules));
        }
        r.energy_joules = self.energy.and_then(|(_, joules)| joules);
        if r.power_watts.is_none() && !self.power_from_fields {
            let d = &self.device;
            r.power_watts = tally
                .call(FieldGroup::Power, "nvmlDeviceGetPowerUsage", || {
                    d.power_usage()
                })
                .map(|mw| f64::from(mw) / 1000.0);
        }
    }
}
