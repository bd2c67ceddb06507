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
