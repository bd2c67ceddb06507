//! Test snapshots, built in one place so that a new snapshot field touches
//! only this file: a GPU that answered with nothing read, and a node
//! snapshot of some GPUs. Tests set what they need with struct update
//! syntax: `GpuSnapshot { readings, ..testing::gpu(0) }`.

use std::sync::Arc;
use std::time::SystemTime;

use super::{GpuIdentity, GpuSnapshot, GpuStatus, Snapshot};

/// GPU `index`, up: uuid `GPU-{index}`, named "Test GPU", every reading
/// absent, no processes, no Xid, no field group read yet.
pub fn gpu(index: u32) -> GpuSnapshot {
    GpuSnapshot {
        identity: Arc::new(GpuIdentity {
            name: Some("Test GPU".into()),
            ..GpuIdentity::default()
        }),
        ..GpuSnapshot::bare(index, format!("GPU-{index}"), GpuStatus::Up)
    }
}

/// A snapshot of `gpus` taken at `taken_at` on host "node", with default
/// driver facts and collection stats and no kubelet.
pub fn snapshot(taken_at: SystemTime, gpus: Vec<GpuSnapshot>) -> Snapshot {
    Snapshot {
        taken_at,
        hostname: "node".into(),
        system: Arc::default(),
        gpus,
        workloads: Default::default(),
        collection: Default::default(),
        kubelet: None,
    }
}
