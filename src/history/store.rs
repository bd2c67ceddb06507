//! Opening the history database: create or migrate it for the agent, open it
//! read-only for the CLI, and refuse — with the file's name and what to do —
//! anything that is not a gpuwatch history or was written by a newer one,
//! before a byte of it is written ([`super::inspect`]). `--reset-history`
//! ([`reset`]) moves aside only what is recognisably gpuwatch's.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::Row;
use tracing::{debug, warn};

use super::inspect::{inspect, is_damage, judge_schema, sidecar, Found, InspectError};

/// The schema, embedded from `migrations/`.
pub static MIGRATOR: Migrator = sqlx::migrate!();

/// Why the history database cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// Not an SQLite file (a text file, a directory, ...): never opened,
    /// moved or replaced, not even with `--reset-history`.
    #[error(
        "{path} is not a gpuwatch history database: {reason}. It was left untouched and will not \
         be moved or replaced: set history.path (or --history-db) to another file"
    )]
    NotSqlite {
        /// The file.
        path: PathBuf,
        /// What gave it away.
        reason: String,
    },
    /// Another application's SQLite database: never opened for writing,
    /// moved or replaced, not even with `--reset-history`.
    #[error(
        "{path} is not a gpuwatch history database: it is another application's SQLite database \
         ({reason}). It was left untouched and will not be moved or replaced: set history.path \
         (or --history-db) to another file"
    )]
    Foreign {
        /// The file.
        path: PathBuf,
        /// What gave it away.
        reason: String,
    },
    /// An SQLite file whose schema cannot be read: `--reset-history` may
    /// move it aside.
    #[error(
        "{path} is a damaged SQLite database, not a usable gpuwatch history ({reason}). It was \
         left untouched: start once with --reset-history to move it aside (it is kept as \
         {path}.moved-TIME) and begin a new history, or set history.path to another file"
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// SQLite's complaint.
        reason: String,
    },
    /// A newer gpuwatch wrote it.
    #[error(
        "{path} was written by a newer gpuwatch (schema version {found}; this one knows up to \
         {known}). It was left untouched: upgrade gpuwatch, set history.path to another file, or \
         start once with --reset-history to move it aside (it is kept as {path}.moved-TIME) and \
         begin a new history"
    )]
    Newer {
        /// The file.
        path: PathBuf,
        /// The newest schema version in the file.
        found: i64,
        /// The newest schema version this binary knows.
        known: i64,
    },
    /// There is no history file (read-only use).
    #[error(
        "no history database at {path}: has the agent run with history enabled? Pass --db PATH \
         or --config FILE to name the agent's database"
    )]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// Anything else SQLite said (a full disk, a read-only file system, a
    /// lock held too long). The error is part of the message, not a source,
    /// so a printed chain says it once.
    #[error("history database {path}: {error}")]
    Sql {
        /// The file.
        path: PathBuf,
        /// SQLite's error.
        error: sqlx::Error,
    },
    /// The file could not be read or moved aside, or its directory created.
    #[error("history database {path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
}

impl HistoryError {
    /// Whether the storage failed (disk full, read-only, a missing or
    /// unwritable directory, a lock) rather than the file being the wrong
    /// one: a fault that may go away, so the agent runs on and retries.
    pub fn is_storage_fault(&self) -> bool {
        matches!(self, HistoryError::Sql { .. } | HistoryError::Io { .. })
    }
}

/// How hard SQLite syncs to disk on commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=NORMAL` in WAL mode: a power cut may lose the last
    /// commits, never corrupts. The default.
    Normal,
    /// `synchronous=FULL`: every commit survives a power cut.
    Full,
}

/// An open history database.
#[derive(Debug, Clone)]
pub struct Store {
    /// Connections (WAL: readers do not block the writer).
    pub pool: SqlitePool,
    /// The file, for messages.
    pub path: PathBuf,
}

impl Store {
    /// Opens (creating and migrating as needed) the database the agent
    /// writes. Looks first, read-only, and refuses foreign, damaged and
    /// newer files before anything is written to them; when opening fails,
    /// removes the files this attempt created (an empty database, a `-shm`
    /// left by a full disk) so that nothing half-made stays behind.
    pub async fn open_for_writing(
        path: &Path,
        durability: Durability,
    ) -> Result<Store, HistoryError> {
        let found = inspect(path).await.map_err(|e| from_inspect(path, e))?;
        refuse(path, &found)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|error| HistoryError::Io {
                path: path.to_path_buf(),
                error,
            })?;
        }
        let before = Existing::look(path);
        let result = Store::connect_and_migrate(path, durability).await;
        if result.is_err() {
            before.remove_created(path);
        }
        result
    }

    async fn connect_and_migrate(
        path: &Path,
        durability: Durability,
    ) -> Result<Store, HistoryError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match durability {
                Durability::Normal => SqliteSynchronous::Normal,
                Durability::Full => SqliteSynchronous::Full,
            })
            .busy_timeout(Duration::from_secs(5))
            // Each commit rewrites the pages on the right edge of the sample
            // B-tree, the last one only partly filled: 1 KiB pages make that
            // rewrite a quarter of the bytes of the default 4 KiB ones
            // (applies to new databases; see benches/history.rs).
            .page_size(1024)
            // SQLite's default page cache grows to 2 MiB per connection as
            // the history grows; the OS page cache keeps the file's pages
            // anyway, so 128 KiB per connection (a commit rewrites a few
            // right-edge pages) costs a few preads, not disk reads (see
            // docs/benchmarks.md "Footprint"; 512 KiB before issue 23).
            .pragma("cache_size", "-128");
        let pool = SqlitePoolOptions::new()
            // One connection for the writer, one for a reader (WAL lets a
            // query run while a batch commits); each connection is a thread
            // and a page cache of its own.
            .max_connections(2)
            // A "ping" before each acquisition is a round trip to the
            // connection's thread that tests nothing for a local file (a
            // dead connection fails its next statement, and the writer
            // retries the batch): it only cost the agent thread wake-ups.
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .map_err(|e| classify(path, e))?;
        let store = Store {
            pool,
            path: path.to_path_buf(),
        };
        // Looked at before opening; looked at again in case the file was
        // swapped in between.
        let checked = match store.check_ownership().await {
            Ok(()) => MIGRATOR
                .run(&store.pool)
                .await
                .map_err(|e| classify(path, sqlx::Error::Migrate(Box::new(e)))),
            Err(e) => Err(e),
        };
        match checked {
            Ok(()) => Ok(store),
            Err(e) => {
                store.pool.close().await;
                Err(e)
            }
        }
    }

    /// Opens an existing database read-only (the CLI: works while the agent
    /// runs or is stopped, and never writes).
    pub async fn open_read_only(path: &Path) -> Result<Store, HistoryError> {
        let found = inspect(path).await.map_err(|e| from_inspect(path, e))?;
        if found == Found::Absent {
            return Err(HistoryError::Missing {
                path: path.to_path_buf(),
            });
        }
        refuse(path, &found)?;
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|e| classify(path, e))?
            .filename(path)
            .read_only(true)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(2)
            .connect_with(options)
            .await
            .map_err(|e| classify(path, e))?;
        let store = Store {
            pool,
            path: path.to_path_buf(),
        };
        store.check_ownership().await?;
        Ok(store)
    }

    /// A gpuwatch history has our migrations table, or nothing at all yet;
    /// and no migration newer than this binary knows.
    async fn check_ownership(&self) -> Result<(), HistoryError> {
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(|e| classify(&self.path, e))?;
        let found = judge_schema(&mut conn)
            .await
            .map_err(|e| classify(&self.path, e))?;
        refuse(&self.path, &found)
    }

    /// Bytes the database occupies (pages in use; the WAL not counted).
    pub async fn size_bytes(&self) -> Result<u64, sqlx::Error> {
        let row = sqlx::query(
            "SELECT (SELECT page_count FROM pragma_page_count()) - (SELECT freelist_count FROM pragma_freelist_count()) AS pages, \
             (SELECT page_size FROM pragma_page_size()) AS size",
        )
        .fetch_one(&self.pool)
        .await?;
        let pages: i64 = row.try_get("pages")?;
        let size: i64 = row.try_get("size")?;
        Ok((pages.max(0) as u64) * (size.max(0) as u64))
    }
}

/// The newest schema version this binary knows.
fn known_version() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// The error for what must not be opened for writing: not SQLite, foreign,
/// damaged, newer.
fn refuse(path: &Path, found: &Found) -> Result<(), HistoryError> {
    let path = path.to_path_buf();
    match found {
        Found::NotSqlite { reason } => Err(HistoryError::NotSqlite {
            path,
            reason: reason.clone(),
        }),
        Found::Foreign { reason } => Err(HistoryError::Foreign {
            path,
            reason: reason.clone(),
        }),
        Found::Damaged { reason } => Err(HistoryError::Damaged {
            path,
            reason: reason.clone(),
        }),
        Found::Ours {
            version: Some(found),
        } if *found > known_version() => Err(HistoryError::Newer {
            path,
            found: *found,
            known: known_version(),
        }),
        _ => Ok(()),
    }
}

/// `--reset-history`: moves the database at `path` (and its `-wal` and
/// `-shm` files) aside to `PATH.moved-UNIXTIME` and returns the new name —
/// only when it is gpuwatch's history (any version) or an SQLite file too
/// damaged to read. A foreign database or a file that is not SQLite is
/// refused untouched. `None` when there is nothing to move (no file, an
/// empty file, an SQLite file with no schema).
pub async fn reset(path: &Path) -> Result<Option<PathBuf>, HistoryError> {
    let found = inspect(path).await.map_err(|e| from_inspect(path, e))?;
    if found.may_reset() {
        return move_aside(path).map(Some);
    }
    refuse(path, &found)?;
    Ok(None)
}

fn move_aside(path: &Path) -> Result<PathBuf, HistoryError> {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let target = PathBuf::from(format!("{}.moved-{stamp}", path.display()));
    let io = |error| HistoryError::Io {
        path: path.to_path_buf(),
        error,
    };
    std::fs::rename(path, &target).map_err(io)?;
    for suffix in ["-wal", "-shm"] {
        let side = sidecar(path, suffix);
        if side.exists() {
            std::fs::rename(&side, sidecar(&target, suffix)).map_err(io)?;
        }
    }
    Ok(target)
}

/// Which of the database's files existed before an open, so that a failed
/// open removes only what it created.
#[derive(Debug, Clone, Copy)]
struct Existing {
    main: bool,
    wal: bool,
    shm: bool,
    journal: bool,
}

impl Existing {
    fn look(path: &Path) -> Existing {
        let exists = |suffix| sidecar(path, suffix).symlink_metadata().is_ok();
        Existing {
            main: exists(""),
            wal: exists("-wal"),
            shm: exists("-shm"),
            journal: exists("-journal"),
        }
    }

    /// After a failed open: a database this open created goes entirely;
    /// next to one that was there, only a `-shm` (an index SQLite rebuilds)
    /// and an empty `-wal` go. A `-wal` with content or a rollback journal
    /// of an existing database may hold its last commits: kept.
    fn remove_created(&self, path: &Path) {
        let created = |existed: bool, suffix: &str| (!existed).then(|| sidecar(path, suffix));
        let mut doomed = vec![created(self.shm, "-shm")];
        if self.main {
            let wal = sidecar(path, "-wal");
            let empty = wal.metadata().is_ok_and(|m| m.len() == 0);
            doomed.push(created(self.wal, "-wal").filter(|_| empty));
        } else {
            doomed.extend([
                created(self.wal, "-wal"),
                created(self.journal, "-journal"),
                created(self.main, ""),
            ]);
        }
        for file in doomed.into_iter().flatten() {
            match std::fs::remove_file(&file) {
                Ok(()) => debug!(file = %file.display(), "Removed a file the failed open created."),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    warn!(file = %file.display(), error = %e, "Cannot remove a file the failed open of the history database created; remove it by hand.")
                }
            }
        }
    }
}

fn from_inspect(path: &Path, error: InspectError) -> HistoryError {
    match error {
        InspectError::Io { error, .. } => HistoryError::Io {
            path: path.to_path_buf(),
            error,
        },
        InspectError::Sql { error, .. } => HistoryError::Sql {
            path: path.to_path_buf(),
            error,
        },
    }
}

/// Turns SQLite's "not a database" and "malformed" into [`HistoryError::Damaged`].
fn classify(path: &Path, error: sqlx::Error) -> HistoryError {
    if is_damage(&error) {
        return HistoryError::Damaged {
            path: path.to_path_buf(),
            reason: error.to_string(),
        };
    }
    HistoryError::Sql {
        path: path.to_path_buf(),
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn make(dir: &Path, name: &str, bytes: &[u8]) {
        std::fs::write(dir.join(name), bytes).expect("write");
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut all: Vec<String> = std::fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        all.sort();
        all
    }

    #[test]
    fn a_storage_error_is_said_once_in_a_printed_chain() {
        let error = HistoryError::Sql {
            path: PathBuf::from("/var/lib/gpuwatch/history.db"),
            error: sqlx::Error::Io(std::io::Error::other("disk I/O error (simulated)")),
        };
        assert!(error.is_storage_fault());
        let printed = format!("{:#}", anyhow::Error::new(error));
        assert_eq!(printed.matches("disk I/O error").count(), 1, "{printed}");
        assert!(
            printed.contains("/var/lib/gpuwatch/history.db"),
            "{printed}"
        );
        let error = HistoryError::Io {
            path: PathBuf::from("/x/history.db"),
            error: std::io::Error::other("Not a directory (simulated)"),
        };
        let printed = format!("{:#}", anyhow::Error::new(error));
        assert_eq!(printed.matches("Not a directory").count(), 1, "{printed}");
    }

    #[test]
    fn a_failed_open_of_a_new_database_removes_all_it_made_but_nothing_older() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("h.db");
        make(dir.path(), "h.db-journal", b"there before");
        let before = Existing::look(&path);
        for name in ["h.db", "h.db-wal", "h.db-shm"] {
            make(dir.path(), name, b"made by the open");
        }
        before.remove_created(&path);
        assert_eq!(names(dir.path()), ["h.db-journal"]);
    }

    #[test]
    fn a_failed_open_of_an_existing_database_keeps_it_and_a_wal_with_commits() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("h.db");
        make(dir.path(), "h.db", b"the history");
        let before = Existing::look(&path);
        make(dir.path(), "h.db-shm", b"abc");
        make(dir.path(), "h.db-wal", b"committed frames");
        make(dir.path(), "h.db-journal", b"a rollback journal");
        before.remove_created(&path);
        assert_eq!(names(dir.path()), ["h.db", "h.db-journal", "h.db-wal"]);

        std::fs::remove_file(dir.path().join("h.db-wal")).expect("rm");
        let before = Existing::look(&path);
        make(dir.path(), "h.db-wal", b"");
        make(dir.path(), "h.db-shm", b"abc");
        before.remove_created(&path);
        assert_eq!(
            names(dir.path()),
            ["h.db", "h.db-journal"],
            "an empty -wal and a -shm made by the open go"
        );
    }
}
