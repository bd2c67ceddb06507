//! GPM of a simulated GPU and of its MIG GPU instances.

use super::GpuSim;
use crate::engine::gpm::{GpmBase, GpmSim, GpmWindow};
use crate::engine::Unavailable;
use crate::rng;
use crate::scenario::gpm::GpmSpec;
use crate::scenario::schema::GpuSpec;
use crate::scenario::Feature;

/// The GPM models of a GPU and of its MIG instances (none without `[gpu.gpm]`).
pub(super) fn compile(spec: &GpuSpec, seed: u64) -> (Option<GpmSim>, Vec<(u32, GpmSim)>) {
    let Some(gpm) = &spec.gpm else {
        return (None, Vec::new());
    };
    let no_gpm = GpmSpec::default();
    let instances = spec
        .mig_instances
        .iter()
        .map(|m| {
            let seed = rng::mix(seed, 0x6750_0000 + u64::from(m.id));
            (m.id, GpmSim::new(m.gpm.as_ref().unwrap_or(&no_gpm), seed))
        })
        .collect();
    (
        Some(GpmSim::new(gpm, rng::mix(seed, rng::hash_str("gpm")))),
        instances,
    )
}

impl GpuSim {
    /// Whether the GPU has GPM (nvmlGpmQueryDeviceSupport's isSupportedDevice).
    pub fn gpm_supported(&self) -> bool {
        self.gpm.is_some()
    }

    fn gpm_of(&self, instance: Option<u32>) -> Option<&GpmSim> {
        match instance {
            None => self.gpm.as_ref(),
            Some(id) => self.mig_gpm.iter().find(|(i, _)| *i == id).map(|(_, g)| g),
        }
    }

    /// Whether a GPM sample of the GPU (`None`) or of a MIG GPU instance
    /// can be taken at `t`: NOT_SUPPORTED without GPM or with MIG off,
    /// INVALID_ARGUMENT for an instance that does not exist.
    pub fn gpm_sample_check(&self, instance: Option<u32>, t: f64) -> Result<(), Unavailable> {
        self.check(Some(Feature::Gpm), t)?;
        if let Some(id) = instance {
            if !self.mig(t).unwrap_or(false) {
                return Err(Unavailable::NotSupported);
            }
            self.gpm_of(Some(id)).ok_or(Unavailable::InvalidArgument)?;
        }
        Ok(())
    }

    /// What the GPU's own readings give the GPM defaults at `s`.
    fn gpm_base(&self, s: f64) -> GpmBase {
        GpmBase {
            util_gpu: self.util_gpu(s),
            util_mem: self.util_mem(s),
            decoder: self
                .signals
                .decoder_percent
                .as_ref()
                .map_or(0.0, |d| d.eval(s)),
        }
    }

    /// The GPM metrics between samples at `t1` and `t2` of the GPU or one
    /// of its MIG GPU instances (INVALID_ARGUMENT when t2 < t1).
    pub fn gpm_window(
        &self,
        instance: Option<u32>,
        t1: f64,
        t2: f64,
    ) -> Result<GpmWindow, Unavailable> {
        let sim = self.gpm_of(instance).ok_or(Unavailable::NotSupported)?;
        let mut window = match instance {
            None => sim.window(t1, t2, |s| self.gpm_base(s)),
            Some(_) => sim.window(t1, t2, |_| GpmBase::default()),
        }
        .ok_or(Unavailable::InvalidArgument)?;
        window.mig = instance.is_some();
        window.nvlink = self.nvlink.as_ref().and_then(|n| n.window(t1, t2));
        Ok(window)
    }
}
