//! `GET /api/v1/health`: per GPU the health verdict (healthy, degraded,
//! unhealthy) with its reasons, their sources and what to do, and the
//! node's hardware facts (GPUs on the PCI bus missing from the driver, the
//! kernel log). One endpoint a scheduler or node-problem-detector can read
//! to cordon the node.

use serde_json::{json, Value};

use crate::gpu::unix_seconds_f64;
use crate::health::escalation::Escalated;
use crate::health::verdict::{judge, node_state};

use super::HttpState;

/// The document, from the latest snapshot (`gpus` empty before the first).
pub fn document(state: &HttpState) -> Value {
    let Some(snapshot) = state.snapshots.borrow().clone() else {
        return json!({ "taken_at": null, "state": null, "gpus": [], "node": null });
    };
    let missing = snapshot.missing_from_driver();
    let escalated = escalations(state);
    let gpus: Vec<Value> = snapshot
        .gpus
        .iter()
        .map(|gpu| {
            let v = judge(&snapshot, gpu, &escalated);
            json!({
                "gpu": gpu.index,
                "uuid": gpu.uuid,
                "state": v.state,
                "reasons": v.reasons,
            })
        })
        .collect();
    let worst = node_state(&snapshot, &escalated);
    let health = &snapshot.collection.health;
    json!({
        "taken_at": unix_seconds_f64(snapshot.taken_at),
        "hostname": snapshot.hostname,
        "state": worst,
        "node": {
            "pci_gpus": health.pci_gpus.as_ref().map(|g| g.len()),
            "missing_from_driver": missing,
            "kernel_log_up": health.kernel_log_up,
        },
        "gpus": gpus,
    })
}

/// The Xid escalations of the alert state (none without rules).
pub fn escalations(state: &HttpState) -> Escalated {
    state
        .alerts
        .as_ref()
        .map(|alerts| alerts.borrow().xid_escalations())
        .unwrap_or_default()
}
