use std::time::Duration;
use std::time::UNIX_EPOCH;

use super::*;
use crate::alerting::silence::Silence;
use crate::routing::matcher::Matcher;
use crate::routing::route::Route;
use crate::rules::{Alert, AlertKey, Severity, Target};

const HOUR: Duration = Duration::from_secs(3600);

fn at(s: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
}

fn key(rule: &str, gpu: u32) -> AlertKey {
    AlertKey {
        rule: rule.into(),
        target: Target::Gpu(format!("GPU-{gpu}")),
    }
}

fn alert(rule: &str, gpu: u32, severity: &str, state: AlertState) -> (AlertKey, Alert) {
    let labels = [
        ("alertname", rule.to_string()),
        ("gpu", gpu.to_string()),
        ("uuid", format!("GPU-{gpu}")),
        ("severity", severity.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    (
        key(rule, gpu),
        Alert {
            state,
            value: Some(1.0),
            labels,
            annotations: BTreeMap::new(),
            annotated_at: None,
        },
    )
}

fn firing(since: u64) -> AlertState {
    AlertState::Firing {
        since: at(since),
        last_true: at(since),
    }
}

fn state(alerts: Vec<(AlertKey, Alert)>) -> EvalState {
    EvalState {
        alerts: alerts.into_iter().collect(),
        ..EvalState::default()
    }
}

fn dest(name: &str, route: Route) -> Destination {
    Destination {
        name: name.into(),
        route,
    }
}

/// Plans at `now` with no silences, applies the changes, returns
/// (receiver, alertname, reason) of each notice.
fn step(
    s: &EvalState,
    ds: &[Destination],
    silences: &[std::sync::Arc<Silence>],
    notified: &mut Notified,
    now: u64,
) -> Vec<(String, String, Reason)> {
    let mutes = Mutes::new(s, silences, crate::gpu::unix_ms(at(now)));
    let p = plan(s, &[], ds, &mutes, notified, at(now));
    apply(notified, &p.changes);
    p.notices
        .iter()
        .map(|n| (n.receiver.clone(), n.transition.key.rule.clone(), n.reason))
        .collect()
}

fn n(receiver: &str, rule: &str, reason: Reason) -> (String, String, Reason) {
    (receiver.into(), rule.into(), reason)
}

#[test]
fn routes_pick_receivers_by_severity_and_labels() {
    let ds = [
        dest("all", Route::default()),
        dest(
            "pager",
            Route {
                severities: vec![Severity::Critical],
                ..Route::default()
            },
        ),
        dest(
            "gpu0",
            Route {
                matchers: vec![Matcher::parse("gpu=0").unwrap()],
                ..Route::default()
            },
        ),
    ];
    let s = state(vec![
        alert("GpuHot", 0, "warning", firing(0)),
        alert("GpuLost", 1, "critical", firing(0)),
    ]);
    let mut notified = Notified::new();
    let notices = step(&s, &ds, &[], &mut notified, 1);
    assert_eq!(
        notices,
        vec![
            n("all", "GpuHot", Reason::Firing),
            n("gpu0", "GpuHot", Reason::Firing),
            n("all", "GpuLost", Reason::Firing),
            n("pager", "GpuLost", Reason::Firing),
        ]
    );
    assert_eq!(notified.len(), 4);
    // Nothing new: nothing sent.
    assert!(step(&s, &ds, &[], &mut notified, 2).is_empty());
}

#[test]
fn firing_repeats_every_interval_until_resolved_then_resolves_once() {
    let ds = [
        dest(
            "hourly",
            Route {
                repeat_interval: Some(HOUR),
                ..Route::default()
            },
        ),
        dest(
            "once",
            Route {
                repeat_interval: None,
                ..Route::default()
            },
        ),
    ];
    let mut s = state(vec![alert("GpuHot", 0, "warning", firing(0))]);
    let mut notified = Notified::new();
    assert_eq!(step(&s, &ds, &[], &mut notified, 0).len(), 2);
    assert!(step(&s, &ds, &[], &mut notified, 3599).is_empty());
    assert_eq!(
        step(&s, &ds, &[], &mut notified, 3600),
        vec![n("hourly", "GpuHot", Reason::Repeat)]
    );
    assert!(step(&s, &ds, &[], &mut notified, 7199).is_empty());
    assert_eq!(step(&s, &ds, &[], &mut notified, 7200).len(), 1);
    s.alerts.get_mut(&key("GpuHot", 0)).unwrap().state = AlertState::Resolved { at: at(8000) };
    assert_eq!(
        step(&s, &ds, &[], &mut notified, 8000),
        vec![
            n("hourly", "GpuHot", Reason::Resolved),
            n("once", "GpuHot", Reason::Resolved)
        ]
    );
    assert!(notified.is_empty());
    assert!(step(&s, &ds, &[], &mut notified, 8001).is_empty());
}

#[test]
fn muted_alerts_wait_and_go_out_once_unmuted() {
    let ds = [dest("all", Route::default())];
    let lost = alert("GpuLost", 1, "critical", firing(0));
    let xid = alert("GpuXidFatal", 1, "critical", firing(0));
    let mut s = state(vec![lost.clone(), xid.clone()]);
    let silence = Silence {
        id: 7,
        matchers: vec![Matcher::parse("alertname=GpuLost").unwrap()],
        starts_ms: crate::gpu::unix_ms(at(0)),
        ends_ms: crate::gpu::unix_ms(at(100)),
        created_by: "t".into(),
        comment: "c".into(),
        updated_ms: 0,
    };
    let silences = [std::sync::Arc::new(silence)];
    let mut notified = Notified::new();
    // GpuLost silenced, GpuXidFatal inhibited by the lost GPU.
    assert!(step(&s, &ds, &silences, &mut notified, 10).is_empty());
    // The silence ends: GpuLost goes out; the Xid stays inhibited.
    assert_eq!(
        step(&s, &ds, &silences, &mut notified, 100),
        vec![n("all", "GpuLost", Reason::Firing)]
    );
    // The GPU is back: GpuLost resolves, the Xid is no longer inhibited.
    s.alerts.get_mut(&lost.0).unwrap().state = AlertState::Resolved { at: at(200) };
    assert_eq!(
        step(&s, &ds, &silences, &mut notified, 200),
        vec![
            n("all", "GpuLost", Reason::Resolved),
            n("all", "GpuXidFatal", Reason::Firing)
        ]
    );
}

#[test]
fn a_muted_alert_that_was_sent_still_resolves_and_one_never_sent_does_not() {
    let ds = [dest("all", Route::default())];
    let mut s = state(vec![
        alert("GpuHot", 0, "warning", firing(0)),
        alert("GpuHot", 1, "warning", firing(0)),
    ]);
    let mut notified = Notified::new();
    let silence = |id, m: &str| {
        std::sync::Arc::new(Silence {
            id,
            matchers: vec![Matcher::parse(m).unwrap()],
            starts_ms: 0,
            ends_ms: crate::gpu::unix_ms(at(100_000)),
            created_by: "t".into(),
            comment: "c".into(),
            updated_ms: 0,
        })
    };
    // GPU 1 is silenced from the start; GPU 0 is sent, then silenced.
    let only1 = [silence(1, "gpu=1")];
    assert_eq!(
        step(&s, &ds, &only1, &mut notified, 1),
        vec![n("all", "GpuHot", Reason::Firing)]
    );
    let both = [silence(1, "gpu=1"), silence(2, "gpu=0")];
    // Muted alerts do not repeat.
    assert!(step(&s, &ds, &both, &mut notified, 5 * 3600).is_empty());
    for alert in s.alerts.values_mut() {
        alert.state = AlertState::Resolved { at: at(6 * 3600) };
    }
    let resolved = step(&s, &ds, &both, &mut notified, 6 * 3600);
    assert_eq!(resolved, vec![n("all", "GpuHot", Reason::Resolved)]);
}

#[test]
fn the_real_transition_is_used_and_stale_bookkeeping_is_forgotten() {
    let ds = [dest("all", Route::default())];
    let (k, mut a) = alert("GpuHot", 0, "warning", firing(0));
    let mut notified = Notified::new();
    step(
        &state(vec![(k.clone(), a.clone())]),
        &ds,
        &[],
        &mut notified,
        1,
    );
    let t = Transition {
        key: k.clone(),
        from: firing(0),
        to: AlertState::Resolved { at: at(50) },
        at: at(50),
        value: Some(2.0),
        labels: a.labels.clone(),
        annotations: BTreeMap::new(),
    };
    a.state = t.to;
    let s = state(vec![(k, a)]);
    let mutes = Mutes::new(&s, &[], 0);
    let p = plan(&s, std::slice::from_ref(&t), &ds, &mutes, &notified, at(50));
    assert_eq!(p.notices.len(), 1);
    assert_eq!(p.notices[0].transition, t, "startsAt comes from the firing");
    // A receiver that is gone, and an alert that is gone: forgotten.
    let mut stale = Notified::new();
    let sent = Sent {
        alertname: "X".into(),
        last_ms: 0,
    };
    stale.insert(("old".into(), "f1".into()), sent.clone());
    stale.insert(("all".into(), "f2".into()), sent);
    let p = plan(&EvalState::default(), &[], &ds, &mutes, &stale, at(60));
    assert!(p.notices.is_empty());
    apply(&mut stale, &p.changes);
    assert!(stale.is_empty());
}

#[test]
fn a_group_wait_holds_new_alerts_and_sends_them_in_one_message() {
    let ds = [
        dest(
            "grouped",
            Route {
                group_wait: Duration::from_secs(30),
                repeat_interval: Some(HOUR),
                ..Route::default()
            },
        ),
        dest("direct", Route::default()),
    ];
    let mut s = state(vec![alert("GpuHot", 0, "warning", firing(0))]);
    let mut notified = Notified::new();
    let mut groups = Groups::new();
    let mut round = |s: &EvalState, now: u64, notified: &mut Notified| {
        let mutes = Mutes::new(s, &[], crate::gpu::unix_ms(at(now)));
        let p = plan(s, &[], &ds, &mutes, notified, at(now));
        let (messages, changes) = group(p, &ds, &mut groups, crate::gpu::unix_ms(at(now)));
        apply(notified, &changes);
        messages
            .iter()
            .map(|m| {
                let names: Vec<String> = m
                    .notices
                    .iter()
                    .map(|n| format!("{}/{:?}", n.transition.key, n.reason))
                    .collect();
                format!("{}: {}", m.receiver, names.join(" "))
            })
            .collect::<Vec<_>>()
    };
    // The direct receiver at once; the grouped one waits.
    assert_eq!(
        round(&s, 0, &mut notified),
        vec!["direct: GpuHot/GPU-0/Firing"]
    );
    let (k, a) = alert("GpuLost", 1, "critical", firing(10));
    s.alerts.insert(k, a);
    assert_eq!(
        round(&s, 10, &mut notified),
        vec!["direct: GpuLost/GPU-1/Firing"]
    );
    assert!(round(&s, 29, &mut notified).is_empty());
    // 30 s after the first: both in one message.
    assert_eq!(
        round(&s, 30, &mut notified),
        vec!["grouped: GpuHot/GPU-0/Firing GpuLost/GPU-1/Firing"]
    );
    assert!(round(&s, 31, &mut notified).is_empty());
    // Repeats and resolved ones are not held.
    assert_eq!(
        round(&s, 3630, &mut notified),
        vec![
            "grouped: GpuHot/GPU-0/Repeat",
            "grouped: GpuLost/GPU-1/Repeat"
        ]
    );
    // An alert that resolves while held is never sent to the group.
    let (k, a) = alert("GpuMemoryPressure", 2, "warning", firing(4000));
    s.alerts.insert(k.clone(), a);
    assert_eq!(
        round(&s, 4000, &mut notified),
        vec!["direct: GpuMemoryPressure/GPU-2/Firing"]
    );
    s.alerts.get_mut(&k).unwrap().state = AlertState::Resolved { at: at(4010) };
    assert_eq!(
        round(&s, 4010, &mut notified),
        vec!["direct: GpuMemoryPressure/GPU-2/Resolved"]
    );
    assert!(round(&s, 4040, &mut notified).is_empty());
    assert!(groups.is_empty());
}
