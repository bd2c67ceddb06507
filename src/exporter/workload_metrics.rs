//! The workload families (`gpuwatch_workload_*`): per workload and GPU (or
//! MIG instance), the GPU-seconds it held, its SM-active seconds and its
//! energy, as counters — the figures owners buy GPUs by.
//!
//! Low cardinality by design: one series per live workload and device (not
//! multiplied into the per-GPU families), a bounded live set, and a
//! workload's series gone [`crate::workload::accounting::ENDED_KEEP`] after
//! it ended. Plain processes (kind `process`) are per-process series, so
//! they are exported only with the per-process detail.

use std::borrow::Cow;
use std::fmt;

use crate::families::Sink;

use crate::gpu::{Device, Snapshot, Workload, WorkloadKind};

use crate::families::{counter, families, gauge, number, unit, Labels};

families! {
    gpu_seconds: counter("workload_gpu", "Seconds a workload held the GPU (had a context on it); a GPU shared by two workloads counts for both.", unit("seconds")),
    sm_active_seconds: counter("workload_sm_active", "Seconds the GPU's SMs were active for a workload: held seconds × the GPU's SM activity (GPM, else utilization) × the workload's share of SM time.", unit("seconds")),
    energy: counter("workload_energy", "The workload's share of the GPU's energy (split by SM time between workloads sharing a GPU, equally while none runs).", unit("joules")),
    peak_memory: gauge("workload_peak_memory", "The most GPU memory the workload's processes held at once on the GPU.", unit("bytes")),
    left_out: counter("workloads_left_out", "Workloads not accounted because the agent already followed its maximum of live workloads.", None),
}

/// Encodes the workload families of `snapshot`; plain processes only when
/// `processes` (the per-process detail) is on.
pub fn encode(snapshot: &Snapshot, processes: bool, encoder: &mut impl Sink) -> fmt::Result {
    let mut f = Families::new();
    let table = &snapshot.workloads;
    for workload in table.live.iter().chain(&table.ended) {
        if workload.key.kind == WorkloadKind::Process && !processes {
            continue;
        }
        for (device, usage) in &workload.devices {
            let labels = || labels(workload, device);
            f.gpu_seconds.push(labels(), usage.gpu_seconds);
            f.sm_active_seconds.push(labels(), usage.sm_active_seconds);
            f.energy.push(labels(), usage.energy_joules);
            f.peak_memory.push(labels(), usage.peak_memory_bytes as f64);
        }
    }
    f.left_out.push(Vec::new(), table.left_out as f64);
    f.encode(encoder)
}

/// `kind`, `workload` (its id), `gpu`, `gpu_instance` (MIG), and the
/// attributes that are known: `user`, `account`, `partition` (Slurm),
/// `namespace`, `pod` and, where the pod holds GPUs through DRA,
/// `dra_claim` (its claims' names, comma-separated; Kubernetes).
fn labels<'a>(workload: &'a Workload, device: &Device) -> Labels<'a> {
    let mut labels: Labels<'a> = Vec::with_capacity(8);
    labels.push(("kind", Cow::Borrowed(workload.key.kind.as_str())));
    labels.push(("workload", Cow::Borrowed(workload.key.id.as_str())));
    labels.push(("gpu", number(device.gpu)));
    if let Some(instance) = device.gpu_instance_id {
        labels.push(("gpu_instance", number(instance)));
    }
    let a = &workload.attributes;
    for (key, value) in [
        ("user", &a.user),
        ("account", &a.account),
        ("partition", &a.partition),
        ("namespace", &a.namespace),
        ("pod", &a.pod),
    ] {
        if let Some(value) = value {
            labels.push((key, Cow::Borrowed(value.as_str())));
        }
    }
    if !a.dra_claims.is_empty() {
        let mut names: Vec<&str> = a.dra_claims.iter().map(|c| c.name.as_str()).collect();
        names.dedup();
        labels.push(("dra_claim", Cow::Owned(names.join(","))));
    }
    labels
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use prometheus_client::encoding::DescriptorEncoder;
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::gpu::testing::snapshot;
    use crate::gpu::{Usage, WorkloadAttributes, WorkloadKey, WorkloadTable};

    fn workload(kind: WorkloadKind, id: &str, attributes: WorkloadAttributes) -> Workload {
        let device = Device {
            gpu: 3,
            gpu_instance_id: None,
        };
        let usage = Usage {
            gpu_seconds: 40.0,
            sm_active_seconds: 24.0,
            energy_joules: 12_000.0,
            peak_memory_bytes: 1 << 30,
            ..Usage::default()
        };
        Workload::new(
            WorkloadKey {
                kind,
                id: id.into(),
            },
            attributes,
            SystemTime::UNIX_EPOCH,
            SystemTime::UNIX_EPOCH + Duration::from_secs(40),
            BTreeMap::from([(device, usage)]),
        )
    }

    fn text(snapshot: &Snapshot, processes: bool) -> String {
        let mut out = String::new();
        let mut registry = prometheus_client::registry::Registry::with_prefix("gpuwatch");
        #[derive(Debug)]
        struct One(Arc<Snapshot>, bool);
        impl prometheus_client::collector::Collector for One {
            fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
                encode(&self.0, self.1, &mut encoder)
            }
        }
        registry.register_collector(Box::new(One(Arc::new(snapshot.clone()), processes)));
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encodes");
        out
    }

    #[test]
    fn a_slurm_job_has_its_counters_and_a_plain_process_only_with_the_detail() {
        let mut snapshot = snapshot(SystemTime::UNIX_EPOCH, Vec::new());
        let slurm = WorkloadAttributes {
            user: Some("alice".into()),
            account: Some("physics".into()),
            partition: Some("gpu".into()),
            ..WorkloadAttributes::default()
        };
        snapshot.workloads = Arc::new(WorkloadTable {
            live: vec![workload(WorkloadKind::SlurmJob, "9100001", slurm)],
            ended: vec![workload(
                WorkloadKind::Process,
                "4242",
                WorkloadAttributes::default(),
            )],
            left_out: 0,
        });
        let default = text(&snapshot, false);
        let job = r#"{kind="slurm_job",workload="9100001",gpu="3",user="alice",account="physics",partition="gpu"}"#;
        assert!(
            default.contains(&format!("gpuwatch_workload_gpu_seconds_total{job} 40.0")),
            "{default}"
        );
        assert!(
            default.contains(&format!(
                "gpuwatch_workload_sm_active_seconds_total{job} 24.0"
            )),
            "{default}"
        );
        assert!(
            default.contains(&format!(
                "gpuwatch_workload_energy_joules_total{job} 12000.0"
            )),
            "{default}"
        );
        assert!(!default.contains("4242"), "{default}");
        assert!(
            default.contains("gpuwatch_workloads_left_out_total 0"),
            "{default}"
        );
        let full = text(&snapshot, true);
        assert!(full.contains(r#"gpuwatch_workload_gpu_seconds_total{kind="process",workload="4242",gpu="3"} 40.0"#), "{full}");
    }
}
