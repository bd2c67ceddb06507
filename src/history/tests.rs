//! The writer and store against real SQLite files: batches land, the tiers
//! answer queries, a full disk loses nothing, and foreign, damaged or newer
//! files are refused untouched.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::Row;

use super::query::{self, GpuSelector, Tier};
use super::stats::HistoryStats;
use super::store::{reset, HistoryError, Store, MIGRATOR};
use super::writer::{self, WriterSettings};
use super::{catalog, Durability, Retention};
use crate::gpu::{
    CollectionStats, FastReadings, GpuIdentity, GpuSnapshot, GpuStatus, SlowReadings, Snapshot,
    SystemInfo,
};

pub(super) fn snapshot(at_s: u64, temp: f64) -> Arc<Snapshot> {
    Arc::new(Snapshot {
        taken_at: UNIX_EPOCH + Duration::from_secs(at_s),
        hostname: "test".into(),
        system: Arc::new(SystemInfo::default()),
        gpus: vec![GpuSnapshot {
            index: 0,
            uuid: "GPU-history-test".into(),
            status: GpuStatus::Up,
            identity: Arc::new(GpuIdentity {
                name: Some("Test GPU".into()),
                ..GpuIdentity::default()
            }),
            readings: FastReadings {
                temperature_gpu_celsius: Some(temp),
                ..FastReadings::default()
            },
            health: Arc::new(SlowReadings::default()),
            processes: Arc::default(),
            mig_instances: Arc::default(),
            pods: Arc::default(),
            xid_errors: Arc::default(),
            groups: BTreeMap::new(),
            gpm: Default::default(),
        }],
        collection: CollectionStats::default(),
        kubelet: None,
    })
}

/// A writer task on a store, fed through `tx`.
struct Writer {
    tx: tokio::sync::mpsc::Sender<Arc<Snapshot>>,
    stats: Arc<HistoryStats>,
    task: tokio::task::JoinHandle<()>,
    _stop: tokio::sync::watch::Sender<bool>,
}

impl Writer {
    fn start(store: &Store, capacity: usize) -> Writer {
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
    async fn finish(self) {
        drop(self.tx);
        self.task.await.expect("writer");
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
async fn a_full_disk_loses_nothing_and_writing_resumes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("full.db");
    drop(
        Store::open_for_writing(&path, Durability::Normal)
            .await
            .expect("create"),
    );
    // One connection that may not grow the file past its current size:
    // SQLite then fails commits with SQLITE_FULL, as on a full disk.
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .expect("pool");
    let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
        .fetch_one(&pool)
        .await
        .expect("pages");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "PRAGMA max_page_count = {pages}"
    )))
    .execute(&pool)
    .await
    .expect("cap");
    let store = Store {
        pool: pool.clone(),
        path: path.clone(),
    };
    let writer = Writer::start(&store, 10_000);
    let (tx, stats) = (writer.tx.clone(), writer.stats.clone());
    let start = 1_700_000_000;
    for s in 0..600 {
        tx.send(snapshot(start + s, 50.0)).await.expect("send");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while stats.write_errors.load(Ordering::Relaxed) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "commits should fail on the full database"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !stats.up.load(Ordering::Relaxed),
        "gpuwatch_history_up 0 while commits fail"
    );
    // Space comes back.
    sqlx::query("PRAGMA max_page_count = 1000000")
        .execute(&pool)
        .await
        .expect("uncap");
    for s in 600..700 {
        tx.send(snapshot(start + s, 50.0)).await.expect("send");
    }
    drop(tx);
    writer.finish().await;
    assert_eq!(
        count(&store, "sample").await,
        700,
        "every sample written once space returned"
    );
    assert_eq!(stats.samples_discarded.load(Ordering::Relaxed), 0);
    assert!(
        stats.up.load(Ordering::Relaxed),
        "1 again once a commit works"
    );
    let integrity: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&pool)
        .await
        .expect("check");
    assert_eq!(integrity, "ok");
}

#[tokio::test]
async fn foreign_damaged_and_newer_files_are_refused_and_kept() {
    let dir = tempfile::tempdir().expect("temp dir");

    let garbage = dir.path().join("garbage.db");
    let bytes = b"this is not an sqlite database, but someone's notes\n".repeat(200);
    std::fs::write(&garbage, &bytes).expect("write");
    let error = Store::open_for_writing(&garbage, Durability::Normal)
        .await
        .expect_err("garbage");
    assert!(matches!(error, HistoryError::NotSqlite { .. }), "{error}");
    assert!(
        error.to_string().contains("garbage.db") && !error.to_string().contains("--reset-history"),
        "names the file, and offers no reset for a file that is not SQLite: {error}"
    );
    assert_eq!(
        std::fs::read(&garbage).expect("still there"),
        bytes,
        "left untouched"
    );

    let foreign = dir.path().join("foreign.db");
    {
        let pool = SqlitePoolOptions::new()
            .connect_with(
                SqliteConnectOptions::new()
                    .filename(&foreign)
                    .create_if_missing(true),
            )
            .await
            .expect("create foreign");
        sqlx::query("CREATE TABLE recipes (name TEXT)")
            .execute(&pool)
            .await
            .expect("table");
        pool.close().await;
    }
    let error = Store::open_for_writing(&foreign, Durability::Normal)
        .await
        .expect_err("foreign");
    assert!(error.to_string().contains("recipes"), "{error}");

    let newer = dir.path().join("newer.db");
    let store = Store::open_for_writing(&newer, Durability::Normal)
        .await
        .expect("create");
    let known = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    sqlx::query("INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) VALUES (?, 'from the future', 1, x'00', 0)")
        .bind(known + 1)
        .execute(&store.pool)
        .await
        .expect("future migration");
    store.pool.close().await;
    let error = Store::open_for_writing(&newer, Durability::Normal)
        .await
        .expect_err("newer");
    assert!(matches!(error, HistoryError::Newer { .. }), "{error}");
    assert!(error.to_string().contains("newer gpuwatch"), "{error}");
    let error = Store::open_read_only(&newer)
        .await
        .expect_err("newer, read-only");
    assert!(matches!(error, HistoryError::Newer { .. }), "{error}");

    assert!(error.to_string().contains("--reset-history"), "{error}");
    let moved = reset(&newer).await.expect("move").expect("moved");
    assert!(!newer.exists());
    Store::open_for_writing(&newer, Durability::Normal)
        .await
        .expect("a fresh database");
    let error = Store::open_read_only(&moved)
        .await
        .expect_err("the moved file is kept as it was");
    assert!(matches!(error, HistoryError::Newer { .. }), "{error}");

    let missing = Store::open_read_only(&dir.path().join("nothing.db"))
        .await
        .expect_err("missing");
    assert!(matches!(missing, HistoryError::Missing { .. }), "{missing}");
}

#[tokio::test]
async fn read_only_opening_never_writes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ro.db");
    let store = Store::open_for_writing(&path, Durability::Full)
        .await
        .expect("create");
    store.pool.close().await;
    let before = std::fs::read(&path).expect("bytes");
    let reader = Store::open_read_only(&path).await.expect("read-only");
    let error = sqlx::query("INSERT INTO event (ts, kind) VALUES (1, 'x')")
        .execute(&reader.pool)
        .await;
    assert!(error.is_err(), "a read-only connection refuses writes");
    let n: i64 = sqlx::query("SELECT count(*) AS n FROM gpu")
        .fetch_one(&reader.pool)
        .await
        .and_then(|r| r.try_get("n"))
        .expect("read");
    assert_eq!(n, 0);
    reader.pool.close().await;
    assert_eq!(std::fs::read(&path).expect("bytes"), before);
}

#[tokio::test]
async fn a_read_only_database_loses_nothing_and_writing_resumes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ro.db");
    drop(
        Store::open_for_writing(&path, Durability::Normal)
            .await
            .expect("create"),
    );
    let options = SqliteConnectOptions::new().filename(&path);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .expect("pool");
    // The connection refuses every write, as on a file or mount made read-only.
    sqlx::query("PRAGMA query_only = ON")
        .execute(&pool)
        .await
        .expect("read-only");
    let store = Store {
        pool: pool.clone(),
        path,
    };
    let writer = Writer::start(&store, 1000);
    let (tx, stats) = (writer.tx.clone(), writer.stats.clone());
    for s in 0..50 {
        tx.send(snapshot(1_700_000_000 + s, 40.0))
            .await
            .expect("send");
    }
    // Generous: on a loaded 2-core machine the 50 ms commits can lag far.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while stats.write_errors.load(Ordering::Relaxed) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "commits should fail while read-only: {} failed, {} rows written",
            stats.write_errors.load(Ordering::Relaxed),
            stats.rows_written.load(Ordering::Relaxed),
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(count(&store, "sample").await, 0);
    sqlx::query("PRAGMA query_only = OFF")
        .execute(&pool)
        .await
        .expect("writable");
    drop(tx);
    writer.finish().await;
    assert_eq!(
        count(&store, "sample").await,
        50,
        "the rows held while read-only are written"
    );
}

#[tokio::test]
async fn the_size_cap_evicts_the_oldest_raw_samples_first() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open_for_writing(&dir.path().join("cap.db"), Durability::Normal)
        .await
        .expect("open");
    let writer = Writer::start(&store, 100_000);
    let tx = writer.tx.clone();
    // 6 hours of one GPU at 1 Hz.
    let start = 1_700_006_400;
    for s in 0..6 * 3600 {
        tx.send(snapshot(start + s, 50.0 + (s % 7) as f64))
            .await
            .expect("send");
    }
    drop(tx);
    writer.finish().await;
    let before = store.size_bytes().await.expect("size");
    let oldest_before: i64 = sqlx::query_scalar("SELECT min(ts) FROM sample")
        .fetch_one(&store.pool)
        .await
        .expect("min");
    let cap = before / 2;
    let far_future = Retention {
        raw: Duration::from_secs(100 * 365 * 86_400),
        minute: Duration::from_secs(100 * 365 * 86_400),
        hour: Duration::from_secs(100 * 365 * 86_400),
    };
    let now_ms = (start + 6 * 3600) as i64 * 1000;
    let deleted = super::retention::prune(&store.pool, far_future, Some(cap), now_ms)
        .await
        .expect("prune");
    assert!(deleted > 0);
    assert!(
        store.size_bytes().await.expect("size") <= cap,
        "fits under the cap"
    );
    let oldest_after: i64 = sqlx::query_scalar("SELECT min(ts) FROM sample")
        .fetch_one(&store.pool)
        .await
        .expect("min");
    assert!(
        oldest_after > oldest_before,
        "the oldest raw samples went first"
    );
    assert_eq!(
        count(&store, "rollup_1m").await,
        360,
        "rollups are kept while raw samples can go"
    );
    let newest: i64 = sqlx::query_scalar("SELECT max(ts) FROM sample")
        .fetch_one(&store.pool)
        .await
        .expect("max");
    assert_eq!(newest, now_ms - 1000, "the newest samples stay");
}

/// A minute rollup of one GPU from the temperatures given (stored units).
fn minute_row(gpu: i64, ts: i64, temperatures: &[i64]) -> super::recorder::RollupRow {
    let column = catalog::FIELDS
        .iter()
        .position(|f| f.name == "temperature")
        .expect("temperature field");
    let mut acc = super::rollup::Accumulator::new(ts);
    for t in temperatures {
        let mut values = vec![None; catalog::FIELDS.len()];
        values[column] = Some(*t);
        acc.add_sample(true, &values);
    }
    super::recorder::RollupRow {
        ts,
        gpu,
        n: acc.n,
        up_n: acc.up_n,
        values: acc.values(),
    }
}

/// Each kind of row goes in multi-row statements (more rows than one
/// statement takes, too): every row lands, a minute met twice in one
/// statement merges as row-by-row statements did, and a later commit merges
/// into the stored row and updates the counters.
#[tokio::test]
async fn one_commit_writes_many_rows_of_each_kind_and_merges_rollups() {
    use super::recorder::{Batch, CounterState, EventRow, GpuRow, SampleRow};
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open_for_writing(&dir.path().join("rows.db"), Durability::Normal)
        .await
        .expect("open");
    let minute = 1_700_000_040_000;
    let mut batch = Batch::default();
    for id in 1..=3 {
        batch.gpus.insert(
            id,
            GpuRow {
                id,
                uuid: format!("GPU-{id}"),
                index: id as u32 - 1,
                name: Some("Test GPU".into()),
                seen_ms: minute,
            },
        );
        batch.minutes.push(minute_row(id, minute, &[40, 50]));
        for counter in ["energy", "xid_total"] {
            batch.counters.insert(
                (id, counter),
                CounterState {
                    last_raw: id as f64,
                    offset: 0.0,
                },
            );
        }
        batch.samples.push(SampleRow {
            ts: minute,
            gpu: id,
            up: true,
            values: vec![Some(id); catalog::FIELDS.len()],
        });
    }
    batch.minutes.push(minute_row(1, minute, &[70]));
    for pid in 0..450 {
        batch.events.push(EventRow {
            ts: minute + pid,
            gpu: Some(1 + pid % 3),
            kind: "process_start",
            code: Some(pid),
            value: Some(pid * 2),
            detail: Some(format!("proc-{pid}")),
        });
    }
    assert_eq!(
        super::sql::commit(&store.pool, &batch)
            .await
            .expect("commit"),
        3 + 4 + 6 + 3 + 450
    );
    let mut later = Batch::default();
    later.minutes.push(minute_row(2, minute, &[60, 60]));
    later.counters.insert(
        (2, "energy"),
        CounterState {
            last_raw: 5.0,
            offset: 2.0,
        },
    );
    super::sql::commit(&store.pool, &later)
        .await
        .expect("second commit");

    assert_eq!(count(&store, "gpu").await, 3);
    assert_eq!(count(&store, "sample").await, 3);
    assert_eq!(count(&store, "event").await, 450);
    assert_eq!(count(&store, "counter_state").await, 6);
    let column = catalog::field("temperature").expect("field").column;
    let rollup = |gpu: i64| {
        let sql = format!(
            "SELECT n, {column}_min, {column}_max, {column}_avg FROM rollup_1m WHERE gpu = ? AND ts = ?"
        );
        let pool = store.pool.clone();
        async move {
            sqlx::query_as::<_, (i64, i64, i64, f64)>(sqlx::AssertSqlSafe(sql))
                .bind(gpu)
                .bind(minute)
                .fetch_one(&pool)
                .await
                .expect("rollup row")
        }
    };
    let (n, min, max, avg) = rollup(1).await;
    assert_eq!((n, min, max), (3, 40, 70), "merged within one statement");
    assert!(
        (avg - 160.0 / 3.0).abs() < 1e-9,
        "average of 40, 50, 70: {avg}"
    );
    assert_eq!(rollup(2).await, (4, 40, 60, 52.5));
    assert_eq!(rollup(3).await, (2, 40, 50, 45.0));
    let energy: (f64, f64) = sqlx::query_as(
        "SELECT last_raw, offset FROM counter_state WHERE gpu = 2 AND counter = 'energy'",
    )
    .fetch_one(&store.pool)
    .await
    .expect("counter");
    assert_eq!(energy, (5.0, 2.0));
    let last: (i64, Option<i64>, String, i64, i64, String) = sqlx::query_as(
        "SELECT ts, gpu, kind, code, value, detail FROM event ORDER BY id DESC LIMIT 1",
    )
    .fetch_one(&store.pool)
    .await
    .expect("event");
    assert_eq!(
        last,
        (
            minute + 449,
            Some(3),
            "process_start".to_string(),
            449,
            898,
            "proc-449".to_string()
        )
    );
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
