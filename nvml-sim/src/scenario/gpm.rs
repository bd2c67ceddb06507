//! `[gpu.gpm]` (and `[gpu.mig_instances.gpm]`): the GPM activity timelines
//! of a Hopper-or-newer GPU or of one of its MIG GPU instances.

use super::timeline::TimelineSpec;
use serde::Deserialize;
use toml::Spanned;

/// GPM timelines. Percentages are 0-100 (as NVML reports the `*_UTIL`
/// metrics); PCIe rates are MiB/s. An absent timeline takes the default the
/// README documents.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpmSpec {
    /// Time any context was active on the graphics/compute engine, %
    /// (NVML_GPM_METRIC_GRAPHICS_UTIL). Default: the GPU's utilization_gpu.
    pub gr_engine_active: Option<Spanned<TimelineSpec>>,
    /// SMs busy, % (SM_UTIL). Default: gr_engine_active.
    pub sm_active: Option<Spanned<TimelineSpec>>,
    /// Warps resident vs the maximum, % (SM_OCCUPANCY). Default: sm_active / 2.
    pub sm_occupancy: Option<Spanned<TimelineSpec>>,
    /// Integer pipe active, % (INTEGER_UTIL). Default 0.
    pub int_active: Option<Spanned<TimelineSpec>>,
    /// Any tensor pipe active, % (ANY_TENSOR_UTIL). Default: hmma + imma + dfma.
    pub tensor_active: Option<Spanned<TimelineSpec>>,
    /// DFMA (FP64) tensor pipe, % (DFMA_TENSOR_UTIL). Default 0.
    pub dfma_active: Option<Spanned<TimelineSpec>>,
    /// HMMA (FP16/BF16) tensor pipe, % (HMMA_TENSOR_UTIL). Default:
    /// tensor_active − imma − dfma.
    pub hmma_active: Option<Spanned<TimelineSpec>>,
    /// IMMA (integer) tensor pipe, % (IMMA_TENSOR_UTIL). Default 0.
    pub imma_active: Option<Spanned<TimelineSpec>>,
    /// DRAM bandwidth used vs the maximum, % (DRAM_BW_UTIL). Default: the
    /// GPU's utilization_memory.
    pub dram_active: Option<Spanned<TimelineSpec>>,
    /// Non-tensor FP64 pipe, % (FP64_UTIL). Default 0.
    pub fp64_active: Option<Spanned<TimelineSpec>>,
    /// Non-tensor FP32 pipe, % (FP32_UTIL). Default 0.
    pub fp32_active: Option<Spanned<TimelineSpec>>,
    /// Non-tensor FP16 pipe, % (FP16_UTIL). Default 0.
    pub fp16_active: Option<Spanned<TimelineSpec>>,
    /// PCIe traffic from the GPU, MiB/s (PCIE_TX_PER_SEC). Default 0.
    pub pcie_tx_mib_s: Option<Spanned<TimelineSpec>>,
    /// PCIe traffic to the GPU, MiB/s (PCIE_RX_PER_SEC). Default 0.
    pub pcie_rx_mib_s: Option<Spanned<TimelineSpec>>,
    /// Each NVDEC engine's utilization, % (NVDEC_n_UTIL). Default: the GPU's
    /// decoder_percent.
    pub nvdec: Option<Spanned<TimelineSpec>>,
    /// Each NVJPG engine's utilization, % (NVJPG_n_UTIL). Default 0.
    pub nvjpg: Option<Spanned<TimelineSpec>>,
    /// Each NVOFA engine's utilization, % (NVOFA_n_UTIL). Default 0.
    pub nvofa: Option<Spanned<TimelineSpec>>,
    /// NVDEC engines (metrics of the others are NOT_SUPPORTED); H100: 7.
    pub nvdec_engines: Spanned<u32>,
    /// NVJPG engines; H100: 7.
    pub nvjpg_engines: Spanned<u32>,
    /// NVOFA engines; H100: 1.
    pub nvofa_engines: Spanned<u32>,
    /// GPM metric ids (nvmlGpmMetricId_t numbers) answered NOT_SUPPORTED.
    pub unsupported: Vec<Spanned<u32>>,
}

impl Default for GpmSpec {
    fn default() -> Self {
        GpmSpec {
            gr_engine_active: None,
            sm_active: None,
            sm_occupancy: None,
            int_active: None,
            tensor_active: None,
            dfma_active: None,
            hmma_active: None,
            imma_active: None,
            dram_active: None,
            fp64_active: None,
            fp32_active: None,
            fp16_active: None,
            pcie_tx_mib_s: None,
            pcie_rx_mib_s: None,
            nvdec: None,
            nvjpg: None,
            nvofa: None,
            nvdec_engines: Spanned::new(0..0, 7),
            nvjpg_engines: Spanned::new(0..0, 7),
            nvofa_engines: Spanned::new(0..0, 1),
            unsupported: Vec::new(),
        }
    }
}

impl GpmSpec {
    /// Every timeline with its key, for validation.
    pub fn timelines(&self) -> [(&'static str, &Option<Spanned<TimelineSpec>>); 17] {
        [
            ("gr_engine_active", &self.gr_engine_active),
            ("sm_active", &self.sm_active),
            ("sm_occupancy", &self.sm_occupancy),
            ("int_active", &self.int_active),
            ("tensor_active", &self.tensor_active),
            ("dfma_active", &self.dfma_active),
            ("hmma_active", &self.hmma_active),
            ("imma_active", &self.imma_active),
            ("dram_active", &self.dram_active),
            ("fp64_active", &self.fp64_active),
            ("fp32_active", &self.fp32_active),
            ("fp16_active", &self.fp16_active),
            ("pcie_tx_mib_s", &self.pcie_tx_mib_s),
            ("pcie_rx_mib_s", &self.pcie_rx_mib_s),
            ("nvdec", &self.nvdec),
            ("nvjpg", &self.nvjpg),
            ("nvofa", &self.nvofa),
        ]
    }

    /// Checks timelines, engine counts (NVML has metric ids for 8 NVDEC,
    /// 8 NVJPG and 2 NVOFA engines) and `unsupported` ids. Errors are
    /// (span, field name under the table, message).
    pub fn check(&self) -> Result<(), (std::ops::Range<usize>, String, String)> {
        for (name, timeline) in self.timelines() {
            if let Some(t) = timeline {
                t.get_ref()
                    .validate()
                    .map_err(|msg| (t.span(), name.to_string(), msg))?;
            }
        }
        for (name, engines, most) in [
            ("nvdec_engines", &self.nvdec_engines, 8),
            ("nvjpg_engines", &self.nvjpg_engines, 8),
            ("nvofa_engines", &self.nvofa_engines, 2),
        ] {
            if *engines.get_ref() > most {
                return Err((
                    engines.span(),
                    name.into(),
                    format!("NVML has GPM metrics for at most {most} of these engines"),
                ));
            }
        }
        for (i, id) in self.unsupported.iter().enumerate() {
            if !crate::gpm_metrics::is_metric_id(*id.get_ref()) {
                return Err((
                    id.span(),
                    format!("unsupported[{i}]"),
                    format!(
                        "{} is not an NVML GPM metric id (nvmlGpmMetricId_t, 1..{})",
                        id.get_ref(),
                        crate::gpm_metrics::METRIC_MAX
                    ),
                ));
            }
        }
        Ok(())
    }
}
