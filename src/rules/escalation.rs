//! Which Xid codes `GpuXidRecurring` says came back on each GPU, read from
//! the evaluation state for the health verdict.

use super::eval::EvalState;
use super::rule::{AlertState, Target};

impl EvalState {
    /// The Xid codes per GPU that `GpuXidRecurring` says came back after GPU
    /// resets or node reboots (its firing alerts; the value is the code),
    /// for the health verdict.
    pub fn xid_escalations(&self) -> crate::health::escalation::Escalated {
        let mut out = crate::health::escalation::Escalated::new();
        for (key, alert) in &self.alerts {
            let (Target::Gpu(gpu), AlertState::Firing { .. }, Some(value)) =
                (&key.target, &alert.state, alert.value)
            else {
                continue;
            };
            if key.rule != super::builtin::XID_RECURRING || value.is_nan() || value < 1.0 {
                continue;
            }
            let codes = out.entry(gpu.clone()).or_default();
            codes.push(value as u64);
            codes.sort_unstable();
            codes.dedup();
        }
        out
    }
}
