//! One health verdict per GPU: healthy, degraded or unhealthy, with the
//! reasons (each with its source and what to do). Pure: computed from a
//! snapshot (as of its `taken_at`, never the wall clock) and the Xid
//! escalations, by [`judge`] alone, so `/metrics`, `/api/v1/health`,
//! `/api/v1/gpus`, `gpuwatch status` and remediation agree.
//!
//! How each signal maps (documented in docs/health.md):
//! - unhealthy: the GPU is lost; the driver asks for a recovery action
//!   (field 230 not `none`); a row remap failed; an NVLink link is down; an
//!   Xid whose catalog action is RESET_GPU or RESTART_BM, or one of the
//!   reset-class codes of the built-in `GpuXidFatal` rule, within the last
//!   30 minutes; the NVLink fabric registration completed with an error, or
//!   the fabric's health summary says unhealthy.
//! - degraded: a row remap or a page retirement waits for a reset; any
//!   other Xid within the last 30 minutes; the fabric registration not
//!   completed yet (single-GPU work still runs; the `GpuFabricNotRegistered`
//!   alert applies the grace period); the fabric at limited capacity or
//!   with degraded bandwidth.
//! - unhealthy, too: an Xid that came back after GPU resets or node
//!   reboots (`GpuXidRecurring` firing): inspect the
//!   hardware, whatever the Xid's own action says.
//! - healthy: none of these.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::gpu::fabric::{FabricHealth, FabricReading, FabricState};
use crate::gpu::links::UNKNOWN_RECOVERY_ACTION;
use crate::gpu::{GpuSnapshot, GpuStatus, Snapshot};
use crate::health::action_class::ActionClass;
use crate::health::escalation::{for_gpu, Escalated};

/// How long an Xid keeps counting against a GPU (the built-in Xid rules
/// keep firing as long).
pub const XID_WINDOW: Duration = Duration::from_secs(30 * 60);

/// The verdict's state, worst last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Nothing wrong is known.
    Healthy,
    /// Usable, but something needs attention at the next chance.
    Degraded,
    /// Do not schedule work on it.
    Unhealthy,
}

impl State {
    /// Every state, for the one-series-per-state gauge.
    pub const ALL: [State; 3] = [State::Healthy, State::Degraded, State::Unhealthy];

    /// The state's name (label value).
    pub fn as_str(self) -> &'static str {
        match self {
            State::Healthy => "healthy",
            State::Degraded => "degraded",
            State::Unhealthy => "unhealthy",
        }
    }
}

/// One reason for a verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reason {
    /// The state this reason alone gives.
    pub state: State,
    /// Where it comes from: `nvml`, `xid`, `nvlink`, `fabric`,
    /// `recovery_action`, `ecc`.
    pub source: &'static str,
    /// What is wrong.
    pub text: String,
    /// What to do.
    pub action: String,
    /// What it asks for, in one word: the class remediation and the
    /// node-problem-detector plugin act on.
    pub class: ActionClass,
}

/// A GPU's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The worst of the reasons' states (healthy without reasons).
    pub state: State,
    /// Why, worst first.
    pub reasons: Vec<Reason>,
}

/// Xid codes the built-in `GpuXidFatal` rule treats as reset-class (the
/// catalog's [`super::catalog::Class::Reset`]).
fn reset_class(code: u64) -> bool {
    super::catalog::class_of(code) == Some(super::catalog::Class::Reset)
}

/// The action of a reason nothing is known about (an Xid code beyond
/// NVIDIA's catalog, a recovery action beyond NVML's): no advice rather
/// than a guess.
pub const NO_ADVICE: &str = "unknown";

/// What to do about a fabric problem.
const FABRIC_ACTION: &str =
    "check that nvidia-fabricmanager runs and its log; then reset the GPU or reboot the node";

/// The reasons a GPU's NVLink fabric reading gives.
fn fabric_reasons(f: &FabricReading) -> Vec<(State, String, ActionClass)> {
    let mut reasons = Vec::new();
    if let Some(problem) = f.problem() {
        let (state, class) = if f.state == FabricState::Completed {
            (State::Unhealthy, ActionClass::FabricNotRegistered)
        } else {
            (State::Degraded, ActionClass::FabricDegraded)
        };
        reasons.push((
            state,
            format!("{problem}: multi-GPU jobs cannot use it"),
            class,
        ));
    }
    match f.health {
        Some(FabricHealth::Unhealthy) => reasons.push((
            State::Unhealthy,
            "the NVLink fabric reports it unhealthy".into(),
            ActionClass::FabricUnhealthy,
        )),
        Some(FabricHealth::LimitedCapacity) => reasons.push((
            State::Degraded,
            "the NVLink fabric runs at limited capacity".into(),
            ActionClass::FabricDegraded,
        )),
        _ => {
            if f.issues.contains(&("degraded_bandwidth", true)) {
                reasons.push((
                    State::Degraded,
                    "NVLink fabric bandwidth is degraded".into(),
                    ActionClass::FabricDegraded,
                ));
            }
        }
    }
    reasons
}

/// What to do about an Xid that resets and reboots do not fix.
pub const INSPECT_HARDWARE_ACTION: &str =
    "INSPECT_HARDWARE: drain the node, run the field diagnostics (DCGM level 3 / NVIDIA fieldiag) and ask NVIDIA support for a replacement";

/// The verdict of `gpu`, one of `snapshot`'s GPUs, as of the snapshot's
/// `taken_at`, with the Xid codes that came back after GPU resets or node
/// reboots (`escalated`, from the `GpuXidRecurring` rule). The one judge
/// every reader of health calls.
pub fn judge(snapshot: &Snapshot, gpu: &GpuSnapshot, escalated: &Escalated) -> Verdict {
    with_escalations(verdict(gpu, snapshot.taken_at), for_gpu(escalated, gpu))
}

/// The node's state: the worst of its GPUs' verdicts, unhealthy when a GPU
/// on the PCI bus is missing from the driver.
pub fn node_state(snapshot: &Snapshot, escalated: &Escalated) -> State {
    let missing = !snapshot.missing_from_driver().is_empty();
    snapshot
        .gpus
        .iter()
        .map(|gpu| judge(snapshot, gpu, escalated).state)
        .chain(missing.then_some(State::Unhealthy))
        .max()
        .unwrap_or(State::Healthy)
}

/// Adds to `verdict` the escalated Xid codes of its GPU: each an unhealthy
/// reason whose action is to inspect the hardware.
fn with_escalations(mut verdict: Verdict, escalated: &[u64]) -> Verdict {
    for code in escalated {
        let name = super::catalog::lookup(*code)
            .map(|info| format!(" ({})", info.mnemonic))
            .unwrap_or_default();
        verdict.reasons.push(Reason {
            state: State::Unhealthy,
            source: "xid",
            text: format!("Xid {code}{name} keeps coming back after GPU resets or node reboots"),
            action: INSPECT_HARDWARE_ACTION.to_string(),
            class: ActionClass::InspectHardware,
        });
    }
    verdict.reasons.sort_by_key(|r| std::cmp::Reverse(r.state));
    verdict.state = verdict.reasons.first().map_or(State::Healthy, |r| r.state);
    verdict
}

/// The verdict of `gpu`'s own readings at `now` (Xids counted within
/// [`XID_WINDOW`] before it).
fn verdict(gpu: &GpuSnapshot, now: SystemTime) -> Verdict {
    let mut reasons = Vec::new();
    let mut add = |state, source, text: String, action: &str, class| {
        reasons.push(Reason {
            state,
            source,
            text,
            action: action.to_string(),
            class,
        })
    };
    if let GpuStatus::Lost { reason } = &gpu.status {
        add(
            State::Unhealthy,
            "nvml",
            format!("the GPU stopped answering NVML ({reason})"),
            "reset the GPU or reboot the node",
            ActionClass::GpuMissing,
        );
    }
    let h = &gpu.health;
    if let Some(action) = h.links.recovery_action.filter(|a| *a != "none") {
        let text = if action == UNKNOWN_RECOVERY_ACTION {
            let raw = h
                .links
                .recovery_action_value
                .map_or_else(|| "?".to_string(), |v| v.to_string());
            format!("the driver asks for a recovery action this release does not know (field 230 value {raw}): check the driver's documentation for it")
        } else {
            format!("the driver asks for a recovery action: {action}")
        };
        add(
            State::Unhealthy,
            "recovery_action",
            text,
            action,
            ActionClass::of_recovery_action(action),
        );
    }
    if h.remapped_rows_failure == Some(true) {
        add(
            State::Unhealthy,
            "ecc",
            "a row remap failed".into(),
            "replace the GPU (RMA)",
            ActionClass::InspectHardware,
        );
    }
    let down: Vec<String> = h
        .links
        .nvlink
        .iter()
        .filter(|l| !l.up)
        .map(|l| l.link.to_string())
        .collect();
    if !down.is_empty() {
        add(
            State::Unhealthy,
            "nvlink",
            format!("NVLink link(s) {} down", down.join(", ")),
            "WORKFLOW_NVLINK: reset the GPU, then check the links and switches",
            ActionClass::WorkflowNvlink,
        );
    }
    if let Some(fabric) = &h.fabric {
        for (state, text, class) in fabric_reasons(fabric) {
            add(state, "fabric", text, FABRIC_ACTION, class);
        }
    }
    if h.remapped_rows_pending == Some(true) {
        add(
            State::Degraded,
            "ecc",
            "a row remap waits for a GPU reset".into(),
            "reset the GPU when it is idle",
            ActionClass::ResetGpu,
        );
    }
    if h.retired_pages_pending == Some(true) {
        add(
            State::Degraded,
            "ecc",
            "a page retirement waits for a reboot".into(),
            "reboot the node when it is idle",
            ActionClass::RebootSystem,
        );
    }
    for xid in gpu.xid_errors.iter() {
        let recent = now
            .duration_since(xid.last_seen)
            .map_or(true, |age| age <= XID_WINDOW);
        if !recent {
            continue;
        }
        let info = crate::health::catalog::lookup(xid.code);
        let catalog_severe = info.is_some_and(|i| {
            matches!(
                i.action,
                crate::health::catalog::Action::ResetGpu
                    | crate::health::catalog::Action::RestartBm
            )
        });
        let unhealthy = catalog_severe || reset_class(xid.code);
        let state = if unhealthy {
            State::Unhealthy
        } else {
            State::Degraded
        };
        let text = match info {
            Some(info) => format!("Xid {} ({}) within 30 minutes", xid.code, info.description),
            None => format!(
                "Xid {} (not in NVIDIA's catalog) within 30 minutes",
                xid.code
            ),
        };
        // A code beyond the catalog gets no advice rather than a guess.
        let action = info.map_or(NO_ADVICE, |info| info.action.as_str());
        let class = ActionClass::of_xid(info.map(|info| info.action), unhealthy);
        add(state, "xid", text, action, class);
    }
    if let Some(other) = gpu.xid_other {
        let recent = now
            .duration_since(other.last_seen)
            .map_or(true, |age| age <= XID_WINDOW);
        if recent {
            add(
                State::Degraded,
                "xid",
                format!(
                    "{} Xid(s) of codes outside NVIDIA's catalog past the first {} of this GPU (counted as \"other\"), the last within 30 minutes",
                    other.count,
                    crate::sampler::xid::MAX_UNKNOWN_XID_CODES
                ),
                NO_ADVICE,
                ActionClass::Other,
            );
        }
    }
    reasons.sort_by_key(|r| std::cmp::Reverse(r.state));
    Verdict {
        state: reasons.first().map_or(State::Healthy, |r| r.state),
        reasons,
    }
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
