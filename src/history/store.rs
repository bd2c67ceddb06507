//! Opening the history database: create or migrate it for the agent, open it
//! read-only for the CLI, and refuse — with the file's name and what to do —
//! anything that is not a gpuwatch history or was written by a newer one.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::Row;

/// The schema, embedded from `migrations/`.
pub static MIGRATOR: Migrator = sqlx::migrate!();

/// Why the history database cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The file is not an SQLite database, is damaged, or belongs to another
    /// application.
    #[error(
        "{path} is not a gpuwatch history database, or it is damaged ({reason}). It was left \
         untouched: move it away, set history.path to another file, or start once with \
         --reset-history to move it aside"
    )]
    NotHistory {
        /// The file.
        path: PathBuf,
        /// What gave it away.
        reason: String,
    },
    /// A newer gpuwatch wrote it.
    #[error(
        "{path} was written by a newer gpuwatch (schema version {found}; this one knows up to \
         {known}). Upgrade gpuwatch, or set history.path to another file"
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
    /// Anything else SQLite said.
    #[error("history database {path}: {source}")]
    Sql {
        /// The file.
        path: PathBuf,
        /// SQLite's error.
        source: sqlx::Error,
    },
    /// The file could not be moved aside or its directory created.
    #[error("history database {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
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
    /// writes. Refuses foreign, damaged and newer files.
    pub async fn open_for_writing(
        path: &Path,
        durability: Durability,
    ) -> Result<Store, HistoryError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| HistoryError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        }
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
            .page_size(1024);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
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
        store.check_ownership().await?;
        MIGRATOR
            .run(&store.pool)
            .await
            .map_err(|e| classify(path, sqlx::Error::Migrate(Box::new(e))))?;
        Ok(store)
    }

    /// Opens an existing database read-only (the CLI: works while the agent
    /// runs or is stopped, and never writes).
    pub async fn open_read_only(path: &Path) -> Result<Store, HistoryError> {
        if !path.is_file() {
            return Err(HistoryError::Missing {
                path: path.to_path_buf(),
            });
        }
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
        let tables: Vec<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
                .fetch_all(&self.pool)
                .await
                .map_err(|e| classify(&self.path, e))?;
        if tables.is_empty() {
            return Ok(());
        }
        if !tables.iter().any(|t| t == "_sqlx_migrations") || !tables.iter().any(|t| t == "sample")
        {
            return Err(HistoryError::NotHistory {
                path: self.path.clone(),
                reason: format!("it holds other tables: {}", tables.join(", ")),
            });
        }
        let found: Option<i64> = sqlx::query("SELECT max(version) AS v FROM _sqlx_migrations")
            .fetch_one(&self.pool)
            .await
            .and_then(|row| row.try_get("v"))
            .map_err(|e| classify(&self.path, e))?;
        let known = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
        match found {
            Some(found) if found > known => Err(HistoryError::Newer {
                path: self.path.clone(),
                found,
                known,
            }),
            _ => Ok(()),
        }
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

/// Moves the database at `path` (and its WAL and shared-memory files) aside
/// to `PATH.moved-UNIXTIME`; returns the new name, or `None` when there was
/// no file.
pub fn move_aside(path: &Path) -> Result<Option<PathBuf>, HistoryError> {
    if !path.exists() {
        return Ok(None);
    }
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let target = PathBuf::from(format!("{}.moved-{stamp}", path.display()));
    let io = |source| HistoryError::Io {
        path: path.to_path_buf(),
        source,
    };
    std::fs::rename(path, &target).map_err(io)?;
    for suffix in ["-wal", "-shm"] {
        let side = PathBuf::from(format!("{}{suffix}", path.display()));
        if side.exists() {
            std::fs::rename(&side, format!("{}{suffix}", target.display())).map_err(io)?;
        }
    }
    Ok(Some(target))
}

/// Turns SQLite's "not a database" and migration mismatches into the
/// errors a person can act on.
fn classify(path: &Path, error: sqlx::Error) -> HistoryError {
    let text = error.to_string();
    if text.contains("not a database") || text.contains("malformed") || text.contains("corrupt") {
        return HistoryError::NotHistory {
            path: path.to_path_buf(),
            reason: text,
        };
    }
    HistoryError::Sql {
        path: path.to_path_buf(),
        source: error,
    }
}
