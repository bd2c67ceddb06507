//! The silences of the running agent: stored in the history database's
//! `silence` table and kept in memory (compiled once) within the limits of
//! [`super::silence_set`], so that the alerting task and the HTTP API read
//! them without a query and adding one costs the same however many there
//! are. The agent is their only writer (the CLI goes through the HTTP API).

use std::sync::Arc;

use sqlx::SqlitePool;
use tokio::sync::{watch, Mutex};
use tracing::warn;

use crate::timespec::Timestamp;

use super::silence::{NewSilence, Silence, SilenceState, MAX_MATCHERS};
use super::silence_set::{Full, SilenceSet, KEEP_EXPIRED_MS};
use crate::routing::matcher::Matcher;

/// The longest matchers column read back, in bytes: 16 matchers of the
/// longest name and value, every byte of it escaped, fit. A longer one
/// (an older version took up to 64 KiB) is skipped without being read.
const MAX_STORED_MATCHERS: i64 = 128 * 1024;

/// Rows read at a time at start-up.
const PAGE: i64 = 16;

/// How many skipped silences are named one by one at start-up.
const MAX_SKIP_WARNINGS: usize = 10;

type SilenceRow = (i64, Option<String>, i64, i64, i64, String, String, i64);

/// The columns of a [`SilenceRow`]; `?1` is [`MAX_STORED_MATCHERS`].
macro_rules! columns {
    () => {
        "SELECT id, CASE WHEN length(matchers) <= ?1 THEN matchers END, length(matchers), \
         starts_ms, ends_ms, created_by, comment, updated_ms FROM silence"
    };
}

/// Why adding a silence failed.
#[derive(Debug, thiserror::Error)]
pub enum AddError {
    /// It does not fit the limits (the API answers 409).
    #[error(transparent)]
    Full(#[from] Full),
    /// The database failed.
    #[error("the history database failed: {0}")]
    Database(#[from] sqlx::Error),
}

/// Why a stored row is not kept.
#[derive(Debug, thiserror::Error)]
enum Unusable {
    /// The matchers column is longer than [`MAX_STORED_MATCHERS`].
    #[error("its matchers take {0} bytes, over the limit of {MAX_STORED_MATCHERS}")]
    TooLong(i64),
    /// A matcher does not parse or compile within today's limits.
    #[error("its matchers do not parse within today's limits: {0}")]
    Matchers(#[from] serde_json::Error),
    /// Too many matchers (or none).
    #[error("it has {0} matchers; 1 to {MAX_MATCHERS} are allowed")]
    Count(usize),
}

/// A stored row as a silence, if its matchers are within today's limits.
fn from_row(row: SilenceRow) -> Result<Silence, Unusable> {
    let (id, matchers, length, starts_ms, ends_ms, created_by, comment, updated_ms) = row;
    let Some(matchers) = matchers else {
        return Err(Unusable::TooLong(length));
    };
    let matchers: Vec<Matcher> = serde_json::from_str(&matchers)?;
    if matchers.is_empty() || matchers.len() > MAX_MATCHERS {
        return Err(Unusable::Count(matchers.len()));
    }
    Ok(Silence {
        id,
        matchers,
        starts_ms,
        ends_ms,
        created_by,
        comment,
        updated_ms,
    })
}

/// Reads the stored silences that fit the limits, as the agent keeps them
/// at start: active and pending ones by id, then expired ones newest first.
/// One that no longer parses or compiles within the limits, or does not
/// fit, is skipped with a warning (and left in the table). Pages through
/// the table, so an old table of any size never sits in memory at once.
pub async fn load(pool: &SqlitePool, now: Timestamp) -> Result<SilenceSet, sqlx::Error> {
    let now_ms = now.as_ms();
    let mut set = SilenceSet::new();
    // The first few are named; the rest only counted (an old table may
    // hold thousands).
    let mut skipped = 0usize;
    let mut skip = |id: i64, why: &str| {
        skipped += 1;
        if skipped <= MAX_SKIP_WARNINGS {
            warn!(silence = id, reason = why, "A stored silence is skipped: it no longer fits the limits on silences (see docs/alerts.md); expire it or add it again within them.");
        }
    };
    let mut after = i64::MIN;
    loop {
        let rows: Vec<SilenceRow> = sqlx::query_as(concat!(
            columns!(),
            " WHERE ends_ms > ?2 AND id > ?3 ORDER BY id LIMIT ?4"
        ))
        .bind(MAX_STORED_MATCHERS)
        .bind(now_ms)
        .bind(after)
        .bind(PAGE)
        .fetch_all(pool)
        .await?;
        let Some(last) = rows.last() else { break };
        after = last.0;
        for row in rows {
            let id = row.0;
            match from_row(row) {
                Ok(silence) => {
                    if let Err(full) = set.keep_stored(silence, now_ms) {
                        skip(id, &full.to_string());
                    }
                }
                Err(why) => skip(id, &why.to_string()),
            }
        }
    }
    if skipped > MAX_SKIP_WARNINGS {
        warn!(
            skipped,
            "{} more stored silences are skipped for the same reasons.",
            skipped - MAX_SKIP_WARNINGS
        );
    }
    let mut before = i64::MAX;
    loop {
        let rows: Vec<SilenceRow> = sqlx::query_as(concat!(
            columns!(),
            " WHERE ends_ms <= ?2 AND ends_ms >= ?3 AND id < ?4 ORDER BY id DESC LIMIT ?5"
        ))
        .bind(MAX_STORED_MATCHERS)
        .bind(now_ms)
        .bind(now_ms.saturating_sub(KEEP_EXPIRED_MS))
        .bind(before)
        .bind(PAGE)
        .fetch_all(pool)
        .await?;
        let Some(last) = rows.last() else { break };
        before = last.0;
        let mut room = true;
        for row in rows {
            // An expired silence that does not parse is only history.
            if let Ok(silence) = from_row(row) {
                room = set.keep_stored(silence, now_ms).unwrap_or(false);
            }
        }
        if !room {
            break;
        }
    }
    Ok(set)
}

/// The active and pending silences as the agent would keep them (for
/// `gpuwatch alerts` and the Alertmanager re-send, which read the database
/// directly). Works on a read-only database too.
pub async fn live(pool: &SqlitePool, now: Timestamp) -> Result<Vec<Arc<Silence>>, sqlx::Error> {
    let set = load(pool, now).await?;
    Ok(set
        .all()
        .iter()
        .filter(|s| s.state(now.as_ms()) != SilenceState::Expired)
        .cloned()
        .collect())
}

/// The agent's silences: the table, and what it holds in memory.
#[derive(Debug, Clone)]
pub struct Silences {
    pool: SqlitePool,
    /// The kept silences; held across a change's database write, so two
    /// requests cannot both take the last place.
    set: Arc<Mutex<SilenceSet>>,
    /// What the set held after the last change, for readers that must not
    /// wait (the alerting task, the API's lists).
    published: Arc<watch::Sender<Arc<Vec<Arc<Silence>>>>>,
}

impl Silences {
    /// Loads the stored silences (see [`load`]).
    pub async fn open(pool: SqlitePool, now: Timestamp) -> Result<Silences, sqlx::Error> {
        let set = load(&pool, now).await?;
        let published = Arc::new(watch::channel(Arc::new(set.all().to_vec())).0);
        Ok(Silences {
            pool,
            set: Arc::new(Mutex::new(set)),
            published,
        })
    }

    fn publish(&self, set: &SilenceSet) {
        self.published.send_replace(Arc::new(set.all().to_vec()));
    }

    /// The kept silences as of the last change, by id: active, pending and
    /// expired (check [`Silence::mutes`] with the time).
    pub fn current(&self) -> Arc<Vec<Arc<Silence>>> {
        self.published.borrow().clone()
    }

    /// Every kept silence, newest first.
    pub fn list(&self) -> Vec<Arc<Silence>> {
        self.current().iter().rev().cloned().collect()
    }

    /// Stores a new silence if it fits the limits (dropping expired ones to
    /// make room); returns its id.
    pub async fn add(&self, new: NewSilence, now: Timestamp) -> Result<i64, AddError> {
        let now_ms = now.as_ms();
        let mut set = self.set.lock().await;
        let mut silence = Silence {
            id: 0,
            matchers: new.matchers,
            starts_ms: new.starts_ms,
            ends_ms: new.ends_ms,
            created_by: new.created_by,
            comment: new.comment,
            updated_ms: now_ms,
        };
        let drop = set.room_for(&silence, now_ms)?;
        let matchers = serde_json::to_string(&silence.matchers)
            .map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM silence WHERE ends_ms < ?")
            .bind(now_ms.saturating_sub(KEEP_EXPIRED_MS))
            .execute(&mut *tx)
            .await?;
        for id in &drop {
            sqlx::query("DELETE FROM silence WHERE id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        silence.id = sqlx::query(
            "INSERT INTO silence (matchers, starts_ms, ends_ms, created_by, comment, created_ms, updated_ms) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(matchers)
        .bind(silence.starts_ms)
        .bind(silence.ends_ms)
        .bind(&silence.created_by)
        .bind(&silence.comment)
        .bind(now_ms)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?
        .last_insert_rowid();
        tx.commit().await?;
        let id = silence.id;
        set.remove(&drop);
        set.insert(silence);
        self.publish(&set);
        Ok(id)
    }

    /// Expires a silence now: its end becomes now (a pending one's start
    /// too). `None` when the agent keeps no such silence; one already over
    /// is left as it is.
    pub async fn expire(
        &self,
        id: i64,
        now: Timestamp,
    ) -> Result<Option<Arc<Silence>>, sqlx::Error> {
        let now_ms = now.as_ms();
        let mut set = self.set.lock().await;
        let Some(kept) = set.get(id).cloned() else {
            return Ok(None);
        };
        if kept.state(now_ms) == SilenceState::Expired {
            return Ok(Some(kept));
        }
        let mut silence = Silence::clone(&kept);
        silence.starts_ms = silence.starts_ms.min(now_ms);
        silence.ends_ms = now_ms;
        silence.updated_ms = now_ms;
        // One more expired: the oldest kept may have to go.
        let mut after = set.clone();
        after.insert(silence);
        let drop = after.to_drop(0, now_ms);
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE silence SET starts_ms = ?, ends_ms = ?, updated_ms = ? WHERE id = ?")
            .bind(now_ms.min(kept.starts_ms))
            .bind(now_ms)
            .bind(now_ms)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        for old in &drop {
            sqlx::query("DELETE FROM silence WHERE id = ?")
                .bind(old)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        after.remove(&drop);
        *set = after;
        self.publish(&set);
        Ok(set.get(id).cloned())
    }
}

#[cfg(test)]
mod tests;
