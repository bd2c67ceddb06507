//! The readers of health agree: `/metrics` (`gpuwatch_gpu_health`),
//! `/api/v1/health`, `/api/v1/gpus`, `gpuwatch status` and remediation's
//! triggers give each GPU the same state, judged as of the snapshot (not the
//! wall clock) and with the Xid escalations — also when the snapshot is old.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use crate::exporter::{Exporter, Format};
use crate::gpu::{testing, GpuSnapshot, Snapshot, XidCount};
use crate::health::escalation::{Escalated, EscalationSource};
use crate::rules::{Alert, AlertKey, AlertState, EvalState, Target};

use super::HttpState;

/// When the snapshot was taken: long ago, so that a reader judging by the
/// wall clock would see every Xid outside its 30-minute window.
fn taken_at() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// GPU 0: an application Xid 10 minutes before the snapshot (degraded);
/// GPU 1: an Xid that came back after resets (escalated: unhealthy);
/// GPU 2: nothing wrong.
fn snapshot() -> Snapshot {
    let xid = GpuSnapshot {
        xid_errors: Arc::new(vec![XidCount {
            code: 13,
            count: 1,
            last_seen: taken_at() - Duration::from_secs(600),
        }]),
        ..testing::gpu(0)
    };
    testing::snapshot(taken_at(), vec![xid, testing::gpu(1), testing::gpu(2)])
}

/// The alert state with `GpuXidRecurring` firing for Xid 79 on GPU 1.
fn alerts() -> EvalState {
    let mut state = EvalState::default();
    state.alerts.insert(
        AlertKey {
            rule: "GpuXidRecurring".into(),
            target: Target::Gpu("GPU-1".into()),
        },
        Alert {
            state: AlertState::Firing {
                since: taken_at(),
                last_true: taken_at(),
            },
            value: Some(79.0),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            annotated_at: None,
        },
    );
    state
}

const EXPECTED: [&str; 3] = ["degraded", "unhealthy", "healthy"];

fn http_state(snapshot: Snapshot, escalated: Escalated) -> HttpState {
    let (_snapshot_tx, snapshots) = watch::channel(Some(Arc::new(snapshot)));
    let (_alerts_tx, alerts) = watch::channel(Arc::new(alerts()));
    // Never stale: the point is a snapshot older than any Xid window.
    let mut exporter = Exporter::new(snapshots.clone(), Duration::from_secs(u32::MAX as u64));
    exporter.set_escalations(EscalationSource::new(move || escalated.clone()));
    HttpState {
        exporter,
        snapshots,
        stale_after: Duration::from_secs(u32::MAX as u64),
        progress: Default::default(),
        history: None,
        alerts: Some(alerts),
        silences: None,
        panics: Default::default(),
    }
}

/// The state `/metrics` sets to 1 for GPU `index`.
fn metrics_state(text: &str, index: usize) -> String {
    let gpu = format!("gpu=\"{index}\"");
    let line = text
        .lines()
        .find(|l| l.starts_with("gpuwatch_gpu_health{") && l.contains(&gpu) && l.ends_with(" 1.0"))
        .unwrap_or_else(|| panic!("no gpuwatch_gpu_health at 1 for GPU {index} in:\n{text}"));
    let start = line.find("state=\"").expect("a state label") + 7;
    let end = line[start..].find('"').expect("closing quote") + start;
    line[start..end].to_string()
}

#[test]
fn every_reader_judges_health_alike_from_the_snapshot_and_its_escalations() {
    let escalated = alerts().xid_escalations();
    assert_eq!(escalated, BTreeMap::from([("GPU-1".into(), vec![79])]));
    let state = http_state(snapshot(), escalated.clone());

    let metrics = state.exporter.render(Format::Prometheus).expect("renders");
    let health = super::health_api::document(&state);
    let gpus = super::gpus::document(&state);
    let status = crate::status::render(&snapshot(), &escalated);
    let status_lines: Vec<&str> = status
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("health: "))
        .collect();
    let remediation = crate::remediation::judge::triggers(
        &snapshot(),
        &escalated,
        &crate::config::RemediationConfig {
            degraded: true,
            actions: crate::config::remediation::ACTIONS
                .iter()
                .map(|a| a.to_string())
                .collect(),
            ..Default::default()
        },
    );
    for (index, expected) in EXPECTED.iter().enumerate() {
        assert_eq!(
            metrics_state(&metrics, index),
            *expected,
            "/metrics, GPU {index}"
        );
        assert_eq!(
            health["gpus"][index]["state"], *expected,
            "/api/v1/health, GPU {index}"
        );
        assert_eq!(
            gpus["gpus"][index]["health"]["state"], *expected,
            "/api/v1/gpus, GPU {index}"
        );
        assert!(
            status_lines[index].starts_with(expected),
            "gpuwatch status, GPU {index}: {}",
            status_lines[index]
        );
        let acted = remediation.iter().any(|t| t.gpu == Some(index as u32));
        assert_eq!(
            acted,
            *expected != "healthy",
            "remediation, GPU {index}: {remediation:?}"
        );
    }
    assert_eq!(health["state"], "unhealthy", "the node is its worst GPU");
}
