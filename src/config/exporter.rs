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
        ExporterConfig { detail }
    }
}
