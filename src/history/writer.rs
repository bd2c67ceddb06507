//! The writer task: receives snapshots from the sampler's bounded queue,
//! records them, commits a batch every `batch_interval`, and prunes every
//! minute. A failed commit (disk full, read-only file) is counted, sets
//! `gpuwatch_history_up` to 0 and is retried with the next batch; an outage
//! is logged when it starts and when it ends, not per batch; /metrics is
//! never affected. At shutdown the open minute and hour are flushed too.
//! [`run_when_open`] waits for a database that could not be opened at start.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};

use crate::gpu::Snapshot;

use super::attach::Slot;
use super::recorder::{Batch, Recorder};
use super::retention::{self, Retention};
use super::sql;
use super::stats::HistoryStats;
use super::store::Store;

/// How the writer batches and prunes.
#[derive(Debug, Clone)]
pub struct WriterSettings {
    /// Time between commits.
    pub batch_interval: Duration,
    /// Retention per tier.
    pub retention: Retention,
    /// Optional size cap, bytes.
    pub max_bytes: Option<u64>,
    /// Raw samples kept in memory while commits fail (about an hour of 8
    /// GPUs at 1 Hz by default); older ones are given up and counted.
    pub max_pending_samples: usize,
}

const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// [`run`], once the database opens. Until then each snapshot is taken off
/// the queue and counted as discarded samples (one per GPU): there is
/// nowhere to record it, and a full queue would count it as dropped by the
/// sampler instead.
pub async fn run_when_open(
    mut store: Slot<Store>,
    mut snapshots: mpsc::Receiver<Arc<Snapshot>>,
    settings: WriterSettings,
    stats: Arc<HistoryStats>,
    mut shutdown: watch::Receiver<bool>,
) {
    let store = loop {
        tokio::select! {
            // The store first: a snapshot is given up only while the
            // database is really unavailable, never because both were ready.
            biased;
            store = store.wait() => match store {
                Some(store) => break store,
                None => return,
            },
            snapshot = snapshots.recv() => match snapshot {
                Some(snapshot) => {
                    stats
                        .samples_discarded
                        .fetch_add(snapshot.gpus.len() as u64, Ordering::Relaxed);
                }
                None => return,
            },
            _ = shutdown.changed() => return,
        }
    };
    run(store, snapshots, settings, stats, shutdown).await;
}

/// Runs until the queue closes or `shutdown` turns true, then commits what
/// is left.
pub async fn run(
    store: Store,
    mut snapshots: mpsc::Receiver<Arc<Snapshot>>,
    settings: WriterSettings,
    stats: Arc<HistoryStats>,
    mut shutdown: watch::Receiver<bool>,
) {
    let (gpus, counters) = match sql::load_state(&store.pool).await {
        Ok(state) => state,
        Err(e) => {
            stats.up.store(false, Ordering::Relaxed);
            error!(path = %store.path.display(), error = %e, "Cannot read the history database's state; history is not recorded until the agent restarts.");
            return;
        }
    };
    // Workloads still running when the agent last stopped ended then, for
    // the history: their accounting starts over under a new start time.
    if let Err(e) = sql::close_running_workloads(&store.pool).await {
        warn!(error = %e, "Cannot close the workloads left running by the last agent; they show as running until the retention removes them.");
    }
    // The kernel log replays what it logged since boot: the Xid events
    // stored since then are not written again.
    let boot_ms = (crate::gpu::unix_seconds_f64(crate::health::boot_time()) * 1000.0) as i64;
    let known_xid = sql::load_known_xid(&store.pool, boot_ms - 60_000)
        .await
        .unwrap_or_else(|e| {
            warn!(error = %e, "Cannot read the stored Xid events; Xid errors logged before the agent started may be recorded twice.");
            Vec::new()
        });
    let mut writer = Writer {
        recorder: Recorder::new(gpus, counters).with_known_xid(known_xid),
        pending: Batch::default(),
        store,
        settings,
        stats,
        commits: Outage::default(),
        prunes: Outage::default(),
    };
    writer.prune().await;
    let mut commit_tick = tokio::time::interval(writer.settings.batch_interval);
    commit_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut prune_tick = tokio::time::interval(PRUNE_EVERY);
    prune_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            snapshot = snapshots.recv() => match snapshot {
                Some(snapshot) => writer.recorder.record(&snapshot),
                None => break,
            },
            _ = commit_tick.tick() => writer.commit(false).await,
            _ = prune_tick.tick() => writer.prune().await,
            _ = shutdown.changed() => break,
        }
    }
    while let Ok(snapshot) = snapshots.try_recv() {
        writer.recorder.record(&snapshot);
    }
    writer.commit(true).await;
}

struct Writer {
    recorder: Recorder,
    /// Rows not yet committed (carried over after a failed commit).
    pending: Batch,
    store: Store,
    settings: WriterSettings,
    stats: Arc<HistoryStats>,
    /// Failing commits, logged once per outage.
    commits: Outage,
    /// Failing prunes, logged once per outage.
    prunes: Outage,
}

/// Failures in a row, so that an outage is logged when it starts and when
/// it ends rather than once per batch.
#[derive(Debug, Default)]
pub(crate) struct Outage {
    since: Option<Instant>,
    failures: u64,
}

impl Outage {
    /// Records a failure; `true` when it starts an outage (log it).
    pub(crate) fn failed(&mut self) -> bool {
        self.failures += 1;
        let first = self.since.is_none();
        self.since.get_or_insert_with(Instant::now);
        first
    }

    /// Records a success; the failures and length of the outage it ends.
    pub(crate) fn succeeded(&mut self) -> Option<(u64, Duration)> {
        let since = self.since.take()?;
        Some((std::mem::take(&mut self.failures), since.elapsed()))
    }
}

impl Writer {
    async fn commit(&mut self, last: bool) {
        let fresh = if last {
            self.recorder.take_final_batch()
        } else {
            self.recorder.take_batch()
        };
        self.pending.append(fresh);
        if self.pending.rows() == 0 {
            return;
        }
        let started = Instant::now();
        match sql::commit(&self.store.pool, &self.pending).await {
            Ok(rows) => {
                self.stats
                    .rows_written
                    .fetch_add(rows as u64, Ordering::Relaxed);
                self.stats
                    .last_commit_micros
                    .store(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                let firsts = [
                    self.pending.samples.iter().map(|r| r.ts).min(),
                    self.pending.minutes.iter().map(|r| r.ts).min(),
                    self.pending.hours.iter().map(|r| r.ts).min(),
                ];
                for (slot, first) in self.stats.oldest_ms.iter().zip(firsts) {
                    if let Some(first) = first {
                        // Until the next prune looks, an empty tier's oldest
                        // row is the first one written.
                        let _ =
                            slot.compare_exchange(-1, first, Ordering::Relaxed, Ordering::Relaxed);
                    }
                }
                self.stats.up.store(true, Ordering::Relaxed);
                if let Some((failures, lasted)) = self.commits.succeeded() {
                    info!(path = %self.store.path.display(), failed_commits = failures, seconds = lasted.as_secs(), "History writes work again; the rows held meanwhile are written.");
                }
                self.pending = Batch::default();
            }
            Err(e) => {
                self.stats.write_errors.fetch_add(1, Ordering::Relaxed);
                self.stats.up.store(false, Ordering::Relaxed);
                let discarded = self.pending.trim_samples(self.settings.max_pending_samples);
                self.stats
                    .samples_discarded
                    .fetch_add(discarded as u64, Ordering::Relaxed);
                if self.commits.failed() {
                    warn!(path = %self.store.path.display(), error = %e, pending_rows = self.pending.rows(), max_pending_samples = self.settings.max_pending_samples,
                        "Cannot write to the history database (disk full or read-only?); keeping the rows in memory (the oldest samples beyond the limit are given up) and retrying with every batch. Free space or fix the file system; /metrics is not affected. Logged once until writes work again.");
                }
            }
        }
    }

    async fn prune(&mut self) {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        match retention::prune(
            &self.store.pool,
            self.settings.retention,
            self.settings.max_bytes,
            now_ms,
        )
        .await
        {
            Ok(n) => {
                self.stats.rows_pruned.fetch_add(n, Ordering::Relaxed);
                if self.prunes.succeeded().is_some() {
                    info!(path = %self.store.path.display(), "Pruning the history database works again.");
                }
            }
            Err(e) => {
                if self.prunes.failed() {
                    warn!(path = %self.store.path.display(), error = %e, "Pruning the history database failed; retrying every minute, logged once until it works again.");
                }
            }
        }
        if let Ok(bytes) = self.store.size_bytes().await {
            self.stats.database_bytes.store(bytes, Ordering::Relaxed);
        }
        if let Ok(oldest) = retention::oldest(&self.store.pool).await {
            for (slot, (_, ms)) in self.stats.oldest_ms.iter().zip(oldest) {
                slot.store(ms.unwrap_or(-1), Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Outage;

    #[test]
    fn an_outage_is_reported_once_when_it_starts_and_once_when_it_ends() {
        let mut outage = Outage::default();
        assert_eq!(outage.succeeded(), None, "no outage to end");
        assert!(outage.failed(), "the first failure starts an outage");
        assert!(!outage.failed() && !outage.failed(), "later ones do not");
        let (failures, _) = outage.succeeded().expect("the outage ends");
        assert_eq!(failures, 3);
        assert_eq!(outage.succeeded(), None, "ended once");
        assert!(outage.failed(), "a new outage is reported again");
    }
}
