//! The scenario file format, exactly as written in TOML (before validation).

use super::feature::Feature;
pub use super::gpm::GpmSpec;
pub use super::health::{FabricSpec, NvLinkSpec, RecoveryAction};
pub use super::kernel_log::KernelLogSpec;
use super::steps::Steps;
use super::timeline::TimelineSpec;
use crate::duration::Duration;
use serde::Deserialize;
use toml::Spanned;

/// The whole scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScenarioFile {
    /// Short scenario name.
    pub name: String,
    /// Free text.
    pub description: String,
    /// Driver version string reported by NVML.
    pub driver_version: Option<Spanned<String>>,
    /// CUDA driver version as an integer (12040 = 12.4).
    pub cuda_driver_version: i32,
    /// NVML library version string (default derived from the driver version).
    pub nvml_version: Option<String>,
    /// Scenario seconds per real second.
    pub speed: Option<Spanned<f64>>,
    /// Seed for every random quantity.
    pub seed: u64,
    /// Initialization behaviour.
    pub init: InitSpec,
    /// The GPUs.
    pub gpu: Vec<Spanned<GpuSpec>>,
    /// Timed faults.
    pub fault: Vec<FaultSpec>,
    /// How long calls take, as a real driver's do.
    pub latency: LatencySpec,
    /// `[[kernel_log]]`: kernel-log lines written to `GPUWATCH_SIM_KMSG`.
    pub kernel_log: Vec<KernelLogSpec>,
}

/// `[latency]`: wall-clock time each call takes, so the agent meets the
/// costs a real driver has (an H200 on driver 580 takes ~3 ms to read the
/// energy counter, ~1 µs for most calls). Real time, not scenario time.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LatencySpec {
    /// NVML function name → time per call, e.g.
    /// `nvmlDeviceGetTotalEnergyConsumption = "3ms"`.
    pub functions: std::collections::BTreeMap<String, Spanned<Duration>>,
    /// Field id (as a string key) → time that field adds to an
    /// nvmlDeviceGetFieldValues batch, e.g. `"83" = "3.4ms"`.
    pub fields: std::collections::BTreeMap<String, Spanned<Duration>>,
}

impl Default for ScenarioFile {
    fn default() -> Self {
        ScenarioFile {
            name: "unnamed".into(),
            description: String::new(),
            driver_version: None,
            cuda_driver_version: 12040,
            nvml_version: None,
            speed: None,
            seed: 1,
            init: InitSpec::default(),
            gpu: Vec::new(),
            fault: Vec::new(),
            latency: LatencySpec::default(),
            kernel_log: Vec::new(),
        }
    }
}

/// `[init]`: make nvmlInit fail.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InitSpec {
    /// An NVML error name without the `NVML_ERROR_` prefix.
    pub error: Option<Spanned<String>>,
}

/// Compute mode of a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeModeSpec {
    /// NVML_COMPUTEMODE_DEFAULT.
    #[default]
    Default,
    /// NVML_COMPUTEMODE_EXCLUSIVE_PROCESS.
    ExclusiveProcess,
    /// NVML_COMPUTEMODE_PROHIBITED.
    Prohibited,
}

/// `[[gpu]]`: one GPU model (replicated `count` times).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpuSpec {
    /// Product name.
    pub name: String,
    /// How many identical GPUs this entry describes.
    pub count: Option<Spanned<u32>>,
    /// Explicit UUID (only with count = 1).
    pub uuid: Option<String>,
    /// Explicit board serial (only with count = 1).
    pub serial: Option<String>,
    /// Explicit PCI bus id such as `00000000:18:00.0` (only with count = 1).
    pub pci_bus_id: Option<String>,
    /// Device node minor number (`/dev/nvidia<N>`) of the entry's first GPU,
    /// the next ones counting up; absent: the NVML index. Real nodes can
    /// differ (minor follows PCI probe order, the index PCI bus order), and
    /// NVIDIA's DRA driver names GPUs by minor.
    pub minor_number: Option<u32>,
    /// Combined PCI device/vendor id (0x233010DE for an H100 SXM).
    pub pci_device_id: u32,
    /// Framebuffer size.
    pub memory_total_mib: u64,
    /// Memory reserved by the driver.
    pub memory_reserved_mib: u64,
    /// Enforced power limit in watts.
    pub power_limit_w: f64,
    /// Default power limit in watts (default: power_limit_w).
    pub power_default_limit_w: Option<f64>,
    /// Slowdown threshold.
    pub temp_slowdown_c: u32,
    /// Shutdown threshold.
    pub temp_shutdown_c: u32,
    /// Max operating GPU temperature.
    pub temp_gpu_max_c: u32,
    /// Max operating memory temperature.
    pub temp_mem_max_c: u32,
    /// Maximum SM clock.
    pub max_sm_clock_mhz: u32,
    /// Maximum memory clock.
    pub max_mem_clock_mhz: u32,
    /// Maximum graphics clock (default: max_sm_clock_mhz).
    pub max_graphics_clock_mhz: Option<u32>,
    /// Maximum video clock.
    pub max_video_clock_mhz: u32,
    /// Number of fans (0: fan calls are NOT_SUPPORTED).
    pub fans: u32,
    /// Current PCIe generation.
    pub pcie_gen: u32,
    /// Current PCIe width.
    pub pcie_width: u32,
    /// Maximum PCIe generation.
    pub pcie_max_gen: u32,
    /// Maximum PCIe width.
    pub pcie_max_width: u32,
    /// PCIe replay counter (retransmissions; a healthy link stays near 0).
    pub pcie_replays: u64,
    /// Whether ECC is present and enabled.
    pub ecc: bool,
    /// Compute mode.
    pub compute_mode: ComputeModeSpec,
    /// MIG mode (absent: NOT_SUPPORTED).
    pub mig: Option<bool>,
    /// Features that are NOT_SUPPORTED from the start.
    pub unsupported: Vec<Feature>,
    /// Derive clock event reasons from utilization, power and temperature.
    pub auto_reasons: bool,
    /// Metric timelines.
    pub metrics: MetricsSpec,
    /// Explicit processes.
    pub processes: Vec<ProcessSpec>,
    /// Generated processes.
    pub process_pool: Option<PoolSpec>,
    /// `[[gpu.mig_instances]]`: MIG GPU instances (only with `mig = true`).
    pub mig_instances: Vec<MigInstanceSpec>,
    /// `[gpu.gpm]`: GPM activity; absent: no GPM (pre-Hopper).
    pub gpm: Option<GpmSpec>,
    /// `[gpu.nvlink]`: NVLink links; absent: NVLink calls NOT_SUPPORTED.
    pub nvlink: Option<NvLinkSpec>,
    /// `[gpu.fabric]`: GPU fabric info; absent: NOT_SUPPORTED.
    pub fabric: Option<FabricSpec>,
    /// GPU recovery action (field 230); absent: the field is NOT_SUPPORTED.
    pub recovery_action: Option<Steps<RecoveryAction>>,
}

impl Default for GpuSpec {
    fn default() -> Self {
        GpuSpec {
            name: "NVIDIA H100 80GB HBM3".into(),
            count: None,
            uuid: None,
            serial: None,
            pci_bus_id: None,
            minor_number: None,
            pci_device_id: 0x2330_10DE,
            memory_total_mib: 81559,
            memory_reserved_mib: 527,
            power_limit_w: 700.0,
            power_default_limit_w: None,
            temp_slowdown_c: 87,
            temp_shutdown_c: 92,
            temp_gpu_max_c: 87,
            temp_mem_max_c: 95,
            max_sm_clock_mhz: 1980,
            max_mem_clock_mhz: 2619,
            max_graphics_clock_mhz: None,
            max_video_clock_mhz: 1755,
            fans: 0,
            pcie_gen: 5,
            pcie_width: 16,
            pcie_max_gen: 5,
            pcie_max_width: 16,
            pcie_replays: 0,
            ecc: true,
            compute_mode: ComputeModeSpec::Default,
            mig: Some(false),
            unsupported: Vec::new(),
            auto_reasons: true,
            metrics: MetricsSpec::default(),
            processes: Vec::new(),
            process_pool: None,
            mig_instances: Vec::new(),
            gpm: None,
            nvlink: None,
            fabric: None,
            recovery_action: None,
        }
    }
}

/// `[gpu.metrics]`: one timeline per metric (all optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSpec {
    /// GPU utilization, %.
    pub utilization_gpu: Option<Spanned<TimelineSpec>>,
    /// Memory controller utilization, %.
    pub utilization_memory: Option<Spanned<TimelineSpec>>,
    /// Used memory including the reserved part, MiB.
    pub memory_used_mib: Option<Spanned<TimelineSpec>>,
    /// GPU temperature, °C.
    pub temperature_gpu: Option<Spanned<TimelineSpec>>,
    /// Memory temperature, °C.
    pub temperature_memory: Option<Spanned<TimelineSpec>>,
    /// Power draw, W.
    pub power_w: Option<Spanned<TimelineSpec>>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<Spanned<TimelineSpec>>,
    /// Memory clock, MHz.
    pub mem_clock_mhz: Option<Spanned<TimelineSpec>>,
    /// Graphics clock, MHz.
    pub graphics_clock_mhz: Option<Spanned<TimelineSpec>>,
    /// Fan speed, %.
    pub fan_percent: Option<Spanned<TimelineSpec>>,
    /// Performance state 0..15.
    pub pstate: Option<Spanned<TimelineSpec>>,
    /// Encoder utilization, %.
    pub encoder_percent: Option<Spanned<TimelineSpec>>,
    /// Decoder utilization, %.
    pub decoder_percent: Option<Spanned<TimelineSpec>>,
    /// Explicit clock event reason bits (OR-ed with auto reasons).
    pub clocks_event_reasons: Option<Spanned<TimelineSpec>>,
}

/// Kind of a GPU process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessKind {
    /// Listed by nvmlDeviceGetComputeRunningProcesses.
    #[default]
    Compute,
    /// Listed by nvmlDeviceGetGraphicsRunningProcesses.
    Graphics,
}

/// `[[gpu.processes]]`: one process.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessSpec {
    /// Process id.
    pub pid: u32,
    /// Process name (nvmlSystemGetProcessName).
    pub name: String,
    /// Compute or graphics.
    #[serde(default)]
    pub kind: ProcessKind,
    /// Used GPU memory, MiB (number or timeline).
    pub memory_mib: Spanned<TimelineSpec>,
    /// When the process appears.
    #[serde(default)]
    pub start: Duration,
    /// When the process exits (never if absent).
    pub stop: Option<Spanned<Duration>>,
    /// SM utilization of this process, % (number or timeline); absent: the
    /// GPU's utilization shared by memory among its compute processes.
    pub sm_percent: Option<Spanned<TimelineSpec>>,
    /// Listed as an MPS client (nvmlDeviceGetMPSComputeRunningProcesses)
    /// instead of as a compute process.
    #[serde(default)]
    pub mps_client: bool,
    /// MIG GPU instance id the process runs in.
    pub gpu_instance: Option<u32>,
}

/// `[[gpu.mig_instances]]`: one MIG GPU instance.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigInstanceSpec {
    /// GPU instance id.
    pub id: u32,
    /// Profile name, e.g. "1g.10gb" (for the MIG device name).
    #[serde(default)]
    pub profile: String,
    /// Memory of the instance, MiB.
    pub memory_mib: u64,
    /// `[gpu.mig_instances.gpm]`: the instance's GPM activity (default 0).
    pub gpm: Option<GpmSpec>,
}

/// `[gpu.process_pool]`: a generator keeping about `count` processes alive.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// Number of concurrently running processes.
    pub count: u32,
    /// Smallest memory footprint, MiB.
    pub min_mib: f64,
    /// Largest memory footprint, MiB.
    pub max_mib: f64,
    /// How long each process lives before it is replaced.
    pub lifetime: Spanned<Duration>,
    /// Names to draw from.
    #[serde(default = "default_pool_names")]
    pub names: Vec<String>,
    /// First pid of the pool (default 100000 + 10000 × GPU index).
    pub pid_base: Option<u32>,
    /// Compute or graphics.
    #[serde(default)]
    pub kind: ProcessKind,
}

fn default_pool_names() -> Vec<String> {
    vec!["python3".into()]
}

/// Fault kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// The GPU falls off the bus.
    Lost,
    /// An Xid error event.
    Xid,
    /// Uncorrected ECC errors.
    EccUncorrected,
    /// Corrected ECC errors.
    EccCorrected,
    /// A row remapping is pending.
    RemapPending,
    /// A row remapping failed.
    RemapFailure,
    /// A feature becomes NOT_SUPPORTED.
    NotSupported,
    /// Every call on the GPU is slow.
    Slow,
    /// Every call on the GPU blocks.
    Hang,
    /// nvmlInit fails.
    InitError,
    /// An NVLink link goes down (inactive).
    NvlinkDown,
    /// The kernel driver goes away: every call fails with DRIVER_NOT_LOADED,
    /// and so does nvmlInit, until the fault ends.
    DriverUnloaded,
}

/// `[[fault]]`: something that goes wrong at a time.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// When the fault starts.
    pub at: Duration,
    /// GPU index (required except for init_error).
    pub gpu: Option<Spanned<u32>>,
    /// What happens.
    pub kind: Spanned<FaultKind>,
    /// When the fault ends (never if absent).
    pub until: Option<Spanned<Duration>>,
    /// Xid code (xid).
    pub code: Option<Spanned<u64>>,
    /// Error count (ecc_*; default 1).
    pub count: Option<Spanned<u64>>,
    /// Feature key (not_supported).
    pub feature: Option<Spanned<Feature>>,
    /// Delay per call in ms (slow).
    pub delay_ms: Option<Spanned<u64>>,
    /// NVML error name (init_error).
    pub error: Option<Spanned<String>>,
    /// NVLink link (nvlink_down).
    pub link: Option<Spanned<u32>>,
}
