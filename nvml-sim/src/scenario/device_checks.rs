//! Validation of a GPU's GPM, NVLink, fabric and MIG-instance GPM tables.

use super::gpm::GpmSpec;
use super::health::{parse_uuid, MAX_LINKS};
use super::schema::GpuSpec;
use super::{Builder, ScenarioError};
use crate::codes;

impl Builder<'_> {
    /// Checks the GPM, NVLink and fabric tables of the GPU at `path`.
    pub(super) fn validate_health(
        &self,
        spec: &GpuSpec,
        path: &str,
        span: std::ops::Range<usize>,
    ) -> Result<(), ScenarioError> {
        if let Some(gpm) = &spec.gpm {
            self.validate_gpm(gpm, &format!("{path}.gpm"))?;
        }
        for (i, m) in spec.mig_instances.iter().enumerate() {
            if let Some(gpm) = &m.gpm {
                self.validate_gpm(gpm, &format!("{path}.mig_instances[{i}].gpm"))?;
                if spec.gpm.is_none() {
                    return self.err(
                        Some(span),
                        format!("{path}.mig_instances[{i}].gpm"),
                        "a MIG instance can only have GPM on a GPU that has it: add [gpu.gpm]",
                    );
                }
            }
        }
        if let Some(nvlink) = &spec.nvlink {
            let links = *nvlink.links.get_ref();
            if links == 0 || links > MAX_LINKS {
                return self.err(
                    Some(nvlink.links.span()),
                    format!("{path}.nvlink.links"),
                    format!("links must be 1..={MAX_LINKS} (omit [gpu.nvlink] for a GPU without NVLink)"),
                );
            }
            for (name, t) in [
                ("tx_mib_s", &nvlink.tx_mib_s),
                ("rx_mib_s", &nvlink.rx_mib_s),
            ] {
                if let Some(t) = t {
                    if let Err(msg) = t.get_ref().validate() {
                        return self.err(Some(t.span()), format!("{path}.nvlink.{name}"), msg);
                    }
                }
            }
            for (i, e) in nvlink.errors.iter().enumerate() {
                let epath = format!("{path}.nvlink.errors[{i}]");
                if let Some(link) = &e.link {
                    if *link.get_ref() >= links {
                        return self.err(
                            Some(link.span()),
                            format!("{epath}.link"),
                            format!(
                                "link {} does not exist: the GPU has {links} links",
                                link.get_ref()
                            ),
                        );
                    }
                }
                if let Err(msg) = e.per_second.get_ref().validate() {
                    return self.err(
                        Some(e.per_second.span()),
                        format!("{epath}.per_second"),
                        msg,
                    );
                }
            }
        }
        if let Some(fabric) = &spec.fabric {
            for status in fabric.status.get_ref().values() {
                if status != "SUCCESS" && codes::code_for_name(status).is_none() {
                    return self.err(
                        Some(fabric.status.span()),
                        format!("{path}.fabric.status"),
                        format!(
                            "`{status}` is not SUCCESS or an NVML error name such as NOT_READY"
                        ),
                    );
                }
            }
            if !(1..=3).contains(fabric.struct_version.get_ref()) {
                return self.err(
                    Some(fabric.struct_version.span()),
                    format!("{path}.fabric.struct_version"),
                    "struct_version must be 1, 2 or 3 (the newest nvmlGpuFabricInfo struct the driver knows)",
                );
            }
            if parse_uuid(fabric.cluster_uuid.get_ref()).is_none() {
                return self.err(
                    Some(fabric.cluster_uuid.span()),
                    format!("{path}.fabric.cluster_uuid"),
                    "cluster_uuid must look like 01234567-89ab-cdef-0123-456789abcdef",
                );
            }
        }
        Ok(())
    }

    fn validate_gpm(&self, gpm: &GpmSpec, path: &str) -> Result<(), ScenarioError> {
        gpm.check()
            .or_else(|(span, field, msg)| self.err(Some(span), format!("{path}.{field}"), msg))
    }
}
