//! Saving and loading the rules engine's state and transitions.

use std::time::SystemTime;

use sqlx::SqlitePool;

use crate::rules::{AlertState, EvalState, Transition};

use super::plan::{Change, Notified, Sent};
use crate::routing::Destination;

/// Why the alert state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The database refused (full, read-only, locked, gone).
    #[error("the history database refused: {0}")]
    Database(#[from] sqlx::Error),
    /// The saved state, or a transition's labels, do not read or write as
    /// JSON.
    #[error("the alert state does not read or write as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The saved state, if any (the agent's, or for `gpuwatch alerts`).
pub async fn load(pool: &SqlitePool) -> Result<Option<EvalState>, StateError> {
    let text: Option<String> = sqlx::query_scalar("SELECT state FROM alert_state WHERE id = 1")
        .fetch_optional(pool)
        .await?;
    text.map(|t| serde_json::from_str(&t).map_err(StateError::from))
        .transpose()
}

/// What each receiver was sent, as stored.
pub async fn load_notified(pool: &SqlitePool) -> Result<Notified, StateError> {
    let rows: Vec<(String, String, String, i64)> =
        sqlx::query_as("SELECT receiver, fingerprint, alertname, last_ms FROM alert_notified")
            .fetch_all(pool)
            .await?;
    Ok(rows
        .into_iter()
        .map(|(receiver, fingerprint, alertname, last_ms)| {
            ((receiver, fingerprint), Sent { alertname, last_ms })
        })
        .collect())
}

/// Once per database (while `alert_notified_seed` has its row): records
/// the alerts firing in `state` as sent, now, to each receiver whose route
/// takes them, as the version before routing did send them; then removes
/// the row. Returns how many were recorded.
pub async fn seed_notified(
    pool: &SqlitePool,
    state: &EvalState,
    receivers: &[Destination],
    now_ms: i64,
) -> Result<usize, StateError> {
    let mut tx = pool.begin().await?;
    let pending = sqlx::query("DELETE FROM alert_notified_seed")
        .execute(&mut *tx)
        .await?
        .rows_affected();
    let mut recorded = 0;
    if pending > 0 {
        for (key, alert) in &state.alerts {
            if !matches!(alert.state, AlertState::Firing { .. }) {
                continue;
            }
            let fingerprint = crate::rules::fingerprint(&alert.labels);
            for d in receivers.iter().filter(|d| d.route.matches(&alert.labels)) {
                sqlx::query(
                    "INSERT OR IGNORE INTO alert_notified (receiver, fingerprint, alertname, last_ms) VALUES (?, ?, ?, ?)",
                )
                .bind(&d.name)
                .bind(&fingerprint)
                .bind(&key.rule)
                .bind(now_ms)
                .execute(&mut *tx)
                .await
                ?;
                recorded += 1;
            }
        }
    }
    tx.commit().await?;
    Ok(recorded)
}

/// One outbox row to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    /// The receiver.
    pub receiver: String,
    /// The dedup key: the alert's fingerprint.
    pub fingerprint: String,
    /// The body, JSON.
    pub payload: String,
}

/// Saves `state` and `transitions` in one transaction, with the outbox rows
/// and the changes to what each receiver was sent ([`Change`]), so that a
/// crash keeps all of them or none.
pub async fn save(
    pool: &SqlitePool,
    state: &EvalState,
    transitions: &[Transition],
    outgoing: &[Outgoing],
    changes: &[Change],
) -> Result<(), StateError> {
    let json = serde_json::to_string(state)?;
    let mut tx = pool.begin().await?;
    sqlx::query(
        "INSERT INTO alert_state (id, state, updated_ms) VALUES (1, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms",
    )
    .bind(&json)
    .bind(crate::gpu::unix_ms(SystemTime::now()))
    .execute(&mut *tx)
    .await?;
    for t in transitions {
        let target = t.key.target.as_text();
        sqlx::query(
            "INSERT INTO alert_transition (ts, alertname, target, from_state, to_state, severity, value, labels, annotations) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(crate::gpu::unix_ms(t.at))
        .bind(&t.key.rule)
        .bind(target)
        .bind(t.from.as_str())
        .bind(t.to.as_str())
        .bind(t.labels.get("severity"))
        .bind(t.value)
        .bind(serde_json::to_string(&t.labels)?)
        .bind(serde_json::to_string(&t.annotations)?)
        .execute(&mut *tx)
        .await
        ?;
    }
    for row in outgoing {
        crate::outbox::store::insert(
            &mut tx,
            &row.receiver,
            &row.fingerprint,
            &row.payload,
            crate::gpu::unix_ms(SystemTime::now()),
        )
        .await?;
    }
    for change in changes {
        match change {
            Change::Sent {
                receiver,
                fingerprint,
                sent,
            } => sqlx::query(
                "INSERT INTO alert_notified (receiver, fingerprint, alertname, last_ms) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (receiver, fingerprint) DO UPDATE SET alertname = excluded.alertname, last_ms = excluded.last_ms",
            )
            .bind(receiver)
            .bind(fingerprint)
            .bind(&sent.alertname)
            .bind(sent.last_ms),
            Change::Forget {
                receiver,
                fingerprint,
            } => sqlx::query("DELETE FROM alert_notified WHERE receiver = ? AND fingerprint = ?")
                .bind(receiver)
                .bind(fingerprint),
        }
        .execute(&mut *tx)
        .await
        ?;
    }
    Ok(tx.commit().await?)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::history::{Durability, Store};
    use crate::routing::matcher::Matcher;
    use crate::routing::route::Route;
    use crate::rules::{Alert, AlertKey, Target};

    fn alert(rule: &str, state: AlertState) -> (AlertKey, Alert) {
        let labels: BTreeMap<String, String> = [("alertname", rule), ("gpu", "1")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        (
            AlertKey {
                rule: rule.into(),
                target: Target::Gpu("GPU-1".into()),
            },
            Alert {
                state,
                value: None,
                labels,
                annotations: BTreeMap::new(),
                annotated_at: None,
            },
        )
    }

    #[tokio::test]
    async fn alerts_firing_at_the_upgrade_count_as_sent_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open_for_writing(&dir.path().join("h.db"), Durability::Normal)
            .await
            .expect("open");
        let t = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let state = EvalState {
            alerts: [
                alert(
                    "GpuLost",
                    AlertState::Firing {
                        since: t,
                        last_true: t,
                    },
                ),
                alert("GpuHot", AlertState::Pending { since: t }),
            ]
            .into_iter()
            .collect(),
            ..EvalState::default()
        };
        let receivers = [
            Destination {
                name: "all".into(),
                route: Route::default(),
            },
            Destination {
                name: "other".into(),
                route: Route {
                    matchers: vec![Matcher::parse("alertname=GpuHot").unwrap()],
                    ..Route::default()
                },
            },
        ];
        assert_eq!(
            seed_notified(&store.pool, &state, &receivers, 5)
                .await
                .expect("seeded"),
            1
        );
        let notified = load_notified(&store.pool).await.expect("load");
        let fingerprint = crate::rules::fingerprint(&state.alerts.values().next().unwrap().labels);
        let fingerprint_lost = crate::rules::fingerprint(
            &state.alerts[&alert("GpuLost", AlertState::Inactive).0].labels,
        );
        assert_ne!(fingerprint, fingerprint_lost);
        assert_eq!(
            notified.get(&("all".to_string(), fingerprint_lost)),
            Some(&Sent {
                alertname: "GpuLost".into(),
                last_ms: 5
            })
        );
        assert_eq!(notified.len(), 1, "{notified:?}");
        // Only once per database.
        assert_eq!(
            seed_notified(&store.pool, &state, &receivers, 6)
                .await
                .expect("seeded"),
            0
        );
        assert_eq!(load_notified(&store.pool).await.expect("load").len(), 1);
    }

    #[tokio::test]
    async fn the_alertmanager_resend_leaves_out_routed_away_silenced_and_inhibited_alerts() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open_for_writing(&dir.path().join("h.db"), Durability::Normal)
            .await
            .expect("open");
        let now = std::time::SystemTime::now();
        let firing = AlertState::Firing {
            since: now,
            last_true: now,
        };
        let on = |rule: &str, gpu: &str, severity: &str| {
            let labels: BTreeMap<String, String> =
                [("alertname", rule), ("gpu", gpu), ("severity", severity)]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
            (
                AlertKey {
                    rule: rule.into(),
                    target: Target::Gpu(format!("GPU-{gpu}")),
                },
                Alert {
                    state: firing,
                    value: None,
                    labels,
                    annotations: BTreeMap::new(),
                    annotated_at: None,
                },
            )
        };
        let state = EvalState {
            alerts: [
                on("GpuLost", "1", "critical"),
                on("GpuXidFatal", "1", "critical"),
                on("GpuHot", "2", "critical"),
                on("GpuHot", "3", "critical"),
                on("GpuMemoryPressure", "3", "warning"),
            ]
            .into_iter()
            .collect(),
            ..EvalState::default()
        };
        save(&store.pool, &state, &[], &[], &[])
            .await
            .expect("save");
        let silences = crate::alerting::Silences::open(
            store.pool.clone(),
            crate::timespec::Timestamp::EARLIEST,
        )
        .await
        .expect("silences");
        let now_ms = crate::gpu::now_ms();
        let new = crate::alerting::silence::NewSilence {
            matchers: vec![Matcher::parse("gpu=2").unwrap()],
            starts_ms: now_ms - 1000,
            ends_ms: now_ms + 3_600_000,
            created_by: "t".into(),
            comment: "c".into(),
        };
        silences
            .add(new, crate::timespec::Timestamp::clamped(now_ms))
            .await
            .expect("add");
        let route = Route {
            severities: vec![crate::rules::Severity::Critical],
            ..Route::default()
        };
        let alerts = crate::alerting::saved_alerts(&store.pool, &route)
            .await
            .expect("alerts");
        let names: Vec<String> = alerts
            .iter()
            .map(|a| format!("{}/{}", a.labels["alertname"], a.labels["gpu"]))
            .collect();
        // GpuXidFatal/1 inhibited, GpuHot/2 silenced, the warning routed away.
        assert_eq!(names, vec!["GpuHot/3", "GpuLost/1"]);
    }
}
