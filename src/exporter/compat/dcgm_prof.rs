//! dcgm-exporter's profiling names (`DCGM_FI_PROF_*`) from GPM readings, and
//! `DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL`.
//!
//! Units are dcgm-exporter's: activity as ratios 0..1 (not %), PCIe and
//! NVLink in bytes per second. HELP texts are those of its
//! `etc/dcp-metrics-included.csv`. On a GPU with MIG instances the activity
//! fields are per instance (labels `GPU_I_ID`, as DCGM reports profiling
//! fields of MIG GPUs per GPU instance, and `GPU_I_PROFILE`, e.g. "1g.10gb",
//! empty when NVML cannot tell); PCIe and NVLink stay per GPU.
//!
//! `DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL` is what DCGM publishes for field 449:
//! despite the `counter` in dcgm-exporter's CSV, the NVLink throughput (TX +
//! RX over all links) in MiB/s — exported untyped, like the other counters.

use std::borrow::Cow;
use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;

use crate::families::{Family, Labels};
use crate::gpu::gpm::GpmMetrics;
use crate::gpu::Snapshot;

use super::dcgm_labels::labels;
use super::dcgm_workload::copies;
use super::tidy;

const MIB: f64 = 1024.0 * 1024.0;

/// Activity fields: (name, HELP, value).
type Field = (&'static str, &'static str, fn(&GpmMetrics) -> Option<f64>);

const ACTIVITY: [Field; 11] = [
    (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "Ratio of time the graphics engine is active.",
        |m| m.graphics_engine_active_ratio,
    ),
    (
        "DCGM_FI_PROF_SM_ACTIVE",
        "The ratio of cycles an SM has at least 1 warp assigned.",
        |m| m.sm_active_ratio,
    ),
    (
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "The ratio of number of warps resident on an SM.",
        |m| m.sm_occupancy_ratio,
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        |m| m.tensor_active_ratio,
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        |m| m.tensor_hmma_active_ratio,
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE",
        "Ratio of cycles the tensor (IMMA) pipe is active.",
        |m| m.tensor_imma_active_ratio,
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE",
        "Ratio of cycles the tensor (DFMA) pipe is active.",
        |m| m.tensor_dfma_active_ratio,
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        |m| m.dram_active_ratio,
    ),
    (
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        "Ratio of cycles the fp64 pipes are active.",
        |m| m.fp64_active_ratio,
    ),
    (
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        "Ratio of cycles the fp32 pipes are active.",
        |m| m.fp32_active_ratio,
    ),
    (
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
        "Ratio of cycles the fp16 pipes are active.",
        |m| m.fp16_active_ratio,
    ),
];

const TRAFFIC: [Field; 4] = [
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", |m| m.pcie_tx_bytes_per_second),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", |m| m.pcie_rx_bytes_per_second),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.", |m| m.nvlink_tx_bytes_per_second),
    ("DCGM_FI_PROF_NVLINK_RX_BYTES", "The rate of data received over NVLink, not including protocol headers, in bytes per second.", |m| m.nvlink_rx_bytes_per_second),
];

/// Encodes the `DCGM_FI_PROF_*` families and the NVLink bandwidth total;
/// with `hpc_job`, one copy of a device's series per Slurm job on it.
pub fn encode(snapshot: &Snapshot, hpc_job: bool, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let mut activity: Vec<Family> = ACTIVITY
        .iter()
        .map(|(name, help, _)| Family::gauge(name, help, None))
        .collect();
    let mut traffic: Vec<Family> = TRAFFIC
        .iter()
        .map(|(name, help, _)| Family::gauge(name, help, None))
        .collect();
    let mut bandwidth = Family::untyped(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "Total number of NVLink bandwidth counters for all lanes.",
    );
    for gpu in snapshot.gpus.iter().filter(|g| g.is_up()) {
        let instances = &gpu.gpm.instances;
        for instance in instances {
            let profile = gpu
                .mig_instances
                .iter()
                .find(|m| m.gpu_instance_id == instance.gpu_instance_id)
                .and_then(|m| m.profile.as_deref())
                .unwrap_or("");
            for extra in copies(gpu, Some(instance.gpu_instance_id), hpc_job) {
                let with_instance = || -> Labels {
                    let mut l = labels(snapshot, gpu);
                    l.push(("GPU_I_PROFILE", Cow::Borrowed(profile)));
                    l.push(("GPU_I_ID", Cow::Owned(instance.gpu_instance_id.to_string())));
                    l.extend(extra.iter().cloned());
                    l
                };
                push_all(&mut activity, &ACTIVITY, with_instance, &instance.metrics);
            }
        }
        let Some(m) = &gpu.gpm.gpu else { continue };
        for extra in copies(gpu, None, hpc_job) {
            let id = || -> Labels {
                let mut l = labels(snapshot, gpu);
                l.extend(extra.iter().cloned());
                l
            };
            if instances.is_empty() {
                push_all(&mut activity, &ACTIVITY, id, m);
            }
            push_all(&mut traffic, &TRAFFIC, id, m);
            if let (Some(tx), Some(rx)) =
                (m.nvlink_tx_bytes_per_second, m.nvlink_rx_bytes_per_second)
            {
                bandwidth.push(id(), tidy((tx + rx) / MIB));
            }
        }
    }
    for family in activity.iter().chain(&traffic) {
        family.encode(encoder)?;
    }
    bandwidth.encode(encoder)
}

fn push_all<'a>(
    families: &mut [Family<'a>],
    fields: &[Field],
    labels: impl Fn() -> Labels<'a>,
    m: &GpmMetrics,
) {
    for (family, (_, _, value)) in families.iter_mut().zip(fields) {
        family.push_some(labels(), value(m).map(tidy));
    }
}
