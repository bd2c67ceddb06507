//! Pruning: each tier keeps its retention, deleting its oldest rows in
//! bounded chunks (the freed pages are reused, so no VACUUM is needed); an
//! optional size cap evicts more, raw samples first.

use std::time::Duration;

// Table names in dynamic SQL come from the constant TIERS list, never from input.
use sqlx::{AssertSqlSafe, SqliteConnection, SqlitePool};

/// How long each tier keeps data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Raw samples.
    pub raw: Duration,
    /// 1-minute rollups.
    pub minute: Duration,
    /// 1-hour rollups (and events).
    pub hour: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            raw: Duration::from_secs(48 * 3600),
            minute: Duration::from_secs(30 * 86_400),
            hour: Duration::from_secs(365 * 86_400),
        }
    }
}

/// The tiers with their tables, newest-and-biggest first (the order the
/// size cap evicts in).
pub const TIERS: [(&str, &str); 3] = [("raw", "sample"), ("1m", "rollup_1m"), ("1h", "rollup_1h")];

/// Deletes at most this span of a table's oldest data per statement, so a
/// prune never holds the write lock for long.
const CHUNK_MS: i64 = 3_600_000;

/// Prunes every tier (and old events) to `retention` at `now_ms`, then
/// enforces `max_bytes`; returns the rows deleted. Runs on one connection
/// taken once: each pool acquisition costs round trips to SQLite's thread.
pub async fn prune(
    pool: &SqlitePool,
    retention: Retention,
    max_bytes: Option<u64>,
    now_ms: i64,
) -> Result<u64, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    let conn = &mut *conn;
    let mut deleted = 0;
    for ((_, table), keep) in TIERS
        .iter()
        .zip([retention.raw, retention.minute, retention.hour])
    {
        let cutoff = now_ms - keep.as_millis() as i64;
        loop {
            let n = delete_oldest(conn, table, cutoff).await?;
            deleted += n;
            if n == 0 {
                break;
            }
        }
    }
    let cutoff = now_ms - retention.hour.as_millis() as i64;
    deleted += sqlx::query("DELETE FROM event WHERE ts < ?")
        .bind(cutoff)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    deleted += sqlx::query("DELETE FROM workload WHERE last_seen < ?")
        .bind(cutoff)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    if let Some(max_bytes) = max_bytes {
        deleted += enforce_size(conn, max_bytes).await?;
    }
    Ok(deleted)
}

/// Deletes rows older than `cutoff`, at most CHUNK_MS of them.
async fn delete_oldest(
    conn: &mut SqliteConnection,
    table: &str,
    cutoff: i64,
) -> Result<u64, sqlx::Error> {
    let sql = format!("DELETE FROM {table} WHERE ts < min(?, (SELECT min(ts) FROM {table}) + ?)");
    Ok(sqlx::query(AssertSqlSafe(sql))
        .bind(cutoff)
        .bind(CHUNK_MS)
        .execute(conn)
        .await?
        .rows_affected())
}

async fn used_bytes(conn: &mut SqliteConnection) -> Result<u64, sqlx::Error> {
    let (pages, free, size): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT page_count FROM pragma_page_count()), (SELECT freelist_count FROM pragma_freelist_count()), (SELECT page_size FROM pragma_page_size())",
    )
    .fetch_one(conn)
    .await?;
    Ok(((pages - free).max(0) as u64) * size.max(0) as u64)
}

/// Over the cap, deletes the oldest hour of raw samples (while more than an
/// hour is kept), then the oldest hours of the minute tier, then of the hour
/// tier, until the database fits.
async fn enforce_size(conn: &mut SqliteConnection, max_bytes: u64) -> Result<u64, sqlx::Error> {
    let mut deleted = 0;
    for (_, table) in TIERS {
        for _ in 0..10_000 {
            if used_bytes(conn).await? <= max_bytes {
                return Ok(deleted);
            }
            let span: Option<(i64, i64)> = sqlx::query_as(AssertSqlSafe(format!(
                "SELECT min(ts), max(ts) FROM {table} HAVING count(*) > 0"
            )))
            .fetch_optional(&mut *conn)
            .await?;
            let Some((oldest, newest)) = span else { break };
            if newest - oldest <= CHUNK_MS {
                break;
            }
            deleted += delete_oldest(conn, table, oldest + CHUNK_MS).await?;
        }
    }
    Ok(deleted)
}

/// The oldest timestamp (ms) in each tier, `None` for an empty one (one
/// query for the three tiers).
pub async fn oldest(pool: &SqlitePool) -> Result<Vec<(&'static str, Option<i64>)>, sqlx::Error> {
    let selects: Vec<String> = TIERS
        .iter()
        .map(|(_, table)| format!("(SELECT min(ts) FROM {table})"))
        .collect();
    let row: (Option<i64>, Option<i64>, Option<i64>) =
        sqlx::query_as(AssertSqlSafe(format!("SELECT {}", selects.join(", "))))
            .fetch_one(pool)
            .await?;
    let [raw, minute, hour] = TIERS.map(|(tier, _)| tier);
    Ok(vec![(raw, row.0), (minute, row.1), (hour, row.2)])
}
