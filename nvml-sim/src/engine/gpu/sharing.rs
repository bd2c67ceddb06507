//! How a simulated GPU is shared: per-process utilization samples, MPS
//! clients and MIG GPU instances, all driven by the scenario's processes.

use super::GpuSim;
use crate::engine::{ProcessSample, Unavailable};
use crate::scenario::schema::ProcessKind;
use crate::scenario::Feature;

/// One process's utilization sample (nvmlProcessUtilizationSample_t).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessUtilization {
    /// Process id.
    pub pid: u32,
    /// SM utilization, %.
    pub sm_percent: u32,
    /// Frame buffer (memory controller) utilization, %.
    pub memory_percent: u32,
}

/// One MIG GPU instance at some time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigInstance {
    /// GPU instance id.
    pub id: u32,
    /// Profile name, e.g. "1g.10gb".
    pub profile: String,
    /// Memory of the instance, bytes.
    pub memory_total: u64,
    /// Memory its processes use, bytes.
    pub memory_used: u64,
}

impl GpuSim {
    /// Utilization of each compute process at `t`: a process with its own
    /// `sm_percent` uses that; the others share the GPU's utilization in
    /// proportion to their memory. Memory utilization is shared the same way.
    pub fn process_utilization(&self, t: f64) -> Result<Vec<ProcessUtilization>, Unavailable> {
        self.check(Some(Feature::Processes), t)?;
        let compute: Vec<ProcessSample> = self
            .all_processes(t)
            .into_iter()
            .filter(|p| p.kind == ProcessKind::Compute)
            .collect();
        let total: f64 = compute.iter().map(|p| p.used_bytes as f64).sum();
        let (gpu, mem) = (self.util_gpu(t), self.util_mem(t));
        Ok(compute
            .iter()
            .map(|p| {
                let share = if total > 0.0 {
                    p.used_bytes as f64 / total
                } else {
                    1.0 / compute.len() as f64
                };
                ProcessUtilization {
                    pid: p.pid,
                    sm_percent: p.sm_percent.unwrap_or(gpu * share).round() as u32,
                    memory_percent: (mem * share).round() as u32,
                }
            })
            .collect())
    }

    /// The MPS clients running at `t`.
    pub fn mps_processes(&self, t: f64) -> Result<Vec<ProcessSample>, Unavailable> {
        self.check(Some(Feature::Processes), t)?;
        let mut list = self.all_processes(t);
        list.retain(|p| p.mps_client);
        Ok(list)
    }

    /// The MIG GPU instances at `t` (none while MIG is off); NOT_SUPPORTED
    /// on GPUs without MIG.
    pub fn mig_instances(&self, t: f64) -> Result<Vec<MigInstance>, Unavailable> {
        if !self.mig(t)? {
            return Ok(Vec::new());
        }
        let processes = self.all_processes(t);
        Ok(self
            .spec()
            .mig_instances
            .iter()
            .map(|m| MigInstance {
                id: m.id,
                profile: m.profile.clone(),
                memory_total: m.memory_mib * 1024 * 1024,
                memory_used: processes
                    .iter()
                    .filter(|p| p.gpu_instance == Some(m.id))
                    .map(|p| p.used_bytes)
                    .sum::<u64>()
                    .min(m.memory_mib * 1024 * 1024),
            })
            .collect())
    }
}
