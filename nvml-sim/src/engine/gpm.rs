//! GPM (GPU Performance Monitoring): per-GPU and per-MIG-instance activity
//! counters integrated from the scenario's `[gpu.gpm]` timelines, and the
//! metrics nvmlGpmMetricsGet computes from two samples.
//!
//! A sample is (GPU, instance, scenario time); since every counter is a pure
//! function of t, a metric between two samples is exactly the time-average
//! of its timeline over [t1, t2] (the rate itself when t1 = t2).

use super::counters::Integrator;
use super::signal::Signal;
use super::Unavailable;
use crate::gpm_metrics::is_metric_id;
use crate::rng;
use crate::scenario::gpm::GpmSpec;
use std::sync::Arc;

/// Integrated quantities, one slot each.
const SLOTS: usize = 17;
const GR: usize = 0;
const SM: usize = 1;
const OCC: usize = 2;
const INT: usize = 3;
const TENSOR: usize = 4;
const DFMA: usize = 5;
const HMMA: usize = 6;
const IMMA: usize = 7;
const DRAM: usize = 8;
const FP64: usize = 9;
const FP32: usize = 10;
const FP16: usize = 11;
const PCIE_TX: usize = 12;
const PCIE_RX: usize = 13;
const NVDEC: usize = 14;
const NVJPG: usize = 15;
const NVOFA: usize = 16;

/// What the GPU's own readings contribute to GPM defaults at some time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpmBase {
    /// utilization_gpu, %.
    pub util_gpu: f64,
    /// utilization_memory, %.
    pub util_mem: f64,
    /// decoder_percent, %.
    pub decoder: f64,
}

/// The GPM model of one GPU or MIG instance.
#[derive(Debug)]
pub struct GpmSim {
    signals: [Option<Signal>; SLOTS],
    engines: [u32; 3],
    unsupported: Arc<[u32]>,
    counters: Integrator<[f64; SLOTS]>,
}

impl GpmSim {
    /// Compiles `spec`; `seed` drives its random walks.
    pub fn new(spec: &GpmSpec, seed: u64) -> Self {
        let signals = spec.timelines().map(|(name, t)| {
            t.as_ref()
                .map(|t| Signal::new(t.get_ref(), rng::mix(seed, rng::hash_str(name))))
        });
        GpmSim {
            signals,
            engines: [
                *spec.nvdec_engines.get_ref(),
                *spec.nvjpg_engines.get_ref(),
                *spec.nvofa_engines.get_ref(),
            ],
            unsupported: spec.unsupported.iter().map(|id| *id.get_ref()).collect(),
            counters: Integrator::default(),
        }
    }

    fn value(&self, slot: usize, s: f64) -> Option<f64> {
        self.signals[slot].as_ref().map(|x| x.eval(s))
    }

    /// Every slot's rate at `s`, defaults applied and clamped; the GPU's
    /// own readings (`base`) are asked only where a slot has no timeline.
    fn rates(&self, s: f64, base: impl Fn(f64) -> GpmBase) -> [f64; SLOTS] {
        let base_at = std::cell::OnceCell::new();
        let base = || *base_at.get_or_init(|| base(s));
        let pct = |v: f64| v.clamp(0.0, 100.0);
        let zero = |slot| self.value(slot, s).unwrap_or(0.0);
        let gr = pct(self.value(GR, s).unwrap_or_else(|| base().util_gpu));
        let sm = pct(self.value(SM, s).unwrap_or(gr));
        let (imma, dfma) = (pct(zero(IMMA)), pct(zero(DFMA)));
        let tensor_given = self.value(TENSOR, s);
        let hmma = pct(self
            .value(HMMA, s)
            .unwrap_or_else(|| tensor_given.map_or(0.0, |tensor| tensor - imma - dfma)));
        let mut r = [0.0; SLOTS];
        r[GR] = gr;
        r[SM] = sm;
        r[OCC] = pct(self.value(OCC, s).unwrap_or(sm / 2.0));
        r[INT] = pct(zero(INT));
        r[TENSOR] = pct(tensor_given.unwrap_or(hmma + imma + dfma));
        r[DFMA] = dfma;
        r[HMMA] = hmma;
        r[IMMA] = imma;
        r[DRAM] = pct(self.value(DRAM, s).unwrap_or_else(|| base().util_mem));
        r[FP64] = pct(zero(FP64));
        r[FP32] = pct(zero(FP32));
        r[FP16] = pct(zero(FP16));
        r[PCIE_TX] = zero(PCIE_TX).max(0.0);
        r[PCIE_RX] = zero(PCIE_RX).max(0.0);
        r[NVDEC] = pct(self.value(NVDEC, s).unwrap_or_else(|| base().decoder));
        r[NVJPG] = pct(zero(NVJPG));
        r[NVOFA] = pct(zero(NVOFA));
        r
    }

    /// The time-averages over [t1, t2] (`None` when t2 < t1); `base` gives
    /// the GPU's own readings at a time.
    pub fn window(&self, t1: f64, t2: f64, base: impl Fn(f64) -> GpmBase) -> Option<GpmWindow> {
        let averages = self.counters.average(t1, t2, |s| self.rates(s, &base))?;
        Some(GpmWindow {
            averages,
            engines: self.engines,
            unsupported: self.unsupported.clone(),
            nvlink: None,
            mig: false,
        })
    }
}

/// What nvmlGpmMetricsGet needs to answer each metric of one sample pair.
#[derive(Debug, Clone, PartialEq)]
pub struct GpmWindow {
    averages: [f64; SLOTS],
    engines: [u32; 3],
    unsupported: Arc<[u32]>,
    /// Per link: [tx, rx] averages in MiB/s; `None` without NVLink.
    pub nvlink: Option<Vec<[f64; 2]>>,
    /// A MIG instance's window: no PCIe or NVLink metrics.
    pub mig: bool,
}

impl GpmWindow {
    /// Metric `id`: NOT_SUPPORTED for what the GPU or instance lacks (and
    /// for the ids the scenario lists), INVALID_ARGUMENT for non-ids.
    pub fn metric(&self, id: u32) -> Result<f64, Unavailable> {
        if !is_metric_id(id) {
            return Err(Unavailable::InvalidArgument);
        }
        if self.unsupported.contains(&id) {
            return Err(Unavailable::NotSupported);
        }
        let a = &self.averages;
        let engine = |first: u32, kind: usize, slot: usize| {
            if id - first < self.engines[kind] {
                Ok(a[slot])
            } else {
                Err(Unavailable::NotSupported)
            }
        };
        match id {
            1 => Ok(a[GR]),
            2 => Ok(a[SM]),
            3 => Ok(a[OCC]),
            4 => Ok(a[INT]),
            5 => Ok(a[TENSOR]),
            6 => Ok(a[DFMA]),
            7 => Ok(a[HMMA]),
            9 => Ok(a[IMMA]),
            10 => Ok(a[DRAM]),
            11 => Ok(a[FP64]),
            12 => Ok(a[FP32]),
            13 => Ok(a[FP16]),
            20 | 21 if self.mig => Err(Unavailable::NotSupported),
            20 => Ok(a[PCIE_TX]),
            21 => Ok(a[PCIE_RX]),
            30..=37 => engine(30, 0, NVDEC),
            40..=47 => engine(40, 1, NVJPG),
            50 | 51 => engine(50, 2, NVOFA),
            60..=97 => self.nvlink_metric(id),
            _ => Err(Unavailable::NotSupported),
        }
    }

    fn nvlink_metric(&self, id: u32) -> Result<f64, Unavailable> {
        let links = match (&self.nvlink, self.mig) {
            (Some(links), false) => links,
            _ => return Err(Unavailable::NotSupported),
        };
        // 60 total RX, 61 total TX; then link l: 62 + 2l RX, 63 + 2l TX.
        // Per link the window holds [tx, rx].
        let direction = if id.is_multiple_of(2) { 1 } else { 0 };
        if id <= 61 {
            return Ok(links.iter().map(|l| l[direction]).sum());
        }
        let link = ((id - 62) / 2) as usize;
        links
            .get(link)
            .map(|l| l[direction])
            .ok_or(Unavailable::NotSupported)
    }
}
