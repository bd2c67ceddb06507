//! Workload summaries through the real writer and SQLite: a job's row
//! while it runs and after it ends, the filters of `gpuwatch jobs`, and a
//! row left running by a stopped agent closed at the next start.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use super::store::Store;
use super::tests::Writer;
use super::workloads::{workloads, WorkloadFilter};
use super::Durability;
use crate::gpu::gpm::{GpmMetrics, GpmReadings};
use crate::gpu::WorkloadKind;
use crate::gpu::{testing, FastReadings, GpuProcess, GpuSnapshot, HostProcess, SlurmJob, Snapshot};
use crate::workload::accounting::Accounts;

const START: u64 = 1_700_002_800;

fn job(pid: u32, id: u64, user: &str) -> GpuProcess {
    GpuProcess {
        pid,
        used_memory_bytes: Some(2 << 30),
        host: Some(Arc::new(HostProcess {
            slurm: Some(SlurmJob {
                job_id: id,
                step: Some("batch".into()),
                user: Some(user.into()),
                account: Some("physics".into()),
                partition: Some("gpu".into()),
            }),
            ..HostProcess::default()
        })),
        ..GpuProcess::default()
    }
}

/// Second `s` of the run: job 9100001 (alice) alone on GPU 0 for 40 s at
/// 60 % SM activity and 250 W; job 9100002 (bob) on GPU 1 from second 10
/// to the end.
fn snapshot(accounts: &mut Accounts, s: u64) -> Arc<Snapshot> {
    let gpu = |index: u32, processes: Vec<GpuProcess>| GpuSnapshot {
        processes: Arc::new(processes),
        readings: FastReadings {
            energy_joules: Some(250.0 * s as f64),
            ..FastReadings::default()
        },
        gpm: Arc::new(GpmReadings {
            supported: Some(true),
            gpu: Some(GpmMetrics {
                sm_active_ratio: Some(0.6),
                ..GpmMetrics::default()
            }),
            ..GpmReadings::default()
        }),
        ..testing::gpu(index)
    };
    let first = if s <= 40 {
        vec![job(10, 9100001, "alice")]
    } else {
        vec![]
    };
    let second = if s >= 10 {
        vec![job(20, 9100002, "bob")]
    } else {
        vec![]
    };
    let mut snapshot = testing::snapshot(
        UNIX_EPOCH + Duration::from_secs(START + s),
        vec![gpu(0, first), gpu(1, second)],
    );
    accounts.step(&snapshot);
    snapshot.workloads = Arc::new(accounts.table());
    Arc::new(snapshot)
}

fn all() -> WorkloadFilter {
    WorkloadFilter {
        from_ms: 0,
        to_ms: i64::MAX,
        limit: 1000,
        ..WorkloadFilter::default()
    }
}

#[tokio::test]
async fn a_jobs_summary_while_it_runs_after_it_ends_and_after_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("h.db");
    let store = Store::open_for_writing(&path, Durability::Normal)
        .await
        .expect("open");
    let writer = Writer::start(&store, 1000);
    let mut accounts = Accounts::default();
    for s in 0..=100 {
        writer
            .tx
            .send(snapshot(&mut accounts, s))
            .await
            .expect("send");
    }
    // While the agent runs, bob's job is running: its row is at most a
    // minute old (written at second 10 and 70).
    let running = loop {
        let found = workloads(&store.pool, &all()).await.expect("query");
        match found.iter().find(|w| w.id == "9100002") {
            Some(bob) if bob.gpu_seconds > 0.0 && found.len() == 2 => break found,
            _ => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    };
    let bob = running
        .iter()
        .find(|w| w.id == "9100002")
        .expect("bob's job");
    assert_eq!(bob.ended, None);
    assert!((bob.gpu_seconds - 60.0).abs() < 1e-6, "{bob:?}");
    writer.finish().await;

    let found = workloads(&store.pool, &all()).await.expect("query");
    assert_eq!(found.len(), 2, "{found:?}");
    let alice = found
        .iter()
        .find(|w| w.id == "9100001")
        .expect("alice's job");
    assert_eq!(alice.kind, "slurm_job");
    assert_eq!(
        (alice.user.as_deref(), alice.account.as_deref()),
        (Some("alice"), Some("physics"))
    );
    assert_eq!(alice.gpus, ["0"]);
    assert_eq!(
        (alice.started, alice.ended),
        (START as f64, Some((START + 40) as f64))
    );
    assert!((alice.gpu_seconds - 40.0).abs() < 1e-6, "{alice:?}");
    assert!((alice.sm_active_seconds - 24.0).abs() < 1e-6, "{alice:?}");
    assert!((alice.energy_joules - 10_000.0).abs() < 1e-6, "{alice:?}");
    assert!((alice.efficiency.expect("held") - 0.6).abs() < 1e-9);
    assert_eq!(alice.peak_memory_bytes, 2 << 30);
    // Still running when the agent stopped: the final batch ends it then.
    let bob = found.iter().find(|w| w.id == "9100002").expect("bob's job");
    assert_eq!(bob.ended, Some((START + 100) as f64));
    assert!((bob.gpu_seconds - 90.0).abs() < 1e-6, "{bob:?}");

    // Filters: user, kind, GPU, time.
    let only = |filter: WorkloadFilter| {
        let pool = store.pool.clone();
        async move {
            workloads(&pool, &filter)
                .await
                .expect("query")
                .into_iter()
                .map(|w| w.id)
                .collect::<Vec<_>>()
        }
    };
    let user = WorkloadFilter {
        user: Some("bob".into()),
        ..all()
    };
    assert_eq!(only(user).await, ["9100002"]);
    let gpu = WorkloadFilter {
        gpu: Some(0),
        ..all()
    };
    assert_eq!(only(gpu).await, ["9100001"]);
    let pods = WorkloadFilter {
        kind: Some(WorkloadKind::Pod),
        ..all()
    };
    assert!(only(pods).await.is_empty());
    let after_alice = WorkloadFilter {
        from_ms: (START as i64 + 50) * 1000,
        ..all()
    };
    assert_eq!(only(after_alice).await, ["9100002"]);

    // A killed agent leaves a running row; the next start closes it when
    // last seen.
    let writer = Writer::start(&store, 1000);
    let mut accounts = Accounts::default();
    for s in 200..=230 {
        writer
            .tx
            .send(snapshot(&mut accounts, s))
            .await
            .expect("send");
    }
    loop {
        let found = workloads(&store.pool, &all()).await.expect("query");
        if found.iter().any(|w| w.started == (START + 200) as f64) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    writer.kill().await;
    drop(store);
    let store = Store::open_for_writing(&path, Durability::Normal)
        .await
        .expect("open again");
    let writer = Writer::start(&store, 10);
    writer.finish().await;
    let found = workloads(&store.pool, &all()).await.expect("query");
    let killed: Vec<_> = found
        .iter()
        .filter(|w| w.started == (START + 200) as f64)
        .collect();
    assert_eq!(killed.len(), 1, "{found:?}");
    assert_eq!(killed[0].ended, Some((START + 200) as f64), "{found:?}");
}

#[tokio::test]
async fn a_pods_dra_claims_are_kept_with_its_summary() {
    use crate::gpu::{DraClaim, PodContainer};
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open_for_writing(&dir.path().join("h.db"), Durability::Normal)
        .await
        .expect("open");
    let writer = Writer::start(&store, 1000);
    let mut accounts = Accounts::default();
    let claim = |device: &str| DraClaim {
        namespace: "ml".into(),
        name: "train-gpus".into(),
        driver: "gpu.nvidia.com".into(),
        pool: "node-a".into(),
        device: device.into(),
    };
    let process = |device: &str| GpuProcess {
        pid: 30,
        pod: Some(Arc::new(PodContainer {
            namespace: "ml".into(),
            pod: "train-0".into(),
            container: "main".into(),
        })),
        dra_claim: Some(Arc::new(claim(device))),
        ..GpuProcess::default()
    };
    for s in 0..=5 {
        let mut snapshot = testing::snapshot(
            UNIX_EPOCH + Duration::from_secs(START + s),
            vec![
                GpuSnapshot {
                    processes: Arc::new(vec![process("gpu-3")]),
                    ..testing::gpu(0)
                },
                GpuSnapshot {
                    processes: Arc::new(vec![process("gpu-1")]),
                    ..testing::gpu(1)
                },
            ],
        );
        accounts.step(&snapshot);
        snapshot.workloads = Arc::new(accounts.table());
        writer.tx.send(Arc::new(snapshot)).await.expect("send");
    }
    writer.finish().await;
    let found = workloads(&store.pool, &all()).await.expect("query");
    let pod = found
        .iter()
        .find(|w| w.id == "ml/train-0")
        .unwrap_or_else(|| panic!("no pod in {found:?}"));
    assert_eq!(pod.kind, "pod");
    // Each GPU's processes name their own device; the pod keeps both.
    assert_eq!(pod.dra_claims, vec![claim("gpu-1"), claim("gpu-3")]);
    assert_eq!(pod.gpus, ["0", "1"]);
}
