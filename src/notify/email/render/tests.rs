use super::*;
use crate::outbox::message::ZERO_TIME;
use serde_json::json;

fn payload(status: &str, external_url: &str) -> OutboxMessage {
    let p = json!({
        "version": "4",
        "status": status,
        "receiver": "mail",
        "externalURL": external_url,
        "alerts": [{
            "status": status,
            "labels": {
                "alertname": "GpuHwThermalSlowdown",
                "severity": "warning",
                "host": "node-1",
                "gpu": "3",
                "uuid": "GPU-3333",
                "team": "<ml & infra>"
            },
            "annotations": {"summary": "GPU 3 <throttles> & \"burns\""},
            "startsAt": "2026-11-29T18:00:00.000Z",
            "endsAt": if status == "firing" { ZERO_TIME } else { "2026-11-29T18:10:00.000Z" },
            "fingerprint": "0123456789abcdef",
        }],
    });
    let mut p: OutboxMessage = serde_json::from_value(p).expect("a message");
    p.alerts[0].details = Some(Details {
        condition: Some("clock_event(hw_thermal_slowdown)".into()),
        value: Some(1.0),
        threshold: None,
        gpu_name: Some("NVIDIA H100".into()),
        metric: Some(MetricDetails {
            name: "temperature".into(),
            label: "GPU temperature".into(),
            unit: "°C".into(),
            current: Some(90.0),
            limit: Some(88.0),
            limit_name: Some("slowdown threshold".into()),
            history: Some(HistorySummary {
                from: 1_795_000_000.0,
                to: 1_795_001_800.0,
                step_seconds: 30.0,
                min: 64.0,
                avg: 72.25,
                max: 90.0,
                points: vec![Some(64.0), None, Some(80.0), Some(90.0)],
            }),
        }),
        ..Details::default()
    });
    p
}

#[test]
fn firing_subject_names_the_alert_host_gpu_and_model() {
    let r = render(&payload("firing", ""));
    assert_eq!(
        r.subject,
        "[FIRING] GpuHwThermalSlowdown on node-1 gpu 3 (NVIDIA H100)"
    );
    assert_eq!(r.fingerprint, "0123456789abcdef");
    let resolved = render(&payload("resolved", ""));
    assert!(
        resolved.subject.starts_with("[RESOLVED] "),
        "{}",
        resolved.subject
    );
    assert_ne!(r.message_id, resolved.message_id);
    assert_eq!(r.message_id, render(&payload("firing", "")).message_id);
    assert!(r
        .message_id
        .starts_with("<gpuwatch.0123456789abcdef.firing."));
    assert!(r.message_id.ends_with("@node-1>"));
}

#[test]
fn text_has_the_facts_and_the_history() {
    let r = render(&payload("firing", ""));
    for needle in [
        "Severity:    warning",
        "GPU:         3 NVIDIA H100 (GPU-3333)",
        "Condition:   clock_event(hw_thermal_slowdown)",
        "Reading:     GPU temperature: 90 °C (slowdown threshold 88 °C)",
        "Started:     2026-11-29T18:00:00.000Z",
        "team=<ml & infra>",
        "GPU temperature, last 30 min",
        "min 64 °C  avg 72.2 °C  max 90 °C",
        "▁ ▅█",
        "set server.external_url",
    ] {
        assert!(r.text.contains(needle), "{needle:?} not in\n{}", r.text);
    }
    assert!(!r.text.contains("Ended:"));
    assert!(render(&payload("resolved", ""))
        .text
        .contains("Ended:       2026-11-29T18:10:00.000Z"));
}

#[test]
fn html_escapes_everything_from_the_payload() {
    let r = render(&payload("firing", "http://node-1:9842/"));
    assert!(r
        .html
        .contains("GPU 3 &lt;throttles&gt; &amp; &quot;burns&quot;"));
    assert!(r.html.contains("team=&lt;ml &amp; infra&gt;"));
    assert!(!r.html.contains("<throttles>"));
    assert!(!r.html.contains("<ml"));
    assert!(r.html.contains("<svg"));
    assert!(r.html.contains("<polyline"));
    assert!(r
        .html
        .contains("http://node-1:9842/api/v1/history?gpu=GPU-3333&amp;metric=temperature"));
    assert!(r
        .text
        .contains("Active alerts: http://node-1:9842/api/v1/alerts"));
}

#[test]
fn without_details_the_history_section_is_left_out() {
    let mut p = payload("firing", "");
    p.alerts[0].details = None;
    let r = render(&p);
    assert_eq!(r.subject, "[FIRING] GpuHwThermalSlowdown on node-1 gpu 3");
    assert!(!r.text.contains("last 30 min"));
    assert!(!r.html.contains("<svg"));
    assert!(r.text.contains("Alert:       GpuHwThermalSlowdown"));
}

#[test]
fn numbers_read_well() {
    assert_eq!(number(90.0), "90");
    assert_eq!(number(0.95), "0.95");
    assert_eq!(with_unit(72.25, "°C"), "72.2 °C");
    assert_eq!(with_unit(45.0, "%"), "45%");
    assert_eq!(with_unit(81920.0, "MiB"), "81920 MiB");
    assert_eq!(clock(1_795_000_000.0), "11:06 UTC");
}

/// A firing Xid alert whose annotations carry `action` and
/// `xid_description`.
fn xid_payload(action: &str, description: &str) -> OutboxMessage {
    let p = json!({
        "version": "4",
        "status": "firing",
        "receiver": "mail",
        "externalURL": "",
        "alerts": [{
            "status": "firing",
            "labels": {"alertname": "GpuXidFatal", "severity": "critical", "host": "node-1", "gpu": "0"},
            "annotations": {
                "summary": "Fatal Xid 79 on GPU 0 of node-1",
                "action": action,
                "xid_description": description,
            },
            "startsAt": "2026-11-29T18:00:00.000Z",
            "endsAt": ZERO_TIME,
            "fingerprint": "0123456789abcdef",
        }],
    });
    serde_json::from_value(p).expect("a message")
}

#[test]
fn an_xid_email_says_what_to_do_first_and_what_the_xid_means() {
    let r = render(&xid_payload(
        "RESTART_BM",
        "GPU has fallen off the bus <79>",
    ));
    assert!(
        r.text.contains("What to do first: RESTART_BM\n"),
        "{}",
        r.text
    );
    assert!(r.text.contains("Action:      RESTART_BM\n"), "{}", r.text);
    assert!(
        r.text
            .contains("Xid:         GPU has fallen off the bus <79>\n"),
        "{}",
        r.text
    );
    assert!(
        r.html
            .contains("<strong>What to do first: RESTART_BM</strong>"),
        "{}",
        r.html
    );
    assert!(
        r.html.contains("GPU has fallen off the bus &lt;79&gt;"),
        "{}",
        r.html
    );
    // A code beyond the catalog: no advice rather than "n/a".
    let r = render(&xid_payload(
        "n/a",
        "not in gpuwatch's embedded Xid catalog yet",
    ));
    assert!(!r.text.contains("What to do first"), "{}", r.text);
    assert!(!r.text.contains("Action:"), "{}", r.text);
    assert!(!r.text.contains("catalog yet"), "{}", r.text);
    // Other alerts have no action line.
    let r = render(&payload("firing", ""));
    assert!(!r.text.contains("What to do first"), "{}", r.text);
}

#[test]
fn a_workload_alert_names_the_workload_and_a_gpu_alert_its_workloads() {
    let p = json!({
        "status": "firing",
        "alerts": [{
            "status": "firing",
            "labels": {
                "alertname": "GpuWorkloadIdle", "severity": "warning", "host": "node-7",
                "kind": "slurm_job", "workload": "1234", "user": "alice",
                "account": "physics", "gpus": "0,1", "team": "ml"
            },
            "annotations": {"summary": "Slurm job 1234 of alice on node-7 holds GPUs 0,1 but idles"},
            "startsAt": "2026-11-29T18:00:00.000Z",
            "endsAt": ZERO_TIME,
            "fingerprint": "0123456789abcdef",
        }],
    });
    let message: OutboxMessage = serde_json::from_value(p).expect("a message");
    let email = render(&message);
    assert_eq!(
        email.subject,
        "[FIRING] GpuWorkloadIdle on node-7 slurm_job 1234"
    );
    for line in [
        "Workload:    slurm_job 1234",
        "User:        alice",
        "Account:     physics",
        "GPUs:        0,1",
        "Labels:      team=ml",
    ] {
        assert!(email.text.contains(line), "{line:?} in\n{}", email.text);
    }
    assert!(
        !email.text.contains("kind="),
        "identity not repeated as labels"
    );

    let mut gpu_alert = payload("firing", "");
    gpu_alert.alerts[0]
        .annotations
        .insert("workloads".into(), "slurm_job 1234 (alice) +1 more".into());
    let email = render(&gpu_alert);
    assert!(
        email.text.contains("Workloads:") && email.text.contains("slurm_job 1234 (alice) +1 more"),
        "{}",
        email.text
    );
    assert!(email.html.contains("slurm_job 1234 (alice) +1 more"));
}
