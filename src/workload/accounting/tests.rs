use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::*;
use crate::gpu::gpm::{GpmMetrics, GpmReadings};
use crate::gpu::testing::{gpu, snapshot};
use crate::gpu::{FastReadings, GpuProcess, HostProcess, SlurmJob};
use crate::gpu::{Usage, WorkloadKind};

const T0: Duration = Duration::from_secs(1_800_000_000);

fn at(seconds: f64) -> SystemTime {
    SystemTime::UNIX_EPOCH + T0 + Duration::from_secs_f64(seconds)
}

fn job_process(pid: u32, job: u64, sm: Option<f64>, memory: u64) -> GpuProcess {
    GpuProcess {
        pid,
        used_memory_bytes: Some(memory),
        sm_utilization_ratio: sm,
        host: Some(Arc::new(HostProcess {
            slurm: Some(SlurmJob {
                job_id: job,
                step: None,
                user: Some("alice".into()),
                account: Some("physics".into()),
                partition: None,
            }),
            ..HostProcess::default()
        })),
        ..GpuProcess::default()
    }
}

/// GPU `index` with `processes`, SM activity `sm_active` (GPM) and its
/// energy counter at `energy`.
fn busy_gpu(index: u32, processes: Vec<GpuProcess>, sm_active: f64, energy: f64) -> GpuSnapshot {
    GpuSnapshot {
        processes: Arc::new(processes),
        readings: FastReadings {
            energy_joules: Some(energy),
            utilization_gpu_ratio: Some(1.0),
            ..FastReadings::default()
        },
        gpm: Arc::new(GpmReadings {
            supported: Some(true),
            gpu: Some(GpmMetrics {
                sm_active_ratio: Some(sm_active),
                ..GpmMetrics::default()
            }),
            ..GpmReadings::default()
        }),
        ..gpu(index)
    }
}

/// The case: a job alone on a GPU with SM active 60 % for 40 s,
/// sampled every second at 300 W: 40 GPU-seconds, 24 SM-active seconds,
/// the GPU's energy.
#[test]
fn a_job_alone_on_a_gpu_is_charged_exactly() {
    let mut accounts = Accounts::default();
    for second in 0..=40 {
        let energy = 1000.0 + 300.0 * f64::from(second);
        let gpus = vec![busy_gpu(
            0,
            vec![job_process(10, 9100001, None, 1 << 30)],
            0.6,
            energy,
        )];
        assert!(accounts
            .step(&snapshot(at(f64::from(second)), gpus))
            .is_empty());
    }
    let live: Vec<&Workload> = accounts.live().collect();
    assert_eq!(live.len(), 1);
    let total = live[0].total();
    assert!((total.gpu_seconds - 40.0).abs() < 1e-9, "{total:?}");
    assert!((total.sm_active_seconds - 24.0).abs() < 1e-9, "{total:?}");
    assert!((total.energy_joules - 12_000.0).abs() < 1e-6, "{total:?}");
    assert!((total.efficiency().expect("held") - 0.6).abs() < 1e-9);
    assert_eq!(total.peak_memory_bytes, 1 << 30);
    // The job ends: it is returned once, with its totals, and forgotten.
    let ended = accounts.step(&snapshot(
        at(41.0),
        vec![busy_gpu(0, vec![], 0.0, 13_300.0)],
    ));
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].key.kind, WorkloadKind::SlurmJob);
    assert_eq!(ended[0].key.id, "9100001");
    assert_eq!(ended[0].last_seen, at(40.0));
    assert_eq!(ended[0].started, at(0.0));
    assert_eq!(ended[0].attributes.account.as_deref(), Some("physics"));
    assert_eq!(accounts.live().count(), 0);
}

/// Two jobs time-slicing one GPU: both hold it the whole time; SM time and
/// energy split by their per-process SM utilization (3:1).
#[test]
fn a_shared_gpu_is_split_by_sm_share() {
    let mut accounts = Accounts::default();
    for second in 0..=10 {
        let processes = vec![
            job_process(10, 1, Some(0.6), 100),
            job_process(11, 2, Some(0.2), 300),
        ];
        let gpus = vec![busy_gpu(0, processes, 0.8, 100.0 * f64::from(second))];
        accounts.step(&snapshot(at(f64::from(second)), gpus));
    }
    let by_id: BTreeMap<&str, Usage> = accounts
        .live()
        .map(|w| (w.key.id.as_str(), w.total()))
        .collect();
    let (one, two) = (by_id["1"], by_id["2"]);
    assert!((one.gpu_seconds - 10.0).abs() < 1e-9 && (two.gpu_seconds - 10.0).abs() < 1e-9);
    assert!((one.sm_active_seconds - 6.0).abs() < 1e-9, "{one:?}");
    assert!((two.sm_active_seconds - 2.0).abs() < 1e-9, "{two:?}");
    assert!((one.energy_joules - 750.0).abs() < 1e-6 && (two.energy_joules - 250.0).abs() < 1e-6);
    assert_eq!((one.peak_memory_bytes, two.peak_memory_bytes), (100, 300));
}

/// With no per-process utilization, idle or not, holders split equally;
/// a gap longer than MAX_INTERVAL is charged to nobody; Xid errors and
/// throttling seen while a job runs are charged to it.
#[test]
fn equal_split_gaps_xid_and_throttling() {
    let mut accounts = Accounts::default();
    let processes = || vec![job_process(10, 1, None, 0), job_process(11, 2, None, 0)];
    accounts.step(&snapshot(at(0.0), vec![busy_gpu(0, processes(), 0.5, 0.0)]));
    let mut throttled = busy_gpu(0, processes(), 0.5, 40.0);
    throttled.readings.clock_event_reasons = Some(0x40 | 0x1);
    throttled.xid_errors = Arc::new(vec![crate::gpu::XidCount {
        code: 79,
        count: 2,
        last_seen: at(2.0),
    }]);
    accounts.step(&snapshot(at(2.0), vec![throttled]));
    // The agent stopped for two minutes: not charged.
    accounts.step(&snapshot(
        at(122.0),
        vec![busy_gpu(0, processes(), 0.5, 9_000.0)],
    ));
    for workload in accounts.live() {
        let usage = workload.total();
        assert!((usage.gpu_seconds - 2.0).abs() < 1e-9, "{usage:?}");
        assert!((usage.sm_active_seconds - 0.5).abs() < 1e-9, "{usage:?}");
        assert!((usage.energy_joules - 20.0).abs() < 1e-9, "{usage:?}");
        assert_eq!(usage.xid_errors, 2);
        assert!((usage.throttle_seconds - 2.0).abs() < 1e-9);
    }
}

/// More live workloads than MAX_LIVE: the rest are left out and counted,
/// not followed.
#[test]
fn live_workloads_are_bounded() {
    let mut accounts = Accounts::default();
    let processes: Vec<GpuProcess> = (0..MAX_LIVE as u32 + 10)
        .map(|pid| GpuProcess {
            pid: pid + 1,
            ..GpuProcess::default()
        })
        .collect();
    accounts.step(&snapshot(at(0.0), vec![busy_gpu(0, processes, 0.1, 0.0)]));
    assert_eq!(accounts.live().count(), MAX_LIVE);
    assert_eq!(accounts.left_out(), 10);
}

/// The table is part of the snapshot's JSON (`/api/v1/snapshot`): devices
/// as a list, times as Unix seconds.
#[test]
fn the_table_serializes_to_json() {
    let mut accounts = Accounts::default();
    for second in 0..=2 {
        let gpus = vec![busy_gpu(1, vec![job_process(10, 7, None, 5)], 0.5, 0.0)];
        accounts.step(&snapshot(at(f64::from(second)), gpus));
    }
    let json = serde_json::to_value(accounts.table()).expect("serializes");
    let workload = &json["live"][0];
    assert_eq!(workload["key"]["kind"], "slurm_job");
    assert_eq!(workload["devices"][0]["gpu"], 1);
    assert_eq!(workload["devices"][0]["gpu_seconds"], 2.0);
    assert_eq!(workload["started"], (T0.as_secs()) as f64);
}

/// A GPU with GPM whose first ticks have no GPM figure yet (as after the
/// agent starts): those intervals wait for GPM's next figure instead of
/// taking utilization (100 % here, against 60 % SM activity); a GPU whose
/// GPM stays silent is charged by utilization after `GPM_GAP_MAX` ticks.
#[test]
fn ticks_without_gpm_are_charged_with_gpms_next_figure_not_utilization() {
    let run = |gpm_from: u32| {
        let mut accounts = Accounts::default();
        for second in 0..=10u32 {
            let mut gpu = busy_gpu(0, vec![job_process(10, 7, None, 1)], 0.6, 0.0);
            if second < gpm_from {
                Arc::make_mut(&mut gpu.gpm).gpu = None;
            }
            accounts.step(&snapshot(at(f64::from(second)), vec![gpu]));
        }
        let total = accounts.live().next().expect("live").total();
        assert!((total.gpu_seconds - 10.0).abs() < 1e-9, "{total:?}");
        total.sm_active_seconds
    };
    // GPM from the third tick on: the first two intervals take its 60 %.
    assert!((run(2) - 6.0).abs() < 1e-9, "{}", run(2));
    // GPM from the sixth tick: four intervals waited more than GPM_GAP_MAX
    // ticks; they are charged by utilization, the rest by GPM.
    let expected = 4.0 * 1.0 + 6.0 * 0.6;
    assert!((run(5) - expected).abs() < 1e-9, "{}", run(5));
    // GPM never answers: utilization throughout.
    assert!((run(u32::MAX) - 10.0).abs() < 1e-9, "{}", run(u32::MAX));
}

/// A pod's process holding its GPU through DRA claim device `device`.
fn pod_process(pid: u32, device: &str) -> GpuProcess {
    GpuProcess {
        pid,
        used_memory_bytes: Some(64),
        sm_utilization_ratio: Some(0.25),
        pod: Some(Arc::new(crate::gpu::PodContainer {
            namespace: "ml".into(),
            pod: "trainer-0".into(),
            container: "main".into(),
        })),
        dra_claim: Some(Arc::new(crate::gpu::DraClaim {
            namespace: "ml".into(),
            name: "gpus".into(),
            driver: "gpu.nvidia.com".into(),
            pool: "node".into(),
            device: device.into(),
        })),
        ..GpuProcess::default()
    }
}

/// The process lists of GPUs 0, 1 and 2 in each of three phases: jobs and
/// a pod coming and going, GPUs shared.
fn phase_lists(phase: u32) -> Vec<Vec<GpuProcess>> {
    let plain = GpuProcess {
        pid: 13,
        name: Some("python3".into()),
        used_memory_bytes: Some(9),
        ..GpuProcess::default()
    };
    match phase {
        0 => vec![
            vec![
                job_process(10, 7, Some(0.3), 100),
                job_process(11, 8, Some(0.1), 50),
            ],
            vec![job_process(12, 7, Some(0.2), 70), plain],
            vec![pod_process(14, "gpu-2"), job_process(15, 9, None, 10)],
        ],
        1 => vec![
            vec![job_process(10, 7, Some(0.3), 150)],
            vec![plain, pod_process(16, "gpu-1")],
            vec![pod_process(14, "gpu-2")],
        ],
        _ => vec![
            Vec::new(),
            vec![job_process(12, 7, Some(0.2), 70)],
            vec![job_process(15, 9, None, 10), pod_process(14, "gpu-2")],
        ],
    }
}

/// Folding between process reads (the sampler shares an unchanged process
/// list between snapshots, and the fold then only adds by index) gives
/// exactly what grouping every snapshot afresh gives: through process
/// changes, a GPU lost and back, workloads ending and coming back, GPM
/// gaps, a pod's DRA claims on two GPUs.
#[test]
fn folding_by_index_between_process_reads_changes_no_figure() {
    let (mut shared, mut fresh) = (Accounts::default(), Accounts::default());
    let mut lists: Vec<Arc<Vec<GpuProcess>>> = Vec::new();
    let mut ended = 0;
    for second in 0..45u32 {
        if second % 5 == 0 {
            lists = phase_lists(second / 5 % 3)
                .into_iter()
                .map(Arc::new)
                .collect();
        }
        let gpus = |copy: bool| -> Vec<GpuSnapshot> {
            (0..3u32)
                .map(|i| {
                    let energy = f64::from(second * (100 + i));
                    let sm_active = 0.5 + 0.1 * f64::from(i);
                    let mut gpu = busy_gpu(i, Vec::new(), sm_active, energy);
                    let list = &lists[i as usize];
                    gpu.processes = if copy {
                        Arc::new(list.as_ref().clone())
                    } else {
                        list.clone()
                    };
                    if i == 1 && (12..14).contains(&second) {
                        gpu.status = GpuStatus::Lost {
                            reason: "gpu_lost".into(),
                        };
                    }
                    if i == 2 && (3..5).contains(&second) {
                        Arc::make_mut(&mut gpu.gpm).gpu = None;
                    }
                    gpu
                })
                .collect()
        };
        let a = shared.step(&snapshot(at(f64::from(second)), gpus(false)));
        let b = fresh.step(&snapshot(at(f64::from(second)), gpus(true)));
        assert_eq!(a, b, "ended at second {second}");
        ended += a.len();
        assert_eq!(shared.table(), fresh.table(), "table at second {second}");
        assert_eq!(shared.left_out(), fresh.left_out());
    }
    assert!(ended >= 3, "workloads ended and came back: {ended}");
    let table = shared.table();
    let pod = table
        .live
        .iter()
        .find(|w| w.key.kind == WorkloadKind::Pod)
        .expect("the pod runs");
    assert_eq!(pod.attributes.dra_claims.len(), 2, "{pod:?}");
    assert!(table.live.iter().all(|w| w.total().gpu_seconds > 0.0));
}

/// Between process reads the tables of successive snapshots share each
/// workload's identity (no string is copied) and differ in the figures.
#[test]
fn tables_share_identities_between_process_reads() {
    let mut accounts = Accounts::default();
    let list = Arc::new(vec![job_process(10, 7, None, 5)]);
    let tick = |accounts: &mut Accounts, second: u32| {
        let mut gpu = busy_gpu(0, Vec::new(), 0.5, f64::from(second) * 300.0);
        gpu.processes = list.clone();
        accounts.step(&snapshot(at(f64::from(second)), vec![gpu]));
        accounts.table()
    };
    let first = tick(&mut accounts, 0);
    let second = tick(&mut accounts, 1);
    assert!(Arc::ptr_eq(
        &first.live[0].identity,
        &second.live[0].identity
    ));
    assert_eq!(first.live[0].total().gpu_seconds, 0.0);
    let usage = second.live[0].total();
    assert_eq!((usage.gpu_seconds, usage.sm_active_seconds), (1.0, 0.5));
    assert_eq!(usage.energy_joules, 300.0);
    assert_eq!(usage.peak_memory_bytes, 5);
}
