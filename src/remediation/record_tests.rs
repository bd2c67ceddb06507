//! Decisions recorded into a real SQLite history and outbox.

use std::time::Duration;

use super::*;
use crate::history::Durability;
use crate::routing::route::Route;
use crate::rules::Severity;

fn decision(action: &'static str, outcome: Outcome) -> Decision {
    Decision {
        at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        action,
        outcome,
        node: "gpu-01".into(),
        trigger: Some(Trigger {
            gpu: Some(3),
            uuid: "GPU-3".into(),
            action: "RESET_GPU",
            source: "recovery_action",
            text: "the driver asks for a recovery action: gpu_reset".into(),
        }),
        detail: "gpuwatch: GPU 3 GPU-3 needs RESET_GPU (x)".into(),
        notify: outcome != Outcome::LeftAlone,
    }
}

#[tokio::test]
async fn each_decision_is_an_event_and_each_action_one_notification_per_routed_receiver() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open_for_writing(&dir.path().join("h.db"), Durability::Normal)
        .await
        .expect("open");
    let warnings_only = Route {
        severities: vec![Severity::Warning],
        ..Route::default()
    };
    let doorbell = Doorbell::default();
    let mut heard = doorbell.listener();
    let sinks = Sinks {
        store: Some(Slot::ready(store.clone())),
        receivers: vec![
            Destination {
                name: "ops".into(),
                route: Route::default(),
            },
            Destination {
                name: "warnings".into(),
                route: warnings_only,
            },
        ],
        doorbell: Some(doorbell),
        external_url: "http://gpu-01:9842".into(),
        host: "gpu-01".into(),
        mode: "on",
    };
    let stats = RemediationStats::new("on");
    sinks
        .record(&stats, &decision("drain", Outcome::Done))
        .await;
    tokio::time::timeout(Duration::from_secs(1), heard.rung())
        .await
        .expect("the doorbell rang");
    sinks
        .record(&stats, &decision("drain", Outcome::LeftAlone))
        .await;
    sinks
        .record(&stats, &decision("resume", Outcome::Done))
        .await;
    let events: Vec<(String, String)> =
        sqlx::query_as("SELECT kind, detail FROM event WHERE kind = 'remediation' ORDER BY id")
            .fetch_all(&store.pool)
            .await
            .expect("events");
    let texts: Vec<&str> = events.iter().map(|(_, d)| d.as_str()).collect();
    assert_eq!(
        texts,
        [
            "drained node gpu-01: gpuwatch: GPU 3 GPU-3 needs RESET_GPU (x)",
            "left node gpu-01 alone: gpuwatch: GPU 3 GPU-3 needs RESET_GPU (x)",
            "resumed node gpu-01: gpuwatch: GPU 3 GPU-3 needs RESET_GPU (x)",
        ]
    );
    // The drain and the resume went to "ops" (critical is not for
    // "warnings"); leaving a node alone is no notification.
    let rows: Vec<(String, String, String)> =
        sqlx::query_as("SELECT receiver, fingerprint, payload FROM outbox ORDER BY id")
            .fetch_all(&store.pool)
            .await
            .expect("outbox");
    assert_eq!(rows.len(), 2, "{rows:?}");
    let drained = OutboxMessage::parse(&rows[0].2).expect("message");
    let resumed = OutboxMessage::parse(&rows[1].2).expect("message");
    assert!(rows.iter().all(|r| r.0 == "ops"));
    assert_eq!(
        rows[0].1, rows[1].1,
        "the resume resolves the drain's alert"
    );
    assert_eq!(
        (drained.status, resumed.status),
        (Status::Firing, Status::Resolved)
    );
    let labels = &drained.alerts[0].labels;
    for (k, v) in [
        ("alertname", "GpuNodeDrained"),
        ("node", "gpu-01"),
        ("gpu", "3"),
        ("uuid", "GPU-3"),
        ("action", "RESET_GPU"),
        ("mode", "on"),
        ("severity", "critical"),
    ] {
        assert_eq!(labels.get(k).map(String::as_str), Some(v), "{labels:?}");
    }
    // A scheduler error is a warning: both receivers get it.
    sinks
        .record(&stats, &decision("drain", Outcome::Error))
        .await;
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM outbox")
        .fetch_one(&store.pool)
        .await
        .expect("count");
    assert_eq!(n, 4);
    assert_eq!(stats.actions("drain", Outcome::Error), 1);
}
