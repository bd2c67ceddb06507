//! The NVML clock-event ("throttle") reasons: one row per bit, with the name
//! used as the `reason` label and, where NVML keeps one, the field id of its
//! cumulative violation counter.

/// One clock-event reason that NVML reports as a bit of a 64-bit mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockEventReason {
    /// The bit in `nvmlDeviceGetCurrentClocksEventReasons`' mask.
    pub bit: u64,
    /// The `reason` label value: stable, snake case.
    pub name: &'static str,
    /// What a person should read it as.
    pub description: &'static str,
    /// The NVML field id (v12 numbering) of the cumulative violation time in
    /// nanoseconds, where NVML provides one.
    pub violation_field: Option<u32>,
}

/// Every reason gpuwatch knows, in bit order.
pub const CLOCK_EVENT_REASONS: &[ClockEventReason] = &[
    ClockEventReason {
        bit: 0x1,
        name: "gpu_idle",
        description: "GPU is idle",
        violation_field: None,
    },
    ClockEventReason {
        bit: 0x2,
        name: "applications_clocks_setting",
        description: "clocks limited by the applications clocks setting",
        violation_field: None,
    },
    ClockEventReason {
        bit: 0x4,
        name: "sw_power_cap",
        description: "software power cap",
        violation_field: Some(74),
    },
    ClockEventReason {
        bit: 0x8,
        name: "hw_slowdown",
        description: "hardware slowdown (thermal or power brake)",
        violation_field: None,
    },
    ClockEventReason {
        bit: 0x10,
        name: "sync_boost",
        description: "sync boost with other GPUs",
        violation_field: Some(76),
    },
    ClockEventReason {
        bit: 0x20,
        name: "sw_thermal_slowdown",
        description: "software thermal slowdown",
        violation_field: Some(251),
    },
    ClockEventReason {
        bit: 0x40,
        name: "hw_thermal_slowdown",
        description: "hardware thermal slowdown",
        violation_field: Some(252),
    },
    ClockEventReason {
        bit: 0x80,
        name: "hw_power_brake_slowdown",
        description: "hardware power brake slowdown",
        violation_field: Some(253),
    },
    ClockEventReason {
        bit: 0x100,
        name: "display_clock_setting",
        description: "clocks limited by the display clock setting",
        violation_field: None,
    },
];

/// The names of the reasons active in `mask`, in bit order.
pub fn active_reason_names(mask: u64) -> impl Iterator<Item = &'static str> {
    CLOCK_EVENT_REASONS
        .iter()
        .filter(move |reason| mask & reason.bit != 0)
        .map(|reason| reason.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_distinct_and_ordered() {
        for pair in CLOCK_EVENT_REASONS.windows(2) {
            assert!(pair[0].bit < pair[1].bit);
            assert_eq!(pair[0].bit.count_ones(), 1);
        }
    }

    #[test]
    fn active_names_follow_the_mask() {
        let names: Vec<_> = active_reason_names(0x40 | 0x4 | 0x1000).collect();
        assert_eq!(names, ["sw_power_cap", "hw_thermal_slowdown"]);
    }
}
