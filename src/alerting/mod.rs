//! The alerting task: evaluates the rules (see [`crate::rules`]) on every
//! snapshot, and on a timer so a stalled sampler is noticed; persists the
//! evaluation state with each transition in one SQLite transaction, so a
//! restart neither loses nor repeats an alert; publishes the state for
//! `gpuwatch_alerts` and `/api/v1/alerts`.
//!
//! After each evaluation, [`plan`] decides which notifications go out
//! (routes, silences, inhibition, repeats); they are written as outbox rows
//! in the same transaction, and [`crate::notify`] delivers them.

mod details;
mod message;
mod metrics;
pub mod mute;
pub mod plan;
pub mod queue;
pub mod silence;
pub mod silence_set;
pub mod silence_store;
mod store;
pub mod transition_log;
pub mod view;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use crate::gpu::Snapshot;
use crate::history::{Retention, Store};
use crate::routing::{Destination, Route};
use crate::rules::{evaluate, AlertState, EvalState, Rule, Transition};
use crate::sampler::SnapshotReceiver;

pub use metrics::AlertsCollector;
pub use queue::{queue, AlertQueue};
pub use silence_store::Silences;
pub use store::{load as saved_state, StateError};

/// The latest evaluation state, for /metrics and the API.
pub type AlertsReceiver = watch::Receiver<Arc<EvalState>>;

/// How often the latest snapshot is evaluated again without a new one (a
/// hung sampler publishes none).
const RECHECK: Duration = Duration::from_secs(15);
/// How often the state is saved when nothing transitioned (baselines move).
const SAVE_EVERY: Duration = Duration::from_secs(60);

/// Loads the saved state (or starts empty) and returns it with the
/// receiver the HTTP side reads.
pub async fn restore(
    store: Option<&Store>,
) -> (EvalState, watch::Sender<Arc<EvalState>>, AlertsReceiver) {
    let state = match store {
        Some(store) => match store::load(&store.pool).await {
            Ok(state) => state.unwrap_or_default(),
            Err(e) => {
                warn!(error = %e, "Cannot read the saved alert state; starting without it (firing alerts may notify again).");
                EvalState::default()
            }
        },
        None => EvalState::default(),
    };
    let (tx, rx) = watch::channel(Arc::new(state.clone()));
    (state, tx, rx)
}

/// The alerts of the state saved in the database that a receiver with
/// `route` is to hear about: firing, taken by the route, neither silenced
/// (silences as stored now) nor inhibited. What the Alertmanager receiver
/// re-sends from, so that its re-sends survive a restart and agree with the
/// outbox.
pub async fn saved_alerts(
    pool: &sqlx::SqlitePool,
    route: &Route,
) -> Result<Vec<crate::rules::Alert>, StateError> {
    let Some(state) = store::load(pool).await? else {
        return Ok(Vec::new());
    };
    let now = crate::timespec::Timestamp::now();
    let silences = silence_store::live(pool, now).await?;
    let mutes = mute::Mutes::new(&state, &silences, now.as_ms());
    Ok(state
        .alerts
        .iter()
        .filter(|(key, alert)| {
            matches!(alert.state, AlertState::Firing { .. })
                && route.matches(&alert.labels)
                && !mutes.of(key, alert).is_muted()
        })
        .map(|(_, alert)| alert.clone())
        .collect())
}

/// Where the alerting task keeps its state: the history database, the
/// receivers that notifications go to, and the silences.
#[derive(Debug, Clone)]
pub struct Persist {
    /// The history database.
    pub store: Store,
    /// The `[[receivers]]` and their routes (empty: no notifications).
    pub receivers: Vec<Destination>,
    /// The silences, kept in the same database.
    pub silences: Silences,
    /// History retention (which tier the notifications' history comes from).
    pub retention: Retention,
    /// The agent's external URL, for the messages' links.
    pub external_url: String,
    /// Rung after new outbox rows were committed (the dispatchers wait on it).
    pub doorbell: crate::outbox::Doorbell,
}

/// Where the alerting task keeps its state, if anywhere.
#[derive(Debug)]
pub enum Persistence {
    /// In the history database, open from the start (the saved state was
    /// restored from it).
    Now(Persist),
    /// In the history database, which could not be opened at start: the
    /// rules are evaluated in memory meanwhile (alerts show on /metrics and
    /// the API) and nothing is queued; once it opens, what was sent before
    /// is read back and the alerts firing then are notified, as after a
    /// restart whose saved state could not be read.
    Later(tokio::sync::oneshot::Receiver<Persist>),
    /// Nowhere: history is off.
    Never,
}

/// Runs until the queue closes or `shutdown` turns true.
pub async fn run(
    rules: Vec<Rule>,
    mut state: EvalState,
    persistence: Persistence,
    mut snapshots: mpsc::Receiver<Arc<Snapshot>>,
    latest: SnapshotReceiver,
    publish: watch::Sender<Arc<EvalState>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let (mut persist, mut later) = match persistence {
        Persistence::Now(p) => (Some(p), None),
        Persistence::Later(rx) => (None, Some(rx)),
        Persistence::Never => (None, None),
    };
    if let Some(p) = &persist {
        match store::seed_notified(
            &p.store.pool,
            &state,
            &p.receivers,
            crate::gpu::unix_ms(SystemTime::now()),
        )
        .await
        {
            Ok(0) => {}
            Ok(n) => {
                info!(notifications = n, "Recorded the alerts firing before this version as already sent, so the upgrade sends them no second time.")
            }
            Err(e) => {
                warn!(error = %e, "Cannot record the alerts firing before this version as sent; they may be sent again.")
            }
        }
    }
    let mut notified = match &persist {
        Some(p) => load_notified(p).await,
        None => plan::Notified::new(),
    };
    let mut groups = plan::Groups::new();
    let mut recheck = tokio::time::interval(RECHECK);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_save = tokio::time::Instant::now();
    loop {
        let snapshot = tokio::select! {
            received = snapshots.recv() => match received {
                Some(snapshot) => snapshot,
                None => break,
            },
            _ = recheck.tick() => match latest.borrow().clone() {
                Some(snapshot) => snapshot,
                None => continue,
            },
            attached = async {
                match later.as_mut() {
                    Some(rx) => rx.await,
                    None => std::future::pending().await,
                }
            }, if later.is_some() => {
                later = None;
                if let Ok(p) = attached {
                    notified = load_notified(&p).await;
                    info!("Alert state is saved in the history database again, and notifications are queued.");
                    persist = Some(p);
                }
                continue;
            }
            _ = shutdown.changed() => break,
        };
        let now = SystemTime::now();
        let (next, transitions) = evaluate(&rules, &snapshot, &state, now);
        for t in &transitions {
            log(t);
        }
        let changed = next != state;
        state = next;
        if changed {
            publish.send_replace(Arc::new(state.clone()));
        }
        let Some(p) = &persist else { continue };
        let silences = p.silences.current();
        let mutes = mute::Mutes::new(&state, &silences, crate::gpu::unix_ms(now));
        let planned = plan::plan(&state, &transitions, &p.receivers, &mutes, &notified, now);
        let (messages, changes) =
            plan::group(planned, &p.receivers, &mut groups, crate::gpu::unix_ms(now));
        for m in &messages {
            for notice in &m.notices {
                debug!(receiver = %m.receiver, alert = %notice.transition.key, reason = ?notice.reason, alerts = m.notices.len(), "Notification queued.");
            }
        }
        if !transitions.is_empty()
            || !messages.is_empty()
            || !changes.is_empty()
            || (changed && last_save.elapsed() >= SAVE_EVERY)
        {
            let details =
                details::gather(&p.store.pool, p.retention, &rules, &snapshot, &messages).await;
            let rows = message::outgoing(&messages, &p.external_url, &details);
            match store::save(&p.store.pool, &state, &transitions, &rows, &changes).await {
                Ok(()) => {
                    if !rows.is_empty() {
                        p.doorbell.ring();
                    }
                    last_save = tokio::time::Instant::now();
                    plan::apply(&mut notified, &changes);
                }
                Err(e) => {
                    warn!(error = %e, "Cannot save alert state to the history database; retrying with the next evaluation.")
                }
            }
        }
    }
    if let Some(p) = &persist {
        if let Err(e) = store::save(&p.store.pool, &state, &[], &[], &[]).await {
            warn!(error = %e, "Cannot save alert state at shutdown.");
        }
    }
}

/// What each receiver was sent, as saved in the database.
async fn load_notified(p: &Persist) -> plan::Notified {
    store::load_notified(&p.store.pool).await.unwrap_or_else(|e| {
        warn!(error = %e, "Cannot read which notifications were sent; firing alerts may be sent again.");
        plan::Notified::new()
    })
}

fn log(t: &Transition) {
    let value = t.value.map(|v| format!("{v}")).unwrap_or_default();
    let summary = t.annotations.get("summary").cloned().unwrap_or_default();
    match t.to {
        AlertState::Firing { .. } => {
            warn!(alert = %t.key, from = t.from.as_str(), value = %value, summary = %summary, "Alert firing.")
        }
        AlertState::Resolved { .. } => info!(alert = %t.key, value = %value, "Alert resolved."),
        _ => {
            info!(alert = %t.key, from = t.from.as_str(), to = t.to.as_str(), "Alert state changed.")
        }
    }
}
