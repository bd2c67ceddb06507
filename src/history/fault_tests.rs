//! The writer and store when storage fails or is not theirs: a full disk
//! or a read-only database loses nothing and writing resumes, the size cap
//! evicts the oldest raw samples first, and foreign, damaged or newer files
//! are refused untouched.
#![allow(
    clippy::disallowed_types,
    reason = "a test's own deadline for real work (SQLite on its thread), in real time"
)]

use std::sync::atomic::Ordering;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::Row;

use super::store::{reset, HistoryError, Store, MIGRATOR};
use super::tests::{count, snapshot, Writer};
use super::{Durability, Retention};

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
