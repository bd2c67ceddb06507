//! Readiness (`/-/ready`, and the `ready` field of `/api/v1/gpus`): a fresh
//! snapshot with at least one GPU.

use std::time::SystemTime;

use crate::exporter::self_metrics::snapshot_age;

use super::HttpState;

/// Why the agent is or is not ready.
#[derive(Debug, Clone, PartialEq)]
pub enum Readiness {
    /// A fresh snapshot with at least one GPU.
    Ready,
    /// Not yet, or not any more; the text says why.
    NotReady(String),
}

impl Readiness {
    /// Judges the latest snapshot.
    pub fn of(state: &HttpState) -> Readiness {
        let snapshot = state.snapshots.borrow().clone();
        let Some(snapshot) = snapshot else {
            return Readiness::NotReady("no sample has completed yet".into());
        };
        let age = snapshot_age(&snapshot, SystemTime::now());
        if age > state.stale_after {
            let busy = state
                .progress
                .busy_for()
                .map(|b| {
                    format!(
                        "; the current sample has been running for {:.1}s (NVML not answering?)",
                        b.as_secs_f64()
                    )
                })
                .unwrap_or_default();
            return Readiness::NotReady(format!(
                "the last sample is {:.1}s old (limit {:.1}s){busy}",
                age.as_secs_f64(),
                state.stale_after.as_secs_f64()
            ));
        }
        if snapshot.gpus.is_empty() {
            return Readiness::NotReady("NVML reports no GPU".into());
        }
        Readiness::Ready
    }
}
