//! Alert history: the stored transitions (`alert_transition`), for
//! `GET /api/v1/alerts/history` and `gpuwatch alerts`.

use std::collections::BTreeMap;

use serde::Serialize;
use sqlx::SqlitePool;

/// One stored transition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    /// When, Unix seconds.
    pub t: f64,
    /// The rule.
    pub alertname: String,
    /// The GPU's UUID, or "node".
    pub target: String,
    /// The GPU's index (its `gpu` label), for GPU alerts.
    pub gpu: Option<String>,
    /// The state before: inactive, pending, firing, resolved.
    pub from: String,
    /// The state after.
    pub to: String,
    /// The `severity` label.
    pub severity: Option<String>,
    /// The condition's value then.
    pub value: Option<f64>,
    /// All labels.
    pub labels: BTreeMap<String, String>,
    /// The annotations as rendered then.
    pub annotations: BTreeMap<String, String>,
}

type Row = (
    i64,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<f64>,
    String,
    String,
);

/// What to list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// From (ms since the Unix epoch, inclusive).
    pub from_ms: i64,
    /// To (ms since the Unix epoch, exclusive).
    pub to_ms: i64,
    /// Only this rule.
    pub alertname: Option<String>,
    /// Only this GPU: its index or UUID.
    pub gpu: Option<String>,
    /// At most this many: the newest ones.
    pub limit: i64,
}

/// The transitions that match, newest first, at most `limit`.
pub async fn transitions(pool: &SqlitePool, filter: &Filter) -> Result<Vec<Record>, sqlx::Error> {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT ts, alertname, target, from_state, to_state, severity, value, labels, annotations \
         FROM alert_transition WHERE ts >= ? AND ts < ? AND (? IS NULL OR alertname = ?) \
         AND (? IS NULL OR target = ? OR json_extract(labels, '$.gpu') = ?) \
         ORDER BY ts DESC, id DESC LIMIT ?",
    )
    .bind(filter.from_ms)
    .bind(filter.to_ms)
    .bind(&filter.alertname)
    .bind(&filter.alertname)
    .bind(&filter.gpu)
    .bind(&filter.gpu)
    .bind(&filter.gpu)
    .bind(filter.limit)
    .fetch_all(pool)
    .await?;
    let records: Vec<Record> = rows
        .into_iter()
        .map(
            |(ts, alertname, target, from, to, severity, value, labels, annotations)| {
                let labels: BTreeMap<String, String> =
                    serde_json::from_str(&labels).unwrap_or_default();
                Record {
                    t: ts as f64 / 1000.0,
                    alertname,
                    target,
                    gpu: labels.get("gpu").cloned(),
                    from,
                    to,
                    severity,
                    value,
                    labels,
                    annotations: serde_json::from_str(&annotations).unwrap_or_default(),
                }
            },
        )
        .collect();
    Ok(records)
}
