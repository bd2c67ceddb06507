//! Classifying NVML's answers: what an error means (absent, lost GPU,
//! driver gone, counted failure) and its stable name for labels.

use std::collections::{BTreeMap, HashSet};

use nvml_wrapper::error::NvmlError;
use tracing::debug;

use crate::gpu::snapshot::FieldGroup;

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
    gpm_logged: HashSet<(u32, u32)>,
}

impl Tally {
    /// Starts reading GPU `gpu`: clears the per-GPU state.
    pub fn begin_gpu(&mut self, gpu: u32) {
        self.gpu = gpu;
        self.groups.clear();
        self.lost = None;
    }

    /// Runs one NVML call for the current GPU and classifies its result.
    pub(super) fn call<T>(
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
    pub(super) fn system<T>(
        &mut self,
        function: &'static str,
        result: Result<T, NvmlError>,
    ) -> Option<T> {
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

    pub(super) fn field_unsupported(&mut self, gpu: u32, field: u32, error: &NvmlError) {
        if self.fields_logged.insert((gpu, field)) {
            debug!(gpu, field, error = %describe(error),
                "NVML field not available; its reading will be absent.");
        }
    }

    /// One GPM metric answered an error in an otherwise working
    /// `nvmlGpmMetricsGet`: unsupported is logged once, others counted.
    pub(super) fn gpm_metric_failed(&mut self, metric: u32, error: &NvmlError) {
        if is_unsupported(error) {
            if self.gpm_logged.insert((self.gpu, metric)) {
                debug!(gpu = self.gpu, metric, error = %describe(error),
                    "GPM metric not available; its reading will be absent.");
            }
        } else {
            self.count("nvmlGpmMetricsGet", error);
        }
    }

    /// Counts a failed call by (function, error).
    pub(super) fn count(&mut self, function: &'static str, error: &NvmlError) {
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
pub(super) fn describe(error: &NvmlError) -> String {
    match error {
        NvmlError::LibloadingError(inner) => format!("the library could not be loaded ({inner})"),
        other => format!("{other} ({})", error_name(other)),
    }
}
