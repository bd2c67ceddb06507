//! The history's own metrics, kept in atomics by the writer and encoded by
//! the exporter at scrape time.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::families::{unit, Family};

/// Counters and gauges the writer updates.
#[derive(Debug, Default)]
pub struct HistoryStats {
    /// Whether the database is open and the last write to it succeeded.
    pub up: AtomicBool,
    /// Rows committed.
    pub rows_written: AtomicU64,
    /// Failed commits.
    pub write_errors: AtomicU64,
    /// Raw samples given up after failed commits piled up, or while the
    /// database was not open.
    pub samples_discarded: AtomicU64,
    /// Snapshots the writer's queue was too full to take (set by the sampler).
    pub snapshots_dropped: Arc<AtomicU64>,
    /// Duration of the last commit, µs.
    pub last_commit_micros: AtomicU64,
    /// Rows removed by retention and the size cap.
    pub rows_pruned: AtomicU64,
    /// Database size, bytes.
    pub database_bytes: AtomicU64,
    /// Oldest sample of the raw, 1m and 1h tiers, ms (-1: empty).
    pub oldest_ms: [AtomicI64; 3],
}

impl HistoryStats {
    /// Fresh stats; `dropped` is the counter the sampler increments.
    pub fn new(dropped: Arc<AtomicU64>) -> Self {
        HistoryStats {
            snapshots_dropped: dropped,
            oldest_ms: [AtomicI64::new(-1), AtomicI64::new(-1), AtomicI64::new(-1)],
            ..HistoryStats::default()
        }
    }
}

/// Encodes [`HistoryStats`] as `gpuwatch_history_*`.
#[derive(Debug)]
pub struct HistoryCollector(pub Arc<HistoryStats>);

impl Collector for HistoryCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let s = &self.0;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        let mut up = Family::gauge(
            "history_up",
            "Whether the history database is open and its last write succeeded (1) or not (0: full disk, read-only or missing storage; history is not recorded and alert notifications are not queued until it returns).",
            None,
        );
        up.push(
            vec![],
            if s.up.load(Ordering::Relaxed) {
                1.0
            } else {
                0.0
            },
        );
        up.encode(&mut encoder)?;
        let counters = [
            ("history_rows_written", "Rows committed to the history database.", &s.rows_written),
            ("history_write_errors", "Commits to the history database that failed (disk full, read-only, ...); the rows are retried.", &s.write_errors),
            ("history_samples_discarded", "Raw samples (one per GPU and sample) given up: commits kept failing, or the database was not open.", &s.samples_discarded),
            ("history_dropped_snapshots", "Snapshots the history writer's queue was too full to take.", &*s.snapshots_dropped),
            ("history_rows_pruned", "Rows deleted by retention and the size cap.", &s.rows_pruned),
        ];
        for (name, help, value) in counters {
            let mut family = Family::counter(name, help, None);
            family.push(vec![], load(value));
            family.encode(&mut encoder)?;
        }
        let mut commit = Family::gauge(
            "history_commit_duration",
            "Duration of the last history commit.",
            unit("seconds"),
        );
        commit.push(vec![], load(&s.last_commit_micros) / 1e6);
        commit.encode(&mut encoder)?;
        let mut size = Family::gauge(
            "history_database_size",
            "Size of the history database (pages in use).",
            unit("bytes"),
        );
        size.push(vec![], load(&s.database_bytes));
        size.encode(&mut encoder)?;
        let mut oldest = Family::gauge(
            "history_oldest_sample_timestamp",
            "Oldest sample kept in each tier.",
            unit("seconds"),
        );
        for ((tier, _), ms) in super::retention::TIERS.iter().zip(&s.oldest_ms) {
            let ms = ms.load(Ordering::Relaxed);
            if ms >= 0 {
                oldest.push(vec![("tier", Cow::Borrowed(*tier))], ms as f64 / 1000.0);
            }
        }
        oldest.encode(&mut encoder)
    }
}
