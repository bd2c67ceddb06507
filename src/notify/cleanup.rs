//! Outbox cleanup, at start and hourly: failed messages (kept so the reason
//! can be looked at) go after [`FAILED_RETENTION`], and the messages of
//! receivers no longer in the configuration go at once (nothing would ever
//! send them). Each removal is logged with its counts.

use std::time::Duration;

use sqlx::SqlitePool;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::gpu::now_ms;

/// How long a failed message is kept.
pub const FAILED_RETENTION: Duration = Duration::from_secs(7 * 86_400);

/// How often the cleanup runs after the one at start.
const EVERY: Duration = Duration::from_secs(3600);

/// What one cleanup removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Cleaned {
    /// Failed messages older than the retention.
    pub expired_failed: u64,
    /// Per receiver no longer configured: (name, pending, failed) removed.
    pub orphaned: Vec<(String, i64, i64)>,
}

/// Removes the failed messages that failed (their last attempt was due)
/// before `failed_before_ms`, and every message of a receiver not in
/// `receivers`.
pub async fn clean(
    pool: &SqlitePool,
    receivers: &[String],
    failed_before_ms: i64,
) -> Result<Cleaned, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let expired_failed = sqlx::query("DELETE FROM outbox WHERE state = 'failed' AND due_ms < ?")
        .bind(failed_before_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    let counts: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT receiver, SUM(state = 'pending'), SUM(state = 'failed') FROM outbox \
         GROUP BY receiver ORDER BY receiver",
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut orphaned = Vec::new();
    for (receiver, pending, failed) in counts {
        if receivers.contains(&receiver) {
            continue;
        }
        sqlx::query("DELETE FROM outbox WHERE receiver = ?")
            .bind(&receiver)
            .execute(&mut *tx)
            .await?;
        orphaned.push((receiver, pending, failed));
    }
    tx.commit().await?;
    Ok(Cleaned {
        expired_failed,
        orphaned,
    })
}

/// Cleans now and then every hour, until `shutdown` turns true.
pub async fn run(pool: SqlitePool, receivers: Vec<String>, mut shutdown: watch::Receiver<bool>) {
    loop {
        let before = now_ms() - FAILED_RETENTION.as_millis() as i64;
        match clean(&pool, &receivers, before).await {
            Ok(cleaned) => log(&cleaned),
            Err(e) => {
                warn!(error = %e, "Cannot clean up the notification outbox; trying again in an hour.")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            break;
        }
    }
}

fn log(cleaned: &Cleaned) {
    if cleaned.expired_failed > 0 {
        info!(
            removed = cleaned.expired_failed,
            retention = %humantime::format_duration(FAILED_RETENTION),
            "Removed failed notifications older than the retention from the outbox."
        );
    }
    for (receiver, pending, failed) in &cleaned.orphaned {
        warn!(
            receiver = %receiver,
            undelivered = pending,
            failed = failed,
            "Removed the outbox messages of a receiver that is no longer configured (renamed or removed from [[receivers]]); they will not be sent."
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Durability, Store};

    async fn add(pool: &SqlitePool, receiver: &str, state: &str, due_ms: i64) {
        sqlx::query(
            "INSERT INTO outbox (receiver, fingerprint, payload, created_ms, due_ms, attempts, state) \
             VALUES (?, 'f', '{}', ?, ?, 1, ?)",
        )
        .bind(receiver)
        .bind(due_ms)
        .bind(due_ms)
        .bind(state)
        .execute(pool)
        .await
        .expect("insert");
    }

    #[tokio::test]
    async fn old_failures_and_unconfigured_receivers_go_the_rest_stays() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open_for_writing(&dir.path().join("h.db"), Durability::Normal)
            .await
            .expect("open");
        let pool = &store.pool;
        let day = 86_400_000;
        let now = 100 * day;
        add(pool, "ops", "pending", now - 30 * day).await; // stays: pending
        add(pool, "ops", "failed", now - 8 * day).await; // goes: too old
        add(pool, "ops", "failed", now - 6 * day).await; // stays
        add(pool, "old", "pending", now).await; // go: "old" is gone
        add(pool, "old", "pending", now).await;
        add(pool, "old", "failed", now).await;
        add(pool, "gone", "failed", now - 9 * day).await; // expired first

        let before = now - FAILED_RETENTION.as_millis() as i64;
        let cleaned = clean(pool, &["ops".to_string()], before)
            .await
            .expect("clean");
        assert_eq!(
            cleaned,
            Cleaned {
                expired_failed: 2,
                orphaned: vec![("old".to_string(), 2, 1)],
            }
        );
        let left: Vec<(String, String, i64)> =
            sqlx::query_as("SELECT receiver, state, due_ms FROM outbox ORDER BY id")
                .fetch_all(pool)
                .await
                .expect("select");
        assert_eq!(
            left,
            vec![
                ("ops".to_string(), "pending".to_string(), now - 30 * day),
                ("ops".to_string(), "failed".to_string(), now - 6 * day),
            ]
        );
        let again = clean(pool, &["ops".to_string()], before)
            .await
            .expect("clean");
        assert_eq!(again, Cleaned::default(), "nothing more to remove");
    }
}
