//! The NVLink fabric families (`gpuwatch_fabric_*`): whether each GPU
//! joined the NVSwitch fabric, its clique, and the fabric's health as the
//! driver sees it. Absent on GPUs without a fabric (PCIe cards, NVLink
//! bridges, older drivers), never 0.
//!
//! Names: `fabric_registered` is the one signal to alert on (1 only when the
//! registration completed with success); `fabric_state` and
//! `fabric_health` follow the one-series-at-1 shape of `gpu_health`, so a
//! panel or a rule reads the name it wants rather than an NVML number.

use std::borrow::Cow;
use std::fmt;

use crate::families::Sink;

use crate::gpu::fabric::{FabricHealth, FabricState};
use crate::gpu::Snapshot;

use crate::families::{flag, ids, with, Family};

/// Encodes the fabric families of `snapshot`.
pub fn encode(snapshot: &Snapshot, encoder: &mut impl Sink) -> fmt::Result {
    let mut state = Family::gauge(
        "fabric_state",
        "NVLink fabric registration of the GPU with the fabric manager: one series per state (not_started, in_progress, completed), the current one at 1; absent without a fabric.",
        None,
    );
    let mut registered = Family::gauge(
        "fabric_registered",
        "Whether the GPU joined the NVLink fabric (1: registration completed with success) or not (0: not started, in progress, or completed with an error, see gpuwatch_fabric_info's status); absent without a fabric.",
        None,
    );
    let mut info = Family::gauge(
        "fabric_info",
        "The GPU's NVLink fabric membership (value 1): clique_id, cluster_uuid and the registration status (success or NVML's error name).",
        None,
    );
    let mut health = Family::gauge(
        "fabric_health",
        "The fabric's health summary for the GPU: one series per summary (healthy, unhealthy, limited_capacity), the current one at 1; absent where the driver has no summary.",
        None,
    );
    let mut issue = Family::gauge(
        "fabric_issue",
        "Fabric health flags the driver reports (1 set, 0 clear), by issue: degraded_bandwidth, route_recovery, route_unhealthy, access_timeout_recovery; unsupported flags are absent.",
        None,
    );
    for gpu in &snapshot.gpus {
        let Some(f) = &gpu.health.fabric else {
            continue;
        };
        let id = || ids(gpu);
        for candidate in FabricState::ALL {
            state.push(
                with(id(), "state", candidate.as_str()),
                flag(candidate == f.state),
            );
        }
        registered.push(id(), flag(f.registered()));
        let mut labels = with(id(), "clique_id", f.clique_id.to_string());
        labels.push(("cluster_uuid", Cow::Borrowed(f.cluster_uuid.as_str())));
        labels.push(("status", Cow::Borrowed(f.status.as_str())));
        info.push(labels, 1.0);
        if let Some(summary) = f.health {
            for candidate in FabricHealth::ALL {
                health.push(
                    with(id(), "health", candidate.as_str()),
                    flag(candidate == summary),
                );
            }
        }
        for (name, set) in &f.issues {
            issue.push(with(id(), "issue", *name), flag(*set));
        }
    }
    for family in [&state, &registered, &info, &health, &issue] {
        family.encode(encoder)?;
    }
    Ok(())
}
