//! What a snapshot says about each rule's condition: per GPU, what
//! evaluation remembers between snapshots ([`GpuEvalState`]) and what
//! changed since the last one, then each condition checked into
//! (holds, value). The state machine that turns checks into transitions is
//! [`super::eval`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::anomaly;
use super::condition::{Condition, Counter, Flag, Metric};
use super::window::WindowAverage;
use crate::gpu::{FieldGroup, GpuSnapshot, Snapshot};

/// What evaluation remembers about one GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuEvalState {
    /// Xid counts by code at the last evaluation.
    pub xid: BTreeMap<u64, u64>,
    /// Counter values by source name (e.g. "ecc_uncorrected_aggregate").
    pub counters: BTreeMap<String, u64>,
    /// Readings this GPU has given at least once (for `absent`).
    pub seen: BTreeSet<Metric>,
    /// Temperature baselines by utilization bucket (anomaly detection).
    #[serde(default)]
    pub baselines: BTreeMap<u8, anomaly::Baseline>,
    /// Utilization of the last 5 minutes (`utilization_avg_5m`).
    #[serde(default)]
    pub utilization: WindowAverage,
    /// Per Xid code, the epochs (boot id and GPU resets within that boot,
    /// see `epoch`) in which it was counted, oldest first, at most
    /// [`EPOCHS_KEPT`]: `xid_recurring` escalates when one comes back.
    /// Saved with the alert state, so an agent restart keeps it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub xid_epochs: BTreeMap<u64, Vec<String>>,
    /// The boot id at the last evaluation (empty: unknown).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub boot_id: String,
    /// GPU resets seen within this boot: the GPU stopped answering and
    /// answered again.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resets: u32,
    /// Whether the GPU was lost at the last evaluation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lost: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Epochs remembered per Xid code (well above any sensible
/// `xid_escalate_after`).
pub const EPOCHS_KEPT: usize = 16;

/// The epoch a GPU is in: its boot id and the resets seen in that boot.
fn epoch(memory: &GpuEvalState) -> String {
    format!("{}#{}", memory.boot_id, memory.resets)
}

/// Tracks reboots (a new boot id) and GPU resets (lost, then answering
/// again within one boot), then adds the current epoch to each new Xid.
fn track_epochs(gpu: &GpuSnapshot, memory: &mut GpuEvalState, boot_id: Option<&str>, xid: &[u64]) {
    if let Some(boot) = boot_id.filter(|b| *b != memory.boot_id) {
        memory.boot_id = boot.to_string();
        memory.resets = 0;
        memory.lost = false;
    }
    if !gpu.is_up() {
        memory.lost = true;
    } else if memory.lost {
        memory.lost = false;
        memory.resets += 1;
    }
    let now = epoch(memory);
    for code in xid {
        let epochs = memory.xid_epochs.entry(*code).or_default();
        if epochs.last() != Some(&now) {
            epochs.push(now.clone());
            if epochs.len() > EPOCHS_KEPT {
                epochs.remove(0);
            }
        }
    }
}

/// What changed on one GPU since the previous evaluation.
#[derive(Debug, Default)]
pub(super) struct Changes {
    xid: Vec<u64>,
    increased: BTreeMap<Counter, u64>,
    anomaly: Option<anomaly::Score>,
    /// How much hotter than its peers (set by the caller, which sees all
    /// GPUs).
    pub(super) peer: Option<f64>,
}

/// Updates a GPU's memory with this snapshot (of the node with `boot_id`)
/// and says what grew.
pub(super) fn observe(
    gpu: &GpuSnapshot,
    memory: &mut GpuEvalState,
    taken_at: SystemTime,
    boot_id: Option<&str>,
) -> Changes {
    let mut changes = Changes::default();
    // Xid counts are since the agent started: a missing baseline is 0, and
    // a count lower than the baseline means the agent restarted.
    let mut xid = BTreeMap::new();
    for entry in gpu.xid_errors.iter() {
        let before = memory
            .xid
            .get(&entry.code)
            .copied()
            .filter(|b| *b <= entry.count)
            .unwrap_or(0);
        if entry.count > before {
            changes.xid.push(entry.code);
        }
        xid.insert(entry.code, entry.count);
    }
    if gpu.is_up() || !xid.is_empty() {
        memory.xid = xid;
    }
    changes.xid.sort_unstable();
    track_epochs(gpu, memory, boot_id, &changes.xid);
    // Lifetime and volatile counters: the first reading is a baseline, a
    // lower reading (driver reload) a new baseline.
    for (counter, sources) in counter_sources(gpu) {
        for (name, value) in sources {
            let Some(value) = value else { continue };
            if let Some(before) = memory.counters.get(name) {
                if value > *before {
                    *changes.increased.entry(counter).or_default() += value - before;
                }
            }
            memory.counters.insert(name.to_string(), value);
        }
    }
    if gpu.is_up() {
        if let Some(utilization) = gpu.readings.utilization_gpu_ratio {
            memory.utilization.add(taken_at, utilization);
        }
        for (metric, _) in super::condition::METRICS {
            if metric_value(gpu, *metric).is_some() {
                memory.seen.insert(*metric);
            }
        }
        if let (Some(utilization), Some(temperature)) = (
            gpu.readings.utilization_gpu_ratio,
            gpu.readings.temperature_gpu_celsius,
        ) {
            changes.anomaly =
                anomaly::observe(&mut memory.baselines, utilization, temperature, taken_at);
        }
    }
    changes
}

type Sources = [(&'static str, Option<u64>); 2];

fn counter_sources(gpu: &GpuSnapshot) -> [(Counter, Sources); 4] {
    let h = &gpu.health;
    [
        (
            Counter::EccUncorrected,
            [
                ("ecc_uncorrected_volatile", h.ecc.uncorrected_volatile),
                ("ecc_uncorrected_aggregate", h.ecc.uncorrected_aggregate),
            ],
        ),
        (
            Counter::EccCorrected,
            [
                ("ecc_corrected_volatile", h.ecc.corrected_volatile),
                ("ecc_corrected_aggregate", h.ecc.corrected_aggregate),
            ],
        ),
        (
            Counter::RetiredPagesDoubleBit,
            [
                ("retired_pages_double_bit", h.retired_pages_double_bit),
                ("", None),
            ],
        ),
        (
            Counter::RemappedRowsUncorrectable,
            [
                ("remapped_rows_uncorrectable", h.remapped_rows_uncorrectable),
                ("", None),
            ],
        ),
    ]
}

/// A reading of `gpu`, or a value derived from its readings; `None` when
/// the reading (or what it derives from) is absent. `utilization_avg_5m`
/// needs evaluation's memory: here it is the current utilization.
pub fn metric_value(gpu: &GpuSnapshot, metric: Metric) -> Option<f64> {
    let r = &gpu.readings;
    let h = &gpu.health;
    match metric {
        Metric::Temperature => r.temperature_gpu_celsius,
        Metric::MemoryTemperature => r.temperature_memory_celsius,
        Metric::DegreesBelowSlowdown => {
            Some(gpu.identity.temperature_slowdown_celsius? - r.temperature_gpu_celsius?)
        }
        Metric::DegreesBelowShutdown => {
            Some(gpu.identity.temperature_shutdown_celsius? - r.temperature_gpu_celsius?)
        }
        Metric::MemoryUsedRatio => r
            .memory
            .filter(|m| m.total_bytes > 0)
            .map(|m| m.used_bytes as f64 / m.total_bytes as f64),
        Metric::MemoryUsedBytes => r.memory.map(|m| m.used_bytes as f64),
        Metric::MemoryFreeBytes => r.memory.map(|m| m.free_bytes as f64),
        Metric::Power => r.power_watts,
        Metric::PowerLimitRatio => {
            let limit = h.power_limit_watts.filter(|l| *l > 0.0)?;
            Some(r.power_watts? / limit)
        }
        Metric::UtilizationGpu | Metric::UtilizationAvg5m => r.utilization_gpu_ratio,
        Metric::UtilizationMemory => r.utilization_memory_ratio,
        Metric::SmClock => r.sm_clock_hertz,
        Metric::FanSpeed => h.fan_speed_ratio.iter().flatten().copied().reduce(f64::max),
        Metric::PerformanceState => h.performance_state.map(f64::from),
        Metric::PcieLinkWidth => h.pcie_link_width.map(f64::from),
        Metric::SmActive => gpu.gpm.sm_active_ratio(),
        Metric::ProcessMemoryBytes => gpu.groups.contains_key(&FieldGroup::Processes).then(|| {
            gpu.processes
                .iter()
                .filter_map(|p| p.used_memory_bytes)
                .sum::<u64>() as f64
        }),
        Metric::NvlinkDown => (!h.links.nvlink.is_empty()).then(|| h.links.links_down() as f64),
        Metric::RecoveryActionNeeded => {
            h.links
                .recovery_action
                .map(|action| if action == "none" { 0.0 } else { 1.0 })
        }
        Metric::FabricNotRegistered => {
            h.fabric
                .as_ref()
                .map(|f| if f.registered() { 0.0 } else { 1.0 })
        }
        Metric::PcieDegraded => {
            let identity = &gpu.identity;
            let below = h.pcie_link_width? < identity.pcie_max_link_width?
                || h.pcie_link_gen? < identity.pcie_max_link_gen?;
            let busy = r.utilization_gpu_ratio? >= PCIE_BUSY;
            Some(if below && busy { 1.0 } else { 0.0 })
        }
    }
}

/// Utilization from which a GPU counts as busy for `pcie_degraded`.
const PCIE_BUSY: f64 = 0.5;

fn group(metric: Metric) -> FieldGroup {
    match metric {
        Metric::Temperature
        | Metric::MemoryTemperature
        | Metric::DegreesBelowSlowdown
        | Metric::DegreesBelowShutdown => FieldGroup::Thermal,
        Metric::MemoryUsedRatio | Metric::MemoryUsedBytes | Metric::MemoryFreeBytes => {
            FieldGroup::Memory
        }
        Metric::Power | Metric::PowerLimitRatio => FieldGroup::Power,
        Metric::UtilizationGpu | Metric::UtilizationAvg5m | Metric::UtilizationMemory => {
            FieldGroup::Utilization
        }
        Metric::SmClock => FieldGroup::Clocks,
        Metric::FanSpeed
        | Metric::PerformanceState
        | Metric::NvlinkDown
        | Metric::RecoveryActionNeeded
        | Metric::FabricNotRegistered => FieldGroup::Device,
        Metric::PcieLinkWidth | Metric::PcieDegraded => FieldGroup::Pcie,
        Metric::SmActive => FieldGroup::Gpm,
        Metric::ProcessMemoryBytes => FieldGroup::Processes,
    }
}

/// A GPU-level condition on one GPU: (true?, value).
pub(super) fn check(
    condition: &Condition,
    gpu: &GpuSnapshot,
    changes: &Changes,
    memory: &GpuEvalState,
) -> (bool, Option<f64>) {
    let yes_no = |b: bool| (b, Some(if b { 1.0 } else { 0.0 }));
    match condition {
        Condition::Compare {
            metric,
            op,
            threshold,
        } => {
            let value = match metric {
                // Absent while the GPU gives no utilization now.
                Metric::UtilizationAvg5m => gpu
                    .readings
                    .utilization_gpu_ratio
                    .and_then(|_| memory.utilization.average()),
                _ => metric_value(gpu, *metric),
            };
            (value.is_some_and(|v| op.holds(v, *threshold)), value)
        }
        Condition::ClockEvent { mask } => match gpu.readings.clock_event_reasons {
            Some(active) => yes_no(active & mask != 0),
            None => (false, None),
        },
        Condition::GpuLost => yes_no(!gpu.is_up()),
        Condition::Xid {
            codes,
            defer_to_remap,
        } => match changes
            .xid
            .iter()
            .filter(|c| !(*defer_to_remap && defers_to_remap(gpu, **c)))
            .find(|c| codes.contains(c))
        {
            Some(code) => (true, Some(*code as f64)),
            None => (false, None),
        },
        Condition::XidRecurring { after } => {
            let reset_class = |code: &u64| {
                crate::health::catalog::class_of(*code)
                    == Some(crate::health::catalog::Class::Reset)
            };
            let epochs = |code: &u64| memory.xid_epochs.get(code).map_or(0, Vec::len);
            match changes
                .xid
                .iter()
                .filter(|c| reset_class(c))
                .find(|c| epochs(c) > *after as usize)
            {
                Some(code) => (true, Some(*code as f64)),
                None => (false, None),
            }
        }
        Condition::Increase { counter } => match changes.increased.get(counter) {
            Some(by) => (true, Some(*by as f64)),
            None => (false, None),
        },
        Condition::Flag { flag } => {
            let h = &gpu.health;
            let value = match flag {
                Flag::RemapFailure => h.remapped_rows_failure,
                Flag::RemapPending => h.remapped_rows_pending,
                Flag::RetiredPagesPending => h.retired_pages_pending,
            };
            match value {
                Some(b) => yes_no(b),
                None => (false, None),
            }
        }
        Condition::Absent { metric } => {
            let missing = gpu.is_up()
                && metric_value(gpu, *metric).is_none()
                && (memory.seen.contains(metric)
                    || gpu.groups.get(&group(*metric)) == Some(&false));
            (missing, None)
        }
        Condition::Stale { .. }
        | Condition::FitsNowhere { .. }
        | Condition::GpusMissingFromDriver
        | Condition::WorkloadIdle { .. } => (false, None),
        Condition::TemperatureAnomaly { margin } => match changes.anomaly {
            Some(score) => (score.is_anomalous(*margin), Some(score.above_mean)),
            None => (false, None),
        },
        Condition::PeerHotter { margin } => match changes.peer {
            Some(excess) => (excess >= *margin, Some(excess)),
            None => (false, None),
        },
        Condition::All(list) => {
            let mut last = (true, None);
            for c in list {
                let (holds, value) = check(c, gpu, changes, memory);
                last = (last.0 && holds, value);
            }
            last
        }
        Condition::Any(list) => {
            let mut first_value = None;
            for c in list {
                let (holds, value) = check(c, gpu, changes, memory);
                if holds {
                    return (true, value);
                }
                first_value = first_value.or(value);
            }
            (false, first_value)
        }
    }
}

/// Whether Xid `code` is left to the row-remap rules on `gpu`: it is one of
/// the row-remap Xids and the GPU gives row-remap readings.
fn defers_to_remap(gpu: &GpuSnapshot, code: u64) -> bool {
    let h = &gpu.health;
    crate::health::catalog::XID_DEFER_TO_REMAP.contains(&code)
        && (h.remapped_rows_pending.is_some() || h.remapped_rows_failure.is_some())
}

/// A node-level condition.
pub(super) fn node_check(
    condition: &Condition,
    snapshot: &Snapshot,
    now: SystemTime,
) -> (bool, Option<f64>) {
    match condition {
        Condition::Stale { max_age } => {
            let age = now
                .duration_since(snapshot.taken_at)
                .unwrap_or(Duration::ZERO);
            (age > *max_age, Some(age.as_secs_f64()))
        }
        Condition::FitsNowhere { profile, margin } => {
            let total = crate::capacity::node_total(snapshot, profile, *margin);
            (total == 0, Some(total as f64))
        }
        Condition::GpusMissingFromDriver => {
            let missing = snapshot.missing_from_driver().len();
            (missing > 0, Some(missing as f64))
        }
        _ => (false, None),
    }
}
