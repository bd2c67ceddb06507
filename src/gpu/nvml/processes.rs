//! Processes on a GPU (compute, graphics, MPS clients), their SM and memory
//! utilization, and the MIG GPU instances.

use std::collections::BTreeMap;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;

use super::{GpuDevice, Tally};
use crate::gpu::snapshot::{FieldGroup, GpuProcess, MigInstance, ProcessKind};

impl GpuDevice<'_> {
    /// The processes with a compute or graphics context on this GPU (MPS
    /// clients included, marked), without names (the sampler resolves those).
    pub fn read_processes(&self, tally: &mut Tally) -> Option<Vec<GpuProcess>> {
        let d = &self.device;
        let group = FieldGroup::Processes;
        let compute = tally.call(group, "nvmlDeviceGetComputeRunningProcesses_v3", || {
            super::raw::compute_processes(d, &self.capacities)
        });
        let graphics = tally.call(group, "nvmlDeviceGetGraphicsRunningProcesses_v3", || {
            d.running_graphics_processes()
        });
        if compute.is_none() && graphics.is_none() {
            return None;
        }
        let mps = tally.call(group, "nvmlDeviceGetMPSComputeRunningProcesses_v3", || {
            d.mps_running_compute_processes()
        });
        let mut by_pid: BTreeMap<u32, GpuProcess> = BTreeMap::new();
        let lists = [
            (ProcessKind::Compute, false, compute.unwrap_or_default()),
            (ProcessKind::Graphics, false, graphics.unwrap_or_default()),
            (ProcessKind::Compute, true, mps.unwrap_or_default()),
        ];
        for (kind, mps_client, list) in lists {
            for info in list {
                let memory = match info.used_gpu_memory {
                    UsedGpuMemory::Used(bytes) => Some(bytes),
                    UsedGpuMemory::Unavailable => None,
                };
                by_pid
                    .entry(info.pid)
                    .and_modify(|p| {
                        if p.kind != kind {
                            p.kind = ProcessKind::ComputeAndGraphics;
                        }
                        p.used_memory_bytes = p.used_memory_bytes.max(memory);
                        p.mps_client |= mps_client;
                    })
                    .or_insert(GpuProcess {
                        pid: info.pid,
                        kind,
                        used_memory_bytes: memory,
                        gpu_instance_id: info.gpu_instance_id,
                        compute_instance_id: info.compute_instance_id,
                        mps_client,
                        ..GpuProcess::default()
                    });
            }
        }
        Some(by_pid.into_values().collect())
    }

    /// The MIG GPU instances of this GPU (call only while MIG is on): one
    /// entry per MIG device, with its memory and profile (the profile of a
    /// device `known` already lists by UUID is kept, not read again).
    pub fn read_mig_instances(
        &self,
        known: &[MigInstance],
        tally: &mut Tally,
    ) -> Option<Vec<MigInstance>> {
        let d = &self.device;
        let group = FieldGroup::Device;
        let count = tally.call(group, "nvmlDeviceGetMaxMigDeviceCount", || {
            d.mig_device_count()
        })?;
        let mut out = Vec::new();
        for i in 0..count {
            // Indices without a MIG device answer NOT_FOUND: skip them.
            let Ok(mig) = d.mig_device_by_index(i) else {
                continue;
            };
            let Some(memory) =
                tally.call(group, "nvmlDeviceGetMemoryInfo_v2", || mig.memory_info())
            else {
                continue;
            };
            let id = tally.call(group, "nvmlDeviceGetGpuInstanceId", || {
                super::raw::gpu_instance_id(&mig)
            });
            let uuid = tally
                .call(group, "nvmlDeviceGetUUID", || mig.uuid())
                .unwrap_or_default();
            let profile = super::mig_profile::read_profile(&mig, &uuid, known, tally);
            out.push(MigInstance {
                gpu_instance_id: id.unwrap_or(i),
                uuid,
                profile,
                memory_total_bytes: memory.total,
                memory_used_bytes: memory.used,
            });
        }
        Some(out)
    }

    /// Per-process SM and memory utilization since `last_seen` (µs, CPU
    /// time; 0 for everything NVML still holds), averaged over the samples
    /// of each pid, as 0..1 ratios; with the newest sample's timestamp, to
    /// pass as `last_seen` next time. `None` where the GPU cannot tell.
    pub fn read_process_utilization(
        &self,
        last_seen: u64,
        tally: &mut Tally,
    ) -> Option<(ProcessUtilization, u64)> {
        let d = &self.device;
        let samples = tally.call(
            FieldGroup::Processes,
            "nvmlDeviceGetProcessUtilization",
            || match super::raw::process_utilization(d, last_seen, &self.capacities) {
                // NOT_FOUND: no sample newer than last_seen (all idle).
                Err(NvmlError::NotFound) => Ok(Vec::new()),
                other => other,
            },
        )?;
        let mut newest = last_seen;
        let mut sums: BTreeMap<u32, (f64, f64, u32)> = BTreeMap::new();
        for s in samples.iter().filter(|s| s.timestamp > last_seen) {
            newest = newest.max(s.timestamp);
            let e = sums.entry(s.pid).or_default();
            e.0 += f64::from(s.sm_util);
            e.1 += f64::from(s.mem_util);
            e.2 += 1;
        }
        let averages = sums
            .into_iter()
            .map(|(pid, (sm, mem, n))| {
                let n = f64::from(n.max(1));
                (
                    pid,
                    (
                        (sm / n / 100.0).clamp(0.0, 1.0),
                        (mem / n / 100.0).clamp(0.0, 1.0),
                    ),
                )
            })
            .collect();
        Some((averages, newest))
    }
}

/// Per-pid (SM, memory) utilization ratios of one interval.
pub type ProcessUtilization = BTreeMap<u32, (f64, f64)>;
