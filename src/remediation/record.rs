//! Where every remediation decision goes: a log line, the metrics
//! ([`RemediationStats`], encoded by [`RemediationCollector`]), an event in
//! history (`gpuwatch events --kind remediation`) and, for actions, one
//! notification per receiver whose route takes it, through the outbox
//! (written in the event's transaction, like alert transitions).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use tracing::{info, warn};

use crate::families::{unit, Family};
use crate::gpu::unix_ms;
use crate::history::attach::Slot;
use crate::history::Store;
use crate::outbox::message::{generator_url, rfc3339, ZERO_TIME};
use crate::outbox::{Doorbell, OutboxAlert, OutboxMessage, Status};
use crate::routing::Destination;

use super::judge::Trigger;

/// How a decision ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// Dry run: what would have been done.
    Would,
    /// Done in the scheduler.
    Done,
    /// The node was someone else's to handle: not touched.
    LeftAlone,
    /// The circuit breaker stopped a drain.
    Refused,
    /// The scheduler call failed; tried again later.
    Error,
}

impl Outcome {
    /// Every outcome, for the counters' zero series.
    pub const ALL: [Outcome; 5] = [
        Outcome::Would,
        Outcome::Done,
        Outcome::LeftAlone,
        Outcome::Refused,
        Outcome::Error,
    ];

    /// The `result` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Would => "would",
            Outcome::Done => "done",
            Outcome::LeftAlone => "left_alone",
            Outcome::Refused => "refused",
            Outcome::Error => "error",
        }
    }
}

/// One decision, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// When.
    pub at: SystemTime,
    /// `drain` or `resume`.
    pub action: &'static str,
    /// How it ended.
    pub outcome: Outcome,
    /// The node.
    pub node: String,
    /// The trigger behind the drain (for a resume: the drain's).
    pub trigger: Option<Trigger>,
    /// What happened, as a sentence fragment (reason, error, who holds the
    /// node).
    pub detail: String,
    /// Whether this one goes out as a notification (one per action, not per
    /// retry).
    pub notify: bool,
}

impl Decision {
    /// The history event's text.
    pub fn text(&self) -> String {
        let node = &self.node;
        let what = match (self.outcome, self.action) {
            (Outcome::Would, a) => format!("dry-run: would {a} node {node}"),
            (Outcome::Done, "drain") => format!("drained node {node}"),
            (Outcome::Done, _) => format!("resumed node {node}"),
            (Outcome::LeftAlone, _) => format!("left node {node} alone"),
            (Outcome::Refused, a) => format!("refused to {a} node {node} (circuit breaker)"),
            (Outcome::Error, a) => format!("cannot {a} node {node}"),
        };
        if self.detail.is_empty() {
            what
        } else {
            format!("{what}: {}", self.detail)
        }
    }
}

/// The remediation metrics' current values.
#[derive(Debug, Default)]
pub struct RemediationStats {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    mode: &'static str,
    state: &'static str,
    actions: BTreeMap<(&'static str, Outcome), u64>,
    last_error: Option<SystemTime>,
    drained_nodes: Option<u64>,
}

impl RemediationStats {
    /// Stats for `mode`, state `ok`.
    pub fn new(mode: &'static str) -> RemediationStats {
        let stats = RemediationStats::default();
        if let Ok(mut i) = stats.inner.lock() {
            i.mode = mode;
            i.state = "ok";
        }
        stats
    }

    /// The state now: `ok`, `failing` (waiting, refused, left alone or in
    /// error), `drained` (by gpuwatch; in a dry run: would be).
    pub fn set_state(&self, state: &'static str) {
        if let Ok(mut i) = self.inner.lock() {
            i.state = state;
        }
    }

    /// Counts `decision`.
    pub fn count(&self, decision: &Decision) {
        if let Ok(mut i) = self.inner.lock() {
            *i.actions
                .entry((decision.action, decision.outcome))
                .or_default() += 1;
            if decision.outcome == Outcome::Error {
                i.last_error = Some(decision.at);
            }
        }
    }

    /// The nodes drained by gpuwatch, as the breaker last counted them.
    pub fn set_drained_nodes(&self, n: u64) {
        if let Ok(mut i) = self.inner.lock() {
            i.drained_nodes = Some(n);
        }
    }

    /// How often `action` ended as `outcome` (tests).
    pub fn actions(&self, action: &'static str, outcome: Outcome) -> u64 {
        self.inner
            .lock()
            .map(|i| i.actions.get(&(action, outcome)).copied().unwrap_or(0))
            .unwrap_or(0)
    }
}

/// Encodes [`RemediationStats`] as `gpuwatch_remediation_*`.
#[derive(Debug)]
pub struct RemediationCollector(pub Arc<RemediationStats>);

impl Collector for RemediationCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let Ok(i) = self.0.inner.lock() else {
            return Ok(());
        };
        let mut state = Family::gauge(
            "remediation_state",
            "Where acting on health stands (value 1): state ok, failing (a reason holds but the node is not drained by gpuwatch: waiting, refused, left alone, or a scheduler error) or drained (by gpuwatch; in dry-run mode: would be); mode off, dry-run or on.",
            None,
        );
        state.push(
            vec![("mode", i.mode.into()), ("state", i.state.into())],
            1.0,
        );
        state.encode(&mut encoder)?;
        let mut actions = Family::counter(
            "remediation_actions",
            "Remediation decisions by action (drain, resume) and result (would: dry run; done; left_alone: drained or down by someone else; refused: circuit breaker; error: the scheduler call failed).",
            None,
        );
        for action in ["drain", "resume"] {
            for outcome in Outcome::ALL {
                let n = i.actions.get(&(action, outcome)).copied().unwrap_or(0);
                actions.push(
                    vec![
                        ("action", action.into()),
                        ("result", outcome.as_str().into()),
                    ],
                    n as f64,
                );
            }
        }
        actions.encode(&mut encoder)?;
        let mut last_error = Family::gauge(
            "remediation_last_error_timestamp",
            "When a scheduler call of remediation last failed (Unix time); absent when none has.",
            unit("seconds"),
        );
        last_error.push_some(vec![], i.last_error.map(crate::gpu::unix_seconds_f64));
        last_error.encode(&mut encoder)?;
        let mut drained = Family::gauge(
            "remediation_drained_nodes",
            "Nodes of the cluster drained by gpuwatch, this one left out, as the circuit breaker last counted them; absent before the first count.",
            None,
        );
        drained.push_some(vec![], i.drained_nodes.map(|n| n as f64));
        drained.encode(&mut encoder)
    }
}

/// Where decisions are written besides the log and the metrics.
#[derive(Clone)]
pub struct Sinks {
    /// The history database (events, outbox), when history is on.
    pub store: Option<Slot<Store>>,
    /// The receivers and their routes (empty without alerting).
    pub receivers: Vec<Destination>,
    /// Rung after outbox rows are committed.
    pub doorbell: Option<Doorbell>,
    /// The agent's URL in notifications.
    pub external_url: String,
    /// The host label.
    pub host: String,
    /// `mode` label of the notifications.
    pub mode: &'static str,
}

/// Why a decision could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The database refused.
    #[error("the history database refused the remediation event: {0}")]
    Database(#[from] sqlx::Error),
    /// The message does not serialise.
    #[error("the remediation notification does not write as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl Sinks {
    /// Logs, counts and stores `decision`.
    pub async fn record(&self, stats: &RemediationStats, decision: &Decision) {
        stats.count(decision);
        let text = decision.text();
        let gpu = decision.trigger.as_ref().and_then(|t| t.gpu);
        let uuid = decision.trigger.as_ref().map(|t| t.uuid.as_str());
        match decision.outcome {
            Outcome::Error | Outcome::Refused => {
                warn!(action = decision.action, result = decision.outcome.as_str(), node = %decision.node, gpu, uuid, "Remediation: {text}.")
            }
            _ => {
                info!(action = decision.action, result = decision.outcome.as_str(), node = %decision.node, gpu, uuid, "Remediation: {text}.")
            }
        }
        let Some(store) = self.store.as_ref().and_then(|s| s.get().ok()) else {
            return;
        };
        if let Err(error) = self.store_one(&store, decision, &text).await {
            warn!(error = %error, "The remediation decision is logged and counted but not stored in history.");
        }
    }

    async fn store_one(
        &self,
        store: &Store,
        decision: &Decision,
        text: &str,
    ) -> Result<(), RecordError> {
        let messages = if decision.notify {
            self.messages(decision, text)?
        } else {
            Vec::new()
        };
        let mut tx = store.pool.begin().await?;
        let gpu_id: Option<i64> = match decision.trigger.as_ref() {
            Some(t) => {
                sqlx::query_scalar("SELECT id FROM gpu WHERE uuid = ?")
                    .bind(&t.uuid)
                    .fetch_optional(&mut *tx)
                    .await?
            }
            None => None,
        };
        sqlx::query("INSERT INTO event (ts, gpu, kind, code, value, detail) VALUES (?, ?, 'remediation', NULL, NULL, ?)")
            .bind(unix_ms(decision.at))
            .bind(gpu_id)
            .bind(text)
            .execute(&mut *tx)
            .await?;
        let now = unix_ms(SystemTime::now());
        for (receiver, fingerprint, payload) in &messages {
            crate::outbox::store::insert(&mut tx, receiver, fingerprint, payload, now).await?;
        }
        tx.commit().await?;
        if let (false, Some(bell)) = (messages.is_empty(), &self.doorbell) {
            bell.ring();
        }
        Ok(())
    }

    /// The notification for each receiver whose route takes it:
    /// (receiver, fingerprint, JSON).
    fn messages(
        &self,
        d: &Decision,
        text: &str,
    ) -> Result<Vec<(String, String, String)>, serde_json::Error> {
        let (alertname, severity, status) = match (d.outcome, d.action) {
            (Outcome::Would | Outcome::Done, "drain") => {
                ("GpuNodeDrained", "critical", Status::Firing)
            }
            (Outcome::Would | Outcome::Done, _) => ("GpuNodeDrained", "critical", Status::Resolved),
            (Outcome::Refused, _) => ("GpuRemediationRefused", "critical", Status::Firing),
            (Outcome::Error, _) => ("GpuRemediationFailed", "warning", Status::Firing),
            (Outcome::LeftAlone, _) => return Ok(Vec::new()),
        };
        let mut labels = BTreeMap::from([
            ("alertname".to_string(), alertname.to_string()),
            ("host".to_string(), self.host.clone()),
            ("node".to_string(), d.node.clone()),
            ("mode".to_string(), self.mode.to_string()),
            ("severity".to_string(), severity.to_string()),
        ]);
        if let Some(t) = &d.trigger {
            if let Some(gpu) = t.gpu {
                labels.insert("gpu".into(), gpu.to_string());
            }
            labels.insert("uuid".into(), t.uuid.clone());
            labels.insert("action".into(), t.action.to_string());
        }
        let annotations = BTreeMap::from([
            ("summary".to_string(), format!("gpuwatch {text}")),
            (
                "description".to_string(),
                format!(
                    "{text}. Remediation mode: {}. See `gpuwatch events --kind remediation` on {}.",
                    self.mode, self.host
                ),
            ),
        ]);
        let fingerprint = crate::rules::fingerprint(&labels);
        let at = rfc3339(d.at);
        let mut out = Vec::new();
        for r in self.receivers.iter().filter(|r| r.route.matches(&labels)) {
            let message = OutboxMessage {
                version: "4".into(),
                group_key: format!("{{}}:{{alertname=\"{alertname}\"}}"),
                truncated_alerts: 0,
                status,
                receiver: r.name.clone(),
                group_labels: BTreeMap::from([("alertname".to_string(), alertname.to_string())]),
                common_labels: labels.clone(),
                common_annotations: annotations.clone(),
                external_url: self.external_url.clone(),
                alerts: vec![OutboxAlert {
                    status,
                    labels: labels.clone(),
                    annotations: annotations.clone(),
                    starts_at: at.clone(),
                    ends_at: if status == Status::Resolved {
                        at.clone()
                    } else {
                        ZERO_TIME.to_string()
                    },
                    generator_url: generator_url(&self.external_url),
                    fingerprint: fingerprint.clone(),
                    details: None,
                }],
            };
            out.push((r.name.clone(), fingerprint.clone(), message.to_json()?));
        }
        Ok(out)
    }
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
