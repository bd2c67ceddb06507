//! GPM (GPU Performance Monitoring, Hopper and newer): what the sampler
//! reads of it. Only this module and `raw::gpm` (its raw calls) use GPM.
//!
//! Each GPU with GPM takes one sample per fast tick and keeps it; the
//! metrics are computed from the previous sample and the new one
//! (`nvmlGpmMetricsGet`), so the first tick has none. With MIG on, each GPU
//! instance is sampled the same way (`nvmlGpmMigSampleGet`). Calls per GPU
//! (and per MIG instance) per tick: sample get and metrics get — 2; the two
//! sample buffers of each are allocated once and take turns. The metric ids
//! the driver answers NOT_SUPPORTED on the first metrics call are not asked
//! again (until a driver re-init). Streaming mode is left as it is (off by
//! default): one sample per second needs no driver-side buffering.
//!
//! NVML's units (nvml.h): `*_UTIL` in % 0-100, PCIe and NVLink in MiB/s;
//! readings are converted to ratios 0..1 and bytes per second.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::raw::{MetricsRequest, SampleBuffer};
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
    /// The whole GPU's sampling (built on its first tick with GPM).
    gpu: Option<Stream<'d>>,
    /// The sampling of each MIG GPU instance, by instance id.
    instances: BTreeMap<u32, Stream<'d>>,
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
    /// session after a driver re-init) and forgets any earlier sample and
    /// learned metric set.
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
        let gpu = self
            .gpm
            .gpu
            .get_or_insert_with(|| Stream::new(&GPU_METRICS));
        readings.gpu = gpu.tick(d, None, tally);
        let mut kept = BTreeMap::new();
        for &id in mig_instances {
            let mut stream = self
                .gpm
                .instances
                .remove(&id)
                .unwrap_or_else(|| Stream::new(&INSTANCE_METRICS));
            if let Some(metrics) = stream.tick(d, Some(id), tally) {
                readings.instances.push(InstanceGpm {
                    gpu_instance_id: id,
                    metrics,
                });
            }
            kept.insert(id, stream);
        }
        // Instances that went away drop (and free) their buffers here.
        self.gpm.instances = kept;
        readings
    }
}

/// The GPM sampling of the GPU or of one MIG instance, kept across ticks.
/// Steady state costs 2 NVML calls a tick: refill the spare buffer, then
/// compute the metrics from the previous sample and it.
struct Stream<'d> {
    /// The previous tick's sample, where one was taken.
    previous: Option<SampleBuffer<'d>>,
    /// The buffer this tick's sample goes into (allocated once).
    spare: Option<SampleBuffer<'d>>,
    /// The metric ids asked, built once.
    request: MetricsRequest,
    /// Where each asked id's value goes, in the request's order.
    targets: Vec<Target>,
    /// Whether the ids the driver answers NOT_SUPPORTED were dropped from
    /// the request (after the first metrics call that worked).
    learned: bool,
    /// NVLink links and media engines asked: the readings' Vecs are sized once.
    links: usize,
    media: usize,
}

impl<'d> Stream<'d> {
    fn new(table: &[(GpmMetricId, Target)]) -> Self {
        let mut stream = Stream {
            previous: None,
            spare: None,
            request: MetricsRequest::new(table.iter().map(|(id, _)| id.as_c())),
            targets: table.iter().map(|(_, target)| *target).collect(),
            learned: false,
            links: 0,
            media: 0,
        };
        stream.count_targets();
        stream
    }

    /// Counts the links (by their RX id) and media engines asked.
    fn count_targets(&mut self) {
        self.links = self
            .targets
            .iter()
            .filter(|t| matches!(t, Target::Link(_, false)))
            .count();
        self.media = self
            .targets
            .iter()
            .filter(|t| matches!(t, Target::Media(..)))
            .count();
    }

    /// Takes a sample of the GPU (`instance` None) or of a MIG instance and,
    /// from the second one on, the figures since the previous one.
    fn tick(
        &mut self,
        device: &Device<'d>,
        instance: Option<u32>,
        tally: &mut Tally,
    ) -> Option<GpmMetrics> {
        let get = match instance {
            None => "nvmlGpmSampleGet",
            Some(_) => "nvmlGpmMigSampleGet",
        };
        let nvml = device.nvml();
        if self.spare.is_none() {
            self.spare = tally.call(FieldGroup::Gpm, "nvmlGpmSampleAlloc", || {
                SampleBuffer::alloc(nvml)
            });
        }
        let Some(mut now) = self.spare.take() else {
            // No buffer, no sample: as when the sample fails, below.
            self.previous = None;
            return None;
        };
        if tally
            .call(FieldGroup::Gpm, get, || now.fill(device, instance))
            .is_none()
        {
            // No sample this tick: the next one has nothing to pair with.
            self.spare = Some(now);
            self.previous = None;
            return None;
        }
        let metrics = match self.previous.take() {
            Some(previous) => {
                let metrics = self.metrics(nvml, &previous, &now, tally);
                self.spare = Some(previous);
                metrics
            }
            None => None,
        };
        self.previous = Some(now);
        metrics
    }

    fn metrics(
        &mut self,
        nvml: &Nvml,
        previous: &SampleBuffer<'d>,
        now: &SampleBuffer<'d>,
        tally: &mut Tally,
    ) -> Option<GpmMetrics> {
        let request = &mut self.request;
        let results = tally.call(FieldGroup::Gpm, "nvmlGpmMetricsGet", || {
            request.get(nvml, previous, now)
        })?;
        let mut m = GpmMetrics {
            nvlink_links: Vec::with_capacity(self.links),
            media_engines: Vec::with_capacity(self.media),
            ..GpmMetrics::default()
        };
        // On the first call: the (id, target) pairs the driver answers.
        let mut answered = (!self.learned).then(Vec::new);
        for (target, (id, result)) in self.targets.iter().zip(results) {
            if let Some(answered) = &mut answered {
                if !matches!(result, Err(NvmlError::NotSupported)) {
                    answered.push((id, *target));
                }
            }
            match result {
                Ok(value) if value.is_finite() => store(&mut m, *target, value),
                Ok(_) => {}
                Err(error) => tally.gpm_metric_failed(id, &error),
            }
        }
        if let Some(answered) = answered {
            // Ask only what answers from now on; a re-init re-learns
            // (`probe_gpm` starts new streams).
            self.learned = true;
            if answered.len() < self.targets.len() {
                self.request = MetricsRequest::new(answered.iter().map(|(id, _)| *id));
                self.targets = answered.into_iter().map(|(_, target)| target).collect();
                self.count_targets();
            }
        }
        Some(m)
    }
}

/// Puts one metric's value (in NVML's unit) where `target` says, in base
/// units. A value that overflows in the conversion (a huge rate times MiB
/// is `+Inf`) is absent, as a non-finite reading is: never `+Inf` in
/// /metrics or `null` in JSON.
fn store(m: &mut GpmMetrics, target: Target, value: f64) {
    let value = match target {
        Target::Ratio(_) | Target::Media(..) => value / 100.0,
        Target::Rate(_) | Target::Link(..) => value * MIB,
    };
    if !value.is_finite() {
        return;
    }
    match target {
        Target::Ratio(field) | Target::Rate(field) => *field(m) = Some(value),
        Target::Link(link, tx) => {
            // The table asks links in order, RX before TX of each.
            if m.nvlink_links.last().map(|l| l.link) != Some(link) {
                m.nvlink_links.push(LinkTraffic {
                    link,
                    ..LinkTraffic::default()
                });
            }
            if let Some(entry) = m.nvlink_links.last_mut() {
                if tx {
                    entry.tx_bytes_per_second = Some(value);
                } else {
                    entry.rx_bytes_per_second = Some(value);
                }
            }
        }
        Target::Media(engine, index) => m.media_engines.push(MediaEngineActivity {
            engine,
            index,
            active_ratio: value,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_hold_every_metric_the_issue_names_within_nvml_limits() {
        // 12 SM/pipe/DRAM figures, 18 media engines, PCIe 2, NVLink 2 + 36.
        assert_eq!(GPU_METRICS.len(), 12 + 18 + 2 + 2 + 36);
        assert_eq!(INSTANCE_METRICS.len(), 12 + 18);
        // One request holds at most NVML_GPM_METRIC_MAX ids.
        assert!(GPU_METRICS.len() <= super::super::raw::MAX_METRICS);
        let request = MetricsRequest::new(GPU_METRICS.iter().map(|(id, _)| id.as_c()));
        assert_eq!(request.len(), GPU_METRICS.len());
        let link17_tx = GPU_METRICS
            .iter()
            .find(|(_, t)| matches!(t, Target::Link(17, true)))
            .map(|(id, _)| id.as_c());
        assert_eq!(link17_tx, Some(97));
    }

    #[test]
    fn a_value_that_overflows_in_the_conversion_is_absent_not_infinite() {
        let mut m = GpmMetrics::default();
        let pcie_tx = Target::Rate(|m| &mut m.pcie_tx_bytes_per_second);
        store(&mut m, pcie_tx, f64::MAX);
        store(&mut m, Target::Link(0, true), 1e308);
        store(&mut m, Target::Link(0, false), 2.0);
        store(&mut m, Target::Ratio(|m| &mut m.sm_active_ratio), 50.0);
        assert_eq!(m.pcie_tx_bytes_per_second, None);
        assert_eq!(m.nvlink_links.len(), 1);
        assert_eq!(m.nvlink_links[0].tx_bytes_per_second, None);
        assert_eq!(m.nvlink_links[0].rx_bytes_per_second, Some(2.0 * MIB));
        assert_eq!(m.sm_active_ratio, Some(0.5));
    }
}
