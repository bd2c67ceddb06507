//! Capacity with no profiles: implicit profiles from running workloads.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use super::running::{holders, implicit_profile, running_fits};
use super::table::render_running;
use super::tests::{gpu, process, snapshot};
use super::Limit;
use crate::gpu::{
    Device, Usage, Workload, WorkloadAttributes, WorkloadKey, WorkloadKind, WorkloadTable,
};

const GIB: u64 = 1 << 30;

/// A workload of `kind`/`id` holding each `(gpu, peak memory, GPU-seconds
/// held, SM-active seconds)`.
fn workload(
    kind: WorkloadKind,
    id: &str,
    user: &str,
    devices: &[(u32, u64, f64, f64)],
) -> Workload {
    let devices: BTreeMap<Device, Usage> = devices
        .iter()
        .map(|&(gpu, peak, held, active)| {
            (
                Device {
                    gpu,
                    gpu_instance_id: None,
                },
                Usage {
                    gpu_seconds: held,
                    sm_active_seconds: active,
                    peak_memory_bytes: peak,
                    ..Usage::default()
                },
            )
        })
        .collect();
    Workload::new(
        WorkloadKey {
            kind,
            id: id.into(),
        },
        WorkloadAttributes {
            user: Some(user.into()),
            namespace: (kind == WorkloadKind::Pod).then(|| "ml".to_string()),
            ..WorkloadAttributes::default()
        },
        SystemTime::now(),
        SystemTime::now(),
        devices,
    )
}

#[test]
fn the_profile_is_the_largest_per_gpu_peak_and_sm_share() {
    let job = workload(
        WorkloadKind::SlurmJob,
        "7300001",
        "alice",
        &[(0, 8 * GIB, 10.0, 2.0), (1, 12 * GIB, 10.0, 4.0)],
    );
    let p = implicit_profile(&job).expect("memory measured");
    assert_eq!(p.name, "slurm_job:7300001");
    assert_eq!((p.memory_bytes, p.model.as_deref()), (12 * GIB, None));
    assert!((p.sm_share.expect("sm share") - 0.4).abs() < 1e-12);
    // Idle (no SM activity): memory alone bounds it.
    let idle = workload(
        WorkloadKind::Process,
        "5301",
        "bob",
        &[(3, 30 * GIB, 10.0, 0.0)],
    );
    assert_eq!(implicit_profile(&idle).and_then(|p| p.sm_share), None);
    // No per-process memory from the driver: nothing can be said.
    let blind = workload(WorkloadKind::Pod, "ml/trainer-0", "x", &[(0, 0, 10.0, 5.0)]);
    assert_eq!(implicit_profile(&blind), None);
}

#[test]
fn running_workloads_fit_by_memory_and_sm_share_and_fill_their_gpus() {
    // GPU 0: 60 GiB free, the job's process keeps half the SMs busy.
    // GPU 1: 70 GiB free, idle.
    let mut g0 = gpu(0, "NVIDIA H100 80GB HBM3", 60 * GIB, "default");
    g0.processes = Arc::new(vec![process(4242, 0.5)]);
    let g1 = gpu(1, "NVIDIA H100 80GB HBM3", 70 * GIB, "default");
    let mut s = snapshot(vec![g0, g1]);
    let job = workload(
        WorkloadKind::SlurmJob,
        "7300001",
        "alice",
        &[(0, 20 * GIB, 10.0, 5.0)],
    );
    let idle = workload(
        WorkloadKind::Process,
        "5301",
        "bob",
        &[(1, 10 * GIB, 10.0, 0.0)],
    );
    let blind = workload(WorkloadKind::Pod, "ml/trainer-0", "x", &[(1, 0, 10.0, 5.0)]);
    s.workloads = Arc::new(WorkloadTable {
        live: vec![job, idle, blind],
        ..WorkloadTable::default()
    });
    let fits = running_fits(&s, GIB);
    assert_eq!(fits.len(), 3);
    // The job: 20 GiB and half the SMs. GPU 0: (60 − 1) / 20 = 2 by
    // memory, (1 − 0.5) / 0.5 = 1 by SM; GPU 1: 69 / 20 = 3, 1 / 0.5 = 2.
    let per_gpu = |i: usize| -> Vec<(u32, u64, Limit)> {
        fits[i]
            .gpus
            .iter()
            .map(|f| (f.gpu, f.fits, f.limit))
            .collect()
    };
    assert_eq!(per_gpu(0), vec![(0, 1, Limit::Sm), (1, 2, Limit::Sm)]);
    assert_eq!((fits[0].node, fits[0].owner.as_deref()), (3, Some("alice")));
    // The idle one: memory alone, 59 / 10 = 5 and 69 / 10 = 6.
    assert_eq!(
        per_gpu(1),
        vec![(0, 5, Limit::Memory), (1, 6, Limit::Memory)]
    );
    assert_eq!(fits[1].node, 11);
    // The pod with no memory figure: named, no fits; its owner is its namespace.
    assert_eq!((fits[2].profile.as_ref(), fits[2].node), (None, 0));
    assert_eq!(fits[2].owner.as_deref(), Some("ml"));
    // Who fills each GPU, most memory first.
    let on =
        |gpu: u32| -> Vec<String> { holders(&s, gpu).iter().map(|h| h.key.id.clone()).collect() };
    assert_eq!(on(0), vec!["7300001"]);
    assert_eq!(on(1), vec!["5301", "ml/trainer-0"]);
}

#[test]
fn the_table_names_each_workload_and_escapes_what_came_from_outside() {
    let g0 = gpu(0, "NVIDIA H100 80GB HBM3", 60 * GIB, "default");
    let mut s = snapshot(vec![g0]);
    let job = workload(
        WorkloadKind::SlurmJob,
        "7300001",
        "al\u{1b}[2Jice",
        &[(0, 20 * GIB, 10.0, 5.0)],
    );
    s.workloads = Arc::new(WorkloadTable {
        live: vec![job],
        ..WorkloadTable::default()
    });
    let out = render_running(&s, GIB);
    assert!(!out.contains('\u{1b}'), "{out}");
    let node = out
        .lines()
        .find(|l| l.starts_with("slurm_job:7300001") && l.contains("node total"))
        .unwrap_or_else(|| panic!("a node total line: {out}"));
    // (60 − 1) / 20 = 2 by memory; 1 / 0.5 = 2 by SM (GPU idle).
    assert_eq!(node.split_whitespace().last(), Some("2"), "{out}");
    assert!(out.contains("Who fills each GPU"), "{out}");
    let gpu0 = out
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with("0 "))
        .unwrap_or_else(|| panic!("GPU 0's holders: {out}"));
    assert!(
        gpu0.contains("slurm_job:7300001 (al\\u{1b}[2Jice) 20.0"),
        "{gpu0}"
    );
    // Nothing running: the table says so and where profiles come from.
    s.workloads = Arc::new(WorkloadTable::default());
    assert!(render_running(&s, GIB).contains("No workload is running on a GPU"));
}
