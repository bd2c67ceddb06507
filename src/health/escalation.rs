//! Xid escalations for the health verdict: the Xid codes that came back on
//! a GPU after GPU resets or node reboots (the built-in `GpuXidRecurring`
//! rule decides, from what it remembers across restarts). The verdict's
//! readers (/metrics, /api/v1/health, the web view) get them through an
//! [`EscalationSource`] the agent wires to the alert state, so this module
//! names no alerting type and the data still flows from rules outwards.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Per GPU (the rules' GPU id: its UUID), the escalated Xid codes.
pub type Escalated = BTreeMap<String, Vec<u64>>;

/// Where the current escalations are read.
#[derive(Clone)]
pub struct EscalationSource(Arc<dyn Fn() -> Escalated + Send + Sync>);

impl EscalationSource {
    /// Reads the escalations with `read` whenever asked.
    pub fn new(read: impl Fn() -> Escalated + Send + Sync + 'static) -> EscalationSource {
        EscalationSource(Arc::new(read))
    }

    /// No escalations ever (no rules running).
    pub fn none() -> EscalationSource {
        EscalationSource::new(Escalated::new)
    }

    /// The escalations now.
    pub fn current(&self) -> Escalated {
        (self.0)()
    }
}

impl Default for EscalationSource {
    fn default() -> Self {
        EscalationSource::none()
    }
}

/// The escalated codes of `gpu` (keyed as the rules key their GPU alerts:
/// [`crate::gpu::GpuSnapshot::alert_key`]).
pub fn for_gpu<'a>(escalated: &'a Escalated, gpu: &crate::gpu::GpuSnapshot) -> &'a [u64] {
    escalated.get(&gpu.alert_key()).map_or(&[], Vec::as_slice)
}

impl fmt::Debug for EscalationSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EscalationSource")
    }
}
