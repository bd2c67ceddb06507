//! The agent's history database at start-up and after: `--reset-history`,
//! the first attempt to open it, and everything that hangs on it (the
//! history writer, the history API, the silences, the alert state and the
//! notification outbox).
//!
//! A database that is the wrong file (not SQLite, another application's,
//! damaged, newer) stops the start with what to do. Storage that fails
//! (a full disk, a read-only file system, a directory that cannot be made)
//! does not: the agent serves /metrics without history, says so once,
//! shows `gpuwatch_history_up 0`, and retries in the background; when the
//! database opens, the writer, the history API, the silences and alerting
//! (state and outbox) start using it.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::alerting::{Persist, Silences};
use crate::config::Config;
use crate::gpu::Snapshot;
use crate::history::attach::{self, Availability, Reopen, Slot};
use crate::history::stats::HistoryStats;
use crate::history::writer::{self, WriterSettings};
use crate::history::{store, Store};
use crate::notify::{FiringAlerts, FiringError, ReceiverConfig, ReceiverStats};
use crate::panics::{spawn_supervised, Panics};
use crate::routing::{Destination, Route};
use crate::sampler::SnapshotSink;

/// History as the running agent uses it, after the first attempt to open.
pub(super) struct HistoryRun {
    /// The database, or why it could not be opened at start.
    opened: Result<Store, store::HistoryError>,
    reopen: Reopen,
    snapshots: mpsc::Receiver<Arc<Snapshot>>,
    pub(super) stats: Arc<HistoryStats>,
    pub(super) settings: WriterSettings,
}

/// `--reset-history` (when asked), then the first attempt to open the
/// database at `path`; adds the writer's queue to `sinks`. Fails only for
/// the wrong file (see the module documentation).
pub(super) async fn open_at_start(
    config: &Config,
    path: PathBuf,
    reset: bool,
    sinks: &mut Vec<SnapshotSink>,
) -> anyhow::Result<HistoryRun> {
    if reset {
        if let Some(moved) = store::reset(&path).await? {
            warn!(from = %path.display(), to = %moved.display(), "Moved the history database aside (--reset-history).");
        }
    }
    let durability = config.history.durability;
    let dropped = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stats = Arc::new(HistoryStats::new(dropped.clone()));
    let opened = match Store::open_for_writing(&path, durability).await {
        Ok(store) => {
            stats.up.store(true, std::sync::atomic::Ordering::Relaxed);
            info!(path = %path.display(), "Recording history.");
            Ok(store)
        }
        Err(e) if e.is_storage_fault() => {
            let notifications = !config.rules.is_empty() && !config.receivers.is_empty();
            warn!(
                path = %path.display(),
                error = %e,
                "History is off for now: the history database cannot be opened. /metrics and the GPUs are not affected{}. gpuwatch retries in the background (every {}s at most) and starts recording when it opens: free disk space, make the directory writable, or set history.path (--history-db) to another file.",
                if notifications { "; alert notifications are held (their outbox lives in that database) and queued once it opens" } else { "" },
                attach::MAX_RETRY_DELAY.as_secs(),
            );
            Err(e)
        }
        Err(e) => return Err(e.into()),
    };
    let (sender, snapshots) = mpsc::channel(config.history.queue);
    sinks.push(SnapshotSink { sender, dropped });
    Ok(HistoryRun {
        opened,
        reopen: Reopen { path, durability },
        snapshots,
        stats,
        settings: WriterSettings {
            batch_interval: config.history.batch_interval,
            retention: config.history.retention,
            max_bytes: config.history.max_size,
            // About an hour of 8 GPUs at 1 Hz.
            max_pending_samples: 30_000,
        },
    })
}

/// The database and the silences, as the running agent's parts see them.
pub(super) struct Attached {
    /// The database, once open.
    pub(super) store: Slot<Store>,
    /// The silences, once read from it.
    pub(super) silences: Slot<Silences>,
    /// The writer, the retries, the silences' loading: awaited at shutdown.
    pub(super) tasks: Vec<JoinHandle<()>>,
}

impl Attached {
    /// Starts the writer (which waits for the database if it is not open
    /// yet) and, when it is not, the retries.
    pub(super) async fn start(
        run: HistoryRun,
        panics: &Arc<Panics>,
        shutdown: &watch::Receiver<bool>,
    ) -> Attached {
        let HistoryRun {
            opened,
            reopen,
            snapshots,
            stats,
            settings,
        } = run;
        let mut tasks = Vec::new();
        let (store, silences) = match opened {
            Ok(store) => {
                let silences = match open_silences(&store).await {
                    Availability::Up(s) => Slot::ready(s),
                    down => Slot::channel(down).1,
                };
                (Slot::ready(store), silences)
            }
            Err(error) => {
                // Shown by the API and compared by the retries as text.
                let reason = error.to_string();
                let (publish, store) = Slot::channel(Availability::Down(reason.clone()));
                tasks.push(spawn_supervised(
                    "history",
                    panics,
                    attach::keep_opening(
                        reopen,
                        reason.clone(),
                        publish,
                        stats.clone(),
                        shutdown.clone(),
                    ),
                ));
                let (fill, silences) = Slot::channel(Availability::Down(reason));
                let mut waiting = store.clone();
                let mut stop = shutdown.clone();
                tasks.push(tokio::spawn(async move {
                    tokio::select! {
                        Some(store) = waiting.wait() => {
                            fill.send_replace(open_silences(&store).await);
                        }
                        _ = stop.changed() => {}
                    }
                }));
                (store, silences)
            }
        };
        tasks.push(spawn_supervised(
            "history",
            panics,
            writer::run_when_open(store.clone(), snapshots, settings, stats, shutdown.clone()),
        ));
        Attached {
            store,
            silences,
            tasks,
        }
    }
}

async fn open_silences(store: &Store) -> Availability<Silences> {
    match Silences::open(store.pool.clone(), crate::timespec::Timestamp::now()).await {
        Ok(silences) => Availability::Up(silences),
        Err(e) => {
            warn!(path = %store.path.display(), error = %e, "Cannot read the silences from the history database: until the agent restarts, the silences API answers 503 and alert notifications are held (they would ignore the silences).");
            Availability::Down(format!("cannot read the silences: {e}"))
        }
    }
}

/// The `[[receivers]]`, counted from the start (their metrics are on
/// /metrics even while the outbox waits for the database).
pub(super) struct Notifiers {
    receivers: Vec<ReceiverConfig>,
    /// Per-receiver counters, for `NotifyCollector`.
    pub(super) stats: Vec<Arc<ReceiverStats>>,
    destinations: Vec<Destination>,
    /// Where the dispatchers' panics are counted (`subsystem="notify"`).
    panics: Arc<Panics>,
    /// Rung by alerting when it queued messages; the dispatchers wait on it.
    doorbell: crate::outbox::Doorbell,
}

/// The alerts a receiver with `route` re-sends (Alertmanager): those
/// firing in the alert state saved in `pool` that the route takes, neither
/// silenced nor inhibited ([`crate::alerting::saved_alerts`]). Wired here
/// so that the notifiers name no alerting type.
fn firing_alerts(pool: &sqlx::SqlitePool, route: &Route) -> FiringAlerts {
    let (pool, route) = (pool.clone(), route.clone());
    FiringAlerts::new(move || {
        let (pool, route) = (pool.clone(), route.clone());
        async move {
            crate::alerting::saved_alerts(&pool, &route)
                .await
                .map_err(|e| FiringError(e.to_string()))
        }
    })
}

impl Notifiers {
    /// The configured receivers, with Alertmanager's links pointing at
    /// `external_url`.
    pub(super) fn new(config: &Config, external_url: &str, panics: &Arc<Panics>) -> Notifiers {
        let mut receivers = config.receivers.clone();
        for receiver in &mut receivers {
            if let crate::notify::ReceiverKind::Alertmanager(am) = &mut receiver.kind {
                am.external_url = external_url.to_string();
            }
        }
        Notifiers {
            stats: receivers
                .iter()
                .map(|r| Arc::new(ReceiverStats::new(&r.name)))
                .collect(),
            destinations: receivers
                .iter()
                .map(|r| Destination {
                    name: r.name.clone(),
                    route: r.route.clone(),
                })
                .collect(),
            receivers,
            panics: panics.clone(),
            doorbell: crate::outbox::Doorbell::default(),
        }
    }

    /// The receivers' routes and the doorbell, for other writers of the
    /// outbox (remediation's notifications).
    pub(super) fn outbox(&self) -> (Vec<Destination>, crate::outbox::Doorbell) {
        (self.destinations.clone(), self.doorbell.clone())
    }

    /// Starts a dispatcher per receiver and the outbox's cleanup.
    fn start(&self, store: &Store, shutdown: &watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        let mut tasks = Vec::new();
        for (receiver, stats) in self.receivers.iter().zip(&self.stats) {
            tasks.push(spawn_supervised(
                "notify",
                &self.panics,
                crate::notify::run(
                    receiver.clone(),
                    store.pool.clone(),
                    stats.clone(),
                    self.doorbell.listener(),
                    shutdown.clone(),
                    firing_alerts(&store.pool, &receiver.route),
                ),
            ));
        }
        if !self.receivers.is_empty() {
            let names: Vec<&str> = self.receivers.iter().map(|r| r.name.as_str()).collect();
            info!(receivers = %names.join(", "), "Sending alert notifications.");
        }
        tasks.push(spawn_supervised(
            "notify",
            &self.panics,
            crate::notify::cleanup::run(
                store.pool.clone(),
                self.receivers.iter().map(|r| r.name.clone()).collect(),
                shutdown.clone(),
            ),
        ));
        tasks
    }

    fn persist(&self, store: Store, silences: Silences, run: &HistoryTerms) -> Persist {
        Persist {
            store,
            receivers: self.destinations.clone(),
            silences,
            retention: run.retention,
            external_url: run.external_url.clone(),
            doorbell: self.doorbell.clone(),
        }
    }
}

/// What alerting's persistence needs besides the database.
pub(super) struct HistoryTerms {
    /// History retention.
    pub(super) retention: crate::history::Retention,
    /// The agent's external URL.
    pub(super) external_url: String,
}

/// Alerting's persistence: now when the database and silences are open
/// (the dispatchers start now), later when they are not (a task waits for
/// them, then starts the dispatchers and hands the alerting task its
/// [`Persist`]; its handle is in `tasks`). Never without history.
pub(super) fn persistence(
    attached: Option<&Attached>,
    notifiers: Notifiers,
    terms: HistoryTerms,
    shutdown: &watch::Receiver<bool>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> crate::alerting::Persistence {
    use crate::alerting::Persistence;
    let Some(attached) = attached else {
        if !notifiers.receivers.is_empty() {
            warn!("[[receivers]] are configured but history is off: notifications need the history database (their outbox lives there), so none are sent.");
        }
        return Persistence::Never;
    };
    if let (Ok(store), Ok(silences)) = (attached.store.get(), attached.silences.get()) {
        tasks.extend(notifiers.start(&store, shutdown));
        return Persistence::Now(notifiers.persist(store, silences, &terms));
    }
    let (hand, later) = oneshot::channel();
    let mut store = attached.store.clone();
    let mut silences = attached.silences.clone();
    let mut stop = shutdown.clone();
    let shutdown = shutdown.clone();
    tasks.push(tokio::spawn(async move {
        let both = async { Some((store.wait().await?, silences.wait().await?)) };
        let (store, silences) = tokio::select! {
            Some(both) = both => both,
            _ = stop.changed() => return,
        };
        let dispatchers = notifiers.start(&store, &shutdown);
        let _ = hand.send(notifiers.persist(store, silences, &terms));
        for task in dispatchers {
            let _ = task.await;
        }
    }));
    Persistence::Later(later)
}
