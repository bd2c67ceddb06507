//! The rows the recorder produces and the writer commits, batched.

use std::collections::BTreeMap;

use super::super::rollup::Value;
use super::workloads::WorkloadRow;

/// A GPU row to insert or update.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuRow {
    /// Key used by every other table.
    pub id: i64,
    /// NVML UUID (or `index-N` when NVML gave none).
    pub uuid: String,
    /// NVML index when last seen.
    pub index: u32,
    /// Product name.
    pub name: Option<String>,
    /// When seen, ms.
    pub seen_ms: i64,
}

/// One raw sample.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRow {
    /// ms since the epoch.
    pub ts: i64,
    /// GPU id.
    pub gpu: i64,
    /// Whether the GPU answered.
    pub up: bool,
    /// Stored values in [`crate::history::catalog::FIELDS`] order.
    pub values: Vec<Option<i64>>,
}

/// One rollup row (merged into an existing row for the same period).
#[derive(Debug, Clone, PartialEq)]
pub struct RollupRow {
    /// Start of the period, ms.
    pub ts: i64,
    /// GPU id.
    pub gpu: i64,
    /// Samples folded in.
    pub n: u64,
    /// Of which up.
    pub up_n: u64,
    /// Rollup columns in catalogue order.
    pub values: Vec<Value>,
}

/// One event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    /// ms since the epoch.
    pub ts: i64,
    /// GPU id, if the event belongs to one.
    pub gpu: Option<i64>,
    /// What happened.
    pub kind: &'static str,
    /// Xid code or pid.
    pub code: Option<i64>,
    /// Xid count or memory (MiB).
    pub value: Option<i64>,
    /// Process name, loss reason.
    pub detail: Option<String>,
}

/// Where a resettable counter stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CounterState {
    /// Last value the driver reported (stored units).
    pub last_raw: f64,
    /// Added to the driver's value so the stored one never goes down.
    pub offset: f64,
}

/// Everything to commit in one transaction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    /// GPU rows by id.
    pub gpus: BTreeMap<i64, GpuRow>,
    /// Raw samples.
    pub samples: Vec<SampleRow>,
    /// Minute rollups.
    pub minutes: Vec<RollupRow>,
    /// Hour rollups.
    pub hours: Vec<RollupRow>,
    /// Events.
    pub events: Vec<EventRow>,
    /// Counter states by (gpu, column).
    pub counters: BTreeMap<(i64, &'static str), CounterState>,
    /// Workload rows.
    pub workloads: Vec<WorkloadRow>,
}

impl Batch {
    /// Rows it holds.
    pub fn rows(&self) -> usize {
        self.gpus.len()
            + self.samples.len()
            + self.minutes.len()
            + self.hours.len()
            + self.events.len()
            + self.counters.len()
            + self.workloads.len()
    }

    /// Adds `later`'s rows after this batch's (a failed commit is retried
    /// together with what came since).
    pub fn append(&mut self, later: Batch) {
        self.gpus.extend(later.gpus);
        self.samples.extend(later.samples);
        self.minutes.extend(later.minutes);
        self.hours.extend(later.hours);
        self.events.extend(later.events);
        self.counters.extend(later.counters);
        self.workloads.extend(later.workloads);
    }

    /// Drops the oldest raw samples so at most `keep` remain; returns how
    /// many were dropped. Rollups, events and counters are small and kept.
    pub fn trim_samples(&mut self, keep: usize) -> usize {
        let excess = self.samples.len().saturating_sub(keep);
        self.samples.drain(..excess);
        excess
    }
}
