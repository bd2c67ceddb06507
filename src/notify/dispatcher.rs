//! One receiver's dispatcher: sends the head of its outbox queue when due,
//! and records what became of it. Receivers have a dispatcher each, so one
//! receiver's outage never holds up another's messages.
//!
//! An Alertmanager receiver's dispatcher also re-sends the firing alerts
//! every `resend_interval` (see [`super::alertmanager`]), read from the
//! [`FiringAlerts`] source the agent wires (the alert state saved in the
//! database, committed with the transitions and their outbox rows, so it
//! survives a restart and agrees with what the outbox sent); and because
//! the re-send runs in this same task, between two outbox messages, it
//! never overtakes a resolved message with a stale firing one.
//!
//! Its timers are tokio's (`tokio::time::Instant`), so its tests run on
//! paused time; the rows' due times are wall-clock milliseconds, as the
//! alerting task writes them.
//!
//! Every attempt, outbox message or re-send, goes through [`attempt`]: the
//! one place where an outcome's reason is cleaned of the receiver's secrets
//! (see [`super::redact`]) before it is counted, logged or stored.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sqlx::SqlitePool;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::alertmanager::{self, AlertmanagerConfig};
use super::{
    outbox, random_unit, FiringAlerts, Outcome, ReceiverConfig, ReceiverKind, ReceiverStats,
    Redactor,
};
use crate::gpu::now_ms;
use crate::outbox::doorbell::Listener;
use crate::outbox::OutboxMessage;

/// How long to wait for the next look at the outbox when the database
/// cannot be read.
const RETRY: Duration = Duration::from_millis(500);
/// How often the outbox is looked at when it is empty and the doorbell does
/// not ring (rows written by anything but this agent's alerting, e.g. an
/// older agent still running against the same file, are noticed within this).
const IDLE: Duration = Duration::from_secs(30);
/// The first re-send after a start waits at most this long (less with a
/// shorter `resend_interval`), so that the first evaluation has resolved
/// what stopped firing while the agent was down.
const FIRST_RESEND: Duration = Duration::from_secs(10);

/// Runs until `shutdown` turns true; looks at the outbox when `doorbell`
/// rings, when the head of the queue is due, and every `IDLE`. An
/// Alertmanager receiver re-sends what `firing` gives.
pub async fn run(
    receiver: ReceiverConfig,
    pool: SqlitePool,
    stats: Arc<ReceiverStats>,
    mut doorbell: Listener,
    mut shutdown: watch::Receiver<bool>,
    firing: FiringAlerts,
) {
    let kind = Arc::new(receiver.kind.clone());
    let redactor = Redactor::for_receiver(&receiver.kind);
    let mut resend = match &receiver.kind {
        ReceiverKind::Alertmanager(config) => Some(Resend {
            config: Arc::new(config.clone()),
            next: Instant::now() + config.resend_interval.min(FIRST_RESEND),
            failing: false,
            firing,
        }),
        _ => None,
    };
    loop {
        if *shutdown.borrow() {
            break;
        }
        if let Some(resend) = &mut resend {
            if Instant::now() >= resend.next {
                resend
                    .run(&receiver.name, &stats, &redactor, &mut shutdown)
                    .await;
                resend.next = Instant::now() + resend.config.resend_interval;
            }
        }
        let mut wait = match step(&receiver, &kind, &redactor, &pool, &stats, &mut shutdown).await {
            Ok(wait) => wait,
            Err(e) => {
                warn!(receiver = %receiver.name, error = %e, "Cannot read or update the notification outbox; trying again shortly.");
                RETRY
            }
        };
        if let Some(resend) = &resend {
            wait = wait.min(resend.next.saturating_duration_since(Instant::now()));
        }
        if wait.is_zero() {
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = doorbell.rung() => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Sends the head of the queue if due; returns how long to wait before the
/// next look.
async fn step(
    receiver: &ReceiverConfig,
    kind: &Arc<ReceiverKind>,
    redactor: &Redactor,
    pool: &SqlitePool,
    stats: &ReceiverStats,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Duration, sqlx::Error> {
    let (depth, oldest) = outbox::depth(pool, &receiver.name).await?;
    stats.set_depth(depth, oldest);
    let Some(row) = outbox::head(pool, &receiver.name).await? else {
        return Ok(IDLE);
    };
    let now = now_ms();
    if row.due_ms > now {
        // Only this dispatcher moves its head: nothing to look at before
        // it is due (a new row queues behind it and rings the doorbell).
        return Ok(Duration::from_millis((row.due_ms - now) as u64).min(IDLE));
    }
    let outcome = match OutboxMessage::parse(&row.payload) {
        Ok(message) => {
            let sending = kind.clone();
            // At shutdown the row stays, and goes out again after the restart.
            let Some(outcome) = attempt(move || sending.send(&message), redactor, shutdown).await
            else {
                return Ok(RETRY);
            };
            outcome
        }
        // Written by a broken version, or by hand: no retry can send it.
        Err(e) => Outcome::Permanent(format!(
            "the outbox message is not an alert notification: {e}"
        )),
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
                "Notification cannot be delivered and will not be retried (kept in the outbox as failed); fix what the error says.");
            outbox::failed(pool, row.id, why).await?;
        }
    }
    let (depth, oldest) = outbox::depth(pool, &receiver.name).await?;
    stats.set_depth(depth, oldest);
    Ok(Duration::ZERO)
}

/// Runs one blocking send on a blocking thread and returns its outcome with
/// the reason cleaned by `redactor`; `None` when `shutdown` came first.
async fn attempt(
    send: impl FnOnce() -> Outcome + Send + 'static,
    redactor: &Redactor,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<Outcome> {
    let sent = tokio::task::spawn_blocking(send);
    let outcome = tokio::select! {
        done = sent => done.unwrap_or_else(|e| Outcome::Retry(format!("the sending thread failed: {e}"))),
        _ = shutdown.changed() => return None,
    };
    Some(redactor.outcome(outcome))
}

/// An Alertmanager receiver's periodic re-send of its firing alerts.
struct Resend {
    config: Arc<AlertmanagerConfig>,
    next: Instant,
    /// The last re-send failed (so the next failure is not logged loudly
    /// again).
    failing: bool,
    /// The alerts firing now that the receiver's route takes.
    firing: FiringAlerts,
}

impl Resend {
    /// Sends the alerts firing now, as the source gives them. A failure is
    /// not retried: the next re-send is due in `resend_interval` anyway.
    async fn run(
        &mut self,
        receiver: &str,
        stats: &ReceiverStats,
        redactor: &Redactor,
        shutdown: &mut watch::Receiver<bool>,
    ) {
        let alerts = match self.firing.current().await {
            Ok(alerts) => alerts,
            Err(e) => {
                warn!(receiver = %receiver, error = %e, "Cannot read the firing alerts to re-send to Alertmanager; trying again at the next re-send.");
                return;
            }
        };
        let Some(body) = alertmanager::resend_body(
            &alerts,
            &self.config.external_url,
            SystemTime::now(),
            self.config.valid_for(),
        ) else {
            return;
        };
        let config = self.config.clone();
        let sending = move || alertmanager::post(&config, &body);
        let Some(outcome) = attempt(sending, redactor, shutdown).await else {
            return;
        };
        stats.count(&outcome);
        let next = humantime::format_duration(self.config.resend_interval);
        match &outcome {
            Outcome::Delivered => {
                if self.failing {
                    info!(receiver = %receiver, "Firing alerts re-sent to Alertmanager again.");
                } else {
                    debug!(receiver = %receiver, "Firing alerts re-sent to Alertmanager.");
                }
                self.failing = false;
            }
            Outcome::Retry(why) | Outcome::Permanent(why) => {
                if self.failing {
                    debug!(receiver = %receiver, error = %why, next_in = %next, "Cannot re-send the firing alerts to Alertmanager.");
                } else {
                    warn!(receiver = %receiver, error = %why, next_in = %next,
                        "Cannot re-send the firing alerts to Alertmanager; trying again at the next re-send (they expire there 4 re-send intervals after the last one that arrived).");
                }
                self.failing = true;
            }
        }
    }
}

#[cfg(test)]
mod tests;
