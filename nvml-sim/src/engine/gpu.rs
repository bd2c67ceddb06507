//! One simulated GPU: its metrics, counters and faults as functions of t.

use super::counters::Integrator;
use super::gpm::GpmSim;
use super::nvlink::NvLinkSim;
use super::processes::{mib_to_bytes, ExplicitProcess, Pool, ProcessSample};
use super::Unavailable;
use crate::rng;
use crate::scenario::schema::{ComputeModeSpec, GpuSpec, ProcessKind};
use crate::scenario::{Fault, FaultEffect, Feature, GpuConfig};
use crate::timeline::{Signal, TimelineSpec};
use toml::Spanned;

mod ecc;
mod health;
mod perf;
mod sharing;
pub use ecc::EccState;
pub use health::{FabricInfo, NvLinkRemote};
pub use sharing::{MigInstance, ProcessUtilization};

/// Clock-event reason bits (nvmlClocksEventReason*).
pub mod reasons {
    /// GPU idle.
    pub const IDLE: u64 = 0x1;
    /// Application clocks setting.
    pub const APPLICATIONS_CLOCKS: u64 = 0x2;
    /// Software power cap.
    pub const SW_POWER_CAP: u64 = 0x4;
    /// Hardware slowdown.
    pub const HW_SLOWDOWN: u64 = 0x8;
    /// Sync boost.
    pub const SYNC_BOOST: u64 = 0x10;
    /// Software thermal slowdown.
    pub const SW_THERMAL: u64 = 0x20;
    /// Hardware thermal slowdown.
    pub const HW_THERMAL: u64 = 0x40;
    /// Hardware power brake slowdown.
    pub const HW_POWER_BRAKE: u64 = 0x80;
    /// Display clock setting.
    pub const DISPLAY_CLOCK: u64 = 0x100;
    /// Every bit the simulator knows.
    pub const ALL: u64 = 0x1FF;
}

/// Which accumulated counter to read (see [`GpuSim::violation_ns`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    /// Time with one reason bit set (must be a single bit of 0x1..0x80).
    Reason(u64),
    /// Power policy: SW power cap or HW power brake.
    PowerPolicy,
    /// Thermal policy: SW or HW thermal slowdown.
    ThermalPolicy,
}

/// Counter slots: 0 energy (J), 1..=8 reason bits 0x1..0x80, 9 power, 10 thermal.
const COUNTERS: usize = 11;

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

/// Compiled metric timelines; `None` means "derive a sensible default".
#[derive(Debug)]
struct Signals {
    utilization_gpu: Option<Signal>,
    utilization_memory: Option<Signal>,
    memory_used_mib: Option<Signal>,
    temperature_gpu: Option<Signal>,
    temperature_memory: Option<Signal>,
    power_w: Option<Signal>,
    sm_clock_mhz: Option<Signal>,
    mem_clock_mhz: Option<Signal>,
    graphics_clock_mhz: Option<Signal>,
    fan_percent: Option<Signal>,
    pstate: Option<Signal>,
    encoder_percent: Option<Signal>,
    decoder_percent: Option<Signal>,
    clocks_event_reasons: Option<Signal>,
}

/// A simulated GPU.
#[derive(Debug)]
pub struct GpuSim {
    config: GpuConfig,
    faults: Vec<Fault>,
    signals: Signals,
    processes: Vec<ExplicitProcess>,
    pool: Option<Pool>,
    counters: Integrator<[f64; COUNTERS]>,
    /// GPM of the whole GPU (`None`: no GPM, as before Hopper).
    gpm: Option<GpmSim>,
    /// GPM of each MIG GPU instance, by instance id (GPUs with GPM only).
    mig_gpm: Vec<(u32, GpmSim)>,
    /// NVLink links (`None`: NVLink NOT_SUPPORTED).
    nvlink: Option<NvLinkSim>,
    /// Bus id of the GPU at the far end of the links (remote = "gpu").
    nvlink_peer: Option<String>,
}

impl GpuSim {
    /// Compiles GPU `config`; `faults` are this GPU's faults only.
    pub fn new(config: GpuConfig, faults: Vec<Fault>, scenario_seed: u64) -> Self {
        let seed = rng::mix(scenario_seed, config.index as u64);
        let m = &config.spec.metrics;
        let sig = |name: &str, spec: &Option<Spanned<TimelineSpec>>| {
            spec.as_ref()
                .map(|s| Signal::new(s.get_ref(), rng::mix(seed, rng::hash_str(name))))
        };
        let signals = Signals {
            utilization_gpu: sig("utilization_gpu", &m.utilization_gpu),
            utilization_memory: sig("utilization_memory", &m.utilization_memory),
            memory_used_mib: sig("memory_used_mib", &m.memory_used_mib),
            temperature_gpu: sig("temperature_gpu", &m.temperature_gpu),
            temperature_memory: sig("temperature_memory", &m.temperature_memory),
            power_w: sig("power_w", &m.power_w),
            sm_clock_mhz: sig("sm_clock_mhz", &m.sm_clock_mhz),
            mem_clock_mhz: sig("mem_clock_mhz", &m.mem_clock_mhz),
            graphics_clock_mhz: sig("graphics_clock_mhz", &m.graphics_clock_mhz),
            fan_percent: sig("fan_percent", &m.fan_percent),
            pstate: sig("pstate", &m.pstate),
            encoder_percent: sig("encoder_percent", &m.encoder_percent),
            decoder_percent: sig("decoder_percent", &m.decoder_percent),
            clocks_event_reasons: sig("clocks_event_reasons", &m.clocks_event_reasons),
        };
        let processes = config
            .spec
            .processes
            .iter()
            .enumerate()
            .map(|(i, p)| ExplicitProcess::new(p, rng::mix(seed, 0x7000 + i as u64)))
            .collect();
        let pool = config.spec.process_pool.as_ref().map(|p| {
            Pool::new(
                p,
                config.index,
                rng::mix(seed, rng::hash_str("process_pool")),
            )
        });
        let (gpm, mig_gpm) = perf::compile(&config.spec, seed);
        let nvlink = health::compile(&config.spec, &faults, seed);
        GpuSim {
            config,
            faults,
            signals,
            processes,
            pool,
            counters: Integrator::default(),
            gpm,
            mig_gpm,
            nvlink,
            nvlink_peer: None,
        }
    }

    /// Static configuration (identity and limits).
    pub fn config(&self) -> &GpuConfig {
        &self.config
    }

    fn spec(&self) -> &GpuSpec {
        &self.config.spec
    }

    /// This GPU's faults.
    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }

    /// Whether the GPU is lost at `t`.
    pub fn is_lost(&self, t: f64) -> bool {
        self.faults
            .iter()
            .any(|f| f.effect == FaultEffect::Lost && f.active(t))
    }

    /// Fails with GPU_IS_LOST or NOT_SUPPORTED when `feature` cannot be read at `t`.
    pub fn check(&self, feature: Option<Feature>, t: f64) -> Result<(), Unavailable> {
        if self.is_lost(t) {
            return Err(Unavailable::GpuLost);
        }
        let Some(feature) = feature else {
            return Ok(());
        };
        let spec = self.spec();
        let hardware_lacks = match feature {
            Feature::Fan => spec.fans == 0,
            Feature::Gpm => spec.gpm.is_none(),
            Feature::Nvlink => spec.nvlink.is_none(),
            Feature::Fabric => spec.fabric.is_none(),
            Feature::Ecc | Feature::RetiredPages | Feature::RemappedRows => !spec.ecc,
            Feature::Mig => spec.mig.is_none(),
            _ => false,
        };
        if hardware_lacks || self.switched_off(feature, t) {
            Err(Unavailable::NotSupported)
        } else {
            Ok(())
        }
    }

    /// Whether the scenario makes `feature` NOT_SUPPORTED at `t` (listed in
    /// `unsupported`, or a `not_supported` fault is active).
    fn switched_off(&self, feature: Feature, t: f64) -> bool {
        self.spec().unsupported.contains(&feature)
            || self
                .faults
                .iter()
                .any(|f| f.effect == FaultEffect::NotSupported(feature) && f.active(t))
    }

    fn gated<T>(
        &self,
        feature: Feature,
        t: f64,
        value: impl FnOnce() -> T,
    ) -> Result<T, Unavailable> {
        self.check(Some(feature), t).map(|()| value())
    }

    // ---- raw metric values (no gating) ----

    fn util_gpu(&self, t: f64) -> f64 {
        self.signals
            .utilization_gpu
            .as_ref()
            .map_or(0.0, |s| s.eval(t))
            .clamp(0.0, 100.0)
    }

    fn util_mem(&self, t: f64) -> f64 {
        self.signals
            .utilization_memory
            .as_ref()
            .map_or_else(|| self.util_gpu(t) * 0.5, |s| s.eval(t))
            .clamp(0.0, 100.0)
    }

    fn power_w(&self, t: f64) -> f64 {
        let limit = self.spec().power_limit_w;
        self.signals
            .power_w
            .as_ref()
            .map_or_else(
                || limit * (0.1 + 0.75 * self.util_gpu(t) / 100.0),
                |s| s.eval(t),
            )
            .max(0.0)
    }

    fn temp_gpu(&self, t: f64) -> f64 {
        let limit = self.spec().power_limit_w;
        self.signals
            .temperature_gpu
            .as_ref()
            .map_or_else(|| 30.0 + 45.0 * self.power_w(t) / limit, |s| s.eval(t))
            .clamp(0.0, 200.0)
    }

    fn temp_mem(&self, t: f64) -> f64 {
        self.signals
            .temperature_memory
            .as_ref()
            .map_or_else(|| self.temp_gpu(t) + 4.0, |s| s.eval(t))
            .clamp(0.0, 200.0)
    }

    /// Clock event reason bits at `t` (timeline OR-ed with auto reasons).
    fn reasons_raw(&self, t: f64) -> u64 {
        let mut bits = self
            .signals
            .clocks_event_reasons
            .as_ref()
            .map_or(0, |s| s.eval(t).max(0.0).round() as u64)
            & reasons::ALL;
        let spec = self.spec();
        if spec.auto_reasons {
            if self.util_gpu(t) < 1.0 {
                bits |= reasons::IDLE;
            }
            if self.power_w(t) >= 0.98 * spec.power_limit_w {
                bits |= reasons::SW_POWER_CAP;
            }
            let temp = self.temp_gpu(t);
            let slowdown = f64::from(spec.temp_slowdown_c);
            if temp >= slowdown - 3.0 {
                bits |= reasons::SW_THERMAL;
            }
            if temp >= slowdown {
                bits |= reasons::HW_THERMAL;
            }
        }
        bits
    }

    fn counters(&self, t: f64) -> [f64; COUNTERS] {
        self.counters.integral(t, |s| {
            let bits = self.reasons_raw(s);
            let on = |mask: u64| if bits & mask != 0 { 1.0 } else { 0.0 };
            [
                self.power_w(s),
                on(0x1),
                on(0x2),
                on(0x4),
                on(0x8),
                on(0x10),
                on(0x20),
                on(0x40),
                on(0x80),
                on(reasons::SW_POWER_CAP | reasons::HW_POWER_BRAKE),
                on(reasons::SW_THERMAL | reasons::HW_THERMAL),
            ]
        })
    }

    // ---- gated readings ----

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

    /// Energy since t = 0, mJ (monotonic).
    pub fn energy_mj(&self, t: f64) -> Result<u64, Unavailable> {
        self.gated(Feature::Energy, t, || (self.counters(t)[0] * 1000.0) as u64)
    }

    /// Accumulated violation time, ns (monotonic).
    pub fn violation_ns(&self, which: Violation, t: f64) -> Result<u64, Unavailable> {
        self.check(Some(Feature::Violation), t)?;
        let slot = match which {
            Violation::Reason(bit) if bit.is_power_of_two() && bit <= 0x80 => {
                1 + bit.trailing_zeros() as usize
            }
            Violation::Reason(_) => return Err(Unavailable::NotSupported),
            Violation::PowerPolicy => 9,
            Violation::ThermalPolicy => 10,
        };
        Ok((self.counters(t)[slot] * 1e9) as u64)
    }

    /// Current clock (0 graphics, 1 SM, 2 memory, 3 video), MHz.
    pub fn clock_mhz(&self, clock: u32, t: f64) -> Result<u32, Unavailable> {
        self.check(Some(Feature::Clocks), t)?;
        let s = self.spec();
        let max_graphics = s.max_graphics_clock_mhz.unwrap_or(s.max_sm_clock_mhz);
        let busy = self.util_gpu(t) >= 1.0;
        let throttled = self.reasons_raw(t)
            & (reasons::HW_SLOWDOWN | reasons::HW_THERMAL | reasons::HW_POWER_BRAKE)
            != 0;
        let default_core = |max: u32| {
            let base = if busy {
                f64::from(max)
            } else {
                345.0_f64.min(f64::from(max))
            };
            if throttled {
                base * 0.5
            } else {
                base
            }
        };
        let value = match clock {
            0 => self
                .signals
                .graphics_clock_mhz
                .as_ref()
                .map_or_else(|| default_core(max_graphics), |x| x.eval(t)),
            1 => self
                .signals
                .sm_clock_mhz
                .as_ref()
                .map_or_else(|| default_core(s.max_sm_clock_mhz), |x| x.eval(t)),
            2 => self
                .signals
                .mem_clock_mhz
                .as_ref()
                .map_or(f64::from(s.max_mem_clock_mhz), |x| x.eval(t)),
            3 => default_core(s.max_video_clock_mhz),
            _ => return Err(Unavailable::InvalidArgument),
        };
        Ok(value.max(0.0).round() as u32)
    }

    /// Maximum clock (0 graphics, 1 SM, 2 memory, 3 video), MHz.
    pub fn max_clock_mhz(&self, clock: u32, t: f64) -> Result<u32, Unavailable> {
        self.check(Some(Feature::MaxClocks), t)?;
        let s = self.spec();
        match clock {
            0 => Ok(s.max_graphics_clock_mhz.unwrap_or(s.max_sm_clock_mhz)),
            1 => Ok(s.max_sm_clock_mhz),
            2 => Ok(s.max_mem_clock_mhz),
            3 => Ok(s.max_video_clock_mhz),
            _ => Err(Unavailable::InvalidArgument),
        }
    }

    /// Clock event reasons bitmask.
    pub fn clocks_event_reasons(&self, t: f64) -> Result<u64, Unavailable> {
        self.gated(Feature::ClocksEventReasons, t, || self.reasons_raw(t))
    }

    /// Supported clock event reasons bitmask.
    pub fn supported_clocks_event_reasons(&self, t: f64) -> Result<u64, Unavailable> {
        self.gated(Feature::ClocksEventReasons, t, || reasons::ALL)
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

    fn all_processes(&self, t: f64) -> Vec<ProcessSample> {
        let mut all: Vec<ProcessSample> =
            self.processes.iter().filter_map(|p| p.sample(t)).collect();
        if let Some(pool) = &self.pool {
            all.extend(pool.sample(t));
        }
        all
    }

    /// Processes of `kind` running at `t`.
    pub fn processes(&self, kind: ProcessKind, t: f64) -> Result<Vec<ProcessSample>, Unavailable> {
        self.check(Some(Feature::Processes), t)?;
        let mut list = self.all_processes(t);
        list.retain(|p| p.kind == kind && !p.mps_client);
        Ok(list)
    }

    /// Name of a simulated process on this GPU.
    pub fn process_name(&self, pid: u32, t: f64) -> Option<String> {
        self.processes
            .iter()
            .find_map(|p| p.name_of(pid).map(str::to_string))
            .or_else(|| self.pool.as_ref().and_then(|p| p.name_of(pid, t)))
    }

    /// Board serial.
    pub fn serial(&self, t: f64) -> Result<&str, Unavailable> {
        self.gated(Feature::Serial, t, || self.config.serial.as_str())
    }

    /// Supported event types bitmask.
    pub fn supported_events(&self) -> u64 {
        if self.spec().ecc {
            0x1 | 0x2 | 0x4 | 0x8 | 0x10
        } else {
            0x8
        }
    }
}

fn pct(signal: Option<&Signal>, t: f64) -> u32 {
    signal.map_or(0.0, |s| s.eval(t)).clamp(0.0, 100.0).round() as u32
}
