//! The history database as the running agent's parts see it: open, or down
//! with a reason. When the storage fails at start (a full disk, a read-only
//! file system, a directory that cannot be made), the agent starts without
//! history and [`keep_opening`] retries in the background; each part that
//! needs the database holds a [`Slot`] and starts using it once it opens.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::stats::HistoryStats;
use super::store::{Durability, Store};

/// The longest wait between two attempts to open the database.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// Distinct failure reasons logged at warning level while retrying.
const MAX_LOGGED_REASONS: usize = 8;

/// Whether a value is there yet.
#[derive(Debug, Clone)]
pub enum Availability<T> {
    /// There, and usable.
    Up(T),
    /// Not (yet): why, as a person reads it.
    Down(String),
}

/// Why a [`Slot`]'s value is not there, as a person reads it (e.g. the
/// storage fault that keeps the history database from opening).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct NotAvailable {
    /// The reason the slot was last given.
    pub reason: String,
}

/// A value some parts of the agent read and that may arrive after they
/// started (the history database, the silences stored in it).
#[derive(Debug, Clone)]
pub struct Slot<T>(watch::Receiver<Availability<T>>);

impl<T: Clone> Slot<T> {
    /// A slot that holds `value` from the start.
    pub fn ready(value: T) -> Slot<T> {
        Slot::channel(Availability::Up(value)).1
    }

    /// A slot and the sender that fills it.
    pub fn channel(initial: Availability<T>) -> (watch::Sender<Availability<T>>, Slot<T>) {
        let (tx, rx) = watch::channel(initial);
        (tx, Slot(rx))
    }

    /// The value now, or why it is not there.
    pub fn get(&self) -> Result<T, NotAvailable> {
        match &*self.0.borrow() {
            Availability::Up(value) => Ok(value.clone()),
            Availability::Down(reason) => Err(NotAvailable {
                reason: reason.clone(),
            }),
        }
    }

    /// Waits until the value is there; `None` when it never will be (its
    /// sender is gone).
    pub async fn wait(&mut self) -> Option<T> {
        let up = self
            .0
            .wait_for(|a| matches!(a, Availability::Up(_)))
            .await
            .ok()?;
        match &*up {
            Availability::Up(value) => Some(value.clone()),
            Availability::Down(_) => None,
        }
    }
}

/// The wait before attempt `attempt` (1 for the first retry): 1 s, 2 s,
/// 4 s, ... doubling up to [`MAX_RETRY_DELAY`]. One agent per node, on its
/// own disk: no jitter needed.
pub fn retry_delay(attempt: u32) -> Duration {
    let doublings = attempt.saturating_sub(1).min(16);
    Duration::from_secs(1u64 << doublings).min(MAX_RETRY_DELAY)
}

/// Where to open the database, and how.
#[derive(Debug, Clone)]
pub struct Reopen {
    /// The database file.
    pub path: PathBuf,
    /// `history.durability`.
    pub durability: Durability,
}

/// Tries to open the database (see [`retry_delay`]) until it opens or
/// `shutdown` turns true; then publishes it on `publish` and sets the
/// `gpuwatch_history_up` gauge. Each failure reason is logged once (the
/// first one was logged at start, as `first_reason`), so a reason that
/// comes back or alternates with another is not logged every attempt; the
/// latest reason is published for the API. The recovery is logged once.
pub async fn keep_opening(
    reopen: Reopen,
    first_reason: String,
    publish: watch::Sender<Availability<Store>>,
    stats: Arc<HistoryStats>,
    mut shutdown: watch::Receiver<bool>,
) {
    let down_since = Instant::now();
    // The reasons logged so far (a handful at most).
    let mut logged = vec![first_reason];
    for attempt in 1u32.. {
        tokio::select! {
            _ = tokio::time::sleep(retry_delay(attempt)) => {}
            _ = shutdown.changed() => return,
        }
        match Store::open_for_writing(&reopen.path, reopen.durability).await {
            Ok(store) => {
                stats.up.store(true, Ordering::Relaxed);
                info!(
                    path = %reopen.path.display(),
                    attempts = attempt,
                    down_seconds = down_since.elapsed().as_secs(),
                    "The history database is open now: recording history, and alert notifications are queued again."
                );
                publish.send_replace(Availability::Up(store));
                return;
            }
            Err(e) => {
                let reason = e.to_string();
                if logged.contains(&reason) || logged.len() >= MAX_LOGGED_REASONS {
                    debug!(path = %reopen.path.display(), error = %reason, attempt, "The history database still cannot be opened.");
                } else {
                    warn!(path = %reopen.path.display(), error = %reason, "The history database still cannot be opened, now for another reason; retrying every {}s at most.", MAX_RETRY_DELAY.as_secs());
                    logged.push(reason.clone());
                }
                publish.send_if_modified(|now| match now {
                    Availability::Down(old) if *old == reason => false,
                    _ => {
                        *now = Availability::Down(reason);
                        true
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_double_up_to_thirty_seconds() {
        let delays: Vec<u64> = (1..=8).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(retry_delay(0), Duration::from_secs(1));
        assert_eq!(retry_delay(u32::MAX), MAX_RETRY_DELAY);
    }

    #[tokio::test]
    async fn a_slot_reports_why_until_filled_and_wakes_waiters() {
        let (tx, slot) = Slot::channel(Availability::Down("disk full".to_string()));
        assert_eq!(
            slot.get(),
            Err(NotAvailable {
                reason: "disk full".to_string()
            })
        );
        let mut waiting = slot.clone();
        let waiter = tokio::spawn(async move { waiting.wait().await });
        tx.send_replace(Availability::Up(7));
        assert_eq!(waiter.await.expect("join"), Some(7));
        assert_eq!(slot.get(), Ok(7));
        assert_eq!(Slot::ready(3).get(), Ok(3));
        assert_eq!(Slot::ready(4).wait().await, Some(4), "filled, sender gone");

        let (tx, mut never) = Slot::<i32>::channel(Availability::Down("off".into()));
        drop(tx);
        assert_eq!(never.wait().await, None, "no sender: it never comes");
    }
}
