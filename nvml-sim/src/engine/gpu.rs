//! One simulated GPU: its metrics, counters and faults as functions of t.
//!
//! This file compiles the GPU and gates every reading (lost GPU, unsupported
//! feature); the readings themselves are in `gpu/readings.rs` and
//! `gpu/clocks.rs`, ECC, health, GPM and sharing in their own files.

use super::counters::Integrator;
use super::gpm::GpmSim;
use super::nvlink::NvLinkSim;
use super::processes::{ExplicitProcess, Pool, ProcessSample};
use super::signal::Signal;
use super::Unavailable;
use crate::rng;
use crate::scenario::schema::{GpuSpec, ProcessKind};
use crate::scenario::timeline::TimelineSpec;
use crate::scenario::{Fault, FaultEffect, Feature, GpuConfig};
use toml::Spanned;

mod clocks;
mod ecc;
mod health;
mod perf;
mod readings;
mod sharing;
pub use clocks::{reasons, Violation};
pub use ecc::EccState;
pub use health::{FabricInfo, NvLinkRemote};
pub use readings::MemoryState;
pub use sharing::{MigInstance, ProcessUtilization};

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

/// Slots of the counters integrated from the clocks' state (`gpu/clocks.rs`):
/// 0 energy (J), 1..=8 reason bits 0x1..0x80, 9 power, 10 thermal.
const COUNTERS: usize = 11;

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

    fn all_processes(&self, t: f64) -> Vec<ProcessSample> {
        let mut all: Vec<ProcessSample> =
            self.processes.iter().filter_map(|p| p.sample(t)).collect();
        if let Some(pool) = &self.pool {
            all.extend(pool.sample(t));
        }
        super::pid_map::apply(&mut all);
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
        let pid = super::pid_map::scenario_pid(pid);
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
