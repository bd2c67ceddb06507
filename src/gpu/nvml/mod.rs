//! The NVML adapter: the only module that imports `nvml_wrapper`.
//!
//! It turns NVML's calls into snapshot readings. Each call's result goes
//! through a [`Tally`], which decides what an error means: an unsupported
//! reading is absent (logged once at debug), a lost GPU marks the GPU lost and
//! skips its remaining calls, anything else is counted by (function, error).
//!
//! Calls per GPU on a fast tick: utilization, memory, temperature and one
//! `nvmlDeviceGetFieldValues` batch (power, memory temperature, violation
//! counters) — 4; the clocks (SM, memory, graphics, video) and the
//! clock-event reasons — 5 more — when they are due (every tick by
//! default, every 5 s in the sampler: [`Cadence`](crate::sampler::reader::Cadence)).
//! The energy counter joins the batch once every [`ENERGY_EVERY`]: a real
//! H200 takes ~3 ms to read it, 30 times the rest of the tick.
//!
//! One file per concern: [`fields`] names the field-value batch ids,
//! `batch` asks a batch of them, `fast` and `slow` read the two tiers, `gpm`
//! the GPM samples and metrics, `processes` the processes and MIG instances,
//! `xid` the Xid event set, and [`tally`] classifies every call's result.
//! Every call nvml-wrapper does not make for us goes through `raw`, the
//! adapter's only `unsafe` code: the other modules forbid it.
#![allow(
    clippy::disallowed_types,
    reason = "the NVML adapter runs on the sampler's blocking thread: std time is its clock"
)]

#[forbid(unsafe_code)]
mod batch;
#[forbid(unsafe_code)]
mod fabric;
#[forbid(unsafe_code)]
mod fast;
#[forbid(unsafe_code)]
pub mod fields;
#[forbid(unsafe_code)]
mod gpm;
#[forbid(unsafe_code)]
mod links;
#[forbid(unsafe_code)]
mod mig_profile;
#[forbid(unsafe_code)]
mod processes;
mod raw;
#[forbid(unsafe_code)]
mod slow;
#[forbid(unsafe_code)]
pub mod tally;
#[forbid(unsafe_code)]
mod xid;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use nvml_wrapper::{Device, Nvml};

use super::snapshot::{FieldGroup, SystemInfo};

pub use fields::{ENERGY_EVERY, FAST_FIELD_IDS, FAST_FIELD_IDS_WITH_ENERGY};
pub use processes::ProcessUtilization;
pub use tally::{error_name, Tally};
pub use xid::{XidListenError, XidListener, XidWait};

use tally::describe;

/// The library name the NVIDIA driver installs.
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

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

/// NVML gave no handle for a GPU: the sampler reports it lost with this
/// reason and retries on the slow tier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("NVML gives no handle for this GPU ({reason}); it is reported lost and retried")]
pub struct NoHandle {
    /// NVML's error as a snake_case name (e.g. "gpu_lost"): the `reason` label.
    pub reason: &'static str,
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
    /// GPM support and the previous tick's GPM samples.
    gpm: gpm::GpmState<'d>,
    /// The identity facts (name, serial, PCI, thresholds, maximum clocks
    /// and PCIe link), read on the handle's first slow tick: they do not
    /// change while the handle lives (a driver re-init makes a new one).
    identity: Option<super::snapshot::GpuIdentity>,
    /// How many fans the board has (0 on SXM modules), read once.
    fans: Option<u32>,
    /// The clock readings (clocks and clock-event reasons) last read, and
    /// fast ticks since: they are read once every `clocks_every` ticks.
    clocks: Option<fast::ClockReadings>,
    /// Process-list buffer sizes, kept between process ticks.
    capacities: raw::Capacities,
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

    /// A handle to the GPU at `index`, or why NVML gives none.
    pub fn device(&self, index: u32, tally: &mut Tally) -> Result<GpuDevice<'_>, NoHandle> {
        match self.nvml.device_by_index(index) {
            Ok(device) => Ok(GpuDevice {
                device,
                index,
                power_from_fields: true,
                energy: None,
                gpm: gpm::GpmState::default(),
                identity: None,
                fans: None,
                clocks: None,
                capacities: raw::Capacities::default(),
            }),
            Err(error) => {
                tally.count("nvmlDeviceGetHandleByIndex_v2", &error);
                Err(NoHandle {
                    reason: error_name(&error),
                })
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
}
