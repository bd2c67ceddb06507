//! What a verdict reason asks for, in one word: the class the judge gives
//! each reason when it makes it, so that remediation (which classes drain a
//! node) and the node-problem-detector plugin (which action a node condition
//! names) read the same answer instead of each guessing from the reason's
//! free text.

use serde::Serialize;

use super::catalog::Action;

/// The action class of one verdict reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ActionClass {
    /// Reset the GPU (`nvidia-smi -r`, or a drain and reset).
    ResetGpu,
    /// Reboot the node (NVIDIA's RESTART_BM and RESTART_VM, a page
    /// retirement waiting for a reboot, the driver's `node_reboot`).
    RebootSystem,
    /// Take the GPU out for diagnostics and support: a failed row remap, an
    /// Xid that keeps coming back after resets, NVIDIA's CONTACT_SUPPORT.
    InspectHardware,
    /// The NVLink fabric registration did not complete.
    FabricNotRegistered,
    /// The NVLink fabric reports itself unhealthy.
    FabricUnhealthy,
    /// The NVLink fabric works with less than it should.
    FabricDegraded,
    /// The GPU stopped answering NVML.
    GpuMissing,
    /// The driver asks to drain peer-to-peer work (`drain_p2p`).
    DrainP2p,
    /// An NVLink link is down: NVIDIA's NVLink workflow, which starts with a
    /// GPU reset.
    WorkflowNvlink,
    /// Restart the application that hit it.
    RestartApp,
    /// Anything else: no advice, or advice no automation acts on (check the
    /// cooling, update the firmware, ...).
    Other,
}

impl ActionClass {
    /// Every class, in the order `[remediation] actions` lists them.
    pub const ALL: [ActionClass; 11] = [
        ActionClass::ResetGpu,
        ActionClass::RebootSystem,
        ActionClass::InspectHardware,
        ActionClass::FabricNotRegistered,
        ActionClass::FabricUnhealthy,
        ActionClass::FabricDegraded,
        ActionClass::GpuMissing,
        ActionClass::DrainP2p,
        ActionClass::WorkflowNvlink,
        ActionClass::RestartApp,
        ActionClass::Other,
    ];

    /// The class's name, as `[remediation] actions`, `/api/v1/health` and
    /// the remediation log write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionClass::ResetGpu => "RESET_GPU",
            ActionClass::RebootSystem => "REBOOT_SYSTEM",
            ActionClass::InspectHardware => "INSPECT_HARDWARE",
            ActionClass::FabricNotRegistered => "FABRIC_NOT_REGISTERED",
            ActionClass::FabricUnhealthy => "FABRIC_UNHEALTHY",
            ActionClass::FabricDegraded => "FABRIC_DEGRADED",
            ActionClass::GpuMissing => "GPU_MISSING",
            ActionClass::DrainP2p => "DRAIN_P2P",
            ActionClass::WorkflowNvlink => "WORKFLOW_NVLINK",
            ActionClass::RestartApp => "RESTART_APP",
            ActionClass::Other => "OTHER",
        }
    }

    /// The class named `text`, if it is one.
    pub fn parse(text: &str) -> Option<ActionClass> {
        ActionClass::ALL.into_iter().find(|c| c.as_str() == text)
    }

    /// The class of an Xid whose catalog row says `action`; `unhealthy`
    /// when the verdict counts the Xid as unhealthy (a reset-class code whose
    /// row names a workflow starts with a reset).
    pub fn of_xid(action: Option<Action>, unhealthy: bool) -> ActionClass {
        match action {
            Some(Action::ResetGpu) => ActionClass::ResetGpu,
            Some(Action::RestartBm | Action::RestartVm) => ActionClass::RebootSystem,
            Some(Action::ContactSupport) => ActionClass::InspectHardware,
            Some(Action::RestartApp) => ActionClass::RestartApp,
            _ if unhealthy => ActionClass::ResetGpu,
            _ => ActionClass::Other,
        }
    }

    /// The class of the driver's recovery action (NVML field 230) `name`.
    pub fn of_recovery_action(name: &str) -> ActionClass {
        match name {
            "gpu_reset" | "drain_and_reset" => ActionClass::ResetGpu,
            "node_reboot" => ActionClass::RebootSystem,
            "drain_p2p" => ActionClass::DrainP2p,
            _ => ActionClass::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_reads_back_from_its_name() {
        for class in ActionClass::ALL {
            assert_eq!(ActionClass::parse(class.as_str()), Some(class));
            let json = serde_json::to_string(&class).expect("a class serializes");
            assert_eq!(json, format!("\"{}\"", class.as_str()));
        }
        assert_eq!(ActionClass::parse("reset_gpu"), None);
    }

    #[test]
    fn remediation_names_exactly_these_classes() {
        let names: Vec<&str> = ActionClass::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names, crate::config::remediation::ACTIONS);
    }

    #[test]
    fn xid_actions_fold_onto_the_classes() {
        assert_eq!(
            ActionClass::of_xid(Some(Action::RestartVm), false),
            ActionClass::RebootSystem
        );
        assert_eq!(
            ActionClass::of_xid(Some(Action::ContactSupport), false),
            ActionClass::InspectHardware
        );
        assert_eq!(
            ActionClass::of_xid(Some(Action::WorkflowXid48), true),
            ActionClass::ResetGpu
        );
        assert_eq!(
            ActionClass::of_xid(Some(Action::CheckMechanicals), false),
            ActionClass::Other
        );
        assert_eq!(ActionClass::of_xid(None, false), ActionClass::Other);
    }
}
