//! GPM readings (GPU Performance Monitoring, Hopper and newer): how busy the
//! GPU really is — SM activity and occupancy, tensor and FP pipes, DRAM
//! bandwidth, PCIe and NVLink traffic — per GPU and per MIG GPU instance.
//!
//! NVML's plain `utilization` only says that *some* kernel ran; GPM says how
//! much of the GPU it used. Each figure is the average over the interval
//! between two GPM samples (one per fast tick), so the first tick has none:
//! absent, not 0. Every figure is in base units: ratios 0..1, bytes per
//! second (NVML gives % and MiB/s; the adapter converts).

use serde::Serialize;

/// What GPM told about one GPU on the last fast tick.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct GpmReadings {
    /// Whether the GPU has GPM (`nvmlGpmQueryDeviceSupport`), asked at start
    /// and after every driver re-init; `None` where NVML could not tell.
    pub supported: Option<bool>,
    /// Whole-GPU figures over the last fast interval; `None` on the first
    /// tick (one sample only), on a GPU without GPM, or when sampling failed.
    pub gpu: Option<GpmMetrics>,
    /// Figures per MIG GPU instance while MIG is on (`nvmlGpmMigSampleGet`),
    /// by GPU instance id; an instance appears from its second sample on.
    pub instances: Vec<InstanceGpm>,
}

/// GPM figures of one MIG GPU instance.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct InstanceGpm {
    /// GPU instance id: the `gpu_instance` label, as on the MIG families.
    pub gpu_instance_id: u32,
    /// The instance's figures (PCIe and NVLink are whole-GPU only: absent).
    pub metrics: GpmMetrics,
}

/// The GPM figures of a GPU or MIG instance over one interval. Each is
/// `None` where the driver does not answer that metric.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct GpmMetrics {
    /// Share of time the graphics/compute engine was active, 0..1.
    pub graphics_engine_active_ratio: Option<f64>,
    /// Share of time an SM had at least one warp assigned, averaged over
    /// all SMs, 0..1: the figure that says how much of the GPU a job uses.
    pub sm_active_ratio: Option<f64>,
    /// Resident warps as a share of the maximum, averaged over all SMs, 0..1.
    pub sm_occupancy_ratio: Option<f64>,
    /// Share of time the integer pipe was active, 0..1.
    pub integer_active_ratio: Option<f64>,
    /// Share of time any tensor pipe was active, 0..1.
    pub tensor_active_ratio: Option<f64>,
    /// Share of time the HMMA (half-precision) tensor pipe was active, 0..1.
    pub tensor_hmma_active_ratio: Option<f64>,
    /// Share of time the IMMA (integer) tensor pipe was active, 0..1.
    pub tensor_imma_active_ratio: Option<f64>,
    /// Share of time the DFMA (double-precision) tensor pipe was active, 0..1.
    pub tensor_dfma_active_ratio: Option<f64>,
    /// Share of time the FP64 pipe was active, 0..1.
    pub fp64_active_ratio: Option<f64>,
    /// Share of time the FP32 pipe was active, 0..1.
    pub fp32_active_ratio: Option<f64>,
    /// Share of time the FP16 pipe was active, 0..1.
    pub fp16_active_ratio: Option<f64>,
    /// Share of the peak DRAM bandwidth used, 0..1.
    pub dram_active_ratio: Option<f64>,
    /// PCIe data sent by the GPU, bytes per second.
    pub pcie_tx_bytes_per_second: Option<f64>,
    /// PCIe data received by the GPU, bytes per second.
    pub pcie_rx_bytes_per_second: Option<f64>,
    /// NVLink data sent over all links, bytes per second.
    pub nvlink_tx_bytes_per_second: Option<f64>,
    /// NVLink data received over all links, bytes per second.
    pub nvlink_rx_bytes_per_second: Option<f64>,
    /// Per NVLink link, those the driver answers for, by link number.
    pub nvlink_links: Vec<LinkTraffic>,
    /// Per video/JPEG/optical-flow engine, those that exist, by kind and number.
    pub media_engines: Vec<MediaEngineActivity>,
}

/// NVLink traffic of one link.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LinkTraffic {
    /// Link number: the `link` label.
    pub link: u32,
    /// Data sent, bytes per second.
    pub tx_bytes_per_second: Option<f64>,
    /// Data received, bytes per second.
    pub rx_bytes_per_second: Option<f64>,
}

/// Activity of one media engine (NVDEC, NVJPG, NVOFA).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MediaEngineActivity {
    /// Engine kind: "nvdec", "nvjpg" or "nvofa" — the `engine` label.
    pub engine: &'static str,
    /// Engine number within its kind — the `engine_index` label.
    pub index: u32,
    /// Share of time the engine was active, 0..1.
    pub active_ratio: f64,
}

impl GpmReadings {
    /// The whole-GPU SM activity, where GPM measured it this tick.
    pub fn sm_active_ratio(&self) -> Option<f64> {
        self.gpu.as_ref().and_then(|m| m.sm_active_ratio)
    }
}
