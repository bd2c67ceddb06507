//! Gated readings of a simulated GPU other than clocks: utilization, memory,
//! temperatures, power, performance state, fans, PCIe, encoder/decoder,
//! compute and MIG mode. Each fails as NVML would when the GPU is lost or
//! the feature is not supported.

use super::GpuSim;
use crate::engine::processes::mib_to_bytes;
use crate::engine::signal::Signal;
use crate::engine::Unavailable;
use crate::scenario::schema::ComputeModeSpec;
use crate::scenario::Feature;

/// Memory state in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryState {
    /// Total framebuffer.
    pub total: u64,
    /// Reserved by the driver.
    pub reserved: u64,
    /// Used, including the reserved part (v1 semantics).
    pub used: u64,
}

impl GpuSim {
    /// (gpu %, memory %) utilization.
    pub fn utilization(&self, t: f64) -> Result<(u32, u32), Unavailable> {
        self.gated(Feature::Utilization, t, || {
            (
                self.util_gpu(t).round() as u32,
                self.util_mem(t).round() as u32,
            )
        })
    }

    /// Memory state in bytes.
    pub fn memory(&self, t: f64) -> Result<MemoryState, Unavailable> {
        self.check(Some(Feature::Memory), t)?;
        let spec = self.spec();
        let total = spec.memory_total_mib as f64;
        let reserved = spec.memory_reserved_mib as f64;
        let used_mib = match &self.signals.memory_used_mib {
            Some(s) => s.eval(t),
            None => {
                reserved
                    + self
                        .all_processes(t)
                        .iter()
                        .map(|p| p.used_bytes as f64)
                        .sum::<f64>()
                        / 1048576.0
            }
        };
        Ok(MemoryState {
            total: mib_to_bytes(total),
            reserved: mib_to_bytes(reserved),
            used: mib_to_bytes(used_mib.clamp(reserved, total)),
        })
    }

    /// GPU temperature, °C.
    pub fn temperature(&self, t: f64) -> Result<u32, Unavailable> {
        self.gated(Feature::Temperature, t, || self.temp_gpu(t).round() as u32)
    }

    /// Memory temperature, °C.
    pub fn memory_temperature(&self, t: f64) -> Result<u32, Unavailable> {
        self.gated(Feature::MemoryTemperature, t, || {
            self.temp_mem(t).round() as u32
        })
    }

    /// Temperature threshold: 0 shutdown, 1 slowdown, 2 memory max, 3 GPU max.
    pub fn temperature_threshold(&self, kind: u32, t: f64) -> Result<u32, Unavailable> {
        self.check(Some(Feature::Temperature), t)?;
        let s = self.spec();
        match kind {
            0 => Ok(s.temp_shutdown_c),
            1 => Ok(s.temp_slowdown_c),
            2 => Ok(s.temp_mem_max_c),
            3 => Ok(s.temp_gpu_max_c),
            _ => Err(Unavailable::NotSupported),
        }
    }

    /// Power draw, mW.
    pub fn power_mw(&self, t: f64) -> Result<u32, Unavailable> {
        self.gated(Feature::Power, t, || {
            (self.power_w(t) * 1000.0).round() as u32
        })
    }

    /// Enforced power limit, mW.
    pub fn power_limit_mw(&self, t: f64) -> Result<u32, Unavailable> {
        self.gated(Feature::PowerLimit, t, || {
            (self.spec().power_limit_w * 1000.0).round() as u32
        })
    }

    /// Default power limit, mW.
    pub fn power_default_limit_mw(&self, t: f64) -> Result<u32, Unavailable> {
        let s = self.spec();
        self.gated(Feature::PowerLimit, t, || {
            (s.power_default_limit_w.unwrap_or(s.power_limit_w) * 1000.0).round() as u32
        })
    }

    /// Performance state 0..15.
    pub fn pstate(&self, t: f64) -> Result<u32, Unavailable> {
        self.gated(Feature::Pstate, t, || {
            let p = self.signals.pstate.as_ref().map_or_else(
                || if self.util_gpu(t) >= 1.0 { 0.0 } else { 8.0 },
                |s| s.eval(t),
            );
            p.clamp(0.0, 15.0).round() as u32
        })
    }

    /// Number of fans. A fanless board (an SXM module) answers 0, as a real
    /// H200 does; only its fan speed reads are NOT_SUPPORTED.
    pub fn fan_count(&self, t: f64) -> Result<u32, Unavailable> {
        if self.spec().fans == 0 {
            self.check(None, t)?;
            return if self.switched_off(Feature::Fan, t) {
                Err(Unavailable::NotSupported)
            } else {
                Ok(0)
            };
        }
        self.gated(Feature::Fan, t, || self.spec().fans)
    }

    /// Fan speed %, fan `fan` (< fan count).
    pub fn fan_percent(&self, fan: u32, t: f64) -> Result<u32, Unavailable> {
        self.check(Some(Feature::Fan), t)?;
        if fan >= self.spec().fans {
            return Err(Unavailable::InvalidArgument);
        }
        let v = self.signals.fan_percent.as_ref().map_or_else(
            || 30.0 + (self.temp_gpu(t) - 40.0).max(0.0) * 1.5,
            |s| s.eval(t),
        );
        Ok(v.clamp(0.0, 100.0).round() as u32)
    }

    /// PCIe replay counter (link-level retransmissions since driver load).
    pub fn pcie_replays(&self, t: f64) -> Result<u64, Unavailable> {
        self.gated(Feature::Pcie, t, || self.spec().pcie_replays)
    }

    /// PCIe link: (current gen, current width, max gen, max width).
    pub fn pcie(&self, t: f64) -> Result<(u32, u32, u32, u32), Unavailable> {
        let s = self.spec();
        self.gated(Feature::Pcie, t, || {
            (s.pcie_gen, s.pcie_width, s.pcie_max_gen, s.pcie_max_width)
        })
    }

    /// Encoder utilization %.
    pub fn encoder(&self, t: f64) -> Result<u32, Unavailable> {
        self.gated(Feature::Encoder, t, || {
            pct(self.signals.encoder_percent.as_ref(), t)
        })
    }

    /// Decoder utilization %.
    pub fn decoder(&self, t: f64) -> Result<u32, Unavailable> {
        self.gated(Feature::Decoder, t, || {
            pct(self.signals.decoder_percent.as_ref(), t)
        })
    }

    /// Compute mode (NVML enum value: 0 default, 2 prohibited, 3 exclusive process).
    pub fn compute_mode(&self, t: f64) -> Result<u32, Unavailable> {
        self.gated(Feature::ComputeMode, t, || match self.spec().compute_mode {
            ComputeModeSpec::Default => 0,
            ComputeModeSpec::Prohibited => 2,
            ComputeModeSpec::ExclusiveProcess => 3,
        })
    }

    /// MIG mode enabled?
    pub fn mig(&self, t: f64) -> Result<bool, Unavailable> {
        self.gated(Feature::Mig, t, || self.spec().mig.unwrap_or(false))
    }
}

fn pct(signal: Option<&Signal>, t: f64) -> u32 {
    signal.map_or(0.0, |s| s.eval(t)).clamp(0.0, 100.0).round() as u32
}
