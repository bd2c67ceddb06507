//! Matching GPU processes to Kubernetes containers.
//!
//! The kubelet names the containers each GPU (or MIG device) is allocated
//! to; a process's cgroup names the UID of the pod it runs in. The two meet
//! on the GPU:
//!
//! - a process in a pod on a device held by exactly one pod belongs to that
//!   pod, and to its container when only one container of the pod holds
//!   the device;
//! - that teaches which pod the UID is, so a process of the same UID on a
//!   shared device (time-slicing or MPS: several pods on one GPU) is
//!   matched too;
//! - nothing is claimed for a process outside any pod (a host process, or a
//!   pod that sees every GPU without requesting one), for a UID seen on
//!   devices held by different pods, or for an unknown UID on a shared GPU.
//!   Those keep their pod UID only.
//!
//! Devices allocated by DRA (NVIDIA's `gpu.nvidia.com` driver) meet the GPU
//! by its minor number (see [`super::dra`]) and then count like the device
//! plugin's; a process attributed through one claim also gets that claim.

use std::collections::HashMap;
use std::sync::Arc;

use crate::gpu::{DraClaim, GpuProcess, GpuSnapshot, PodAllocation, PodContainer};

use super::dra::{self, DraDevice};
use super::PodAllocations;

/// NVIDIA's extended resources (`nvidia.com/gpu`, `nvidia.com/mig-*`): the
/// only ones whose bare numeric device ids are taken as GPU indices.
const NVIDIA_RESOURCE_PREFIX: &str = "nvidia.com/";

/// Sets each GPU's `pods` from `allocations`, and each process's `pod`.
pub fn attribute(gpus: &mut [GpuSnapshot], allocations: &PodAllocations) {
    for gpu in gpus.iter_mut() {
        gpu.pods = Arc::new(gpu_allocations(gpu, allocations));
    }
    let learned = learn_pod_uids(gpus);
    for gpu in gpus.iter_mut() {
        if gpu.processes.is_empty() {
            continue;
        }
        let pods = gpu.pods.clone();
        for process in Arc::make_mut(&mut gpu.processes) {
            let holders = pod_uid(process).and_then(|uid| {
                let mut candidates = candidates(&pods, process.gpu_instance_id);
                if single_pod(&candidates).is_none() {
                    let Some(Some((namespace, name))) = learned.get(uid) else {
                        return None;
                    };
                    candidates.retain(|a| a.owner.namespace == *namespace && a.owner.pod == *name);
                }
                Some(candidates)
            });
            process.pod = holders.as_deref().and_then(owner);
            process.dra_claim = holders
                .as_deref()
                .filter(|_| process.pod.is_some())
                .and_then(single_claim);
        }
    }
}

/// The devices of `gpu` the kubelet allocated: the GPU itself (by UUID, or
/// by NVML index where NVIDIA's device plugin runs with
/// `--device-id-strategy=index`) and its MIG instances (by MIG UUID).
fn gpu_allocations(gpu: &GpuSnapshot, allocations: &PodAllocations) -> Vec<PodAllocation> {
    let index = gpu.index.to_string();
    let by_index = allocations
        .holders(&index)
        .iter()
        .filter(|h| h.resource.starts_with(NVIDIA_RESOURCE_PREFIX));
    let whole = allocations
        .holders(&gpu.uuid)
        .iter()
        .chain(by_index)
        .map(|h| (h, None));
    let mig = gpu.mig_instances.iter().flat_map(|m| {
        allocations
            .holders(&m.uuid)
            .iter()
            .map(move |h| (h, Some(m.gpu_instance_id)))
    });
    let minor = gpu.identity.minor_number;
    let dra = allocations
        .dra_holders()
        .iter()
        .filter(|(device, _)| Some(device.minor()) == minor)
        .filter_map(|(device, holder)| match device {
            DraDevice::Gpu { .. } => Some((holder, None)),
            DraDevice::Mig { profile, .. } => {
                dra::mig_instance(profile, &gpu.mig_instances).map(|id| (holder, Some(id)))
            }
        });
    let mut out: Vec<PodAllocation> = whole
        .chain(mig)
        .chain(dra)
        .filter(|_| !gpu.uuid.is_empty())
        .map(|(holder, gpu_instance_id)| PodAllocation {
            gpu_instance_id,
            ..holder.clone()
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Pod UID → the one pod (namespace, name) its processes were found on
/// devices held by a single pod; `None` where they were found on devices
/// of different pods (then the UID is not trusted).
fn learn_pod_uids(gpus: &[GpuSnapshot]) -> HashMap<String, Option<(String, String)>> {
    let mut learned: HashMap<String, Option<(String, String)>> = HashMap::new();
    for gpu in gpus {
        for process in gpu.processes.iter() {
            let Some(uid) = pod_uid(process) else {
                continue;
            };
            let Some(pod) = single_pod(&candidates(&gpu.pods, process.gpu_instance_id)) else {
                continue;
            };
            let pod = (pod.namespace.clone(), pod.pod.clone());
            learned
                .entry(uid.to_string())
                .and_modify(|known| {
                    if known.as_ref() != Some(&pod) {
                        *known = None;
                    }
                })
                .or_insert(Some(pod));
        }
    }
    learned
}

fn pod_uid(process: &GpuProcess) -> Option<&str> {
    process
        .host
        .as_ref()?
        .container
        .as_ref()?
        .pod_uid
        .as_deref()
}

/// The allocations a process on MIG instance `gpu_instance` (or on the
/// whole GPU) can belong to.
fn candidates(pods: &[PodAllocation], gpu_instance: Option<u32>) -> Vec<&PodAllocation> {
    pods.iter()
        .filter(|a| {
            a.gpu_instance_id.is_none()
                || gpu_instance.is_none()
                || a.gpu_instance_id == gpu_instance
        })
        .collect()
}

/// The pod of `candidates` when they all belong to one.
fn single_pod<'a>(candidates: &[&'a PodAllocation]) -> Option<&'a PodContainer> {
    let first = &candidates.first()?.owner;
    candidates
        .iter()
        .all(|a| a.owner.namespace == first.namespace && a.owner.pod == first.pod)
        .then_some(&**first)
}

/// The DRA claim of `candidates` (all one pod) when they hold the device
/// through exactly one claim.
fn single_claim(candidates: &[&PodAllocation]) -> Option<Arc<DraClaim>> {
    let mut claims = candidates.iter().filter_map(|a| a.claim.as_ref());
    let first = claims.next()?;
    claims
        .all(|c| c.namespace == first.namespace && c.name == first.name)
        .then(|| first.clone())
}

/// The container of `candidates` (all one pod, or nothing is claimed); its
/// container name empty when several containers of the pod hold the device.
fn owner(candidates: &[&PodAllocation]) -> Option<Arc<PodContainer>> {
    let pod = single_pod(candidates)?;
    let first = &candidates[0].owner;
    if candidates
        .iter()
        .all(|a| a.owner.container == first.container)
    {
        Some(first.clone())
    } else {
        Some(Arc::new(PodContainer {
            container: String::new(),
            ..pod.clone()
        }))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod dra_tests;
