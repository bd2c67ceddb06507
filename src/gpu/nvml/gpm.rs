//! GPM (GPU Performance Monitoring, Hopper and newer): the only module that
//! uses nvml-wrapper's GPM types.
//!
//! Each GPU with GPM takes one sample per fast tick and keeps it; the
//! metrics are computed from the previous sample and the new one
//! (`nvmlGpmMetricsGet`), so the first tick has none. With MIG on, each GPU
//! instance is sampled the same way (`nvmlGpmMigSampleGet`). Calls per GPU
//! (and per MIG instance) per tick: sample alloc + get, metrics get, and the
//! free of the previous sample — 4. Streaming mode is left as it is (off by
//! default): one sample per second needs no driver-side buffering.
//!
//! NVML's units (nvml.h): `*_UTIL` in % 0-100, PCIe and NVLink in MiB/s;
//! readings are converted to ratios 0..1 and bytes per second.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::gpm::{gpm_metrics_get, GpmSample};

use super::{GpuDevice, Tally};
use crate::gpu::gpm::{GpmMetrics, GpmReadings, InstanceGpm, LinkTraffic, MediaEngineActivity};
use crate::gpu::snapshot::FieldGroup;

const MIB: f64 = 1024.0 * 1024.0;

/// NVLink links GPM has metrics for (NVML_GPM_METRIC_NVLINK_L0..L17).
const NVLINK_LINKS: u32 = 18;

/// The GPM state of one GPU, kept across ticks.
#[derive(Default)]
pub(super) struct GpmState<'d> {
    /// Whether the GPU has GPM; `None` until asked.
    supported: Option<bool>,
    /// The whole-GPU sample of the previous tick.
    previous: Option<GpmSample<'d>>,
    /// The previous tick's sample of each MIG GPU instance, by instance id.
    instances: BTreeMap<u32, GpmSample<'d>>,
}

/// Where one metric's value goes, and in which unit it comes.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// A % figure, stored as a ratio in the named field.
    Ratio(fn(&mut GpmMetrics) -> &mut Option<f64>),
    /// A MiB/s figure, stored as bytes per second in the named field.
    Rate(fn(&mut GpmMetrics) -> &mut Option<f64>),
    /// One NVLink link's traffic, MiB/s (`true`: transmitted).
    Link(u32, bool),
    /// One media engine's activity, %.
    Media(&'static str, u32),
}

/// The metric ids asked of a whole GPU, each with where its value goes.
static GPU_METRICS: LazyLock<Vec<(GpmMetricId, Target)>> = LazyLock::new(|| metric_table(true));

/// The metric ids asked of a MIG instance: no PCIe or NVLink (whole-GPU only).
static INSTANCE_METRICS: LazyLock<Vec<(GpmMetricId, Target)>> =
    LazyLock::new(|| metric_table(false));

fn metric_table(whole_gpu: bool) -> Vec<(GpmMetricId, Target)> {
    use GpmMetricId as M;
    let mut table: Vec<(GpmMetricId, Target)> = vec![
        (
            M::GraphicsUtil,
            Target::Ratio(|m| &mut m.graphics_engine_active_ratio),
        ),
        (M::SmUtil, Target::Ratio(|m| &mut m.sm_active_ratio)),
        (M::SmOccupancy, Target::Ratio(|m| &mut m.sm_occupancy_ratio)),
        (
            M::IntegerUtil,
            Target::Ratio(|m| &mut m.integer_active_ratio),
        ),
        (
            M::AnyTensorUtil,
            Target::Ratio(|m| &mut m.tensor_active_ratio),
        ),
        (
            M::HmmaTensorUtil,
            Target::Ratio(|m| &mut m.tensor_hmma_active_ratio),
        ),
        (
            M::ImmaTensorUtil,
            Target::Ratio(|m| &mut m.tensor_imma_active_ratio),
        ),
        (
            M::DfmaTensorUtil,
            Target::Ratio(|m| &mut m.tensor_dfma_active_ratio),
        ),
        (M::DramBwUtil, Target::Ratio(|m| &mut m.dram_active_ratio)),
        (M::Fp64Util, Target::Ratio(|m| &mut m.fp64_active_ratio)),
        (M::Fp32Util, Target::Ratio(|m| &mut m.fp32_active_ratio)),
        (M::Fp16Util, Target::Ratio(|m| &mut m.fp16_active_ratio)),
    ];
    // NVDEC_0..7 are ids 30-37, NVJPG_0..7 40-47, NVOFA_0..1 50-51.
    for (engine, first, count) in [("nvdec", 30u32, 8u32), ("nvjpg", 40, 8), ("nvofa", 50, 2)] {
        for index in 0..count {
            if let Ok(id) = GpmMetricId::try_from(first + index) {
                table.push((id, Target::Media(engine, index)));
            }
        }
    }
    if whole_gpu {
        table.push((
            M::PcieTxPerSec,
            Target::Rate(|m| &mut m.pcie_tx_bytes_per_second),
        ));
        table.push((
            M::PcieRxPerSec,
            Target::Rate(|m| &mut m.pcie_rx_bytes_per_second),
        ));
        table.push((
            M::NvlinkTotalTxPerSec,
            Target::Rate(|m| &mut m.nvlink_tx_bytes_per_second),
        ));
        table.push((
            M::NvlinkTotalRxPerSec,
            Target::Rate(|m| &mut m.nvlink_rx_bytes_per_second),
        ));
        // NVLINK_Ln_RX is 62 + 2n, NVLINK_Ln_TX 63 + 2n.
        for link in 0..NVLINK_LINKS {
            for (offset, tx) in [(0, false), (1, true)] {
                if let Ok(id) = GpmMetricId::try_from(62 + 2 * link + offset) {
                    table.push((id, Target::Link(link, tx)));
                }
            }
        }
    }
    table
}

impl<'d> GpuDevice<'d> {
    /// Asks NVML whether this GPU has GPM (at start, and on a new NVML
    /// session after a driver re-init) and forgets any earlier sample.
    pub fn probe_gpm(&mut self, tally: &mut Tally) -> Option<bool> {
        let d = &self.device;
        let supported = tally.call(FieldGroup::Gpm, "nvmlGpmQueryDeviceSupport", || {
            d.gpm_support()
        });
        self.gpm = GpmState {
            supported,
            ..GpmState::default()
        };
        supported
    }

    /// Whether this GPU has GPM, as last asked.
    pub fn gpm_supported(&self) -> Option<bool> {
        self.gpm.supported
    }

    /// Takes this tick's GPM samples — the GPU's and, while MIG is on, one
    /// per GPU instance in `mig_instances` — and computes the figures from
    /// each pair. A GPU without GPM reads nothing.
    pub fn read_gpm(&mut self, mig_instances: &[u32], tally: &mut Tally) -> GpmReadings {
        // NVML could not tell at start (a GPU lost then): ask again.
        if self.gpm.supported.is_none() {
            self.probe_gpm(tally);
        }
        let mut readings = GpmReadings {
            supported: self.gpm.supported,
            ..GpmReadings::default()
        };
        if self.gpm.supported != Some(true) {
            return readings;
        }
        let d = &self.device;
        let sample = tally.call(FieldGroup::Gpm, "nvmlGpmSampleGet", || d.gpm_sample());
        if let (Some(previous), Some(now)) = (self.gpm.previous.take(), &sample) {
            readings.gpu = self.metrics(&previous, now, &GPU_METRICS, tally);
        }
        self.gpm.previous = sample;
        let mut kept = BTreeMap::new();
        for &id in mig_instances {
            let sample = tally.call(FieldGroup::Gpm, "nvmlGpmMigSampleGet", || {
                d.gpm_mig_sample(id)
            });
            let Some(now) = sample else { continue };
            if let Some(previous) = self.gpm.instances.remove(&id) {
                if let Some(metrics) = self.metrics(&previous, &now, &INSTANCE_METRICS, tally) {
                    readings.instances.push(InstanceGpm {
                        gpu_instance_id: id,
                        metrics,
                    });
                }
            }
            kept.insert(id, now);
        }
        // Instances that went away drop (and free) their last sample here.
        self.gpm.instances = kept;
        readings
    }

    fn metrics(
        &self,
        previous: &GpmSample<'d>,
        now: &GpmSample<'d>,
        table: &[(GpmMetricId, Target)],
        tally: &mut Tally,
    ) -> Option<GpmMetrics> {
        let nvml = self.device.nvml();
        let ids: Vec<GpmMetricId> = table.iter().map(|(id, _)| *id).collect();
        let results = tally.call(FieldGroup::Gpm, "nvmlGpmMetricsGet", || {
            gpm_metrics_get(nvml, previous, now, &ids)
        })?;
        let mut m = GpmMetrics::default();
        let mut links: BTreeMap<u32, LinkTraffic> = BTreeMap::new();
        for ((id, target), result) in table.iter().zip(results) {
            let value = match result {
                Ok(r) if r.value.is_finite() => r.value,
                Ok(_) => continue,
                Err(error) => {
                    tally.gpm_metric_failed(metric_number(*id), &error);
                    continue;
                }
            };
            match *target {
                Target::Ratio(field) => *field(&mut m) = Some(value / 100.0),
                Target::Rate(field) => *field(&mut m) = Some(value * MIB),
                Target::Link(link, tx) => {
                    let entry = links.entry(link).or_insert_with(|| LinkTraffic {
                        link,
                        ..LinkTraffic::default()
                    });
                    if tx {
                        entry.tx_bytes_per_second = Some(value * MIB);
                    } else {
                        entry.rx_bytes_per_second = Some(value * MIB);
                    }
                }
                Target::Media(engine, index) => m.media_engines.push(MediaEngineActivity {
                    engine,
                    index,
                    active_ratio: value / 100.0,
                }),
            }
        }
        m.nvlink_links = links.into_values().collect();
        Some(m)
    }
}

/// NVML's number for a metric id, for logs and error counts.
fn metric_number(id: GpmMetricId) -> u32 {
    id.as_c()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_hold_every_metric_the_issue_names_within_nvml_limits() {
        // 12 SM/pipe/DRAM figures, 18 media engines, PCIe 2, NVLink 2 + 36.
        assert_eq!(GPU_METRICS.len(), 12 + 18 + 2 + 2 + 36);
        assert_eq!(INSTANCE_METRICS.len(), 12 + 18);
        // nvml-wrapper panics above 98 ids in one call.
        assert!(GPU_METRICS.len() <= 98);
        let link17_tx = GPU_METRICS
            .iter()
            .find(|(_, t)| matches!(t, Target::Link(17, true)))
            .map(|(id, _)| metric_number(*id));
        assert_eq!(link17_tx, Some(97));
    }
}
