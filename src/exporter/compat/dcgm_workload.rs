//! dcgm-exporter's workload labels on the `DCGM_FI_*` series of a GPU (or
//! MIG instance), as dcgm-exporter multiplies them:
//!
//! - `hpc_job`: one series per Slurm job on the device (dcgm-exporter's
//!   `--hpc-job-mapping-dir`); off unless `[exporter] compat_hpc_job`.
//!   gpuwatch's jobs are those of the mapping directory (where configured)
//!   and those its processes show (cgroup or environment).
//! - `dra_claim_name`, `dra_claim_namespace`, `dra_driver`, `dra_pool`,
//!   `dra_device`: one series per DRA claim device on the device
//!   (dcgm-exporter's `--kubernetes-enable-dra`), always on: they appear
//!   only where the kubelet names DRA claims.
//!
//! A device with neither keeps its one series without these labels.

use std::borrow::Cow;

use crate::gpu::{DraClaim, GpuSnapshot};

/// The labels one copy of a device's series adds.
pub(super) type Extra = Vec<(&'static str, Cow<'static, str>)>;

/// The most jobs (and, apart, claim devices) that multiply one device's
/// series: a bound on what a misbehaving mapping directory can cost.
const MAX_COPIES: usize = 64;

/// The label sets a device's series are copied with: at least one (empty
/// where no job or claim applies).
pub(super) fn copies(gpu: &GpuSnapshot, gpu_instance: Option<u32>, hpc_job: bool) -> Vec<Extra> {
    let jobs = if hpc_job {
        jobs(gpu, gpu_instance)
    } else {
        Vec::new()
    };
    let claims = claims(gpu, gpu_instance);
    let job_sets: Vec<Extra> = if jobs.is_empty() {
        vec![Vec::new()]
    } else {
        jobs.into_iter()
            .map(|job| vec![("hpc_job", Cow::Owned(job))])
            .collect()
    };
    let mut out = Vec::with_capacity(job_sets.len() * claims.len().max(1));
    for set in job_sets {
        if claims.is_empty() {
            out.push(set);
            continue;
        }
        for claim in &claims {
            let mut labels = set.clone();
            labels.extend([
                ("dra_claim_name", Cow::Owned(claim.name.clone())),
                ("dra_claim_namespace", Cow::Owned(claim.namespace.clone())),
                ("dra_driver", Cow::Owned(claim.driver.clone())),
                ("dra_pool", Cow::Owned(claim.pool.clone())),
                ("dra_device", Cow::Owned(claim.device.clone())),
            ]);
            out.push(labels);
        }
    }
    out
}

/// The Slurm jobs on the device: the mapping directory's and the
/// processes' own, sorted, without duplicates.
fn jobs(gpu: &GpuSnapshot, gpu_instance: Option<u32>) -> Vec<String> {
    let mapped = gpu
        .hpc_jobs
        .iter()
        .filter(|m| m.gpu_instance_id == gpu_instance)
        .map(|m| m.job.clone());
    let running = gpu
        .processes
        .iter()
        .filter(|p| p.gpu_instance_id == gpu_instance)
        .filter_map(|p| {
            let own = p
                .host
                .as_ref()?
                .slurm
                .as_ref()
                .map(|j| j.job_id.to_string());
            own.or_else(|| p.mapped_job.clone())
        });
    let mut jobs: Vec<String> = mapped.chain(running).collect();
    jobs.sort();
    jobs.dedup();
    jobs.truncate(MAX_COPIES);
    jobs
}

/// The DRA claim devices allocated on the device.
fn claims(gpu: &GpuSnapshot, gpu_instance: Option<u32>) -> Vec<&DraClaim> {
    let mut claims: Vec<&DraClaim> = gpu
        .pods
        .iter()
        .filter(|a| a.gpu_instance_id == gpu_instance)
        .filter_map(|a| a.claim.as_deref())
        .collect();
    claims.sort();
    claims.dedup();
    claims.truncate(MAX_COPIES);
    claims
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::gpu::{
        testing, GpuProcess, HostProcess, MappedJob, PodAllocation, PodContainer, SlurmJob,
    };

    fn names(copies: &[Extra]) -> Vec<String> {
        copies
            .iter()
            .map(|set| {
                set.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    #[test]
    fn one_copy_per_job_when_asked_and_per_claim_device() {
        let mut gpu = testing::gpu(0);
        gpu.hpc_jobs = Arc::new(vec![
            MappedJob {
                gpu_instance_id: None,
                job: "9100002".into(),
            },
            MappedJob {
                gpu_instance_id: Some(1),
                job: "9100009".into(),
            },
        ]);
        gpu.processes = Arc::new(vec![GpuProcess {
            pid: 1,
            host: Some(Arc::new(HostProcess {
                slurm: Some(SlurmJob {
                    job_id: 9100001,
                    step: None,
                    user: None,
                    account: None,
                    partition: None,
                }),
                ..HostProcess::default()
            })),
            ..GpuProcess::default()
        }]);
        assert_eq!(names(&copies(&gpu, None, false)), vec![String::new()]);
        assert_eq!(
            names(&copies(&gpu, None, true)),
            vec!["hpc_job=9100001", "hpc_job=9100002"]
        );
        assert_eq!(names(&copies(&gpu, Some(1), true)), vec!["hpc_job=9100009"]);

        let claim = |name: &str| {
            Some(Arc::new(DraClaim {
                namespace: "ml".into(),
                name: name.into(),
                driver: "gpu.nvidia.com".into(),
                pool: "node-a".into(),
                device: "gpu-0".into(),
            }))
        };
        let owner = Arc::new(PodContainer {
            namespace: "ml".into(),
            pod: "a".into(),
            container: "c".into(),
        });
        gpu.pods = Arc::new(vec![
            PodAllocation {
                owner: owner.clone(),
                resource: "gpu.nvidia.com".into(),
                gpu_instance_id: None,
                claim: claim("b"),
            },
            PodAllocation {
                owner: owner.clone(),
                resource: "gpu.nvidia.com".into(),
                gpu_instance_id: None,
                claim: claim("a"),
            },
            PodAllocation {
                owner,
                resource: "nvidia.com/gpu".into(),
                gpu_instance_id: None,
                claim: None,
            },
        ]);
        let dra =
            "dra_claim_namespace=ml dra_driver=gpu.nvidia.com dra_pool=node-a dra_device=gpu-0";
        assert_eq!(
            names(&copies(&gpu, None, false)),
            vec![
                format!("dra_claim_name=a {dra}"),
                format!("dra_claim_name=b {dra}")
            ]
        );
        assert_eq!(copies(&gpu, None, true).len(), 4, "2 jobs × 2 claims");
    }
}
