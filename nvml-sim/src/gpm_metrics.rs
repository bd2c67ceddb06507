//! The GPM metric ids NVML defines (`nvmlGpmMetricId_t`), and the names
//! and units the simulator reports for the ones it answers: what a scenario
//! may list as unsupported, what the engine computes and what
//! nvmlGpmMetricsGet describes.

use std::ffi::CString;
use std::sync::OnceLock;

/// `NVML_GPM_METRIC_MAX` of nvml-wrapper-sys 0.10: ids are below it.
pub const METRIC_MAX: u32 = 210;

/// Whether `id` is an nvmlGpmMetricId_t value (the bindings skip 8, 14-19,
/// 22-29, 38-39, 48-49, 52-59 and 98-99).
pub fn is_metric_id(id: u32) -> bool {
    matches!(id, 1..=7 | 9..=13 | 20 | 21 | 30..=37 | 40..=47 | 50 | 51 | 60..=97 | 100..=209)
}

/// (short name, long name, unit) of a metric the simulator answers; the
/// strings live for the whole process (metricInfo points at them). Indexed
/// by id: every metrics call looks up each metric it answers.
pub fn info(id: u32) -> Option<&'static (CString, CString, CString)> {
    static TABLE: OnceLock<Vec<Option<(CString, CString, CString)>>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            let mut t = vec![None; METRIC_MAX as usize];
            let mut add = |id: u32, short: String, long: String, unit: &str| {
                let c = |s: String| CString::new(s).unwrap_or_default();
                if let Some(slot) = t.get_mut(id as usize) {
                    *slot = Some((c(short), c(long), c(unit.to_string())));
                }
            };
            for (id, short, long) in [
                (1, "graphics_util", "Graphics/compute engine activity"),
                (2, "sm_util", "SM activity"),
                (3, "sm_occupancy", "SM occupancy"),
                (4, "integer_util", "Integer pipe activity"),
                (5, "any_tensor_util", "Tensor pipe activity (any)"),
                (6, "dfma_tensor_util", "DFMA tensor pipe activity"),
                (7, "hmma_tensor_util", "HMMA tensor pipe activity"),
                (9, "imma_tensor_util", "IMMA tensor pipe activity"),
                (10, "dram_bw_util", "DRAM bandwidth utilization"),
                (11, "fp64_util", "FP64 pipe activity"),
                (12, "fp32_util", "FP32 pipe activity"),
                (13, "fp16_util", "FP16 pipe activity"),
            ] {
                add(id, short.into(), long.into(), "%");
            }
            add(
                20,
                "pcie_tx_per_sec".into(),
                "PCIe traffic from the GPU".into(),
                "MiB/sec",
            );
            add(
                21,
                "pcie_rx_per_sec".into(),
                "PCIe traffic to the GPU".into(),
                "MiB/sec",
            );
            for n in 0..8 {
                add(
                    30 + n,
                    format!("nvdec{n}_util"),
                    format!("NVDEC {n} utilization"),
                    "%",
                );
                add(
                    40 + n,
                    format!("nvjpg{n}_util"),
                    format!("NVJPG {n} utilization"),
                    "%",
                );
            }
            for n in 0..2 {
                add(
                    50 + n,
                    format!("nvofa{n}_util"),
                    format!("NVOFA {n} utilization"),
                    "%",
                );
            }
            add(
                60,
                "nvlink_total_rx_per_sec".into(),
                "NVLink read bandwidth, all links".into(),
                "MiB/sec",
            );
            add(
                61,
                "nvlink_total_tx_per_sec".into(),
                "NVLink write bandwidth, all links".into(),
                "MiB/sec",
            );
            for l in 0..18 {
                add(
                    62 + 2 * l,
                    format!("nvlink_l{l}_rx_per_sec"),
                    format!("NVLink read bandwidth, link {l}"),
                    "MiB/sec",
                );
                add(
                    63 + 2 * l,
                    format!("nvlink_l{l}_tx_per_sec"),
                    format!("NVLink write bandwidth, link {l}"),
                    "MiB/sec",
                );
            }
            t
        })
        .get(id as usize)?
        .as_ref()
}
