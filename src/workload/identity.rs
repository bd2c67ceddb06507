//! Who a GPU process works for: one workload key per (kind, id), from what
//! the sampler learned of the process (its Slurm job, its pod, its
//! container, or the process itself), in that order of preference.

use crate::gpu::{GpuProcess, WorkloadAttributes, WorkloadKey, WorkloadKind};

/// The workload `process` works for, and what is known of it.
pub fn of_process(process: &GpuProcess) -> (WorkloadKey, WorkloadAttributes) {
    let host = process.host.as_deref();
    let user = host.and_then(|h| h.user.clone());
    let mut attributes = WorkloadAttributes {
        user,
        command: process.name.clone(),
        ..WorkloadAttributes::default()
    };
    if let Some(job) = host.and_then(|h| h.slurm.as_ref()) {
        if job.user.is_some() {
            attributes.user = job.user.clone();
        }
        attributes.account = job.account.clone();
        attributes.partition = job.partition.clone();
        return (
            key(WorkloadKind::SlurmJob, job.job_id.to_string()),
            attributes,
        );
    }
    if let Some(job) = &process.mapped_job {
        return (key(WorkloadKind::SlurmJob, job.clone()), attributes);
    }
    if let Some(pod) = &process.pod {
        attributes.namespace = Some(pod.namespace.clone());
        attributes.pod = Some(pod.pod.clone());
        attributes.dra_claims = process.dra_claim.iter().map(|c| (**c).clone()).collect();
        let id = format!("{}/{}", pod.namespace, pod.pod);
        return (key(WorkloadKind::Pod, id), attributes);
    }
    if let Some(container) = host.and_then(|h| h.container.as_ref()) {
        return (
            key(WorkloadKind::Container, container.id.clone()),
            attributes,
        );
    }
    (
        key(WorkloadKind::Process, process.pid.to_string()),
        attributes,
    )
}

fn key(kind: WorkloadKind, id: String) -> WorkloadKey {
    WorkloadKey { kind, id }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::gpu::{Container, HostProcess, PodContainer, SlurmJob};

    #[test]
    fn the_most_specific_identity_wins() {
        let container = Container {
            id: "c".repeat(64),
            runtime: None,
            pod_uid: None,
        };
        let job = SlurmJob {
            job_id: 9100001,
            step: Some("0".into()),
            user: Some("alice".into()),
            account: Some("physics".into()),
            partition: Some("gpu".into()),
        };
        let host = |slurm: Option<SlurmJob>, container: Option<Container>| {
            Some(Arc::new(HostProcess {
                user: Some("uid-user".into()),
                container,
                slurm,
                ..HostProcess::default()
            }))
        };
        let pod = Some(Arc::new(PodContainer {
            namespace: "ml".into(),
            pod: "trainer-0".into(),
            container: "main".into(),
        }));
        let process = |host, pod| GpuProcess {
            pid: 4242,
            name: Some("python3".into()),
            host,
            pod,
            ..GpuProcess::default()
        };
        let (k, a) = of_process(&process(
            host(Some(job), Some(container.clone())),
            pod.clone(),
        ));
        assert_eq!((k.kind, k.id.as_str()), (WorkloadKind::SlurmJob, "9100001"));
        assert_eq!(
            (a.user.as_deref(), a.account.as_deref()),
            (Some("alice"), Some("physics"))
        );
        let (k, a) = of_process(&process(host(None, Some(container.clone())), pod));
        assert_eq!((k.kind, k.id.as_str()), (WorkloadKind::Pod, "ml/trainer-0"));
        assert_eq!(a.namespace.as_deref(), Some("ml"));
        let (k, _) = of_process(&process(host(None, Some(container.clone())), None));
        assert_eq!((k.kind, k.id), (WorkloadKind::Container, container.id));
        let (k, a) = of_process(&process(None, None));
        assert_eq!((k.kind, k.id.as_str()), (WorkloadKind::Process, "4242"));
        assert_eq!(a.command.as_deref(), Some("python3"));
        for kind in WorkloadKind::ALL {
            assert_eq!(WorkloadKind::parse(kind.as_str()), Some(kind));
        }
    }
}
