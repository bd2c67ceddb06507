//! Per-GPU readings of a snapshot: identity (slow-changing facts), the
//! fast tier (utilization, memory, temperatures, power, clocks) and the slow
//! tier (limits, PCIe, ECC, retired pages, remapped rows, modes, links).
//! Each reading is an `Option`: absent means the GPU or driver could not
//! give it, never zero.

use std::collections::BTreeMap;

use serde::Serialize;

/// Facts about a GPU that rarely change.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct GpuIdentity {
    /// Product name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: Option<String>,
    /// Board serial number.
    pub serial: Option<String>,
    /// PCI bus id, e.g. "00000000:18:00.0".
    pub pci_bus_id: Option<String>,
    /// Combined PCI device and vendor id.
    pub pci_device_id: Option<u32>,
    /// Device node minor number (`/dev/nvidia<N>`): how NVIDIA's DRA driver
    /// names the GPU (`gpu-<N>`).
    pub minor_number: Option<u32>,
    /// Temperature at which the GPU starts to slow down, °C.
    pub temperature_slowdown_celsius: Option<f64>,
    /// Temperature at which the GPU shuts down, °C.
    pub temperature_shutdown_celsius: Option<f64>,
    /// Maximum GPU temperature before thermal management, °C.
    pub temperature_gpu_max_celsius: Option<f64>,
    /// Maximum memory temperature, °C.
    pub temperature_memory_max_celsius: Option<f64>,
    /// Maximum SM clock, Hz.
    pub max_sm_clock_hertz: Option<f64>,
    /// Maximum memory clock, Hz.
    pub max_memory_clock_hertz: Option<f64>,
    /// Maximum graphics clock, Hz.
    pub max_graphics_clock_hertz: Option<f64>,
    /// Maximum PCIe link generation.
    pub pcie_max_link_gen: Option<u32>,
    /// Maximum PCIe link width (lanes).
    pub pcie_max_link_width: Option<u32>,
}

/// Memory as NVML reports it, in bytes.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct MemoryReading {
    /// Installed frame buffer.
    pub total_bytes: u64,
    /// Allocated.
    pub used_bytes: u64,
    /// Unallocated.
    pub free_bytes: u64,
    /// Set aside by the driver.
    pub reserved_bytes: u64,
}

/// Readings taken on every fast tick.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FastReadings {
    /// Share of time a kernel ran, 0..1.
    pub utilization_gpu_ratio: Option<f64>,
    /// Share of time device memory was read or written, 0..1.
    pub utilization_memory_ratio: Option<f64>,
    /// Frame buffer memory.
    pub memory: Option<MemoryReading>,
    /// GPU die temperature, °C.
    pub temperature_gpu_celsius: Option<f64>,
    /// Memory (HBM) temperature, °C.
    pub temperature_memory_celsius: Option<f64>,
    /// Power draw, W.
    pub power_watts: Option<f64>,
    /// Energy used since the driver loaded, J.
    pub energy_joules: Option<f64>,
    /// SM clock, Hz.
    pub sm_clock_hertz: Option<f64>,
    /// Memory clock, Hz.
    pub memory_clock_hertz: Option<f64>,
    /// Graphics clock, Hz.
    pub graphics_clock_hertz: Option<f64>,
    /// Video (encoder/decoder) clock, Hz.
    pub video_clock_hertz: Option<f64>,
    /// Active clock-event reasons, as NVML's bit mask.
    pub clock_event_reasons: Option<u64>,
    /// Cumulative time spent in each reason that NVML keeps a counter for,
    /// seconds, keyed by reason name.
    pub clock_event_seconds: BTreeMap<&'static str, f64>,
}

/// Readings taken on the slow tier.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SlowReadings {
    /// Enforced power limit, W.
    pub power_limit_watts: Option<f64>,
    /// Default power limit, W.
    pub power_default_limit_watts: Option<f64>,
    /// Performance state: 0 (max) .. 15 (min).
    pub performance_state: Option<u32>,
    /// Fan speed of each fan as a share of its maximum, 0..1.
    pub fan_speed_ratio: Vec<Option<f64>>,
    /// Current PCIe link generation.
    pub pcie_link_gen: Option<u32>,
    /// Current PCIe link width (lanes).
    pub pcie_link_width: Option<u32>,
    /// PCIe replays (link-level retransmissions) since the driver loaded.
    pub pcie_replay_errors: Option<u64>,
    /// Whether ECC is enabled.
    pub ecc_enabled: Option<bool>,
    /// ECC error counters.
    pub ecc: EccCounters,
    /// Pages retired for single-bit errors.
    pub retired_pages_single_bit: Option<u64>,
    /// Pages retired for double-bit errors.
    pub retired_pages_double_bit: Option<u64>,
    /// Whether a page retirement waits for a reboot.
    pub retired_pages_pending: Option<bool>,
    /// Rows remapped for correctable errors.
    pub remapped_rows_correctable: Option<u64>,
    /// Rows remapped for uncorrectable errors.
    pub remapped_rows_uncorrectable: Option<u64>,
    /// Whether a row remap waits for a GPU reset.
    pub remapped_rows_pending: Option<bool>,
    /// Whether a row remap failed.
    pub remapped_rows_failure: Option<bool>,
    /// Video encoder utilization, 0..1.
    pub encoder_utilization_ratio: Option<f64>,
    /// Video decoder utilization, 0..1.
    pub decoder_utilization_ratio: Option<f64>,
    /// Compute mode: "default", "exclusive_thread", "prohibited", "exclusive_process".
    pub compute_mode: Option<&'static str>,
    /// Whether MIG mode is enabled.
    pub mig_enabled: Option<bool>,
    /// NVLink links and the recovery action.
    pub links: crate::gpu::links::LinkHealth,
    /// NVLink fabric registration; `None` without a fabric.
    pub fabric: Option<crate::gpu::fabric::FabricReading>,
    /// Data each NVLink link carried (fields 138/139), on GPUs whose NVLink
    /// traffic GPM does not give (pre-Hopper, or GPM not read); empty
    /// elsewhere and without NVLink.
    pub nvlink_traffic: Vec<crate::gpu::links::NvLinkTraffic>,
}

/// ECC error counts.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct EccCounters {
    /// Corrected since the last driver load.
    pub corrected_volatile: Option<u64>,
    /// Uncorrected since the last driver load.
    pub uncorrected_volatile: Option<u64>,
    /// Corrected over the board's life.
    pub corrected_aggregate: Option<u64>,
    /// Uncorrected over the board's life.
    pub uncorrected_aggregate: Option<u64>,
}

impl GpuIdentity {
    /// This identity updated with every fact `newer` knows; facts `newer`
    /// lacks (a GPU lost halfway through the slow tier) are kept.
    pub fn updated_with(&self, newer: GpuIdentity) -> GpuIdentity {
        GpuIdentity {
            name: newer.name.or_else(|| self.name.clone()),
            serial: newer.serial.or_else(|| self.serial.clone()),
            pci_bus_id: newer.pci_bus_id.or_else(|| self.pci_bus_id.clone()),
            pci_device_id: newer.pci_device_id.or(self.pci_device_id),
            minor_number: newer.minor_number.or(self.minor_number),
            temperature_slowdown_celsius: newer
                .temperature_slowdown_celsius
                .or(self.temperature_slowdown_celsius),
            temperature_shutdown_celsius: newer
                .temperature_shutdown_celsius
                .or(self.temperature_shutdown_celsius),
            temperature_gpu_max_celsius: newer
                .temperature_gpu_max_celsius
                .or(self.temperature_gpu_max_celsius),
            temperature_memory_max_celsius: newer
                .temperature_memory_max_celsius
                .or(self.temperature_memory_max_celsius),
            max_sm_clock_hertz: newer.max_sm_clock_hertz.or(self.max_sm_clock_hertz),
            max_memory_clock_hertz: newer.max_memory_clock_hertz.or(self.max_memory_clock_hertz),
            max_graphics_clock_hertz: newer
                .max_graphics_clock_hertz
                .or(self.max_graphics_clock_hertz),
            pcie_max_link_gen: newer.pcie_max_link_gen.or(self.pcie_max_link_gen),
            pcie_max_link_width: newer.pcie_max_link_width.or(self.pcie_max_link_width),
        }
    }
}
