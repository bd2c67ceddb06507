//! Starting the remediation task (`[remediation]`, unless its mode is off)
//! with what it records into: the history database, the outbox's receivers
//! and doorbell, and its metrics on /metrics.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{RemediationConfig, RemediationMode};
use crate::exporter::Exporter;
use crate::health::escalation::EscalationSource;
use crate::history::attach::Slot;
use crate::history::Store;
use crate::panics::{spawn_supervised, Panics};
use crate::remediation::{record, slurm::Slurm, Remediation};
use crate::sampler::SnapshotReceiver;

/// What the agent hands the remediation task.
pub(super) struct Wiring {
    /// The history database, when history is on.
    pub(super) store: Option<Slot<Store>>,
    /// The receivers' routes and the outbox's doorbell, when alerting runs.
    pub(super) outbox: Option<(Vec<crate::routing::Destination>, crate::outbox::Doorbell)>,
    /// The alert state (for the Xid escalations the verdict follows).
    pub(super) alerts: Option<crate::alerting::AlertsReceiver>,
    /// The agent's URL in notifications.
    pub(super) external_url: String,
    /// The host label of notifications.
    pub(super) hostname: String,
}

/// Adds the remediation metrics to `exporter` and spawns the task; `None`
/// when the mode is off.
pub(super) fn start(
    config: &RemediationConfig,
    wiring: Wiring,
    snapshots: SnapshotReceiver,
    panics: &Arc<Panics>,
    shutdown: &watch::Receiver<bool>,
    exporter: &mut Exporter,
) -> Option<JoinHandle<()>> {
    if config.mode == RemediationMode::Off {
        return None;
    }
    let mode = config.mode.as_str();
    let stats = Arc::new(record::RemediationStats::new(mode));
    exporter.add(Box::new(record::RemediationCollector(stats.clone())));
    let escalations = match wiring.alerts {
        Some(alerts) => EscalationSource::new(move || alerts.borrow().xid_escalations()),
        None => EscalationSource::none(),
    };
    let (receivers, doorbell) = match wiring.outbox {
        Some((receivers, doorbell)) => (receivers, Some(doorbell)),
        None => (Vec::new(), None),
    };
    let sinks = record::Sinks {
        store: wiring.store,
        receivers,
        doorbell,
        external_url: wiring.external_url,
        host: wiring.hostname,
        mode,
    };
    let remediation = Remediation::new(
        Slurm::new(config.slurm.clone()),
        config.clone(),
        sinks,
        stats,
    );
    Some(spawn_supervised(
        "remediation",
        panics,
        crate::remediation::run(remediation, snapshots, escalations, shutdown.clone()),
    ))
}
