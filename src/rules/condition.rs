//! Conditions: what a rule tests, and their small text syntax.
//!
//! ```text
//! temperature > 85                      a reading (or derived value) against a number
//! degrees_below_slowdown <= 5           derived from the GPU's own thresholds
//! memory_free_bytes < 1GiB              sizes for byte readings
//! clock_event(hw_thermal_slowdown)      a clock-event reason active (names as the `reason` label)
//! xid(48, 79)                           one of these Xid codes seen since the last evaluation
//! xid_recurring(2)                      a reset-class Xid came back after 2 GPU resets / node reboots
//! increase(ecc_uncorrected)             a counter grew since the last evaluation
//! remap_failure | remap_pending | retired_pages_pending | gpu_lost
//! gpus_missing_from_driver              (node) NVIDIA GPUs on the PCI bus that NVML does not list
//! absent(power)                         a reading this GPU gives is missing
//! stale(30s)                            the snapshot is older than this (node-level)
//! workload_idle(0.01)                   (per workload) SM-active / held seconds over the rule's `for` below this
//! workload_idle(0.01, slurm_job, pod)   the same, for these workload kinds only
//! temperature_anomaly(8)                above its own baseline at this load (see anomaly)
//! peer_hotter(15)                       hotter than its peers at similar load (see anomaly)
//! A or B                                either (GPU-level conditions only)
//! ```

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A reading of one GPU, or a value derived from its readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// GPU die temperature, °C.
    Temperature,
    /// Memory (HBM) temperature, °C.
    MemoryTemperature,
    /// The GPU's own slowdown temperature minus its temperature, °C.
    DegreesBelowSlowdown,
    /// The GPU's own shutdown temperature minus its temperature, °C.
    DegreesBelowShutdown,
    /// Used / total frame buffer, 0..1.
    MemoryUsedRatio,
    /// Used frame buffer, bytes.
    MemoryUsedBytes,
    /// Free frame buffer, bytes.
    MemoryFreeBytes,
    /// Power draw, W.
    Power,
    /// Power draw / enforced power limit, 0..1.
    PowerLimitRatio,
    /// GPU utilization, 0..1.
    UtilizationGpu,
    /// GPU utilization averaged over the last 5 minutes, 0..1 (see
    /// [`super::window`]): for rules that must not flap when utilization
    /// wanders around their threshold.
    UtilizationAvg5m,
    /// Memory utilization, 0..1.
    UtilizationMemory,
    /// SM clock, Hz.
    SmClock,
    /// The fastest fan, 0..1.
    FanSpeed,
    /// Performance state, 0 (max) .. 15.
    PerformanceState,
    /// Current PCIe link width, lanes.
    PcieLinkWidth,
    /// GPM SM activity (Hopper and newer), 0..1: absent without GPM.
    SmActive,
    /// Memory used by the GPU's processes together, bytes.
    ProcessMemoryBytes,
    /// NVLink links that are down (absent without NVLink).
    NvlinkDown,
    /// 1 when the driver's recovery action (field 230) is not `none`, 0
    /// when it is (absent when unsupported).
    RecoveryActionNeeded,
    /// 1 when the PCIe link runs below its maximum width or generation
    /// while the GPU is busy (utilization at least 50 %; idle GPUs
    /// downshift on purpose), else 0.
    PcieDegraded,
    /// 1 when the GPU is not in the NVLink fabric (registration not
    /// completed, or completed with an error), 0 when it is (absent
    /// without a fabric).
    FabricNotRegistered,
}

/// Every metric with its name in the condition syntax.
pub const METRICS: &[(Metric, &str)] = &[
    (Metric::Temperature, "temperature"),
    (Metric::MemoryTemperature, "memory_temperature"),
    (Metric::DegreesBelowSlowdown, "degrees_below_slowdown"),
    (Metric::DegreesBelowShutdown, "degrees_below_shutdown"),
    (Metric::MemoryUsedRatio, "memory_used_ratio"),
    (Metric::MemoryUsedBytes, "memory_used_bytes"),
    (Metric::MemoryFreeBytes, "memory_free_bytes"),
    (Metric::Power, "power"),
    (Metric::PowerLimitRatio, "power_limit_ratio"),
    (Metric::UtilizationGpu, "utilization"),
    (Metric::UtilizationAvg5m, "utilization_avg_5m"),
    (Metric::UtilizationMemory, "memory_utilization"),
    (Metric::SmClock, "sm_clock"),
    (Metric::FanSpeed, "fan_speed"),
    (Metric::PerformanceState, "performance_state"),
    (Metric::PcieLinkWidth, "pcie_link_width"),
    (Metric::SmActive, "sm_active"),
    (Metric::ProcessMemoryBytes, "process_memory_bytes"),
    (Metric::NvlinkDown, "nvlink_down"),
    (Metric::RecoveryActionNeeded, "recovery_action_needed"),
    (Metric::PcieDegraded, "pcie_degraded"),
    (Metric::FabricNotRegistered, "fabric_not_registered"),
];

impl Metric {
    /// The name in the condition syntax.
    pub fn as_str(self) -> &'static str {
        METRICS
            .iter()
            .find(|(m, _)| *m == self)
            .map_or("?", |(_, name)| name)
    }

    /// Looks a metric up by name.
    pub fn parse(name: &str) -> Option<Metric> {
        METRICS.iter().find(|(_, n)| *n == name).map(|(m, _)| *m)
    }

    pub(super) fn is_bytes(self) -> bool {
        matches!(
            self,
            Metric::MemoryUsedBytes | Metric::MemoryFreeBytes | Metric::ProcessMemoryBytes
        )
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl Op {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }

    pub(super) fn parse(text: &str) -> Option<Op> {
        Some(match text {
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "<" => Op::Lt,
            "<=" => Op::Le,
            "==" => Op::Eq,
            "!=" => Op::Ne,
            _ => return None,
        })
    }

    /// `value OP threshold`.
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Op::Gt => value > threshold,
            Op::Ge => value >= threshold,
            Op::Lt => value < threshold,
            Op::Le => value <= threshold,
            Op::Eq => value == threshold,
            Op::Ne => value != threshold,
        }
    }

    /// Whether the operator points up (`>`, `>=`), down (`<`, `<=`) or
    /// neither; hysteresis needs a direction.
    pub fn direction(self) -> Direction {
        match self {
            Op::Gt | Op::Ge => Direction::Up,
            Op::Lt | Op::Le => Direction::Down,
            Op::Eq | Op::Ne => Direction::Neither,
        }
    }
}

/// Which way a comparison fires: what a clear threshold (hysteresis) needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `>`, `>=`: fires above the threshold, clears below the clear value.
    Up,
    /// `<`, `<=`: fires below the threshold, clears above the clear value.
    Down,
    /// `==`, `!=`: no direction, so no clear threshold.
    Neither,
}

/// A cumulative counter whose increase a rule can watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    /// Uncorrected ECC errors (volatile or aggregate count grew).
    EccUncorrected,
    /// Corrected ECC errors (volatile or aggregate count grew).
    EccCorrected,
    /// Pages retired for double-bit errors.
    RetiredPagesDoubleBit,
    /// Rows remapped for uncorrectable errors.
    RemappedRowsUncorrectable,
}

/// Every counter with its name in the condition syntax.
pub const COUNTERS: &[(Counter, &str)] = &[
    (Counter::EccUncorrected, "ecc_uncorrected"),
    (Counter::EccCorrected, "ecc_corrected"),
    (Counter::RetiredPagesDoubleBit, "retired_pages_double_bit"),
    (
        Counter::RemappedRowsUncorrectable,
        "remapped_rows_uncorrectable",
    ),
];

impl Counter {
    /// The name in the condition syntax.
    pub fn as_str(self) -> &'static str {
        COUNTERS
            .iter()
            .find(|(c, _)| *c == self)
            .map_or("?", |(_, name)| name)
    }
}

/// A yes/no health fact of a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Flag {
    /// A row remap failed: the GPU needs service.
    RemapFailure,
    /// A row remap waits for a GPU reset.
    RemapPending,
    /// A page retirement waits for a reboot.
    RetiredPagesPending,
}

/// The flag conditions by name.
pub(super) const FLAGS: &[(Flag, &str)] = &[
    (Flag::RemapFailure, "remap_failure"),
    (Flag::RemapPending, "remap_pending"),
    (Flag::RetiredPagesPending, "retired_pages_pending"),
];

impl Flag {
    /// The name in the condition syntax.
    pub fn as_str(self) -> &'static str {
        FLAGS
            .iter()
            .find(|(c, _)| *c == self)
            .map_or("?", |(_, name)| name)
    }
}

/// What a rule tests.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// A reading compared to a number; a missing reading is never true.
    Compare {
        /// The reading.
        metric: Metric,
        /// The operator.
        op: Op,
        /// The number.
        threshold: f64,
    },
    /// Any of these clock-event reason bits is active.
    ClockEvent {
        /// The bits (see [`crate::gpu::reasons`]).
        mask: u64,
    },
    /// The GPU stopped answering.
    GpuLost,
    /// One of these Xid codes was counted since the last evaluation.
    Xid {
        /// The codes.
        codes: Vec<u64>,
        /// Whether Xid 63/64 ([`crate::health::catalog::XID_DEFER_TO_REMAP`])
        /// are left to the row-remap rules on a GPU that gives row-remap
        /// readings (the built-in Xid rules do; `xid(...)` in a rule file
        /// does not).
        defer_to_remap: bool,
    },
    /// A reset-class Xid (catalog class [`crate::health::catalog::Class::Reset`])
    /// was counted on a GPU where the same code was seen before at least
    /// `after` GPU resets or node reboots ago: the remedy did not help, the
    /// hardware needs inspecting. A reboot is a new boot id, a reset a GPU
    /// that stopped answering and answered again within one boot; an agent
    /// restart is neither.
    XidRecurring {
        /// Resets/reboots the Xid must survive (`[health] xid_escalate_after`).
        after: u32,
    },
    /// A counter grew since the last evaluation.
    Increase {
        /// The counter.
        counter: Counter,
    },
    /// A health flag is set.
    Flag {
        /// The flag.
        flag: Flag,
    },
    /// The reading is missing on a GPU that is up and gives it (it was seen
    /// before, or its field group failed).
    Absent {
        /// The reading.
        metric: Metric,
    },
    /// The node's snapshot is older than this (node-level).
    Stale {
        /// Longest acceptable age.
        max_age: Duration,
    },
    /// The temperature is above its own baseline at this utilization by
    /// more than its normal band and at least `margin` °C (see
    /// [`super::anomaly`]).
    TemperatureAnomaly {
        /// Least excess over the baseline mean, °C.
        margin: f64,
    },
    /// The GPU is at least `margin` °C hotter than the median of its peers
    /// at similar utilization (see [`super::anomaly`]).
    PeerHotter {
        /// Least excess over the peers' median, °C.
        margin: f64,
    },
    /// Not one more instance of a workload profile fits on any GPU of the
    /// node (node-level; made from `[[profiles]]`, see
    /// [`crate::rules::capacity::rules`]).
    FitsNowhere {
        /// The profile.
        profile: crate::capacity::Profile,
        /// Memory kept free on each GPU, bytes.
        margin: u64,
    },
    /// NVIDIA GPUs sit on the PCI bus that NVML does not list (node-level;
    /// the value is how many, see the health module's PCI scan).
    GpusMissingFromDriver,
    /// A live workload (Slurm job, pod, container, process) whose
    /// SM-active seconds per GPU-second held, over the rule's `for` (the
    /// window), stayed below `below` (workload-level: one alert per
    /// workload, see [`super::workload`]).
    WorkloadIdle {
        /// The ratio below which the workload counts as idle, 0..1.
        below: f64,
        /// The kinds judged; empty: every kind.
        kinds: Vec<crate::gpu::WorkloadKind>,
    },
    /// Any of these (GPU-level) conditions.
    Any(Vec<Condition>),
    /// All of these (GPU-level) conditions; the value and threshold shown
    /// are the last one's (write the distinguishing condition last).
    All(Vec<Condition>),
}

impl Condition {
    /// Whether the rule makes one alert for the node rather than one per GPU.
    pub fn is_node_level(&self) -> bool {
        matches!(
            self,
            Condition::Stale { .. }
                | Condition::FitsNowhere { .. }
                | Condition::GpusMissingFromDriver
        )
    }

    /// Whether the rule makes one alert per workload rather than per GPU.
    pub fn is_workload_level(&self) -> bool {
        matches!(self, Condition::WorkloadIdle { .. })
    }

    /// The threshold shown as `{{ .threshold }}`: a comparison's number, a
    /// staleness limit in seconds.
    pub fn threshold(&self) -> Option<f64> {
        match self {
            Condition::Compare { threshold, .. } => Some(*threshold),
            Condition::Stale { max_age } => Some(max_age.as_secs_f64()),
            Condition::XidRecurring { after } => Some(f64::from(*after)),
            Condition::WorkloadIdle { below, .. } => Some(*below),
            Condition::TemperatureAnomaly { margin } | Condition::PeerHotter { margin } => {
                Some(*margin)
            }
            Condition::Any(list) => list.iter().find_map(Condition::threshold),
            Condition::All(list) => list.iter().rev().find_map(Condition::threshold),
            _ => None,
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::Compare {
                metric,
                op,
                threshold,
            } => write!(f, "{} {} {}", metric.as_str(), op.as_str(), threshold),
            Condition::ClockEvent { mask } => {
                let names: Vec<&str> = crate::gpu::reasons::active_reason_names(*mask).collect();
                write!(f, "clock_event({})", names.join(", "))
            }
            Condition::GpuLost => f.write_str("gpu_lost"),
            Condition::GpusMissingFromDriver => f.write_str("gpus_missing_from_driver"),
            Condition::Xid { codes, .. } => {
                let codes: Vec<String> = codes.iter().map(u64::to_string).collect();
                write!(f, "xid({})", codes.join(", "))
            }
            Condition::XidRecurring { after } => write!(f, "xid_recurring({after})"),
            Condition::Increase { counter } => write!(f, "increase({})", counter.as_str()),
            Condition::Flag { flag } => f.write_str(flag.as_str()),
            Condition::Absent { metric } => write!(f, "absent({})", metric.as_str()),
            Condition::Stale { max_age } => {
                write!(f, "stale({})", humantime::format_duration(*max_age))
            }
            Condition::TemperatureAnomaly { margin } => write!(f, "temperature_anomaly({margin})"),
            Condition::PeerHotter { margin } => write!(f, "peer_hotter({margin})"),
            Condition::WorkloadIdle { below, kinds } => {
                write!(f, "workload_idle({below}")?;
                for kind in kinds {
                    write!(f, ", {}", kind.as_str())?;
                }
                f.write_str(")")
            }
            Condition::FitsNowhere { profile, .. } => {
                write!(f, "fits_nowhere(profile {})", profile.name)
            }
            Condition::Any(list) | Condition::All(list) => {
                let joint = if matches!(self, Condition::Any(_)) {
                    " or "
                } else {
                    " and "
                };
                for (i, c) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str(joint)?;
                    }
                    write!(f, "{c}")?;
                }
                Ok(())
            }
        }
    }
}
