//! The simulation engine: answers "what is the state of GPU i at time t".
//!
//! The engine is a pure function of the scenario and t (plus caches); the FFI
//! layer only translates its answers into NVML calls.

mod checkpoints;
pub mod counters;
pub mod fields;
pub mod gpm;
mod gpu;
pub mod kmsg;
pub mod nvlink;
pub mod pid_map;
pub mod processes;
pub mod signal;

pub use fields::FieldValue;
pub use gpu::{
    reasons, EccState, FabricInfo, GpuSim, MemoryState, MigInstance, NvLinkRemote,
    ProcessUtilization, Violation,
};
pub use processes::ProcessSample;

use crate::scenario::{FaultEffect, Scenario};
use nvml_wrapper_sys::bindings::{nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED, nvmlReturn_t};

/// Why a reading is not available.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// NVML_ERROR_NOT_SUPPORTED.
    NotSupported,
    /// NVML_ERROR_GPU_IS_LOST.
    GpuLost,
    /// NVML_ERROR_INVALID_ARGUMENT (e.g. an unknown clock type).
    InvalidArgument,
}

/// An event the simulator delivers through event sets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimEvent {
    /// Scenario time, seconds.
    pub at: f64,
    /// GPU index.
    pub gpu: usize,
    /// NVML event type bit (0x8 Xid, 0x2 double-bit ECC, 0x1 single-bit ECC).
    pub event_type: u64,
    /// Event data (the Xid code; 0 for ECC events).
    pub data: u64,
}

/// What must happen before a call on a GPU is answered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Gate {
    /// Answer right away.
    Open,
    /// Sleep this many real milliseconds first.
    Slow(u64),
    /// Block until scenario time reaches the value (forever when None).
    Hang(Option<f64>),
}

/// A running scenario.
#[derive(Debug)]
pub struct Engine {
    scenario: Scenario,
    gpus: Vec<GpuSim>,
    events: Vec<SimEvent>,
    v13u1_fields: bool,
}

impl Engine {
    /// Builds the engine for `scenario`.
    pub fn new(scenario: Scenario) -> Engine {
        let mut gpus: Vec<GpuSim> = scenario
            .gpus
            .iter()
            .map(|g| {
                let faults = scenario
                    .faults
                    .iter()
                    .filter(|f| f.gpu == Some(g.index))
                    .cloned()
                    .collect();
                GpuSim::new(g.clone(), faults, scenario.seed)
            })
            .collect();
        // NVLink bridges (remote = "gpu") pair each GPU with the next one.
        let count = scenario.gpus.len();
        for (i, gpu) in gpus.iter_mut().enumerate() {
            let peer = &scenario.gpus[(i + 1) % count].pci_bus_id;
            gpu.set_nvlink_peer(peer.clone());
        }
        let mut events: Vec<SimEvent> = scenario
            .faults
            .iter()
            .filter_map(|f| {
                let gpu = f.gpu?;
                let (event_type, data) = match f.effect {
                    FaultEffect::Xid(code) => (0x8, code),
                    FaultEffect::EccUncorrected(_) => (0x2, 0),
                    FaultEffect::EccCorrected(_) => (0x1, 0),
                    _ => return None,
                };
                Some(SimEvent {
                    at: f.at,
                    gpu,
                    event_type,
                    data,
                })
            })
            .collect();
        events.sort_by(|a, b| a.at.total_cmp(&b.at).then(a.gpu.cmp(&b.gpu)));
        let v13u1_fields = fields::uses_v13u1_field_ids(&scenario.driver_version);
        Engine {
            scenario,
            gpus,
            events,
            v13u1_fields,
        }
    }

    /// The scenario being run.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// Wall-clock µs field `id` adds to a field-values batch (`[latency]`).
    pub fn field_latency_us(&self, id: u32) -> u64 {
        self.scenario
            .field_latency_us
            .get(&id)
            .copied()
            .unwrap_or(0)
    }

    /// Number of GPUs.
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }

    /// GPU `index`.
    pub fn gpu(&self, index: usize) -> Option<&GpuSim> {
        self.gpus.get(index)
    }

    /// Index of the GPU with this UUID.
    pub fn find_uuid(&self, uuid: &str) -> Option<usize> {
        self.gpus.iter().position(|g| g.config().uuid == uuid)
    }

    /// All events, sorted by time.
    pub fn events(&self) -> &[SimEvent] {
        &self.events
    }

    /// The error nvmlInit returns at `t`, if any.
    pub fn init_error(&self, t: f64) -> Option<nvmlReturn_t> {
        if self.driver_unloaded(t) {
            return Some(nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED);
        }
        self.scenario.init_error.or_else(|| {
            self.scenario.faults.iter().find_map(|f| match f.effect {
                FaultEffect::InitError(code) if f.active(t) => Some(code),
                _ => None,
            })
        })
    }

    /// Whether the kernel driver is gone at `t` (a `driver_unloaded` fault).
    pub fn driver_unloaded(&self, t: f64) -> bool {
        self.scenario
            .faults
            .iter()
            .any(|f| f.effect == FaultEffect::DriverUnloaded && f.active(t))
    }

    /// What a call on GPU `index` must wait for at `t`.
    pub fn gate(&self, index: usize, t: f64) -> Gate {
        let Some(gpu) = self.gpus.get(index) else {
            return Gate::Open;
        };
        let mut gate = Gate::Open;
        for f in gpu.faults().iter().filter(|f| f.active(t)) {
            match f.effect {
                FaultEffect::Hang => return Gate::Hang(f.until),
                FaultEffect::Slow(ms) => gate = Gate::Slow(ms),
                _ => {}
            }
        }
        gate
    }

    /// Reads field `id` of GPU `index` with scopeId `scope` (ids as
    /// nvml-wrapper sends them for this driver version).
    pub fn field(
        &self,
        index: usize,
        id: u32,
        scope: u32,
        t: f64,
    ) -> Result<FieldValue, Unavailable> {
        let gpu = self.gpus.get(index).ok_or(Unavailable::InvalidArgument)?;
        fields::read(gpu, id, scope, self.v13u1_fields, t)
    }

    /// The kernel-log records in log order, `ago` lines placed before
    /// `t_init` (the scenario time of the first nvmlInit).
    pub fn kernel_log(&self, t_init: f64) -> Vec<kmsg::Record> {
        kmsg::schedule(&self.scenario.kernel_log, &self.scenario.gpus, t_init)
    }

    /// Name of a simulated process.
    pub fn process_name(&self, pid: u32, t: f64) -> Option<String> {
        self.gpus.iter().find_map(|g| g.process_name(pid, t))
    }
}

#[cfg(test)]
mod gpm_tests;
#[cfg(test)]
mod health_tests;
#[cfg(test)]
mod tests;
