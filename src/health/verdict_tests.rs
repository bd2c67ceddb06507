//! Tests of the health verdict.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::gpu::links::{LinkHealth, NvLinkState};
use crate::gpu::{testing, GpuIdentity, SlowReadings, XidCount};

fn gpu(health: SlowReadings, xid: Vec<XidCount>) -> GpuSnapshot {
    GpuSnapshot {
        identity: Arc::new(GpuIdentity::default()),
        health: Arc::new(health),
        xid_errors: Arc::new(xid),
        ..testing::gpu(0)
    }
}

fn xid(code: u64, at: SystemTime) -> XidCount {
    XidCount {
        code,
        count: 1,
        last_seen: at,
    }
}

#[test]
fn each_signal_maps_to_its_state() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
    let healthy = verdict(&gpu(SlowReadings::default(), vec![]), now);
    assert_eq!((healthy.state, healthy.reasons.len()), (State::Healthy, 0));

    let pending = SlowReadings {
        remapped_rows_pending: Some(true),
        ..SlowReadings::default()
    };
    assert_eq!(verdict(&gpu(pending, vec![]), now).state, State::Degraded);

    // Xid 13 (catalog: RESTART_APP) degrades; Xid 79 (reset class) is
    // unhealthy; both only for 30 minutes.
    let v = verdict(&gpu(SlowReadings::default(), vec![xid(13, now)]), now);
    assert_eq!(v.state, State::Degraded);
    assert_eq!(v.reasons[0].action, "RESTART_APP");
    assert_eq!(v.reasons[0].class, ActionClass::RestartApp);
    let v = verdict(&gpu(SlowReadings::default(), vec![xid(79, now)]), now);
    assert_eq!(v.state, State::Unhealthy);
    let old = now - XID_WINDOW - Duration::from_secs(1);
    let v = verdict(&gpu(SlowReadings::default(), vec![xid(79, old)]), now);
    assert_eq!(v.state, State::Healthy);

    let links = SlowReadings {
        links: LinkHealth {
            nvlink: vec![NvLinkState {
                link: 3,
                up: false,
                errors: BTreeMap::new(),
            }],
            recovery_action: Some("gpu_reset"),
            recovery_action_value: Some(1),
        },
        remapped_rows_pending: Some(true),
        ..SlowReadings::default()
    };
    let v = verdict(&gpu(links, vec![]), now);
    assert_eq!(v.state, State::Unhealthy);
    let sources: Vec<_> = v.reasons.iter().map(|r| (r.state, r.source)).collect();
    assert_eq!(
        sources,
        [
            (State::Unhealthy, "recovery_action"),
            (State::Unhealthy, "nvlink"),
            (State::Degraded, "ecc")
        ]
    );
    assert_eq!(v.reasons[0].action, "gpu_reset");
    let classes: Vec<_> = v.reasons.iter().map(|r| r.class).collect();
    assert_eq!(
        classes,
        [
            ActionClass::ResetGpu,
            ActionClass::WorkflowNvlink,
            ActionClass::ResetGpu
        ]
    );

    let mut lost = gpu(SlowReadings::default(), vec![]);
    lost.status = GpuStatus::Lost {
        reason: "gpu_lost".into(),
    };
    assert_eq!(verdict(&lost, now).state, State::Unhealthy);
    assert_eq!(
        verdict(&lost, now).reasons[0].class,
        ActionClass::GpuMissing
    );

    let failed_remap = SlowReadings {
        remapped_rows_failure: Some(true),
        retired_pages_pending: Some(true),
        ..SlowReadings::default()
    };
    let classes: Vec<_> = verdict(&gpu(failed_remap, vec![]), now)
        .reasons
        .iter()
        .map(|r| (r.state, r.class))
        .collect();
    assert_eq!(
        classes,
        [
            (State::Unhealthy, ActionClass::InspectHardware),
            (State::Degraded, ActionClass::RebootSystem)
        ]
    );
}

#[test]
fn an_xid_is_classed_by_its_catalog_action() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
    // Xid 48 (double-bit ECC) names NVIDIA's workflow, which starts with a
    // reset; a code whose row says RESTART_BM asks for a reboot.
    let v = verdict(&gpu(SlowReadings::default(), vec![xid(48, now)]), now);
    assert_eq!(v.reasons[0].action, "WORKFLOW_XID_48");
    assert_eq!(
        (v.state, v.reasons[0].class),
        (State::Unhealthy, ActionClass::ResetGpu)
    );
    let reboot = (1..=200)
        .find(|code| {
            crate::health::catalog::lookup(*code)
                .is_some_and(|i| i.action == crate::health::catalog::Action::RestartBm)
        })
        .expect("the catalog has a RESTART_BM row");
    let v = verdict(&gpu(SlowReadings::default(), vec![xid(reboot, now)]), now);
    assert_eq!(v.reasons[0].class, ActionClass::RebootSystem);
    let unknown = verdict(&gpu(SlowReadings::default(), vec![xid(100_000, now)]), now);
    assert_eq!(unknown.reasons[0].class, ActionClass::Other);
}

#[test]
fn an_escalated_xid_makes_the_gpu_unhealthy_and_asks_for_inspection() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let v = with_escalations(verdict(&gpu(SlowReadings::default(), vec![]), now), &[79]);
    assert_eq!(v.state, State::Unhealthy);
    assert_eq!(v.reasons.len(), 1);
    assert_eq!(v.reasons[0].source, "xid");
    assert!(v.reasons[0].text.contains("Xid 79"), "{:?}", v.reasons);
    assert!(v.reasons[0].action.starts_with("INSPECT_HARDWARE"));
    assert_eq!(v.reasons[0].class, ActionClass::InspectHardware);
    let plain = verdict(&gpu(SlowReadings::default(), vec![]), now);
    assert_eq!(
        with_escalations(plain.clone(), &[]),
        plain,
        "nothing escalated, nothing changes"
    );
}

#[test]
fn fabric_registration_and_health_map_to_their_states() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
    let with = |state, status: &str, health| SlowReadings {
        fabric: Some(FabricReading {
            state,
            status: status.into(),
            clique_id: 1,
            cluster_uuid: String::new(),
            health,
            issues: vec![("degraded_bandwidth", false)],
        }),
        ..SlowReadings::default()
    };
    let v = |h| verdict(&gpu(h, vec![]), now);
    let ok = v(with(
        FabricState::Completed,
        "success",
        Some(FabricHealth::Healthy),
    ));
    assert_eq!((ok.state, ok.reasons.len()), (State::Healthy, 0));
    let waiting = v(with(FabricState::InProgress, "not_ready", None));
    assert_eq!(waiting.state, State::Degraded);
    assert_eq!(waiting.reasons[0].source, "fabric");
    assert!(waiting.reasons[0].text.contains("in progress"));
    assert_eq!(waiting.reasons[0].class, ActionClass::FabricDegraded);
    let failed = v(with(
        FabricState::Completed,
        "insufficient_resources",
        Some(FabricHealth::Healthy),
    ));
    assert_eq!(failed.state, State::Unhealthy);
    assert!(failed.reasons[0].text.contains("insufficient_resources"));
    assert!(failed.reasons[0].action.contains("fabricmanager"));
    assert_eq!(failed.reasons[0].class, ActionClass::FabricNotRegistered);
    let limited = v(with(
        FabricState::Completed,
        "success",
        Some(FabricHealth::LimitedCapacity),
    ));
    assert_eq!(limited.state, State::Degraded);
    assert_eq!(limited.reasons[0].class, ActionClass::FabricDegraded);
    let sick = v(with(
        FabricState::Completed,
        "success",
        Some(FabricHealth::Unhealthy),
    ));
    assert_eq!(sick.state, State::Unhealthy);
    assert_eq!(sick.reasons[0].class, ActionClass::FabricUnhealthy);
}

#[test]
fn a_recovery_action_beyond_nvmls_is_unhealthy_with_its_raw_value() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
    for raw in [7u64, 4_294_967_295] {
        let health = SlowReadings {
            links: LinkHealth {
                nvlink: vec![],
                recovery_action: Some(crate::gpu::links::recovery_action_name(raw)),
                recovery_action_value: Some(raw),
            },
            ..SlowReadings::default()
        };
        let v = verdict(&gpu(health, vec![]), now);
        assert_eq!(v.state, State::Unhealthy, "value {raw}");
        assert_eq!(v.reasons[0].source, "recovery_action");
        assert_eq!(v.reasons[0].action, "unknown");
        assert!(
            v.reasons[0].text.contains(&format!("value {raw}")),
            "{:?}",
            v.reasons
        );
    }
}

#[test]
fn an_xid_beyond_the_catalog_gets_no_advice() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
    let v = verdict(&gpu(SlowReadings::default(), vec![xid(100_000, now)]), now);
    assert_eq!(v.state, State::Degraded);
    assert_eq!(v.reasons[0].action, NO_ADVICE);
    assert!(v.reasons[0].text.contains("not in NVIDIA's catalog"));
}

#[test]
fn folded_xids_degrade_for_30_minutes_without_advice() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
    let folded = |last_seen| GpuSnapshot {
        xid_other: Some(crate::gpu::XidFolded {
            count: 968,
            last_seen,
        }),
        ..gpu(SlowReadings::default(), vec![])
    };
    let v = verdict(&folded(now), now);
    assert_eq!(v.state, State::Degraded);
    assert_eq!(
        (v.reasons[0].source, v.reasons[0].action.as_str()),
        ("xid", NO_ADVICE)
    );
    assert!(v.reasons[0].text.contains("968"), "{:?}", v.reasons);
    let old = now - XID_WINDOW - Duration::from_secs(1);
    assert_eq!(verdict(&folded(old), now).state, State::Healthy);
}
