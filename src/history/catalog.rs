//! What history stores: one entry per stored reading, tying its API name to
//! its column, unit, integer scale and kind. The writer, the rollups and the
//! queries all work from this table, so a new reading is one entry here plus
//! a migration.

use crate::gpu::GpuSnapshot;

/// How a reading behaves over time, which decides how it rolls up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A level: rolled up as min / max / avg / last.
    Gauge,
    /// Ever-increasing (the writer keeps it monotonic across driver resets and
    /// agent restarts): rolled up as last.
    Counter,
    /// A bit mask: rolled up as the OR of the bits seen.
    Bits,
    /// A discrete state (P-state, link width): rolled up as last.
    State,
}

/// One stored reading.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The name the API and CLI use, e.g. "temperature".
    pub name: &'static str,
    /// The column in `sample` (and the prefix of the rollup columns).
    pub column: &'static str,
    /// The unit values are returned in.
    pub unit: &'static str,
    /// Stored integer = value in `unit` × `scale`.
    pub scale: f64,
    /// How it rolls up.
    pub kind: Kind,
    /// Reads the value, in `unit`, from a GPU's snapshot.
    pub read: fn(&GpuSnapshot) -> Option<f64>,
}

const MIB: f64 = 1024.0 * 1024.0;

fn violation(gpu: &GpuSnapshot, reason: &str) -> Option<f64> {
    gpu.readings.clock_event_seconds.get(reason).copied()
}

/// Every stored reading, in column order.
pub const FIELDS: &[Field] = &[
    Field {
        name: "utilization",
        column: "util_gpu",
        unit: "percent",
        scale: 1.0,
        kind: Kind::Gauge,
        read: |g| g.readings.utilization_gpu_ratio.map(|r| r * 100.0),
    },
    Field {
        name: "memory_utilization",
        column: "util_mem",
        unit: "percent",
        scale: 1.0,
        kind: Kind::Gauge,
        read: |g| g.readings.utilization_memory_ratio.map(|r| r * 100.0),
    },
    Field {
        name: "memory_used",
        column: "mem_used",
        unit: "MiB",
        scale: 1.0,
        kind: Kind::Gauge,
        read: |g| g.readings.memory.map(|m| m.used_bytes as f64 / MIB),
    },
    Field {
        name: "memory_total",
        column: "mem_total",
        unit: "MiB",
        scale: 1.0,
        kind: Kind::State,
        read: |g| g.readings.memory.map(|m| m.total_bytes as f64 / MIB),
    },
    Field {
        name: "temperature",
        column: "temp_gpu",
        unit: "celsius",
        scale: 1.0,
        kind: Kind::Gauge,
        read: |g| g.readings.temperature_gpu_celsius,
    },
    Field {
        name: "memory_temperature",
        column: "temp_mem",
        unit: "celsius",
        scale: 1.0,
        kind: Kind::Gauge,
        read: |g| g.readings.temperature_memory_celsius,
    },
    Field {
        name: "power",
        column: "power",
        unit: "watts",
        scale: 10.0,
        kind: Kind::Gauge,
        read: |g| g.readings.power_watts,
    },
    Field {
        name: "energy",
        column: "energy",
        unit: "joules",
        scale: 1.0,
        kind: Kind::Counter,
        read: |g| g.readings.energy_joules,
    },
    Field {
        name: "sm_clock",
        column: "sm_clock",
        unit: "MHz",
        scale: 1.0,
        kind: Kind::Gauge,
        read: |g| g.readings.sm_clock_hertz.map(|h| h / 1e6),
    },
    Field {
        name: "memory_clock",
        column: "mem_clock",
        unit: "MHz",
        scale: 1.0,
        kind: Kind::Gauge,
        read: |g| g.readings.memory_clock_hertz.map(|h| h / 1e6),
    },
    Field {
        name: "clock_events",
        column: "clock_events",
        unit: "bits",
        scale: 1.0,
        kind: Kind::Bits,
        read: |g| g.readings.clock_event_reasons.map(|b| b as f64),
    },
    Field {
        name: "throttle_sw_power_cap",
        column: "thr_power_cap",
        unit: "seconds",
        scale: 1000.0,
        kind: Kind::Counter,
        read: |g| violation(g, "sw_power_cap"),
    },
    Field {
        name: "throttle_sync_boost",
        column: "thr_sync_boost",
        unit: "seconds",
        scale: 1000.0,
        kind: Kind::Counter,
        read: |g| violation(g, "sync_boost"),
    },
    Field {
        name: "throttle_sw_thermal",
        column: "thr_sw_thermal",
        unit: "seconds",
        scale: 1000.0,
        kind: Kind::Counter,
        read: |g| violation(g, "sw_thermal_slowdown"),
    },
    Field {
        name: "throttle_hw_thermal",
        column: "thr_hw_thermal",
        unit: "seconds",
        scale: 1000.0,
        kind: Kind::Counter,
        read: |g| violation(g, "hw_thermal_slowdown"),
    },
    Field {
        name: "throttle_hw_power_brake",
        column: "thr_power_brake",
        unit: "seconds",
        scale: 1000.0,
        kind: Kind::Counter,
        read: |g| violation(g, "hw_power_brake_slowdown"),
    },
    Field {
        name: "pstate",
        column: "pstate",
        unit: "pstate",
        scale: 1.0,
        kind: Kind::State,
        read: |g| g.health.performance_state.map(f64::from),
    },
    Field {
        name: "fan",
        column: "fan",
        unit: "percent",
        scale: 1.0,
        kind: Kind::Gauge,
        read: |g| {
            g.health
                .fan_speed_ratio
                .first()
                .copied()
                .flatten()
                .map(|r| r * 100.0)
        },
    },
    Field {
        name: "pcie_gen",
        column: "pcie_gen",
        unit: "generation",
        scale: 1.0,
        kind: Kind::State,
        read: |g| g.health.pcie_link_gen.map(f64::from),
    },
    Field {
        name: "pcie_width",
        column: "pcie_width",
        unit: "lanes",
        scale: 1.0,
        kind: Kind::State,
        read: |g| g.health.pcie_link_width.map(f64::from),
    },
    Field {
        name: "ecc_corrected",
        column: "ecc_corrected",
        unit: "errors",
        scale: 1.0,
        kind: Kind::Counter,
        read: |g| {
            g.health
                .ecc
                .corrected_aggregate
                .or(g.health.ecc.corrected_volatile)
                .map(|c| c as f64)
        },
    },
    Field {
        name: "ecc_uncorrected",
        column: "ecc_uncorrected",
        unit: "errors",
        scale: 1.0,
        kind: Kind::Counter,
        read: |g| {
            g.health
                .ecc
                .uncorrected_aggregate
                .or(g.health.ecc.uncorrected_volatile)
                .map(|c| c as f64)
        },
    },
    // GPM (migration 5): absent on GPUs without GPM and on the first tick.
    Field {
        name: "sm_active",
        column: "sm_active",
        unit: "percent",
        scale: 10.0,
        kind: Kind::Gauge,
        read: |g| gpm_percent(g, |m| m.sm_active_ratio),
    },
    Field {
        name: "sm_occupancy",
        column: "sm_occupancy",
        unit: "percent",
        scale: 10.0,
        kind: Kind::Gauge,
        read: |g| gpm_percent(g, |m| m.sm_occupancy_ratio),
    },
    Field {
        name: "tensor_active",
        column: "tensor_active",
        unit: "percent",
        scale: 10.0,
        kind: Kind::Gauge,
        read: |g| gpm_percent(g, |m| m.tensor_active_ratio),
    },
    Field {
        name: "dram_active",
        column: "dram_active",
        unit: "percent",
        scale: 10.0,
        kind: Kind::Gauge,
        read: |g| gpm_percent(g, |m| m.dram_active_ratio),
    },
];

/// A whole-GPU GPM ratio as a percentage.
fn gpm_percent(
    gpu: &GpuSnapshot,
    ratio: fn(&crate::gpu::gpm::GpmMetrics) -> Option<f64>,
) -> Option<f64> {
    gpu.gpm.gpu.as_ref().and_then(ratio).map(|r| r * 100.0)
}

/// The reading named `name`.
pub fn field(name: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.name == name)
}

/// Every API name, for error messages.
pub fn names() -> Vec<&'static str> {
    FIELDS.iter().map(|f| f.name).collect()
}

/// The rollup columns a field has, in table order.
pub fn rollup_columns(field: &Field) -> Vec<String> {
    match field.kind {
        Kind::Gauge => ["min", "max", "avg", "last"]
            .iter()
            .map(|s| format!("{}_{s}", field.column))
            .collect(),
        Kind::Bits => vec![format!("{}_any", field.column)],
        Kind::Counter | Kind::State => vec![format!("{}_last", field.column)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::reasons::CLOCK_EVENT_REASONS;

    #[test]
    fn names_and_columns_are_unique() {
        let mut names = names();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FIELDS.len());
        let mut columns: Vec<_> = FIELDS.iter().map(|f| f.column).collect();
        columns.sort_unstable();
        columns.dedup();
        assert_eq!(columns.len(), FIELDS.len());
    }

    #[test]
    fn throttle_fields_name_known_reasons() {
        for reason in [
            "sw_power_cap",
            "sync_boost",
            "sw_thermal_slowdown",
            "hw_thermal_slowdown",
            "hw_power_brake_slowdown",
        ] {
            let known = CLOCK_EVENT_REASONS
                .iter()
                .any(|r| r.name == reason && r.violation_field.is_some());
            assert!(known, "{reason}");
        }
    }
}
