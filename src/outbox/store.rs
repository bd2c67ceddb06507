//! The outbox's SQL: rows are added with an alert transition (in its
//! transaction), claimed oldest first by the receiver's dispatcher, and
//! deleted (delivered), pushed back (retry) or marked failed.

use sqlx::{Sqlite, SqlitePool, Transaction};

/// One message waiting for its receiver.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Row {
    /// The row.
    pub id: i64,
    /// The alert's dedup key.
    pub fingerprint: String,
    /// The body, JSON.
    pub payload: String,
    /// Not before (ms since the Unix epoch).
    pub due_ms: i64,
    /// Attempts so far.
    pub attempts: i64,
}

/// Adds a message, due at once, inside the caller's transaction.
pub async fn insert(
    tx: &mut Transaction<'_, Sqlite>,
    receiver: &str,
    fingerprint: &str,
    payload: &str,
    now_ms: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO outbox (receiver, fingerprint, payload, created_ms, due_ms, attempts, state) \
         VALUES (?, ?, ?, ?, ?, 0, 'pending')",
    )
    .bind(receiver)
    .bind(fingerprint)
    .bind(payload)
    .bind(now_ms)
    .bind(now_ms)
    .execute(&mut **tx)
    .await
    .map(|_| ())
}

/// The receiver's oldest pending message, due or not: messages go out in
/// the order they were written (a firing before its resolved), so the
/// dispatcher waits for the head of its queue.
pub async fn head(pool: &SqlitePool, receiver: &str) -> Result<Option<Row>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, fingerprint, payload, due_ms, attempts FROM outbox \
         WHERE receiver = ? AND state = 'pending' ORDER BY id LIMIT 1",
    )
    .bind(receiver)
    .fetch_optional(pool)
    .await
}

/// Delivered: the row goes.
pub async fn delivered(pool: &SqlitePool, id: i64) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM outbox WHERE id = ?")
        .bind(id)
        .execute(pool)
        .await
        .map(|_| ())
}

/// A transient failure: try again at `due_ms`.
pub async fn retry(
    pool: &SqlitePool,
    id: i64,
    due_ms: i64,
    error: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE outbox SET attempts = attempts + 1, due_ms = ?, last_error = ? WHERE id = ?",
    )
    .bind(due_ms)
    .bind(error)
    .bind(id)
    .execute(pool)
    .await
    .map(|_| ())
}

/// A permanent failure: kept, marked, never sent again.
pub async fn failed(pool: &SqlitePool, id: i64, error: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE outbox SET attempts = attempts + 1, state = 'failed', last_error = ? WHERE id = ?",
    )
    .bind(error)
    .bind(id)
    .execute(pool)
    .await
    .map(|_| ())
}

/// Pending messages for the receiver and the creation time of the oldest.
pub async fn depth(pool: &SqlitePool, receiver: &str) -> Result<(i64, Option<i64>), sqlx::Error> {
    sqlx::query_as(
        "SELECT COUNT(*), MIN(created_ms) FROM outbox WHERE receiver = ? AND state = 'pending'",
    )
    .bind(receiver)
    .fetch_one(pool)
    .await
}
