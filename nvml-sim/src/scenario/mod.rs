//! Scenario files: parsing, validation and the validated model the engine runs.

mod device_checks;
mod error;
mod fault;
mod feature;
pub mod gpm;
pub mod health;
mod identity;
pub mod kernel_log;
pub mod schema;
pub mod steps;
pub mod timeline;
mod validated;

pub use error::ScenarioError;
pub use feature::Feature;
pub use validated::{Fault, FaultEffect, GpuConfig};

use crate::codes;
use error::Locator;
use kernel_log::KernelLine;
use nvml_wrapper_sys::bindings::nvmlReturn_t;
use schema::{GpuSpec, ScenarioFile};
use std::collections::BTreeMap;
use toml::Spanned;

/// Default driver version reported when a scenario does not set one.
pub const DEFAULT_DRIVER_VERSION: &str = "550.54.15";

/// A validated scenario, ready to be run by an [`Engine`](crate::Engine).
#[derive(Debug, Clone)]
pub struct Scenario {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) driver_version: String,
    pub(crate) cuda_driver_version: i32,
    pub(crate) nvml_version: String,
    pub(crate) speed: f64,
    pub(crate) seed: u64,
    pub(crate) init_error: Option<nvmlReturn_t>,
    pub(crate) gpus: Vec<GpuConfig>,
    pub(crate) faults: Vec<Fault>,
    /// `[latency]`: µs per call of a function, by name.
    pub(crate) function_latency_us: BTreeMap<String, u64>,
    /// `[latency]`: µs a field adds to a field-values batch, by id.
    pub(crate) field_latency_us: BTreeMap<u32, u64>,
    /// Kernel-log lines (`[[kernel_log]]` and the Xid faults' lines).
    pub(crate) kernel_log: Vec<KernelLine>,
}

impl Scenario {
    /// Parses and validates a scenario; `origin` names the source in errors.
    pub fn parse(source: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        let loc = Locator::new(source, origin);
        let deserializer = toml::Deserializer::parse(source)
            .map_err(|e| loc.error(e.span().map(|s| s.start), "", e.message().trim()))?;
        let file: ScenarioFile = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            // Spanned<T> wrappers show up as a private key in the path; hide them.
            let path = e
                .path()
                .to_string()
                .replace(".$__serde_spanned_private_value", "");
            let inner = e.into_inner();
            let path = if path == "." { String::new() } else { path };
            loc.error(inner.span().map(|s| s.start), path, inner.message().trim())
        })?;
        Builder { loc: &loc, file }.build()
    }

    /// Number of GPUs (after replication).
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }

    /// Scenario name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Scenario description.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Driver version string.
    pub fn driver_version(&self) -> &str {
        &self.driver_version
    }

    /// Scenario seconds per real second (before the env override).
    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// The GPUs.
    pub fn gpus(&self) -> &[GpuConfig] {
        &self.gpus
    }

    /// The faults.
    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }
}

struct Builder<'a> {
    loc: &'a Locator<'a>,
    file: ScenarioFile,
}

impl Builder<'_> {
    fn err<T>(
        &self,
        span: Option<std::ops::Range<usize>>,
        path: impl Into<String>,
        msg: impl Into<String>,
    ) -> Result<T, ScenarioError> {
        Err(self.loc.error(span.map(|s| s.start), path, msg))
    }

    fn build(self) -> Result<Scenario, ScenarioError> {
        let f = &self.file;
        let driver_version = match &f.driver_version {
            Some(v) => {
                let ok = v.get_ref().split('.').count() >= 2
                    && v.get_ref()
                        .split('.')
                        .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
                if !ok {
                    return self.err(
                        Some(v.span()),
                        "driver_version",
                        format!("`{}` is not a version like 550.54.15", v.get_ref()),
                    );
                }
                v.get_ref().clone()
            }
            None => DEFAULT_DRIVER_VERSION.to_string(),
        };
        let speed = match &f.speed {
            Some(s) if !(s.get_ref().is_finite() && *s.get_ref() > 0.0) => {
                return self.err(Some(s.span()), "speed", "speed must be a positive number");
            }
            Some(s) => *s.get_ref(),
            None => 1.0,
        };
        let init_error = match &f.init.error {
            Some(name) => Some(self.error_code(name, "init.error")?),
            None => None,
        };
        let gpus = self.gpus()?;
        let faults = f
            .fault
            .iter()
            .enumerate()
            .map(|(i, fault)| self.fault(i, fault, &gpus))
            .collect::<Result<Vec<_>, _>>()?;
        let kernel_log = kernel_log::build(self.loc, &f.kernel_log, &gpus, &faults)?;
        let (function_latency_us, field_latency_us) = self.latency()?;
        Ok(Scenario {
            name: f.name.clone(),
            description: f.description.clone(),
            nvml_version: f
                .nvml_version
                .clone()
                .unwrap_or_else(|| format!("12.{driver_version}")),
            driver_version,
            cuda_driver_version: f.cuda_driver_version,
            speed,
            seed: f.seed,
            init_error,
            gpus,
            faults,
            function_latency_us,
            field_latency_us,
            kernel_log,
        })
    }

    /// Checks `[latency]`: known function names, numeric field ids.
    #[allow(clippy::type_complexity)]
    fn latency(&self) -> Result<(BTreeMap<String, u64>, BTreeMap<u32, u64>), ScenarioError> {
        let spec = &self.file.latency;
        let us = |d: &Spanned<crate::duration::Duration>| (d.get_ref().secs() * 1e6).round() as u64;
        let mut functions = BTreeMap::new();
        for (name, delay) in &spec.functions {
            if !crate::functions::NAMES.contains(&name.as_str()) {
                return self.err(
                    Some(delay.span()),
                    format!("latency.functions.{name}"),
                    format!(
                        "`{name}` is not an NVML function the simulator implements (see nvml-sim/src/functions.rs)"
                    ),
                );
            }
            functions.insert(name.clone(), us(delay));
        }
        let mut fields = BTreeMap::new();
        for (id, delay) in &spec.fields {
            let Ok(number) = id.parse::<u32>() else {
                return self.err(
                    Some(delay.span()),
                    format!("latency.fields.{id}"),
                    "field keys are NVML field ids (numbers), such as \"83\" for the energy counter",
                );
            };
            fields.insert(number, us(delay));
        }
        Ok((functions, fields))
    }

    fn error_code(
        &self,
        name: &Spanned<String>,
        path: &str,
    ) -> Result<nvmlReturn_t, ScenarioError> {
        codes::code_for_name(name.get_ref()).ok_or_else(|| {
            let known: Vec<&str> = codes::names().collect();
            self.loc.error(
                Some(name.span().start),
                path,
                format!(
                    "unknown NVML error `{}` (expected one of {})",
                    name.get_ref(),
                    known.join(", ")
                ),
            )
        })
    }

    fn gpus(&self) -> Result<Vec<GpuConfig>, ScenarioError> {
        let mut gpus = Vec::new();
        for (entry, spanned) in self.file.gpu.iter().enumerate() {
            let spec = spanned.get_ref();
            let path = format!("gpu[{entry}]");
            self.validate_gpu(spec, &path, spanned.span())?;
            let count = spec.count.as_ref().map_or(1, |c| *c.get_ref());
            for replica in 0..count {
                let index = gpus.len();
                let pci_bus_id = spec
                    .pci_bus_id
                    .clone()
                    .unwrap_or_else(|| identity::pci_bus_id(index));
                gpus.push(GpuConfig {
                    index,
                    uuid: spec
                        .uuid
                        .clone()
                        .unwrap_or_else(|| identity::uuid(self.file.seed, index)),
                    serial: spec
                        .serial
                        .clone()
                        .unwrap_or_else(|| identity::serial(self.file.seed, index)),
                    bus: identity::parse_bus(&pci_bus_id).unwrap_or_else(|| identity::bus(index)),
                    pci_bus_id,
                    minor_number: spec
                        .minor_number
                        .map_or(index as u32, |first| first.saturating_add(replica)),
                    spec: spec.clone(),
                });
            }
        }
        Ok(gpus)
    }

    fn validate_gpu(
        &self,
        spec: &GpuSpec,
        path: &str,
        span: std::ops::Range<usize>,
    ) -> Result<(), ScenarioError> {
        if let Some(count) = &spec.count {
            if *count.get_ref() == 0 {
                return self.err(
                    Some(count.span()),
                    format!("{path}.count"),
                    "count must be at least 1",
                );
            }
            if *count.get_ref() > 1
                && (spec.uuid.is_some() || spec.serial.is_some() || spec.pci_bus_id.is_some())
            {
                return self.err(
                    Some(count.span()),
                    format!("{path}.count"),
                    "uuid, serial and pci_bus_id can only be set when count = 1",
                );
            }
        }
        if spec.memory_total_mib == 0 || spec.memory_reserved_mib > spec.memory_total_mib {
            return self.err(
                Some(span),
                format!("{path}.memory_reserved_mib"),
                "memory_total_mib must be > 0 and ≥ memory_reserved_mib",
            );
        }
        if !(spec.power_limit_w.is_finite() && spec.power_limit_w > 0.0) {
            return self.err(
                Some(span),
                format!("{path}.power_limit_w"),
                "power_limit_w must be positive",
            );
        }
        let m = &spec.metrics;
        let timelines = [
            ("utilization_gpu", &m.utilization_gpu),
            ("utilization_memory", &m.utilization_memory),
            ("memory_used_mib", &m.memory_used_mib),
            ("temperature_gpu", &m.temperature_gpu),
            ("temperature_memory", &m.temperature_memory),
            ("power_w", &m.power_w),
            ("sm_clock_mhz", &m.sm_clock_mhz),
            ("mem_clock_mhz", &m.mem_clock_mhz),
            ("graphics_clock_mhz", &m.graphics_clock_mhz),
            ("fan_percent", &m.fan_percent),
            ("pstate", &m.pstate),
            ("encoder_percent", &m.encoder_percent),
            ("decoder_percent", &m.decoder_percent),
            ("clocks_event_reasons", &m.clocks_event_reasons),
        ];
        for (name, timeline) in timelines {
            if let Some(t) = timeline {
                if let Err(msg) = t.get_ref().validate() {
                    return self.err(Some(t.span()), format!("{path}.metrics.{name}"), msg);
                }
            }
        }
        for (i, p) in spec.processes.iter().enumerate() {
            if let Err(msg) = p.memory_mib.get_ref().validate() {
                return self.err(
                    Some(p.memory_mib.span()),
                    format!("{path}.processes[{i}].memory_mib"),
                    msg,
                );
            }
            if let Some(stop) = &p.stop {
                if stop.get_ref().secs() < p.start.secs() {
                    return self.err(
                        Some(stop.span()),
                        format!("{path}.processes[{i}].stop"),
                        "stop is before start",
                    );
                }
            }
        }
        if let Some(pool) = &spec.process_pool {
            let ppath = format!("{path}.process_pool");
            if pool.count == 0
                || pool.names.is_empty()
                || !(pool.min_mib >= 0.0 && pool.min_mib <= pool.max_mib)
            {
                return self.err(
                    Some(span),
                    ppath,
                    "process_pool needs count ≥ 1, at least one name and 0 ≤ min_mib ≤ max_mib",
                );
            }
            if pool.lifetime.get_ref().secs() <= 0.0 {
                return self.err(
                    Some(pool.lifetime.span()),
                    format!("{ppath}.lifetime"),
                    "lifetime must be greater than zero",
                );
            }
        }
        self.validate_health(spec, path, span)
    }
}

#[cfg(test)]
mod tests;
