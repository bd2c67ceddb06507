//! What is at the history database's path, found out without writing a
//! byte: nothing, an empty or blank SQLite file, gpuwatch's history (and its
//! schema version), a damaged SQLite file, another application's SQLite
//! database, or not an SQLite file at all. The agent decides from this
//! whether to open the file read-write (which switches it to WAL, a write)
//! and whether `--reset-history` may move it aside.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, Row, SqliteConnection};

/// The first bytes of every SQLite 3 database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";
/// Size of the SQLite file header.
const HEADER_BYTES: usize = 100;

/// What [`inspect`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// No file: the agent creates one.
    Absent,
    /// A zero-byte file: SQLite's empty database; nothing to lose.
    Empty,
    /// An SQLite database with no schema at all (no tables, no
    /// `user_version`, no `application_id`): nothing to lose.
    Blank,
    /// A gpuwatch history; `version` is the newest migration applied.
    Ours {
        /// Newest migration in `_sqlx_migrations` (`None`: none applied).
        version: Option<i64>,
    },
    /// An SQLite header, but the schema cannot be read.
    Damaged {
        /// SQLite's complaint.
        reason: String,
    },
    /// Another application's SQLite database.
    Foreign {
        /// What gave it away.
        reason: String,
    },
    /// Not an SQLite file (a text file, a directory, a device, ...).
    NotSqlite {
        /// What gave it away.
        reason: String,
    },
}

impl Found {
    /// Whether `--reset-history` may move the file aside: only gpuwatch's
    /// own history, or an SQLite file too damaged to tell whose it is.
    /// Never a foreign database or a non-SQLite file (a moved system file
    /// breaks the system even though no byte is lost).
    pub fn may_reset(&self) -> bool {
        matches!(self, Found::Ours { .. } | Found::Damaged { .. })
    }
}

/// Why the path could not be inspected (it may be fine: a full disk, a
/// file another process holds locked).
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// Reading the file failed.
    #[error("cannot read {path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        error: std::io::Error,
    },
    /// SQLite failed for another reason than a damaged file.
    #[error("cannot read {path}: {error}")]
    Sql {
        /// The file.
        path: PathBuf,
        /// SQLite's error.
        error: sqlx::Error,
    },
}

/// Looks at `path` without writing to it: no journal-mode change, no lock
/// that outlives the call, and no `-wal`/`-shm` file created next to a file
/// that had none.
pub async fn inspect(path: &Path) -> Result<Found, InspectError> {
    let io = |error| InspectError::Io {
        path: path.to_path_buf(),
        error,
    };
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Found::Absent)
        }
        Err(e) => return Err(io(e)),
    };
    if meta.is_dir() {
        return Ok(Found::NotSqlite {
            reason: "it is a directory".into(),
        });
    }
    if !meta.is_file() {
        return Ok(Found::NotSqlite {
            reason: "it is not a regular file (a device, socket or pipe)".into(),
        });
    }
    if meta.len() == 0 {
        return Ok(Found::Empty);
    }
    let mut header = Vec::with_capacity(HEADER_BYTES);
    std::fs::File::open(path)
        .and_then(|f| f.take(HEADER_BYTES as u64).read_to_end(&mut header))
        .map_err(io)?;
    if let Some(found) = judge_header(&header) {
        return Ok(found);
    }
    read_schema(path, &header).await
}

/// What the first 100 bytes alone tell; `None` when the schema must be read.
pub fn judge_header(header: &[u8]) -> Option<Found> {
    if !header.starts_with(SQLITE_MAGIC) {
        return Some(Found::NotSqlite {
            reason: "it does not start with SQLite's header".into(),
        });
    }
    if header.len() < HEADER_BYTES {
        return Some(Found::Damaged {
            reason: format!(
                "it is {} bytes long, shorter than SQLite's {HEADER_BYTES}-byte header",
                header.len()
            ),
        });
    }
    let application_id = u32::from_be_bytes([header[68], header[69], header[70], header[71]]);
    if application_id != 0 {
        return Some(Found::Foreign {
            reason: format!(
                "its header names another application (application_id {application_id:#010x})"
            ),
        });
    }
    None
}

/// Reads the schema through a read-only connection. A WAL-mode file with no
/// `-wal` next to it is opened `immutable` (all its content is in the main
/// file, and a read-only WAL open would otherwise create `-wal` and `-shm`
/// files and leave them behind); any other file is opened read-only with
/// normal locking, which creates nothing.
async fn read_schema(path: &Path, header: &[u8]) -> Result<Found, InspectError> {
    let wal_mode = header.get(18) == Some(&2);
    let has_wal = sidecar(path, "-wal").exists();
    let options = SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .immutable(wal_mode && !has_wal)
        .busy_timeout(Duration::from_secs(5));
    let sql = |error: sqlx::Error| {
        if is_damage(&error) {
            Ok(Found::Damaged {
                reason: error.to_string(),
            })
        } else {
            Err(InspectError::Sql {
                path: path.to_path_buf(),
                error,
            })
        }
    };
    let mut conn = match options.connect().await {
        Ok(conn) => conn,
        Err(e) => return sql(e),
    };
    let found = judge_schema(&mut conn).await;
    let _ = conn.close().await;
    match found {
        Ok(found) => Ok(found),
        Err(e) => sql(e),
    }
}

pub(crate) async fn judge_schema(conn: &mut SqliteConnection) -> Result<Found, sqlx::Error> {
    let objects: i64 = sqlx::query_scalar("SELECT count(*) FROM sqlite_master")
        .fetch_one(&mut *conn)
        .await?;
    let user_version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut *conn)
        .await?;
    if objects == 0 {
        return Ok(if user_version == 0 {
            Found::Blank
        } else {
            Found::Foreign {
                reason: format!("it has no tables but user_version {user_version}"),
            }
        });
    }
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )
    .fetch_all(&mut *conn)
    .await?;
    let has = |name: &str| tables.iter().any(|t| t == name);
    if !has("_sqlx_migrations") || !has("sample") {
        return Ok(Found::Foreign {
            reason: if tables.is_empty() {
                "it holds views, indexes or triggers but none of gpuwatch's tables".into()
            } else {
                format!("it holds other tables: {}", tables.join(", "))
            },
        });
    }
    let version: Option<i64> = sqlx::query("SELECT max(version) AS v FROM _sqlx_migrations")
        .fetch_one(&mut *conn)
        .await
        .and_then(|row| row.try_get("v"))?;
    Ok(Found::Ours { version })
}

/// Whether SQLite's error says the file is damaged (rather than busy,
/// unreadable or on a failing disk).
pub fn is_damage(error: &sqlx::Error) -> bool {
    let text = error.to_string();
    text.contains("not a database") || text.contains("malformed") || text.contains("corrupt")
}

/// `PATH-wal`, `PATH-shm`: SQLite's files next to the database.
pub fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}
