//! One receiver's dispatcher: sends the head of its outbox queue when due,
//! and records what became of it. Receivers have a dispatcher each, so one
//! receiver's outage never holds up another's messages.

use std::sync::Arc;
use std::time::Duration;

use sqlx::SqlitePool;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::{now_ms, outbox, random_unit, Outcome, ReceiverConfig, ReceiverKind, ReceiverStats};

/// How often the outbox is looked at when nothing is due (new rows are
/// noticed within this).
const POLL: Duration = Duration::from_millis(500);

/// Runs until `shutdown` turns true.
pub async fn run(
    receiver: ReceiverConfig,
    pool: SqlitePool,
    stats: Arc<ReceiverStats>,
    mut shutdown: watch::Receiver<bool>,
) {
    let kind = Arc::new(receiver.kind.clone());
    loop {
        if *shutdown.borrow() {
            break;
        }
        let wait = match step(&receiver, &kind, &pool, &stats, &mut shutdown).await {
            Ok(wait) => wait,
            Err(e) => {
                warn!(receiver = %receiver.name, error = %e, "Cannot read or update the notification outbox; trying again shortly.");
                POLL
            }
        };
        if wait.is_zero() {
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Sends the head of the queue if due; returns how long to wait before the
/// next look.
async fn step(
    receiver: &ReceiverConfig,
    kind: &Arc<ReceiverKind>,
    pool: &SqlitePool,
    stats: &ReceiverStats,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Duration, sqlx::Error> {
    let (depth, oldest) = outbox::depth(pool, &receiver.name).await?;
    stats.set_depth(depth, oldest);
    let Some(row) = outbox::head(pool, &receiver.name).await? else {
        return Ok(POLL);
    };
    let now = now_ms();
    if row.due_ms > now {
        return Ok(Duration::from_millis((row.due_ms - now) as u64).min(POLL));
    }
    let body = row.payload.clone();
    let sending = kind.clone();
    let sent = tokio::task::spawn_blocking(move || sending.send(&body));
    // At shutdown the row stays, and goes out again after the restart.
    let outcome = tokio::select! {
        done = sent => done.unwrap_or_else(|e| Outcome::Retry(format!("the sending thread failed: {e}"))),
        _ = shutdown.changed() => return Ok(POLL),
    };
    stats.count(&outcome);
    let attempts = u32::try_from(row.attempts + 1).unwrap_or(u32::MAX);
    match &outcome {
        Outcome::Delivered => {
            debug!(receiver = %receiver.name, fingerprint = %row.fingerprint, attempts, "Notification delivered.");
            outbox::delivered(pool, row.id).await?;
        }
        Outcome::Retry(why) => {
            let delay = receiver.backoff.delay(attempts, random_unit());
            info!(receiver = %receiver.name, fingerprint = %row.fingerprint, attempts, error = %why,
                retry_in = %humantime::format_duration(Duration::from_millis(delay.as_millis() as u64)),
                "Notification not delivered; will retry.");
            outbox::retry(pool, row.id, now_ms() + delay.as_millis() as i64, why).await?;
        }
        Outcome::Permanent(why) => {
            warn!(receiver = %receiver.name, fingerprint = %row.fingerprint, attempts, error = %why,
                "Notification refused by the receiver; it will not be retried (kept in the outbox as failed).");
            outbox::failed(pool, row.id, why).await?;
        }
    }
    let (depth, oldest) = outbox::depth(pool, &receiver.name).await?;
    stats.set_depth(depth, oldest);
    Ok(Duration::ZERO)
}
