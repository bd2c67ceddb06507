//! The NVML adapter: the only module that imports `nvml_wrapper`.
//!
//! It turns NVML's calls into snapshot readings. Each call's result goes
//! through a [`Tally`], which decides what an error means: an unsupported
//! reading is absent (logged once at debug), a lost GPU marks the GPU lost and
//! skips its remaining calls, anything else is counted by (function, error).
//!
//! Calls per GPU on a fast tick: utilization, memory, temperature, SM clock,
//! memory clock, clock-event reasons, and one `nvmlDeviceGetFieldValues` batch
//! (power, memory temperature, violation counters) — 7 in all. The energy
//! counter joins the batch once every [`ENERGY_EVERY`]: a real H200 takes
//! ~3 ms to read it, 30 times the rest of the tick.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, ComputeMode, EccCounter, MemoryError, TemperatureSensor, TemperatureThreshold,
};
use nvml_wrapper::enums::device::{SampleValue, UsedGpuMemory};
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::event::EventSet;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::{Device, Nvml};
use tracing::{debug, warn};

use super::snapshot::{
    EccCounters, FastReadings, FieldGroup, GpuIdentity, GpuProcess, MemoryReading, MigInstance,
    ProcessKind, SlowReadings, SystemInfo,
};

/// The library name the NVIDIA driver installs.
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

const MHZ: f64 = 1_000_000.0;
const FIELD_MEMORY_TEMP: u32 = 82;
const FIELD_TOTAL_ENERGY: u32 = 83;
const FIELD_PCIE_REPLAY: u32 = 94;
const FIELD_POWER_INSTANT: u32 = 186;
const FIELD_ECC_SBE_VOL: u32 = 3;
const FIELD_ECC_DBE_VOL: u32 = 4;
const FIELD_ECC_SBE_AGG: u32 = 5;
const FIELD_ECC_DBE_AGG: u32 = 6;
const FIELD_RETIRED_SBE: u32 = 29;
const FIELD_RETIRED_DBE: u32 = 30;
const FIELD_RETIRED_PENDING: u32 = 31;
const FIELD_REMAPPED_COR: u32 = 142;
const FIELD_REMAPPED_UNC: u32 = 143;
const FIELD_REMAPPED_PENDING: u32 = 144;
const FIELD_REMAPPED_FAILURE: u32 = 145;

/// The reasons whose violation counters the fast tier reads, in the order
/// of their ids in [`FAST_FIELD_IDS`] (a test checks them against
/// [`CLOCK_EVENT_REASONS`]).
const VIOLATION_REASONS: [&str; 5] = [
    "sw_power_cap",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
];

/// The one `nvmlDeviceGetFieldValues` batch of the fast tier (v12 ids):
/// power, memory temperature, then the violation counters of
/// [`VIOLATION_REASONS`]. Public so benchmarks make exactly the same call.
pub const FAST_FIELD_IDS: [u32; 7] = [
    FIELD_POWER_INSTANT,
    FIELD_MEMORY_TEMP,
    74,
    76,
    251,
    252,
    253,
];

/// [`FAST_FIELD_IDS`] plus the energy counter, read once every
/// [`ENERGY_EVERY`].
pub const FAST_FIELD_IDS_WITH_ENERGY: [u32; 8] = {
    let mut ids = [FIELD_TOTAL_ENERGY; 8];
    let mut i = 0;
    while i < FAST_FIELD_IDS.len() {
        ids[i] = FAST_FIELD_IDS[i];
        i += 1;
    }
    ids
};

/// How often the energy counter is read. On a real H200 (driver 580) it
/// costs ~3 ms a read against ~0.1 ms for the rest of the fast tick; a
/// counter for `rate()` over minutes loses nothing at 5 s.
pub const ENERGY_EVERY: Duration = Duration::from_secs(5);

/// Why NVML could not be opened: the library did not load or `nvmlInit` failed.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot initialise NVML from {library}: {reason}. Is the NVIDIA driver installed and \
     loaded? Pass --nvml-library PATH to point at libnvidia-ml.so, or run with --simulate to \
     try gpuwatch on simulated GPUs"
)]
pub struct OpenError {
    /// The library path or name that was tried.
    pub library: String,
    /// NVML's own words.
    pub reason: String,
}

/// An initialised NVML library. Owned by the sampler; shared read-only with
/// the Xid event thread.
#[derive(Debug)]
pub struct Driver {
    nvml: Nvml,
}

/// A handle to one GPU, borrowed from its [`Driver`].
pub struct GpuDevice<'d> {
    device: Device<'d>,
    index: u32,
    /// Whether NVML_FI_DEV_POWER_INSTANT works on this GPU; when it does
    /// not, power comes from `nvmlDeviceGetPowerUsage`. Re-probed on the slow tier.
    power_from_fields: bool,
    /// The energy counter's last reading (J) and when it was read: it is
    /// read once every [`ENERGY_EVERY`] and carried between reads.
    energy: Option<(Instant, Option<f64>)>,
}

impl Driver {
    /// Loads NVML from `library` (or the system's `libnvidia-ml.so.1`) and
    /// initialises it.
    pub fn open(library: Option<&Path>) -> Result<Driver, OpenError> {
        let path: PathBuf = library
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_LIBRARY));
        let mut builder = Nvml::builder();
        builder.lib_path(OsStr::new(path.as_os_str()));
        builder
            .init()
            .map(|nvml| Driver { nvml })
            .map_err(|error| OpenError {
                library: path.display().to_string(),
                reason: describe(&error),
            })
    }

    /// How many GPUs NVML sees.
    pub fn device_count(&self, tally: &mut Tally) -> Option<u32> {
        let result = self.nvml.device_count();
        tally.system("nvmlDeviceGetCount_v2", result)
    }

    /// A handle to the GPU at `index`, or the error name (e.g. "gpu_lost")
    /// when NVML gives none.
    pub fn device(&self, index: u32, tally: &mut Tally) -> Result<GpuDevice<'_>, String> {
        match self.nvml.device_by_index(index) {
            Ok(device) => Ok(GpuDevice {
                device,
                index,
                power_from_fields: true,
                energy: None,
            }),
            Err(error) => {
                tally.count("nvmlDeviceGetHandleByIndex_v2", &error);
                Err(error_name(&error).to_string())
            }
        }
    }

    /// Driver, NVML and CUDA versions.
    pub fn system_info(&self, tally: &mut Tally) -> SystemInfo {
        let driver_version =
            tally.system("nvmlSystemGetDriverVersion", self.nvml.sys_driver_version());
        let nvml_version = tally.system("nvmlSystemGetNVMLVersion", self.nvml.sys_nvml_version());
        let cuda_driver_version = tally
            .system(
                "nvmlSystemGetCudaDriverVersion_v2",
                self.nvml.sys_cuda_driver_version(),
            )
            .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
        SystemInfo {
            driver_version,
            nvml_version,
            cuda_driver_version,
        }
    }

    /// NVML's name for a process, for when /proc cannot tell (another PID
    /// namespace, or the simulator).
    pub fn process_name(&self, pid: u32) -> Option<String> {
        let name = self.nvml.sys_process_name(pid, 64).ok()?;
        let base = name.rsplit('/').next().unwrap_or(&name).trim();
        (!base.is_empty()).then(|| base.to_string())
    }

    /// An event set that receives Xid critical errors from every GPU in
    /// `indices` that supports them.
    pub fn xid_listener(&self, indices: &[u32]) -> Result<XidListener<'_>, String> {
        let mut registered: Vec<u32> = Vec::new();
        let mut set = self.nvml.create_event_set().map_err(|e| describe(&e))?;
        for &index in indices {
            let device = match self.nvml.device_by_index(index) {
                Ok(device) => device,
                Err(error) => {
                    debug!(gpu = index, error = %describe(&error), "No handle for Xid events.");
                    continue;
                }
            };
            let supported = device
                .supported_event_types()
                .map(|t| t.contains(EventTypes::CRITICAL_XID_ERROR))
                .unwrap_or(false);
            if !supported {
                debug!(gpu = index, "GPU does not report Xid events.");
                continue;
            }
            match device.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                Ok(kept) => {
                    set = kept;
                    registered.push(index);
                }
                Err(error) => {
                    warn!(gpu = index, error = %describe(&error.error),
                        "Cannot register for Xid events on this GPU; its Xid errors will not be counted.");
                    // A failed registration releases the set: build it again.
                    set = self.nvml.create_event_set().map_err(|e| describe(&e))?;
                    for &again in &registered {
                        let device = self.nvml.device_by_index(again).map_err(|e| describe(&e))?;
                        set = device
                            .register_events(EventTypes::CRITICAL_XID_ERROR, set)
                            .map_err(|e| describe(&e.error))?;
                    }
                }
            }
        }
        Ok(XidListener { set, registered })
    }
}

/// Waits for Xid events on the GPUs it registered.
pub struct XidListener<'d> {
    set: EventSet<'d>,
    registered: Vec<u32>,
}

/// What one wait on the Xid event set produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XidWait {
    /// An Xid error on GPU `gpu`.
    Event {
        /// NVML index of the GPU.
        gpu: u32,
        /// The Xid code.
        code: u64,
    },
    /// Nothing arrived within the timeout.
    Timeout,
    /// The wait failed; the message says why.
    Failed(String),
}

impl XidListener<'_> {
    /// The GPUs whose Xid errors this listener receives.
    pub fn registered(&self) -> &[u32] {
        &self.registered
    }

    /// Waits up to `timeout_ms` for the next event.
    pub fn wait(&self, timeout_ms: u32) -> XidWait {
        match self.set.wait(timeout_ms) {
            Ok(event) => {
                let code = match event.event_data {
                    Some(XidError::Value(code)) => code,
                    Some(XidError::Unknown) | None => 999,
                };
                match event.device.index() {
                    Ok(gpu) => XidWait::Event { gpu, code },
                    Err(error) => XidWait::Failed(describe(&error)),
                }
            }
            Err(NvmlError::Timeout) => XidWait::Timeout,
            Err(error) => XidWait::Failed(describe(&error)),
        }
    }
}

impl GpuDevice<'_> {
    /// NVML index of this GPU.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The GPU's UUID, the key that follows it across re-enumeration.
    pub fn uuid(&self, tally: &mut Tally) -> Option<String> {
        tally.call(FieldGroup::Identity, "nvmlDeviceGetUUID", || {
            self.device.uuid()
        })
    }

    /// Reads the fast tier.
    pub fn read_fast(&mut self, tally: &mut Tally) -> FastReadings {
        let d = &self.device;
        let mut r = FastReadings::default();
        if let Some(u) = tally.call(
            FieldGroup::Utilization,
            "nvmlDeviceGetUtilizationRates",
            || d.utilization_rates(),
        ) {
            r.utilization_gpu_ratio = Some(f64::from(u.gpu) / 100.0);
            r.utilization_memory_ratio = Some(f64::from(u.memory) / 100.0);
        }
        r.memory = tally
            .call(FieldGroup::Memory, "nvmlDeviceGetMemoryInfo_v2", || {
                d.memory_info()
            })
            .map(|m| MemoryReading {
                total_bytes: m.total,
                used_bytes: m.used,
                free_bytes: m.free,
                reserved_bytes: m.reserved,
            });
        r.temperature_gpu_celsius = tally
            .call(FieldGroup::Thermal, "nvmlDeviceGetTemperature", || {
                d.temperature(TemperatureSensor::Gpu)
            })
            .map(f64::from);
        r.sm_clock_hertz = tally
            .call(FieldGroup::Clocks, "nvmlDeviceGetClockInfo", || {
                d.clock_info(Clock::SM)
            })
            .map(|mhz| f64::from(mhz) * MHZ);
        r.memory_clock_hertz = tally
            .call(FieldGroup::Clocks, "nvmlDeviceGetClockInfo", || {
                d.clock_info(Clock::Memory)
            })
            .map(|mhz| f64::from(mhz) * MHZ);
        r.graphics_clock_hertz = tally
            .call(FieldGroup::Clocks, "nvmlDeviceGetClockInfo", || {
                d.clock_info(Clock::Graphics)
            })
            .map(|mhz| f64::from(mhz) * MHZ);
        r.video_clock_hertz = tally
            .call(FieldGroup::Clocks, "nvmlDeviceGetClockInfo", || {
                d.clock_info(Clock::Video)
            })
            .map(|mhz| f64::from(mhz) * MHZ);
        r.clock_event_reasons = tally.call(
            FieldGroup::Clocks,
            "nvmlDeviceGetCurrentClocksThrottleReasons",
            || d.current_throttle_reasons().map(|bits| bits.bits()),
        );
        self.read_fast_fields(tally, &mut r);
        r
    }

    fn read_fast_fields(&mut self, tally: &mut Tally, r: &mut FastReadings) {
        let now = Instant::now();
        let energy_due = self
            .energy
            .is_none_or(|(read_at, _)| now.duration_since(read_at) >= ENERGY_EVERY);
        let ids: &[u32] = if energy_due {
            &FAST_FIELD_IDS_WITH_ENERGY
        } else {
            &FAST_FIELD_IDS
        };
        let values = self.field_values(FieldGroup::Power, ids, tally);
        let power_mw = values.first().copied().flatten();
        match power_mw {
            Some(mw) => r.power_watts = Some(mw / 1000.0),
            None => self.power_from_fields = false,
        }
        r.temperature_memory_celsius = values.get(1).copied().flatten();
        for (i, name) in VIOLATION_REASONS.iter().enumerate() {
            if let Some(ns) = values.get(2 + i).copied().flatten() {
                r.clock_event_seconds.insert(name, ns / 1e9);
            }
        }
        if energy_due {
            let joules = values.get(7).copied().flatten().map(|mj| mj / 1000.0);
            self.energy = Some((now, joules));
        }
        r.energy_joules = self.energy.and_then(|(_, joules)| joules);
        if r.power_watts.is_none() && !self.power_from_fields {
            let d = &self.device;
            r.power_watts = tally
                .call(FieldGroup::Power, "nvmlDeviceGetPowerUsage", || {
                    d.power_usage()
                })
                .map(|mw| f64::from(mw) / 1000.0);
        }
    }

    /// One `nvmlDeviceGetFieldValues` call; each entry is `None` where that
    /// field is unsupported. The result lines up with `ids` by position.
    fn field_values(&self, group: FieldGroup, ids: &[u32], tally: &mut Tally) -> Vec<Option<f64>> {
        let field_ids: Vec<FieldId> = ids.iter().map(|&id| FieldId(id)).collect();
        let Some(samples) = tally.call(group, "nvmlDeviceGetFieldValues", || {
            self.device.field_values_for(&field_ids)
        }) else {
            return vec![None; ids.len()];
        };
        let mut out = Vec::with_capacity(ids.len());
        for (id, sample) in ids.iter().zip(samples) {
            let value = match sample.and_then(|s| s.value) {
                Ok(SampleValue::F64(v)) => Some(v),
                Ok(SampleValue::U32(v)) => Some(f64::from(v)),
                Ok(SampleValue::U64(v)) => Some(v as f64),
                Ok(SampleValue::I64(v)) => Some(v as f64),
                Err(error) => {
                    tally.field_unsupported(self.index, *id, &error);
                    None
                }
            };
            out.push(value);
        }
        out.resize(ids.len(), None);
        out
    }

    /// Reads the slow tier: identity facts and health counters.
    pub fn read_slow(&mut self, tally: &mut Tally) -> (GpuIdentity, SlowReadings) {
        self.power_from_fields = true;
        let d = &self.device;
        let id = FieldGroup::Identity;
        let threshold = |tally: &mut Tally, which| {
            tally
                .call(id, "nvmlDeviceGetTemperatureThreshold", || {
                    d.temperature_threshold(which)
                })
                .map(f64::from)
        };
        let identity = GpuIdentity {
            name: tally.call(id, "nvmlDeviceGetName", || d.name()),
            serial: tally.call(id, "nvmlDeviceGetSerial", || d.serial()),
            pci_bus_id: None,
            pci_device_id: None,
            temperature_slowdown_celsius: threshold(tally, TemperatureThreshold::Slowdown),
            temperature_shutdown_celsius: threshold(tally, TemperatureThreshold::Shutdown),
            temperature_gpu_max_celsius: threshold(tally, TemperatureThreshold::GpuMax),
            temperature_memory_max_celsius: threshold(tally, TemperatureThreshold::MemoryMax),
            max_sm_clock_hertz: tally
                .call(id, "nvmlDeviceGetMaxClockInfo", || {
                    d.max_clock_info(Clock::SM)
                })
                .map(|mhz| f64::from(mhz) * MHZ),
            max_memory_clock_hertz: tally
                .call(id, "nvmlDeviceGetMaxClockInfo", || {
                    d.max_clock_info(Clock::Memory)
                })
                .map(|mhz| f64::from(mhz) * MHZ),
            max_graphics_clock_hertz: tally
                .call(id, "nvmlDeviceGetMaxClockInfo", || {
                    d.max_clock_info(Clock::Graphics)
                })
                .map(|mhz| f64::from(mhz) * MHZ),
            pcie_max_link_gen: tally.call(
                FieldGroup::Pcie,
                "nvmlDeviceGetMaxPcieLinkGeneration",
                || d.max_pcie_link_gen(),
            ),
            pcie_max_link_width: tally.call(
                FieldGroup::Pcie,
                "nvmlDeviceGetMaxPcieLinkWidth",
                || d.max_pcie_link_width(),
            ),
        };
        let identity = match tally.call(id, "nvmlDeviceGetPciInfo_v3", || d.pci_info()) {
            Some(pci) => GpuIdentity {
                pci_bus_id: Some(pci.bus_id),
                pci_device_id: Some(pci.pci_device_id),
                ..identity
            },
            None => identity,
        };
        let slow = self.read_health(tally);
        (identity, slow)
    }

    fn read_health(&self, tally: &mut Tally) -> SlowReadings {
        let d = &self.device;
        let dev = FieldGroup::Device;
        let mut s = SlowReadings {
            power_limit_watts: tally
                .call(FieldGroup::Power, "nvmlDeviceGetEnforcedPowerLimit", || {
                    d.enforced_power_limit()
                })
                .map(|mw| f64::from(mw) / 1000.0),
            power_default_limit_watts: tally
                .call(
                    FieldGroup::Power,
                    "nvmlDeviceGetPowerManagementDefaultLimit",
                    || d.power_management_limit_default(),
                )
                .map(|mw| f64::from(mw) / 1000.0),
            performance_state: tally
                .call(dev, "nvmlDeviceGetPerformanceState", || {
                    d.performance_state()
                })
                .map(|p| p.as_c()),
            pcie_link_gen: tally.call(
                FieldGroup::Pcie,
                "nvmlDeviceGetCurrPcieLinkGeneration",
                || d.current_pcie_link_gen(),
            ),
            pcie_link_width: tally.call(FieldGroup::Pcie, "nvmlDeviceGetCurrPcieLinkWidth", || {
                d.current_pcie_link_width()
            }),
            encoder_utilization_ratio: tally
                .call(dev, "nvmlDeviceGetEncoderUtilization", || {
                    d.encoder_utilization()
                })
                .map(|u| f64::from(u.utilization) / 100.0),
            decoder_utilization_ratio: tally
                .call(dev, "nvmlDeviceGetDecoderUtilization", || {
                    d.decoder_utilization()
                })
                .map(|u| f64::from(u.utilization) / 100.0),
            compute_mode: tally
                .call(dev, "nvmlDeviceGetComputeMode", || d.compute_mode())
                .map(|mode| match mode {
                    ComputeMode::Default => "default",
                    ComputeMode::ExclusiveThread => "exclusive_thread",
                    ComputeMode::Prohibited => "prohibited",
                    ComputeMode::ExclusiveProcess => "exclusive_process",
                }),
            mig_enabled: tally
                .call(dev, "nvmlDeviceGetMigMode", || d.mig_mode())
                .map(|m| m.current == 1),
            ..SlowReadings::default()
        };
        s.pcie_replay_errors =
            self.field_values(FieldGroup::Pcie, &[FIELD_PCIE_REPLAY], tally)[0].map(|v| v as u64);
        if let Some(fans) = tally.call(dev, "nvmlDeviceGetNumFans", || d.num_fans()) {
            s.fan_speed_ratio = (0..fans)
                .map(|fan| {
                    tally
                        .call(dev, "nvmlDeviceGetFanSpeed_v2", || d.fan_speed(fan))
                        .map(|pct| f64::from(pct) / 100.0)
                })
                .collect();
        }
        s.ecc_enabled = tally
            .call(FieldGroup::Ecc, "nvmlDeviceGetEccMode", || {
                d.is_ecc_enabled()
            })
            .map(|mode| mode.currently_enabled);
        if s.ecc_enabled == Some(true) {
            self.read_ecc(tally, &mut s);
        }
        s
    }

    fn read_ecc(&self, tally: &mut Tally, s: &mut SlowReadings) {
        let ids = [
            FIELD_ECC_SBE_VOL,
            FIELD_ECC_DBE_VOL,
            FIELD_ECC_SBE_AGG,
            FIELD_ECC_DBE_AGG,
            FIELD_RETIRED_SBE,
            FIELD_RETIRED_DBE,
            FIELD_RETIRED_PENDING,
            FIELD_REMAPPED_COR,
            FIELD_REMAPPED_UNC,
            FIELD_REMAPPED_PENDING,
            FIELD_REMAPPED_FAILURE,
        ];
        let v = self.field_values(FieldGroup::Ecc, &ids, tally);
        let count = |i: usize| v[i].map(|x| x as u64);
        let flag = |i: usize| v[i].map(|x| x != 0.0);
        s.ecc = EccCounters {
            corrected_volatile: count(0),
            uncorrected_volatile: count(1),
            corrected_aggregate: count(2),
            uncorrected_aggregate: count(3),
        };
        if s.ecc.uncorrected_volatile.is_none() {
            // Older drivers lack the ECC fields: ask the classic calls.
            let d = &self.device;
            let total = |tally: &mut Tally, kind, counter| {
                tally.call(FieldGroup::Ecc, "nvmlDeviceGetTotalEccErrors", || {
                    d.total_ecc_errors(kind, counter)
                })
            };
            s.ecc = EccCounters {
                corrected_volatile: total(tally, MemoryError::Corrected, EccCounter::Volatile),
                uncorrected_volatile: total(tally, MemoryError::Uncorrected, EccCounter::Volatile),
                corrected_aggregate: total(tally, MemoryError::Corrected, EccCounter::Aggregate),
                uncorrected_aggregate: total(
                    tally,
                    MemoryError::Uncorrected,
                    EccCounter::Aggregate,
                ),
            };
        }
        s.retired_pages_single_bit = count(4);
        s.retired_pages_double_bit = count(5);
        s.retired_pages_pending = flag(6);
        s.remapped_rows_correctable = count(7);
        s.remapped_rows_uncorrectable = count(8);
        s.remapped_rows_pending = flag(9);
        s.remapped_rows_failure = flag(10);
    }

    /// The processes with a compute or graphics context on this GPU (MPS
    /// clients included, marked), without names (the sampler resolves those).
    pub fn read_processes(&self, tally: &mut Tally) -> Option<Vec<GpuProcess>> {
        let d = &self.device;
        let group = FieldGroup::Processes;
        let compute = tally.call(group, "nvmlDeviceGetComputeRunningProcesses_v3", || {
            d.running_compute_processes()
        });
        let graphics = tally.call(group, "nvmlDeviceGetGraphicsRunningProcesses_v3", || {
            d.running_graphics_processes()
        });
        if compute.is_none() && graphics.is_none() {
            return None;
        }
        let mps = tally.call(group, "nvmlDeviceGetMPSComputeRunningProcesses_v3", || {
            d.mps_running_compute_processes()
        });
        let mut by_pid: BTreeMap<u32, GpuProcess> = BTreeMap::new();
        let lists = [
            (ProcessKind::Compute, false, compute.unwrap_or_default()),
            (ProcessKind::Graphics, false, graphics.unwrap_or_default()),
            (ProcessKind::Compute, true, mps.unwrap_or_default()),
        ];
        for (kind, mps_client, list) in lists {
            for info in list {
                let memory = match info.used_gpu_memory {
                    UsedGpuMemory::Used(bytes) => Some(bytes),
                    UsedGpuMemory::Unavailable => None,
                };
                by_pid
                    .entry(info.pid)
                    .and_modify(|p| {
                        if p.kind != kind {
                            p.kind = ProcessKind::ComputeAndGraphics;
                        }
                        p.used_memory_bytes = p.used_memory_bytes.max(memory);
                        p.mps_client |= mps_client;
                    })
                    .or_insert(GpuProcess {
                        pid: info.pid,
                        kind,
                        used_memory_bytes: memory,
                        gpu_instance_id: info.gpu_instance_id,
                        compute_instance_id: info.compute_instance_id,
                        mps_client,
                        ..GpuProcess::default()
                    });
            }
        }
        Some(by_pid.into_values().collect())
    }

    /// The MIG GPU instances of this GPU (call only while MIG is on): one
    /// entry per MIG device, with its memory.
    pub fn read_mig_instances(&self, tally: &mut Tally) -> Option<Vec<MigInstance>> {
        let d = &self.device;
        let group = FieldGroup::Device;
        let count = tally.call(group, "nvmlDeviceGetMaxMigDeviceCount", || {
            d.mig_device_count()
        })?;
        let mut out = Vec::new();
        for i in 0..count {
            // Indices without a MIG device answer NOT_FOUND: skip them.
            let Ok(mig) = d.mig_device_by_index(i) else {
                continue;
            };
            let Some(memory) =
                tally.call(group, "nvmlDeviceGetMemoryInfo_v2", || mig.memory_info())
            else {
                continue;
            };
            let id = tally.call(group, "nvmlDeviceGetGpuInstanceId", || {
                gpu_instance_id(&mig)
            });
            let uuid = tally.call(group, "nvmlDeviceGetUUID", || mig.uuid());
            out.push(MigInstance {
                gpu_instance_id: id.unwrap_or(i),
                uuid: uuid.unwrap_or_default(),
                memory_total_bytes: memory.total,
                memory_used_bytes: memory.used,
            });
        }
        Some(out)
    }

    /// Per-process SM and memory utilization since `last_seen` (µs, CPU
    /// time; 0 for everything NVML still holds), averaged over the samples
    /// of each pid, as 0..1 ratios; with the newest sample's timestamp, to
    /// pass as `last_seen` next time. `None` where the GPU cannot tell.
    pub fn read_process_utilization(
        &self,
        last_seen: u64,
        tally: &mut Tally,
    ) -> Option<(ProcessUtilization, u64)> {
        let d = &self.device;
        let samples = tally.call(
            FieldGroup::Processes,
            "nvmlDeviceGetProcessUtilization",
            || match d.process_utilization_stats(last_seen) {
                // NOT_FOUND: no sample newer than last_seen (all idle).
                Err(NvmlError::NotFound) => Ok(Vec::new()),
                other => other,
            },
        )?;
        let mut newest = last_seen;
        let mut sums: BTreeMap<u32, (f64, f64, u32)> = BTreeMap::new();
        for s in samples.iter().filter(|s| s.timestamp > last_seen) {
            newest = newest.max(s.timestamp);
            let e = sums.entry(s.pid).or_default();
            e.0 += f64::from(s.sm_util);
            e.1 += f64::from(s.mem_util);
            e.2 += 1;
        }
        let averages = sums
            .into_iter()
            .map(|(pid, (sm, mem, n))| {
                let n = f64::from(n.max(1));
                (
                    pid,
                    (
                        (sm / n / 100.0).clamp(0.0, 1.0),
                        (mem / n / 100.0).clamp(0.0, 1.0),
                    ),
                )
            })
            .collect();
        Some((averages, newest))
    }
}

/// Per-pid (SM, memory) utilization ratios of one interval.
pub type ProcessUtilization = BTreeMap<u32, (f64, f64)>;

/// `nvmlDeviceGetGpuInstanceId`, which nvml-wrapper does not wrap.
fn gpu_instance_id(mig: &Device<'_>) -> Result<u32, NvmlError> {
    let sym = mig
        .nvml()
        .lib()
        .nvmlDeviceGetGpuInstanceId
        .as_ref()
        .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
    let mut id: std::ffi::c_uint = 0;
    // SAFETY: the handle comes from nvml-wrapper and stays valid while `mig`
    // lives; `id` is a valid out pointer.
    let code = unsafe { sym(mig.handle(), &mut id) };
    nvml_wrapper::error::nvml_try(code).map(|()| id)
}

/// What one tick learned about NVML's health: per-group success, a lost GPU,
/// and errors by (function, error). Kept by the sampler across ticks.
#[derive(Debug, Default)]
pub struct Tally {
    /// Errors since start by (NVML function, error name).
    pub errors: BTreeMap<(String, String), u64>,
    /// Per-group outcome of the GPU being read now.
    pub groups: BTreeMap<FieldGroup, bool>,
    /// Set when the GPU being read returned GPU_IS_LOST (or similar): its
    /// remaining calls are skipped.
    pub lost: Option<String>,
    /// Set when NVML itself stopped working (uninitialised, driver gone):
    /// the sampler re-initialises.
    pub driver_failed: Option<String>,
    gpu: u32,
    unsupported_logged: HashSet<(u32, &'static str)>,
    fields_logged: HashSet<(u32, u32)>,
}

impl Tally {
    /// Starts reading GPU `gpu`: clears the per-GPU state.
    pub fn begin_gpu(&mut self, gpu: u32) {
        self.gpu = gpu;
        self.groups.clear();
        self.lost = None;
    }

    /// Runs one NVML call for the current GPU and classifies its result.
    fn call<T>(
        &mut self,
        group: FieldGroup,
        function: &'static str,
        f: impl FnOnce() -> Result<T, NvmlError>,
    ) -> Option<T> {
        if self.lost.is_some() || self.driver_failed.is_some() {
            self.groups.insert(group, false);
            return None;
        }
        match f() {
            Ok(value) => {
                self.groups.entry(group).or_insert(true);
                Some(value)
            }
            Err(error) if is_unsupported(&error) => {
                self.groups.entry(group).or_insert(true);
                if self.unsupported_logged.insert((self.gpu, function)) {
                    debug!(gpu = self.gpu, function, error = %describe(&error),
                        "Reading not supported; it will be absent.");
                }
                None
            }
            Err(error) => {
                self.groups.insert(group, false);
                self.count(function, &error);
                if is_lost(&error) {
                    self.lost = Some(error_name(&error).to_string());
                }
                None
            }
        }
    }

    /// Classifies a driver-wide call (not tied to one GPU).
    fn system<T>(&mut self, function: &'static str, result: Result<T, NvmlError>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) if is_unsupported(&error) => None,
            Err(error) => {
                self.count(function, &error);
                if is_driver_failure(&error) {
                    self.driver_failed = Some(describe(&error));
                }
                None
            }
        }
    }

    fn field_unsupported(&mut self, gpu: u32, field: u32, error: &NvmlError) {
        if self.fields_logged.insert((gpu, field)) {
            debug!(gpu, field, error = %describe(error),
                "NVML field not available; its reading will be absent.");
        }
    }

    /// Counts a failed call by (function, error).
    fn count(&mut self, function: &'static str, error: &NvmlError) {
        if is_driver_failure(error) {
            self.driver_failed = Some(describe(error));
        }
        *self
            .errors
            .entry((function.to_string(), error_name(error).to_string()))
            .or_insert(0) += 1;
    }
}

fn is_unsupported(error: &NvmlError) -> bool {
    matches!(
        error,
        NvmlError::NotSupported
            | NvmlError::FailedToLoadSymbol(_)
            | NvmlError::FunctionNotFound
            | NvmlError::NoData
    )
}

fn is_lost(error: &NvmlError) -> bool {
    matches!(
        error,
        NvmlError::GpuLost | NvmlError::ResetRequired | NvmlError::Timeout | NvmlError::IrqIssue
    )
}

fn is_driver_failure(error: &NvmlError) -> bool {
    matches!(
        error,
        NvmlError::Uninitialized | NvmlError::DriverNotLoaded | NvmlError::LibRmVersionMismatch
    )
}

/// A stable snake_case name for an NVML error: the `error` label value.
pub fn error_name(error: &NvmlError) -> &'static str {
    match error {
        NvmlError::Uninitialized => "uninitialized",
        NvmlError::InvalidArg => "invalid_argument",
        NvmlError::NotSupported => "not_supported",
        NvmlError::NoPermission => "no_permission",
        NvmlError::NotFound => "not_found",
        NvmlError::InsufficientSize(_) => "insufficient_size",
        NvmlError::InsufficientPower => "insufficient_power",
        NvmlError::DriverNotLoaded => "driver_not_loaded",
        NvmlError::Timeout => "timeout",
        NvmlError::IrqIssue => "irq_issue",
        NvmlError::LibraryNotFound => "library_not_found",
        NvmlError::FunctionNotFound => "function_not_found",
        NvmlError::CorruptedInfoROM => "corrupted_inforom",
        NvmlError::GpuLost => "gpu_lost",
        NvmlError::ResetRequired => "reset_required",
        NvmlError::OperatingSystem => "operating_system",
        NvmlError::LibRmVersionMismatch => "lib_rm_version_mismatch",
        NvmlError::InUse => "in_use",
        NvmlError::InsufficientMemory => "insufficient_memory",
        NvmlError::NoData => "no_data",
        NvmlError::Unknown => "unknown",
        NvmlError::FailedToLoadSymbol(_) => "symbol_missing",
        NvmlError::Utf8Error(_) | NvmlError::NulError(_) => "bad_string",
        NvmlError::UnexpectedVariant(_) | NvmlError::IncorrectBits(_) => "unexpected_value",
        NvmlError::LibloadingError(_) => "library_load_failed",
        _ => "other",
    }
}

/// NVML's error in words, with the wrapper's source where it has one.
fn describe(error: &NvmlError) -> String {
    match error {
        NvmlError::LibloadingError(inner) => format!("the library could not be loaded ({inner})"),
        other => format!("{other} ({})", error_name(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::reasons::CLOCK_EVENT_REASONS;

    #[test]
    fn the_energy_batch_is_the_fast_batch_plus_energy() {
        assert_eq!(FAST_FIELD_IDS_WITH_ENERGY[..7], FAST_FIELD_IDS);
        assert_eq!(FAST_FIELD_IDS_WITH_ENERGY[7], FIELD_TOTAL_ENERGY);
    }

    #[test]
    fn the_fast_batch_reads_every_violation_counter_in_order() {
        let expected: Vec<(&str, u32)> = CLOCK_EVENT_REASONS
            .iter()
            .filter_map(|r| r.violation_field.map(|f| (r.name, f)))
            .collect();
        let batch: Vec<(&str, u32)> = VIOLATION_REASONS
            .iter()
            .copied()
            .zip(FAST_FIELD_IDS[2..].iter().copied())
            .collect();
        assert_eq!(batch, expected);
    }
}
