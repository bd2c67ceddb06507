//! The alerting task: evaluates the rules (see [`crate::rules`]) on every
//! snapshot, and on a timer so a stalled sampler is noticed; persists the
//! evaluation state with each transition in one SQLite transaction, so a
//! restart neither loses nor repeats an alert; publishes the state for
//! `gpuwatch_alerts` and `/api/v1/alerts`.
//!
//! Each transition to firing or resolved also gets an outbox row per
//! receiver in that transaction; [`crate::notify`] delivers them.

mod metrics;
mod store;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::gpu::Snapshot;
use crate::history::{Retention, Store};
use crate::notify::details;
use crate::rules::{evaluate, AlertState, EvalState, Rule, Transition};
use crate::sampler::SnapshotReceiver;

pub use metrics::AlertsCollector;
pub use store::{transitions, StoredTransition};

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

/// The alerts of the state saved in the database (pending, firing and
/// recently resolved): what the Alertmanager receiver re-sends from, so
/// that its re-sends survive a restart and agree with the outbox.
pub async fn saved_alerts(pool: &sqlx::SqlitePool) -> Result<Vec<crate::rules::Alert>, String> {
    Ok(store::load(pool)
        .await?
        .map(|state| state.alerts.into_values().collect())
        .unwrap_or_default())
}

/// Where the alerting task keeps its state: the history database, and the
/// receivers whose outbox rows each transition adds.
#[derive(Debug, Clone)]
pub struct Persist {
    /// The history database.
    pub store: Store,
    /// The `[[receivers]]` names (empty: no notifications).
    pub receivers: Vec<String>,
    /// History retention (which tier the notifications' history comes from).
    pub retention: Retention,
    /// The agent's external URL, for the messages' links.
    pub external_url: String,
}

/// Runs until the queue closes or `shutdown` turns true.
pub async fn run(
    rules: Vec<Rule>,
    mut state: EvalState,
    persist: Option<Persist>,
    mut snapshots: mpsc::Receiver<Arc<Snapshot>>,
    latest: SnapshotReceiver,
    publish: watch::Sender<Arc<EvalState>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let receivers = persist
        .as_ref()
        .map(|p| p.receivers.clone())
        .unwrap_or_default();
    let retention = persist.as_ref().map(|p| p.retention).unwrap_or_default();
    let external_url = persist
        .as_ref()
        .map(|p| p.external_url.clone())
        .unwrap_or_default();
    let store = persist.map(|p| p.store);
    let mut recheck = tokio::time::interval(RECHECK);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_save = std::time::Instant::now();
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
            _ = shutdown.changed() => break,
        };
        let (next, transitions) = evaluate(&rules, &snapshot, &state, SystemTime::now());
        for t in &transitions {
            log(t);
        }
        let changed = next != state;
        state = next;
        if changed {
            publish.send_replace(Arc::new(state.clone()));
        }
        if let Some(store) = &store {
            if !transitions.is_empty() || (changed && last_save.elapsed() >= SAVE_EVERY) {
                let details = if receivers.is_empty() {
                    Vec::new()
                } else {
                    gather(&store.pool, retention, &rules, &snapshot, &transitions).await
                };
                match store::save(
                    &store.pool,
                    &state,
                    &transitions,
                    &details,
                    &receivers,
                    &external_url,
                )
                .await
                {
                    Ok(()) => last_save = std::time::Instant::now(),
                    Err(e) => {
                        warn!(error = %e, "Cannot save alert state to the history database; retrying with the next change.")
                    }
                }
            }
        }
    }
    if let Some(store) = &store {
        if let Err(e) = store::save(&store.pool, &state, &[], &[], &[], "").await {
            warn!(error = %e, "Cannot save alert state at shutdown.");
        }
    }
}

/// What the notifications of `transitions` say beyond labels and
/// annotations (value, threshold, GPU name, the reading's recent history),
/// one per transition; only notified transitions get a history query.
async fn gather(
    pool: &sqlx::SqlitePool,
    retention: Retention,
    rules: &[Rule],
    snapshot: &Snapshot,
    transitions: &[Transition],
) -> Vec<details::Details> {
    let mut all = Vec::with_capacity(transitions.len());
    for t in transitions {
        let rule = rules.iter().find(|r| r.name == t.key.rule);
        let mut d = details::describe(rule, snapshot, t);
        if matches!(
            t.to,
            AlertState::Firing { .. } | AlertState::Resolved { .. }
        ) {
            details::add_history(pool, retention, t, &mut d).await;
        }
        all.push(d);
    }
    all
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
