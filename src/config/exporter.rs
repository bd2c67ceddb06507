//! `[exporter]`: what /metrics exports beyond the default families.

use crate::exporter::detail::Detail;

use super::raw::RawExporter;
use super::Validator;

/// /metrics settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExporterConfig {
    /// The detail sets exported besides the default families
    /// (`detail = ["nvlink_links", ...]`, `"full"` for all;
    /// `--metrics-detail` overrides it).
    pub detail: Detail,
    /// dcgm-exporter's `hpc_job` label on the `DCGM_FI_*` series of
    /// `--metrics-compat dcgm`: one copy of a GPU's series per Slurm job on
    /// it (`compat_hpc_job = true`); off by default, as in dcgm-exporter,
    /// since it multiplies those series.
    pub compat_hpc_job: bool,
}

impl Validator<'_> {
    /// Checks `[exporter]`: every detail set name must be known.
    pub(super) fn exporter(&mut self, exporter: RawExporter) -> ExporterConfig {
        let mut detail = Detail::NONE;
        for name in exporter.detail.iter().flatten() {
            match Detail::parse_name(name.get_ref()) {
                Ok(sets) => detail = sets.sets().chain(detail.sets()).collect(),
                Err(error) => self.problem("exporter.detail", name.span(), &error.to_string()),
            }
        }
        ExporterConfig {
            detail,
            compat_hpc_job: exporter.compat_hpc_job.is_some_and(|on| *on.get_ref()),
        }
    }
}
