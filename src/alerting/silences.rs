//! The silences of the running agent: stored in the history database's
//! `silence` table, with the ones not yet over kept in memory, so that the
//! alerting task and the HTTP API read them without a query. The agent is
//! their only writer (the CLI goes through the HTTP API).

use std::sync::Arc;

use sqlx::SqlitePool;
use tokio::sync::watch;
use tracing::warn;

use super::matcher::Matcher;
use super::silence::{NewSilence, Silence, SilenceState};

/// How long an expired silence stays listed before it is removed.
const KEEP_EXPIRED_MS: i64 = 5 * 24 * 3_600_000;

type SilenceRow = (i64, String, i64, i64, String, String, i64);

/// The columns of a [`SilenceRow`], as a string literal for `concat!`.
macro_rules! columns {
    () => {
        "SELECT id, matchers, starts_ms, ends_ms, created_by, comment, updated_ms FROM silence"
    };
}

fn from_row(row: SilenceRow) -> Option<Silence> {
    let (id, matchers, starts_ms, ends_ms, created_by, comment, updated_ms) = row;
    match serde_json::from_str::<Vec<Matcher>>(&matchers) {
        Ok(matchers) => Some(Silence {
            id,
            matchers,
            starts_ms,
            ends_ms,
            created_by,
            comment,
            updated_ms,
        }),
        Err(e) => {
            warn!(silence = id, error = %e, "A stored silence's matchers do not parse; it is ignored.");
            None
        }
    }
}

/// Every stored silence (pending, active and recently expired), newest
/// first. Works on a read-only database too.
pub async fn list(pool: &SqlitePool) -> Result<Vec<Silence>, sqlx::Error> {
    let rows: Vec<SilenceRow> = sqlx::query_as(concat!(columns!(), " ORDER BY id DESC"))
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().filter_map(from_row).collect())
}

/// The agent's silences: the table, and the ones not over in memory.
#[derive(Debug, Clone)]
pub struct Silences {
    pool: SqlitePool,
    current: Arc<watch::Sender<Arc<Vec<Silence>>>>,
}

impl Silences {
    /// Loads the silences that are not over yet.
    pub async fn open(pool: SqlitePool, now_ms: i64) -> Result<Silences, sqlx::Error> {
        let silences = Silences {
            pool,
            current: Arc::new(watch::channel(Arc::new(Vec::new())).0),
        };
        silences.reload(now_ms).await?;
        Ok(silences)
    }

    async fn reload(&self, now_ms: i64) -> Result<(), sqlx::Error> {
        let rows: Vec<SilenceRow> =
            sqlx::query_as(concat!(columns!(), " WHERE ends_ms > ? ORDER BY id"))
                .bind(now_ms)
                .fetch_all(&self.pool)
                .await?;
        self.current
            .send_replace(Arc::new(rows.into_iter().filter_map(from_row).collect()));
        Ok(())
    }

    /// The silences that were not over at the last change (check
    /// [`Silence::mutes`] with the time: some may have ended since).
    pub fn current(&self) -> Arc<Vec<Silence>> {
        self.current.borrow().clone()
    }

    /// Every stored silence, newest first.
    pub async fn list(&self) -> Result<Vec<Silence>, sqlx::Error> {
        list(&self.pool).await
    }

    /// Stores a new silence (and removes ones expired long ago); returns
    /// its id.
    pub async fn add(&self, new: &NewSilence, now_ms: i64) -> Result<i64, sqlx::Error> {
        let matchers =
            serde_json::to_string(&new.matchers).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM silence WHERE ends_ms < ?")
            .bind(now_ms - KEEP_EXPIRED_MS)
            .execute(&mut *tx)
            .await?;
        let id = sqlx::query(
            "INSERT INTO silence (matchers, starts_ms, ends_ms, created_by, comment, created_ms, updated_ms) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(matchers)
        .bind(new.starts_ms)
        .bind(new.ends_ms)
        .bind(&new.created_by)
        .bind(&new.comment)
        .bind(now_ms)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?
        .last_insert_rowid();
        tx.commit().await?;
        self.reload(now_ms).await?;
        Ok(id)
    }

    /// Expires a silence now: its end becomes now (a pending one's start
    /// too). `None` when there is no such silence; one already over is
    /// left as it is.
    pub async fn expire(&self, id: i64, now_ms: i64) -> Result<Option<Silence>, sqlx::Error> {
        let row: Option<SilenceRow> = sqlx::query_as(concat!(columns!(), " WHERE id = ?"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(mut silence) = row.and_then(from_row) else {
            return Ok(None);
        };
        if silence.state(now_ms) != SilenceState::Expired {
            silence.starts_ms = silence.starts_ms.min(now_ms);
            silence.ends_ms = now_ms;
            silence.updated_ms = now_ms;
            sqlx::query(
                "UPDATE silence SET starts_ms = ?, ends_ms = ?, updated_ms = ? WHERE id = ?",
            )
            .bind(silence.starts_ms)
            .bind(silence.ends_ms)
            .bind(now_ms)
            .bind(id)
            .execute(&self.pool)
            .await?;
            self.reload(now_ms).await?;
        }
        Ok(Some(silence))
    }
}
