//! The writer and store against real SQLite files: batches land and the
//! tiers answer queries. Storage faults are in `fault_tests.rs`, multi-row
//! statements in `batch_tests.rs`; this file also holds what they share.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use super::query::{self, GpuSelector, Tier};
use super::stats::HistoryStats;
use super::store::Store;
use super::writer::{self, WriterSettings};
use super::{catalog, Durability, Retention};
use crate::gpu::{testing, FastReadings, GpuSnapshot, Snapshot};

pub(super) fn snapshot(at_s: u64, temp: f64) -> Arc<Snapshot> {
    let gpu = GpuSnapshot {
        uuid: "GPU-history-test".into(),
        readings: FastReadings {
            temperature_gpu_celsius: Some(temp),
            ..FastReadings::default()
        },
        ..testing::gpu(0)
    };
    Arc::new(Snapshot {
        hostname: "test".into(),
        ..testing::snapshot(UNIX_EPOCH + Duration::from_secs(at_s), vec![gpu])
    })
}

/// A writer task on a store, fed through `tx`.
pub(super) struct Writer {
    pub(super) tx: tokio::sync::mpsc::Sender<Arc<Snapshot>>,
    pub(super) stats: Arc<HistoryStats>,
    task: tokio::task::JoinHandle<()>,
    _stop: tokio::sync::watch::Sender<bool>,
}

impl Writer {
    pub(super) fn start(store: &Store, capacity: usize) -> Writer {
        let (tx, rx) = tokio::sync::mpsc::channel(capacity);
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let stats = Arc::new(HistoryStats::new(Arc::new(AtomicU64::new(0))));
        let task = tokio::spawn(writer::run(
            store.clone(),
            rx,
            settings(),
            stats.clone(),
            stop_rx,
        ));
        Writer {
            tx,
            stats,
            task,
            _stop: stop,
        }
    }

    /// Closes the queue and waits for the final commit.
    pub(super) async fn finish(self) {
        drop(self.tx);
        self.task.await.expect("writer");
    }

    /// Stops the writer without its final commit, as a killed agent would.
    pub(super) async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

pub(super) fn settings() -> WriterSettings {
    WriterSettings {
        batch_interval: Duration::from_millis(50),
        // Nothing is pruned: the test's timestamps are old.
        retention: Retention {
            raw: Duration::from_secs(100 * 365 * 86_400),
            minute: Duration::from_secs(100 * 365 * 86_400),
            hour: Duration::from_secs(100 * 365 * 86_400),
        },
        max_bytes: None,
        max_pending_samples: 100_000,
    }
}

pub(super) async fn count(store: &Store, table: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
        .fetch_one(&store.pool)
        .await
        .expect("count")
}

#[tokio::test]
async fn snapshots_become_samples_rollups_and_answers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("h.db");
    let store = Store::open_for_writing(&path, Durability::Normal)
        .await
        .expect("open");
    let writer = Writer::start(&store, 1000);
    let (tx, stats) = (writer.tx.clone(), writer.stats.clone());
    // 3 hours at 1 Hz starting on an hour boundary, temperature = minute of the hour.
    let start = 1_700_002_800;
    for s in 0..3 * 3600 {
        tx.send(snapshot(start + s, ((s / 60) % 60) as f64))
            .await
            .expect("send");
    }
    drop(tx);
    writer.finish().await;
    assert_eq!(count(&store, "sample").await, 3 * 3600);
    assert_eq!(count(&store, "rollup_1m").await, 180);
    assert_eq!(count(&store, "rollup_1h").await, 3);
    assert!(stats.rows_written.load(Ordering::Relaxed) > 10_800);

    let temperature = catalog::field("temperature").expect("field");
    let gpu: GpuSelector = "0".parse().expect("selector");
    let now = (start + 3 * 3600) as i64 * 1000;
    let from = start as i64 * 1000;
    let raw = query::series(
        &store.pool,
        &gpu,
        temperature,
        from,
        from + 120_000,
        Some(Duration::from_secs(10)),
        Retention::default(),
        now,
    )
    .await
    .expect("raw series");
    assert_eq!(raw.tier, Tier::Raw);
    assert_eq!(raw.points.len(), 12);
    assert_eq!(
        (raw.points[6].avg, raw.points[6].min, raw.points[6].max),
        (Some(1.0), Some(1.0), Some(1.0))
    );
    let minutes = query::series(
        &store.pool,
        &gpu,
        temperature,
        from,
        now,
        Some(Duration::from_secs(600)),
        Retention::default(),
        now,
    )
    .await
    .expect("minute series");
    assert_eq!(minutes.tier, Tier::Minute);
    assert_eq!(minutes.points.len(), 18);
    assert_eq!(
        minutes.points[1].avg,
        Some(14.5),
        "minutes 10..19 average 14.5"
    );
    assert_eq!(
        (minutes.points[1].min, minutes.points[1].max),
        (Some(10.0), Some(19.0))
    );
    let hours = query::series(
        &store.pool,
        &gpu,
        temperature,
        from,
        now,
        Some(Duration::from_secs(3600)),
        Retention::default(),
        now,
    )
    .await
    .expect("hour series");
    assert_eq!(hours.tier, Tier::Hour);
    assert_eq!(hours.points.len(), 3);
    assert_eq!(hours.points[2].avg, Some(29.5));
    assert_eq!(hours.points[2].last, Some(59.0));
    let events = query::events(&store.pool, 0, now + 1, None, None, 100)
        .await
        .expect("events");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, "agent_start");
}

#[tokio::test]
async fn an_open_database_gets_every_snapshot_already_queued() {
    // The writer starting late (a loaded machine, a short run) finds the
    // database open and snapshots queued at once: none may be given up.
    for round in 0..20 {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open_for_writing(&dir.path().join("late.db"), Durability::Normal)
            .await
            .expect("open");
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        for s in 0..8 {
            tx.send(snapshot(1_700_000_000 + s, 40.0))
                .await
                .expect("queue");
        }
        drop(tx);
        let (_stop, stop_rx) = tokio::sync::watch::channel(false);
        let stats = Arc::new(HistoryStats::new(Arc::new(AtomicU64::new(0))));
        writer::run_when_open(
            super::attach::Slot::ready(store.clone()),
            rx,
            settings(),
            stats.clone(),
            stop_rx,
        )
        .await;
        assert_eq!(
            stats.samples_discarded.load(Ordering::Relaxed),
            0,
            "round {round}: snapshots given up though the database was open"
        );
        assert_eq!(count(&store, "sample").await, 8, "round {round}");
    }
}
