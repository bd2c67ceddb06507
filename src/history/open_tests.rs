//! Opening and resetting against real files: what is not gpuwatch's is
//! never written, moved or replaced (compared byte for byte); a damaged or
//! newer history may be reset; a failed open leaves no files of its own;
//! and a database that cannot be opened at start is retried and attached.
#![allow(
    clippy::disallowed_types,
    reason = "a test's own deadline for real work (SQLite on its thread), in real time"
)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

use super::attach::{self, Availability, Reopen, Slot};
use super::inspect::{inspect, Found};
use super::stats::HistoryStats;
use super::store::{reset, HistoryError, Store};
use super::tests::{count, settings, snapshot};
use super::writer;
use super::Durability;

/// Makes an SQLite database at `path` the way another program would.
async fn foreign_db(path: &Path, journal: SqliteJournalMode, sql: &str) {
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(
            SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true)
                .journal_mode(journal),
        )
        .await
        .expect("create the other program's database");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(&pool)
        .await
        .expect("its schema");
    pool.close().await;
}

/// Every file in `dir`, with its bytes (directories as `None`).
fn files(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| {
            let e = e.expect("entry");
            let bytes = e
                .file_type()
                .expect("type")
                .is_file()
                .then(|| std::fs::read(e.path()).expect("read"));
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    all.sort();
    all
}

#[tokio::test]
async fn another_programs_sqlite_database_is_refused_byte_for_byte_untouched() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = [
        (
            "rollback.db",
            SqliteJournalMode::Delete,
            "CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('bread');",
        ),
        (
            "wal.db",
            SqliteJournalMode::Wal,
            "CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('soup');",
        ),
        (
            "app-id.db",
            SqliteJournalMode::Delete,
            "PRAGMA application_id = 1234;",
        ),
        (
            "versioned.db",
            SqliteJournalMode::Delete,
            "PRAGMA user_version = 7;",
        ),
        (
            "sample-only.db",
            SqliteJournalMode::Delete,
            "CREATE TABLE sample (ts INTEGER);",
        ),
    ];
    for (name, journal, sql) in cases {
        foreign_db(&dir.path().join(name), journal, sql).await;
    }
    let before = files(dir.path());
    assert_eq!(before.len(), cases.len(), "no side files: {before:?}");
    for (name, _, _) in cases {
        let path = dir.path().join(name);
        let error = Store::open_for_writing(&path, Durability::Normal)
            .await
            .expect_err(name);
        assert!(
            matches!(error, HistoryError::Foreign { .. }),
            "{name}: {error}"
        );
        let text = error.to_string();
        assert!(
            text.contains(name) && text.contains("left untouched") && text.contains("another file"),
            "{text}"
        );
        assert!(
            !text.contains("--reset-history"),
            "no reset offered: {text}"
        );
        let error = reset(&path).await.expect_err(name);
        assert!(
            matches!(error, HistoryError::Foreign { .. }),
            "{name}: {error}"
        );
    }
    assert_eq!(
        files(dir.path()),
        before,
        "every byte the same, nothing created, nothing moved"
    );
}

#[tokio::test]
async fn a_file_that_is_not_sqlite_is_refused_and_never_reset() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("passwd"),
        "root:x:0:0:root:/root:/bin/bash\n",
    )
    .expect("write");
    std::fs::create_dir(dir.path().join("a-directory")).expect("dir");
    let before = files(dir.path());
    for name in ["passwd", "a-directory"] {
        let path = dir.path().join(name);
        let error = Store::open_for_writing(&path, Durability::Normal)
            .await
            .expect_err(name);
        assert!(matches!(error, HistoryError::NotSqlite { .. }), "{error}");
        assert!(!error.to_string().contains("--reset-history"), "{error}");
        let error = reset(&path).await.expect_err(name);
        assert!(matches!(error, HistoryError::NotSqlite { .. }), "{error}");
        let error = Store::open_read_only(&path).await.expect_err(name);
        assert!(matches!(error, HistoryError::NotSqlite { .. }), "{error}");
    }
    assert_eq!(files(dir.path()), before, "untouched, not moved");
}

/// A gpuwatch history, closed.
async fn history_db(path: &Path) {
    let store = Store::open_for_writing(path, Durability::Normal)
        .await
        .expect("create");
    store.pool.close().await;
}

#[tokio::test]
async fn a_damaged_history_is_refused_with_the_reset_hint_and_reset_keeps_it_aside() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("history.db");
    history_db(&path).await;
    let mut bytes = std::fs::read(&path).expect("read");
    // SQLite's header stays; the schema page after it is overwritten.
    for b in &mut bytes[100..1024] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).expect("damage");
    assert!(
        matches!(inspect(&path).await, Ok(Found::Damaged { .. })),
        "{:?}",
        inspect(&path).await
    );
    let error = Store::open_for_writing(&path, Durability::Normal)
        .await
        .expect_err("damaged");
    assert!(matches!(error, HistoryError::Damaged { .. }), "{error}");
    assert!(error.to_string().contains("--reset-history"), "{error}");
    assert_eq!(std::fs::read(&path).expect("read"), bytes, "left untouched");

    let moved = reset(&path).await.expect("reset").expect("moved");
    assert_eq!(std::fs::read(&moved).expect("kept"), bytes);
    let store = Store::open_for_writing(&path, Durability::Normal)
        .await
        .expect("a new history in its place");
    assert_eq!(count(&store, "sample").await, 0);

    // A file cut off inside SQLite's header is damaged too.
    let short = dir.path().join("short.db");
    std::fs::write(&short, &bytes[..60]).expect("write");
    assert!(matches!(
        Store::open_for_writing(&short, Durability::Normal).await,
        Err(HistoryError::Damaged { .. })
    ));
}

#[tokio::test]
async fn an_empty_file_or_blank_database_becomes_the_history_and_needs_no_reset() {
    let dir = tempfile::tempdir().expect("temp dir");
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").expect("touch");
    let blank = dir.path().join("blank.db");
    foreign_db(&blank, SqliteJournalMode::Delete, "VACUUM;").await;
    assert!(std::fs::metadata(&blank).expect("meta").len() > 0);
    for path in [&empty, &blank] {
        assert_eq!(reset(path).await.expect("reset"), None, "nothing to move");
        let store = Store::open_for_writing(path, Durability::Normal)
            .await
            .expect("open");
        assert_eq!(count(&store, "sample").await, 0);
        store.pool.close().await;
    }
    assert_eq!(
        reset(&dir.path().join("none.db")).await.expect("none"),
        None
    );
}

#[tokio::test]
async fn a_failed_open_removes_the_files_it_created_and_only_those() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("history.db");
    // The shared-memory file cannot be made writable (a directory is in its
    // place): the open fails ("attempt to write a readonly database") after
    // SQLite made the database file and its journal.
    std::fs::create_dir(dir.path().join("history.db-shm")).expect("block -shm");
    let error = Store::open_for_writing(&path, Durability::Normal)
        .await
        .expect_err("no -shm, no WAL");
    assert!(error.is_storage_fault(), "{error}");
    let names: Vec<String> = files(dir.path()).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["history.db-shm"], "only what was there before");
}

/// A path that cannot be created while `blocker` is a regular file (as
/// root, too: a file is no directory, whatever the permissions).
fn blocked_path(dir: &Path) -> (PathBuf, PathBuf) {
    let blocker = dir.join("state");
    std::fs::write(&blocker, b"a file where a directory should be").expect("blocker");
    (blocker.clone(), blocker.join("history.db"))
}

#[tokio::test]
async fn a_database_that_cannot_be_opened_at_start_is_retried_and_then_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (blocker, path) = blocked_path(dir.path());
    let first = Store::open_for_writing(&path, Durability::Normal)
        .await
        .expect_err("blocked");
    assert!(first.is_storage_fault(), "{first}");
    assert!(first.to_string().contains("history.db"), "{first}");

    let stats = Arc::new(HistoryStats::new(Arc::new(AtomicU64::new(0))));
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let (publish, slot) = Slot::channel(Availability::Down(first.to_string()));
    let retries = tokio::spawn(attach::keep_opening(
        Reopen {
            path: path.clone(),
            durability: Durability::Normal,
        },
        first.to_string(),
        publish,
        stats.clone(),
        shutdown.clone(),
    ));
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let writer = tokio::spawn(writer::run_when_open(
        slot.clone(),
        rx,
        settings(),
        stats.clone(),
        shutdown,
    ));
    // While it is down, snapshots are taken off the queue and counted.
    for s in 0..3 {
        tx.send(snapshot(1_700_000_000 + s, 40.0))
            .await
            .expect("send");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while stats.samples_discarded.load(Ordering::Relaxed) < 3 {
        assert!(std::time::Instant::now() < deadline, "never discarded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(slot.get().is_err(), "still blocked");
    assert!(!stats.up.load(Ordering::Relaxed));

    std::fs::remove_file(&blocker).expect("unblock");
    std::fs::create_dir(&blocker).expect("the directory");
    let store = tokio::time::timeout(Duration::from_secs(60), slot.clone().wait())
        .await
        .expect("opened within the retries")
        .expect("a store");
    assert!(stats.up.load(Ordering::Relaxed), "gpuwatch_history_up 1");
    retries.await.expect("the retries end once it opened");
    for s in 3..5 {
        tx.send(snapshot(1_700_000_000 + s, 40.0))
            .await
            .expect("send");
    }
    drop(tx);
    writer.await.expect("writer");
    assert_eq!(count(&store, "sample").await, 2, "written once open");
    drop(stop);
}

#[tokio::test]
async fn the_retries_stop_at_shutdown() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_blocker, path) = blocked_path(dir.path());
    let stats = Arc::new(HistoryStats::new(Arc::new(AtomicU64::new(0))));
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let (publish, _slot) = Slot::channel(Availability::Down("blocked".into()));
    let retries = tokio::spawn(attach::keep_opening(
        Reopen {
            path,
            durability: Durability::Normal,
        },
        "blocked".into(),
        publish,
        stats,
        shutdown,
    ));
    stop.send_replace(true);
    tokio::time::timeout(Duration::from_secs(20), retries)
        .await
        .expect("stopped")
        .expect("join");
}
