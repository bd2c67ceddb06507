//! Drop-in metric names: the families of other GPU exporters, encoded from
//! the same snapshot, so that dashboards and alerts written for them keep
//! working when gpuwatch replaces them.
//!
//! - [`dcgm`]: NVIDIA dcgm-exporter's `DCGM_FI_*` names, labels and units.
//! - [`nvidia_smi`]: utkuozdemir/nvidia_gpu_exporter's `nvidia_smi_*` names.
//!
//! They are exported *in addition to* the `gpuwatch_*` families (gpuwatch's
//! own dashboards, rules and readiness need those). Like the main collector,
//! a scrape reads the latest snapshot and never calls NVML; a reading the
//! snapshot lacks stays absent.

pub mod dcgm;
mod dcgm_labels;
pub mod dcgm_prof;
mod dcgm_workload;
pub mod nvidia_smi;
pub mod nvidia_smi_extra;

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use std::sync::Arc;

use crate::gpu::Snapshot;

/// A yes/no reading as the peers write it (1 or 0), absent when unknown.
fn flag(value: Option<bool>) -> Option<f64> {
    value.map(crate::families::flag)
}

/// One compatibility family set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MetricsCompat {
    /// dcgm-exporter's `DCGM_FI_*` families.
    Dcgm,
    /// nvidia_gpu_exporter's `nvidia_smi_*` families.
    NvidiaSmi,
}

impl MetricsCompat {
    /// Every set, in the order they are encoded.
    pub const ALL: [MetricsCompat; 2] = [MetricsCompat::Dcgm, MetricsCompat::NvidiaSmi];

    /// The name used on the command line and in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricsCompat::Dcgm => "dcgm",
            MetricsCompat::NvidiaSmi => "nvidia_smi",
        }
    }

    /// Parses one name.
    pub fn parse(name: &str) -> Result<MetricsCompat, UnknownCompat> {
        MetricsCompat::ALL
            .into_iter()
            .find(|c| c.as_str() == name.trim())
            .ok_or_else(|| UnknownCompat(name.trim().to_string()))
    }

    /// Parses the values of `--metrics-compat` (each may be a
    /// comma-separated list). `none` stands for the empty set, so that the
    /// flag can switch off what the configuration turned on. The result is
    /// sorted and without duplicates.
    pub fn parse_list<'a>(
        values: impl IntoIterator<Item = &'a str>,
    ) -> Result<Vec<MetricsCompat>, UnknownCompat> {
        let mut out = Vec::new();
        for value in values {
            for name in value.split(',').map(str::trim) {
                if name.is_empty() || name == "none" {
                    continue;
                }
                out.push(MetricsCompat::parse(name)?);
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// A name that is no metrics compatibility set (the name, trimmed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{0}\" is not a metrics compatibility set; use \"dcgm\" or \"nvidia_smi\" (or \"none\" on the command line)")]
pub struct UnknownCompat(pub String);

impl fmt::Display for MetricsCompat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Encodes the chosen compatibility families of one snapshot.
#[derive(Debug)]
pub struct CompatCollector {
    snapshot: Arc<Snapshot>,
    sets: Vec<MetricsCompat>,
    hpc_job: bool,
}

impl CompatCollector {
    /// A collector for `sets`, encoding `snapshot`.
    pub fn new(snapshot: Arc<Snapshot>, sets: Vec<MetricsCompat>) -> CompatCollector {
        CompatCollector {
            snapshot,
            sets,
            hpc_job: false,
        }
    }

    /// Adds dcgm-exporter's `hpc_job` label to the `DCGM_FI_*` series: one
    /// copy of a GPU's series per Slurm job on it (`[exporter]
    /// compat_hpc_job`; off by default, as in dcgm-exporter).
    pub fn with_hpc_job(mut self, hpc_job: bool) -> CompatCollector {
        self.hpc_job = hpc_job;
        self
    }
}

impl Collector for CompatCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let snapshot = &self.snapshot;
        for set in &self.sets {
            match set {
                MetricsCompat::Dcgm => dcgm::encode(snapshot, self.hpc_job, &mut encoder)?,
                MetricsCompat::NvidiaSmi => nvidia_smi::encode(snapshot, &mut encoder)?,
            }
        }
        Ok(())
    }
}

/// Rounds away binary noise from unit conversions (0.29 × 100 is
/// 28.999999999999996 in f64), keeping 6 decimals.
pub(crate) fn tidy(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_repeated_and_comma_separated_values() {
        assert_eq!(
            MetricsCompat::parse_list(["dcgm", "nvidia_smi,dcgm"]),
            Ok(vec![MetricsCompat::Dcgm, MetricsCompat::NvidiaSmi])
        );
        assert_eq!(
            MetricsCompat::parse_list([" nvidia_smi "]),
            Ok(vec![MetricsCompat::NvidiaSmi])
        );
        assert_eq!(MetricsCompat::parse_list(["none"]), Ok(vec![]));
        let error = MetricsCompat::parse_list(["dcgm,prometheus"]).unwrap_err();
        assert_eq!(error, UnknownCompat("prometheus".to_string()));
        assert!(error.to_string().contains("\"prometheus\""), "{error}");
    }

    #[test]
    fn tidy_removes_conversion_noise() {
        assert_eq!(tidy(0.29 * 100.0), 29.0);
        assert_eq!(tidy(1.5), 1.5);
    }
}
