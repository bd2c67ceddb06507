//! `[[fault]]` validation: what a fault does, when, and to which GPU.

use super::schema::{FaultKind, FaultSpec};
use super::{Builder, Fault, FaultEffect, GpuConfig, ScenarioError};
use toml::Spanned;

impl Builder<'_> {
    /// Validates `[[fault]]` number `i` against the scenario's GPUs.
    pub(super) fn fault(
        &self,
        i: usize,
        f: &FaultSpec,
        gpus: &[GpuConfig],
    ) -> Result<Fault, ScenarioError> {
        let gpu_count = gpus.len();
        let path = format!("fault[{i}]");
        let kind = *f.kind.get_ref();
        let gpu = match (&f.gpu, kind) {
            (Some(g), FaultKind::InitError | FaultKind::DriverUnloaded) => {
                return self.err(
                    Some(g.span()),
                    format!("{path}.gpu"),
                    "init_error and driver_unloaded faults apply to the whole library, not a GPU",
                );
            }
            (Some(g), _) if *g.get_ref() as usize >= gpu_count => {
                return self.err(
                    Some(g.span()),
                    format!("{path}.gpu"),
                    format!(
                        "GPU {} does not exist (the scenario has {gpu_count} GPUs)",
                        g.get_ref()
                    ),
                );
            }
            (Some(g), _) => Some(*g.get_ref() as usize),
            (None, FaultKind::InitError | FaultKind::DriverUnloaded) => None,
            (None, _) => {
                return self.err(
                    Some(f.kind.span()),
                    format!("{path}.gpu"),
                    "this fault kind needs a `gpu` index",
                )
            }
        };
        let until = match &f.until {
            Some(u) if u.get_ref().secs() <= f.at.secs() => {
                return self.err(
                    Some(u.span()),
                    format!("{path}.until"),
                    "until must be after at",
                );
            }
            Some(u) => Some(u.get_ref().secs()),
            None => None,
        };
        let used = |name: &str| match name {
            "code" => kind == FaultKind::Xid,
            "count" => matches!(kind, FaultKind::EccCorrected | FaultKind::EccUncorrected),
            "feature" => kind == FaultKind::NotSupported,
            "delay_ms" => kind == FaultKind::Slow,
            "link" => kind == FaultKind::NvlinkDown,
            _ => kind == FaultKind::InitError,
        };
        let extras = [
            ("code", f.code.as_ref().map(Spanned::span)),
            ("count", f.count.as_ref().map(Spanned::span)),
            ("feature", f.feature.as_ref().map(Spanned::span)),
            ("delay_ms", f.delay_ms.as_ref().map(Spanned::span)),
            ("error", f.error.as_ref().map(Spanned::span)),
            ("link", f.link.as_ref().map(Spanned::span)),
        ];
        for (name, span) in extras {
            if let Some(span) = span {
                if !used(name) {
                    return self.err(
                        Some(span),
                        format!("{path}.{name}"),
                        format!("`{name}` has no meaning for kind {kind:?}"),
                    );
                }
            }
        }
        let missing = |name: &str| {
            self.loc.error(
                Some(f.kind.span().start),
                format!("{path}.{name}"),
                format!("kind {kind:?} needs `{name}`"),
            )
        };
        let effect = match kind {
            FaultKind::Lost => FaultEffect::Lost,
            FaultKind::Xid => {
                FaultEffect::Xid(*f.code.as_ref().ok_or_else(|| missing("code"))?.get_ref())
            }
            FaultKind::EccUncorrected => {
                FaultEffect::EccUncorrected(f.count.as_ref().map_or(1, |c| *c.get_ref()))
            }
            FaultKind::EccCorrected => {
                FaultEffect::EccCorrected(f.count.as_ref().map_or(1, |c| *c.get_ref()))
            }
            FaultKind::RemapPending => FaultEffect::RemapPending,
            FaultKind::RemapFailure => FaultEffect::RemapFailure,
            FaultKind::NotSupported => FaultEffect::NotSupported(
                *f.feature
                    .as_ref()
                    .ok_or_else(|| missing("feature"))?
                    .get_ref(),
            ),
            FaultKind::Slow => FaultEffect::Slow(
                *f.delay_ms
                    .as_ref()
                    .ok_or_else(|| missing("delay_ms"))?
                    .get_ref(),
            ),
            FaultKind::Hang => FaultEffect::Hang,
            FaultKind::NvlinkDown => {
                let link = f.link.as_ref().ok_or_else(|| missing("link"))?;
                let links = gpu
                    .and_then(|g| gpus.get(g))
                    .and_then(|g| g.spec.nvlink.as_ref())
                    .map_or(0, |n| *n.links.get_ref());
                if *link.get_ref() >= links {
                    return self.err(
                        Some(link.span()),
                        format!("{path}.link"),
                        format!(
                            "link {} does not exist: the GPU has {links} NVLink links ([gpu.nvlink] links)",
                            link.get_ref()
                        ),
                    );
                }
                FaultEffect::NvlinkDown(*link.get_ref())
            }
            FaultKind::DriverUnloaded => FaultEffect::DriverUnloaded,
            FaultKind::InitError => {
                let name = f.error.as_ref().ok_or_else(|| missing("error"))?;
                FaultEffect::InitError(self.error_code(name, &format!("{path}.error"))?)
            }
        };
        Ok(Fault {
            at: f.at.secs(),
            until,
            gpu,
            effect,
        })
    }
}
