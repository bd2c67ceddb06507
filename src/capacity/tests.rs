use std::sync::Arc;
use std::time::SystemTime;

use super::*;
use crate::gpu::{
    testing, FastReadings, GpuIdentity, GpuProcess, GpuStatus, MemoryReading, MigInstance,
    SlowReadings,
};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// An 80 GiB GPU named `name` with `free` bytes free, in `mode`.
pub(super) fn gpu(index: u32, name: &str, free: u64, mode: &'static str) -> GpuSnapshot {
    GpuSnapshot {
        identity: Arc::new(GpuIdentity {
            name: Some(name.into()),
            ..GpuIdentity::default()
        }),
        readings: FastReadings {
            utilization_gpu_ratio: Some(0.0),
            memory: Some(MemoryReading {
                total_bytes: 80 * GIB,
                used_bytes: 80 * GIB - free,
                free_bytes: free,
                reserved_bytes: 0,
            }),
            ..FastReadings::default()
        },
        health: Arc::new(SlowReadings {
            compute_mode: Some(mode),
            mig_enabled: Some(false),
            ..SlowReadings::default()
        }),
        ..testing::gpu(index)
    }
}

pub(super) fn process(pid: u32, sm: f64) -> GpuProcess {
    GpuProcess {
        pid,
        used_memory_bytes: Some(GIB),
        sm_utilization_ratio: Some(sm),
        ..GpuProcess::default()
    }
}

fn profile(name: &str, memory: u64, sm_share: Option<f64>, model: Option<&str>) -> Profile {
    Profile {
        name: name.into(),
        memory_bytes: memory,
        sm_share,
        model: model.map(str::to_string),
    }
}

pub(super) fn snapshot(gpus: Vec<GpuSnapshot>) -> Snapshot {
    Snapshot {
        hostname: "n".into(),
        ..testing::snapshot(SystemTime::now(), gpus)
    }
}

#[test]
fn free_memory_minus_the_margin_divided_by_the_profile() {
    // 20 GiB free, 1 GiB margin: 19 GiB / 1.8 GB (1_800_000_000 B) =
    // 20_401_094_656 / 1_800_000_000 = 11.33 → 11.
    let g = gpu(0, "NVIDIA H100 80GB HBM3", 20 * GIB, "default");
    let resnet = profile("resnet50", 1_800_000_000, None, None);
    let fit = gpu_fit(&g, &resnet, GIB).expect("applies");
    assert_eq!((fit.fits, fit.limit), (11, Limit::Memory));
    // BERT training needs 12 GiB: 19 / 12 → 1.
    let bert = profile("bert", 12 * GIB, None, None);
    assert_eq!(gpu_fit(&g, &bert, GIB).map(|f| f.fits), Some(1));
    // Less free than the margin: none, never an underflow.
    let full = gpu(1, "NVIDIA H100 80GB HBM3", 512 * MIB, "default");
    assert_eq!(gpu_fit(&full, &resnet, GIB).map(|f| f.fits), Some(0));
}

#[test]
fn the_sm_share_in_use_bounds_the_count() {
    let mut g = gpu(0, "H100", 60 * GIB, "default");
    // Two processes use 0.35 + 0.25 = 0.6 of the SMs; 0.4 left, 0.15 each:
    // 0.4 / 0.15 = 2.67 → 2 (memory alone would allow 59 / 2 = 29).
    g.processes = Arc::new(vec![process(1, 0.35), process(2, 0.25)]);
    let p = profile("infer", 2 * GIB, Some(0.15), None);
    let fit = gpu_fit(&g, &p, GIB).expect("applies");
    assert_eq!((fit.fits, fit.limit), (2, Limit::Sm));
    // Exactly 0.4 / 0.2 = 2, not 1 by a rounding error.
    let p = profile("infer", 2 * GIB, Some(0.2), None);
    assert_eq!(gpu_fit(&g, &p, GIB).map(|f| f.fits), Some(2));
}

#[test]
fn compute_modes_exclusive_and_prohibited() {
    let p = profile("p", GIB, None, None);
    let idle = gpu(0, "H100", 40 * GIB, "exclusive_process");
    assert_eq!(
        gpu_fit(&idle, &p, 0).map(|f| (f.fits, f.limit)),
        Some((1, Limit::ExclusiveIdle))
    );
    let mut busy = idle.clone();
    busy.processes = Arc::new(vec![process(7, 0.1)]);
    assert_eq!(
        gpu_fit(&busy, &p, 0).map(|f| (f.fits, f.limit)),
        Some((0, Limit::ExclusiveBusy))
    );
    // An MPS server with clients under exclusive mode: more clients may
    // join, as memory allows (40 / 1 = 40).
    let mut mps = idle.clone();
    mps.processes = Arc::new(vec![
        GpuProcess {
            pid: 9,
            name: Some("nvidia-cuda-mps-server".into()),
            ..GpuProcess::default()
        },
        GpuProcess {
            pid: 10,
            mps_client: true,
            ..GpuProcess::default()
        },
    ]);
    assert_eq!(
        gpu_fit(&mps, &p, 0).map(|f| (f.fits, f.limit)),
        Some((40, Limit::Memory))
    );
    let prohibited = gpu(1, "H100", 40 * GIB, "prohibited");
    assert_eq!(
        gpu_fit(&prohibited, &p, 0).map(|f| (f.fits, f.limit)),
        Some((0, Limit::Prohibited))
    );
    let mut lost = gpu(2, "H100", 40 * GIB, "default");
    lost.status = GpuStatus::Lost {
        reason: "gpu_lost".into(),
    };
    assert_eq!(gpu_fit(&lost, &p, 0).map(|f| f.fits), Some(0));
}

#[test]
fn mig_instances_count_one_by_one() {
    let mut g = gpu(0, "NVIDIA A100-SXM4-80GB", 70 * GIB, "default");
    g.health = Arc::new(SlowReadings {
        mig_enabled: Some(true),
        compute_mode: Some("default"),
        ..SlowReadings::default()
    });
    let instance = |id, total: u64, used: u64| MigInstance {
        gpu_instance_id: id,
        uuid: format!("MIG-{id}"),
        memory_total_bytes: total,
        memory_used_bytes: used,
        profile: None,
    };
    // 3g.40gb with 10 GiB used: (40 − 10 − 0.5) / 8 = 3.69 → 3;
    // 1g.10gb empty: (10 − 0.5) / 8 = 1.19 → 1; 1g.10gb with 4 GiB used:
    // (10 − 4 − 0.5) / 8 = 0.69 → 0. Sum 4 (not 70 / 8 = 8 of the whole GPU).
    g.mig_instances = Arc::new(vec![
        instance(1, 40 * GIB, 10 * GIB),
        instance(2, 10 * GIB, 0),
        instance(3, 10 * GIB, 4 * GIB),
    ]);
    let p = profile("bert", 8 * GIB, None, None);
    assert_eq!(
        gpu_fit(&g, &p, 512 * MIB).map(|f| (f.fits, f.limit)),
        Some((4, Limit::Mig))
    );
}

#[test]
fn model_filter_and_node_total() {
    let s = snapshot(vec![
        gpu(0, "NVIDIA H100 80GB HBM3", 30 * GIB, "default"),
        gpu(1, "NVIDIA H100 80GB HBM3", 9 * GIB, "default"),
        gpu(2, "NVIDIA A10", 20 * GIB, "default"),
    ]);
    let h100_only = profile("big", 8 * GIB, None, Some("h100"));
    // (30 − 1) / 8 = 3; (9 − 1) / 8 = 1; the A10 does not count.
    assert_eq!(node_total(&s, &h100_only, GIB), 4);
    let config = CapacityConfig {
        profiles: vec![h100_only.clone(), profile("any", 16 * GIB, None, None)],
        memory_margin_bytes: GIB,
        alert_for: std::time::Duration::ZERO,
    };
    let all = fits(&s, &config);
    let rows: Vec<(u32, &str, u64)> = all
        .iter()
        .map(|f| (f.gpu, f.profile.as_str(), f.fits))
        .collect();
    // "any": (30 − 1) / 16 = 1; (9 − 1) / 16 = 0; (20 − 1) / 16 = 1.
    assert_eq!(
        rows,
        vec![
            (0, "big", 3),
            (0, "any", 1),
            (1, "big", 1),
            (1, "any", 0),
            (2, "any", 1)
        ]
    );
    let nowhere = profile("huge", 40 * GIB, None, None);
    assert_eq!(node_total(&s, &nowhere, GIB), 0);
}

#[test]
fn a_profile_that_fits_nowhere_fires_its_node_alert_with_the_profile_label() {
    use crate::rules::{evaluate, AlertState, EvalState, Target};
    let config = CapacityConfig {
        profiles: vec![
            profile("fits", 8 * GIB, None, None),
            profile("too-big", 50 * GIB, None, None),
        ],
        memory_margin_bytes: GIB,
        alert_for: std::time::Duration::ZERO,
    };
    let rules =
        crate::rules::capacity::rules(&config, config.alert_for).expect("valid profile names");
    // 30 GiB and 9 GiB free: "fits" fits (3 + 1), "too-big" nowhere.
    let s = snapshot(vec![
        gpu(0, "H100", 30 * GIB, "default"),
        gpu(1, "H100", 9 * GIB, "default"),
    ]);
    let (state, transitions) = evaluate(&rules, &s, &EvalState::default(), s.taken_at);
    let fired: Vec<(&str, &str)> = transitions
        .iter()
        .filter(|t| matches!(t.to, AlertState::Firing { .. }))
        .map(|t| {
            (
                t.key.rule.as_str(),
                t.labels.get("profile").map(String::as_str).unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(fired, vec![("GpuCapacityExhausted:too-big", "too-big")]);
    assert!(state
        .alerts
        .keys()
        .all(|k| k.target == Target::Node && k.rule.ends_with("too-big")));
    let t = &transitions[0];
    assert_eq!(t.value, Some(0.0));
    assert!(
        t.annotations
            .get("description")
            .is_some_and(|d| d.contains("too-big (50.0 GiB each)")),
        "{:?}",
        t.annotations
    );
}
