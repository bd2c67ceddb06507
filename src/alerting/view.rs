//! The alerts as the API and `gpuwatch alerts` show them: state, times,
//! value, labels, annotations, fingerprint, and whether (and why) the alert
//! is silenced or inhibited.

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{json, Value};

use crate::rules::{AlertState, EvalState};

use super::mute::Mutes;
use super::silence::Silence;

/// One JSON object per alert in `state` (pending, firing, recently
/// resolved), muted by `silences` and lost GPUs at `now`.
pub fn alerts_json(state: &EvalState, silences: &[Arc<Silence>], now: SystemTime) -> Vec<Value> {
    let now_ms = crate::timespec::Timestamp::of(now).as_ms();
    let mutes = Mutes::new(state, silences, now_ms);
    state
        .alerts
        .iter()
        .map(|(key, alert)| {
            let secs = crate::gpu::unix_seconds_f64;
            let (kind, since, resolved_at) = match alert.state {
                AlertState::Pending { since } => ("pending", Some(secs(since)), None),
                AlertState::Firing { since, .. } => ("firing", Some(secs(since)), None),
                AlertState::Resolved { at } => ("resolved", None, Some(secs(at))),
                AlertState::Inactive => ("inactive", None, None),
            };
            let mute = mutes.of(key, alert);
            json!({
                "alertname": key.rule,
                "state": kind,
                "active_since": since,
                "resolved_at": resolved_at,
                "value": alert.value,
                "labels": alert.labels,
                "annotations": alert.annotations,
                "fingerprint": crate::rules::fingerprint(&alert.labels),
                "silenced": !mute.silenced_by.is_empty(),
                "silenced_by": mute.silenced_by,
                "inhibited": mute.inhibited_by.is_some(),
                "inhibited_by": mute.inhibited_by.into_iter().collect::<Vec<_>>(),
            })
        })
        .collect()
}
