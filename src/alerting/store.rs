//! Saving and loading the rules engine's state and transitions.

use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::SqlitePool;

use crate::notify::details::Details;
use crate::rules::{EvalState, Target, Transition};

fn ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The saved state, if any.
pub async fn load(pool: &SqlitePool) -> Result<Option<EvalState>, String> {
    let text: Option<String> = sqlx::query_scalar("SELECT state FROM alert_state WHERE id = 1")
        .fetch_optional(pool)
        .await
        .map_err(|e| e.to_string())?;
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| format!("the saved alert state does not parse: {e}"))
    })
    .transpose()
}

/// Saves `state` and `transitions` in one transaction, with an outbox row
/// per (transition to firing or resolved) x receiver in `receivers`, whose
/// links point at `external_url`. `details[i]`, where given, goes into
/// transition i's messages.
pub async fn save(
    pool: &SqlitePool,
    state: &EvalState,
    transitions: &[Transition],
    details: &[Details],
    receivers: &[String],
    external_url: &str,
) -> Result<(), String> {
    let json = serde_json::to_string(state).map_err(|e| e.to_string())?;
    let mut tx = pool.begin().await.map_err(|e| e.to_string())?;
    sqlx::query(
        "INSERT INTO alert_state (id, state, updated_ms) VALUES (1, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms",
    )
    .bind(&json)
    .bind(ms(SystemTime::now()))
    .execute(&mut *tx)
    .await
    .map_err(|e| e.to_string())?;
    for (i, t) in transitions.iter().enumerate() {
        let target = match &t.key.target {
            Target::Gpu(uuid) => uuid.clone(),
            Target::Node => "node".to_string(),
        };
        sqlx::query(
            "INSERT INTO alert_transition (ts, alertname, target, from_state, to_state, severity, value, labels, annotations) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(ms(t.at))
        .bind(&t.key.rule)
        .bind(target)
        .bind(t.from.as_str())
        .bind(t.to.as_str())
        .bind(t.labels.get("severity"))
        .bind(t.value)
        .bind(serde_json::to_string(&t.labels).map_err(|e| e.to_string())?)
        .bind(serde_json::to_string(&t.annotations).map_err(|e| e.to_string())?)
        .execute(&mut *tx)
        .await
        .map_err(|e| e.to_string())?;
        let fingerprint = crate::notify::webhook::fingerprint(&t.labels);
        for receiver in receivers {
            if let Some(mut body) = crate::notify::webhook::payload(t, receiver, external_url) {
                if let Some(details) = details.get(i) {
                    crate::notify::details::attach(&mut body, details);
                }
                crate::notify::outbox::insert(
                    &mut tx,
                    receiver,
                    &fingerprint,
                    &body.to_string(),
                    ms(SystemTime::now()),
                )
                .await
                .map_err(|e| e.to_string())?;
            }
        }
    }
    tx.commit().await.map_err(|e| e.to_string())
}

/// One stored alert transition, as `/api/v1/alerts/history` shows it.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub struct StoredTransition {
    /// When, Unix seconds.
    pub t: f64,
    /// The rule.
    pub alertname: String,
    /// The GPU's UUID, or "node".
    pub target: String,
    /// State before: inactive, pending, firing or resolved.
    pub from: String,
    /// State after.
    pub to: String,
    /// The severity label, if any.
    pub severity: Option<String>,
    /// The rule's value at the transition.
    pub value: Option<f64>,
    /// The alert's labels (gpu, uuid, severity, ...).
    pub labels: serde_json::Value,
    /// Its annotations (summary, ...).
    pub annotations: serde_json::Value,
}

/// Transitions between `from_ms` and `to_ms`, newest first, at most `limit`:
/// the recent alert history.
pub async fn transitions(
    pool: &SqlitePool,
    from_ms: i64,
    to_ms: i64,
    limit: i64,
) -> Result<Vec<StoredTransition>, sqlx::Error> {
    use sqlx::Row;
    let rows = sqlx::query(
        "SELECT ts, alertname, target, from_state, to_state, severity, value, labels, annotations \
         FROM alert_transition WHERE ts >= ? AND ts < ? ORDER BY ts DESC, id DESC LIMIT ?",
    )
    .bind(from_ms)
    .bind(to_ms)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    // Labels and annotations were written by serde_json; a row that does not
    // parse (edited by hand) shows them as null rather than failing the list.
    let parse = |text: String| serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
    rows.iter()
        .map(|row| {
            Ok(StoredTransition {
                t: row.try_get::<i64, _>("ts")? as f64 / 1000.0,
                alertname: row.try_get("alertname")?,
                target: row.try_get("target")?,
                from: row.try_get("from_state")?,
                to: row.try_get("to_state")?,
                severity: row.try_get("severity")?,
                value: row.try_get("value")?,
                labels: parse(row.try_get("labels")?),
                annotations: parse(row.try_get("annotations")?),
            })
        })
        .collect()
}
