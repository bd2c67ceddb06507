//! ECC counters, retired pages and remapped rows of a simulated GPU, from
//! the scenario's ECC and remap faults.

use super::GpuSim;
use crate::engine::Unavailable;
use crate::rng;
use crate::scenario::{FaultEffect, Feature};

/// ECC and retirement counters at some time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EccState {
    /// Corrected (single-bit) errors.
    pub corrected: u64,
    /// Uncorrected (double-bit) errors.
    pub uncorrected: u64,
    /// Uncorrected-error faults so far (one retired page / remapped row each).
    pub uncorrected_events: u32,
    /// A remap (and page retirement) is pending.
    pub pending: bool,
    /// A remap failed.
    pub failure: bool,
}

impl GpuSim {
    /// Whether ECC is enabled.
    pub fn ecc_enabled(&self, t: f64) -> Result<bool, Unavailable> {
        self.gated(Feature::Ecc, t, || true)
    }

    fn ecc_raw(&self, t: f64) -> EccState {
        let mut ecc = EccState::default();
        for f in self.faults.iter().filter(|f| f.at <= t) {
            match f.effect {
                FaultEffect::EccCorrected(n) => ecc.corrected += n,
                FaultEffect::EccUncorrected(n) => {
                    ecc.uncorrected += n;
                    ecc.uncorrected_events += 1;
                }
                FaultEffect::RemapPending if f.active(t) => ecc.pending = true,
                FaultEffect::RemapFailure if f.active(t) => ecc.failure = true,
                _ => {}
            }
        }
        ecc
    }

    /// ECC error counters (volatile = aggregate: the simulated boot is t = 0).
    pub fn ecc(&self, t: f64) -> Result<EccState, Unavailable> {
        self.gated(Feature::Ecc, t, || self.ecc_raw(t))
    }

    /// Retired pages for a cause (0 multiple single-bit, 1 double-bit): (address, µs timestamp).
    pub fn retired_pages(&self, cause: u32, t: f64) -> Result<Vec<(u64, u64)>, Unavailable> {
        self.check(Some(Feature::RetiredPages), t)?;
        if cause != 1 {
            return Ok(Vec::new());
        }
        Ok(self
            .faults
            .iter()
            .filter(|f| f.at <= t && matches!(f.effect, FaultEffect::EccUncorrected(_)))
            .map(|f| {
                let address =
                    (rng::mix(self.config.index as u64, f.at.to_bits()) & 0x00FF_FFFF) << 12;
                (address, (f.at * 1e6) as u64)
            })
            .collect())
    }

    /// Whether page retirement is pending.
    pub fn retired_pending(&self, t: f64) -> Result<bool, Unavailable> {
        self.gated(Feature::RetiredPages, t, || self.ecc_raw(t).pending)
    }

    /// Remapped rows: (corrected, uncorrected, pending, failure).
    pub fn remapped_rows(&self, t: f64) -> Result<(u32, u32, bool, bool), Unavailable> {
        self.gated(Feature::RemappedRows, t, || {
            let e = self.ecc_raw(t);
            (0, e.uncorrected_events, e.pending, e.failure)
        })
    }
}
