//! A GPU's NVLink fabric registration (`nvmlDeviceGetGpuFabricInfoV`), read
//! on the slow tier: on NVSwitch systems (HGX/DGX H100, H200, B200) a GPU
//! must register with the fabric manager before multi-GPU jobs can use its
//! NVLinks. Absent on GPUs without a fabric (PCIe cards, NVLink bridges,
//! older drivers), never 0.

use serde::Serialize;

/// What NVML says about the GPU's fabric registration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FabricReading {
    /// Registration progress: `not_started`, `in_progress` or `completed`.
    pub state: FabricState,
    /// Outcome of the registration: `success`, or NVML's error name (e.g.
    /// `not_ready`, `insufficient_resources`); meaningful once completed.
    pub status: String,
    /// The NVLink clique (partition) the GPU joined.
    pub clique_id: u32,
    /// The fabric's cluster UUID, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    pub cluster_uuid: String,
    /// The v3 health summary; `None` on drivers that lack it.
    pub health: Option<FabricHealth>,
    /// The health-mask flags the driver reports, with whether each is set
    /// (`degraded_bandwidth`, `route_recovery`, `route_unhealthy`,
    /// `access_timeout_recovery`); unsupported flags are left out.
    pub issues: Vec<(&'static str, bool)>,
}

/// Registration progress (`nvmlGpuFabricState_t`, less NOT_SUPPORTED,
/// which is an absent reading).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FabricState {
    /// NVML_GPU_FABRIC_STATE_NOT_STARTED.
    NotStarted,
    /// NVML_GPU_FABRIC_STATE_IN_PROGRESS.
    InProgress,
    /// NVML_GPU_FABRIC_STATE_COMPLETED.
    Completed,
}

impl FabricState {
    /// Every state, for the one-series-at-1 gauge.
    pub const ALL: [FabricState; 3] = [
        FabricState::NotStarted,
        FabricState::InProgress,
        FabricState::Completed,
    ];

    /// The state from NVML's value; `None` for NOT_SUPPORTED (0) and
    /// values this build does not know.
    pub fn from_nvml(value: u8) -> Option<FabricState> {
        match value {
            1 => Some(FabricState::NotStarted),
            2 => Some(FabricState::InProgress),
            3 => Some(FabricState::Completed),
            _ => None,
        }
    }

    /// NVML's own number (nvidia-smi and nvidia_gpu_exporter print it).
    pub fn nvml_value(self) -> u8 {
        match self {
            FabricState::NotStarted => 1,
            FabricState::InProgress => 2,
            FabricState::Completed => 3,
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            FabricState::NotStarted => "not_started",
            FabricState::InProgress => "in_progress",
            FabricState::Completed => "completed",
        }
    }
}

/// The fabric's own health summary (NVML_GPU_FABRIC_HEALTH_SUMMARY_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FabricHealth {
    /// Every route and link is fine.
    Healthy,
    /// The GPU cannot use the fabric.
    Unhealthy,
    /// Usable with less bandwidth or fewer routes.
    LimitedCapacity,
}

impl FabricHealth {
    /// Every summary, for the one-series-at-1 gauge.
    pub const ALL: [FabricHealth; 3] = [
        FabricHealth::Healthy,
        FabricHealth::Unhealthy,
        FabricHealth::LimitedCapacity,
    ];

    /// The summary from NVML's value; `None` for NOT_SUPPORTED (0).
    pub fn from_nvml(value: u8) -> Option<FabricHealth> {
        match value {
            1 => Some(FabricHealth::Healthy),
            2 => Some(FabricHealth::Unhealthy),
            3 => Some(FabricHealth::LimitedCapacity),
            _ => None,
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            FabricHealth::Healthy => "healthy",
            FabricHealth::Unhealthy => "unhealthy",
            FabricHealth::LimitedCapacity => "limited_capacity",
        }
    }
}

/// The health-mask flags: (name, shift). Each is two bits: 0 not
/// supported, 1 true, 2 false (`NVML_GPU_FABRIC_HEALTH_MASK_*`).
pub const HEALTH_FLAGS: [(&str, u32); 4] = [
    ("degraded_bandwidth", 0),
    ("route_recovery", 2),
    ("route_unhealthy", 4),
    ("access_timeout_recovery", 6),
];

/// The supported flags of a health mask, with whether each is set.
pub fn decode_health_mask(mask: u32) -> Vec<(&'static str, bool)> {
    HEALTH_FLAGS
        .iter()
        .filter_map(|(name, shift)| match (mask >> shift) & 0x3 {
            1 => Some((*name, true)),
            2 => Some((*name, false)),
            _ => None,
        })
        .collect()
}

impl FabricReading {
    /// Whether the GPU is in the fabric: registration completed with
    /// success. In progress, not started or a failure status is not.
    pub fn registered(&self) -> bool {
        self.state == FabricState::Completed && self.status == "success"
    }

    /// Why the GPU is not registered, in words; `None` when it is.
    pub fn problem(&self) -> Option<String> {
        match self.state {
            FabricState::Completed if self.status == "success" => None,
            FabricState::Completed => Some(format!(
                "NVLink fabric registration completed with an error ({})",
                self.status
            )),
            FabricState::InProgress => Some("NVLink fabric registration is in progress".into()),
            FabricState::NotStarted => Some("NVLink fabric registration has not started".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(state: FabricState, status: &str) -> FabricReading {
        FabricReading {
            state,
            status: status.into(),
            clique_id: 1,
            cluster_uuid: String::new(),
            health: None,
            issues: Vec::new(),
        }
    }

    #[test]
    fn states_and_summaries_follow_nvml_values() {
        assert_eq!(FabricState::from_nvml(0), None);
        for state in FabricState::ALL {
            assert_eq!(FabricState::from_nvml(state.nvml_value()), Some(state));
        }
        assert_eq!(FabricState::from_nvml(4), None);
        assert_eq!(FabricHealth::from_nvml(0), None);
        assert_eq!(
            FabricHealth::from_nvml(3),
            Some(FabricHealth::LimitedCapacity)
        );
    }

    #[test]
    fn health_mask_keeps_only_supported_flags() {
        // degraded bandwidth TRUE (1), route recovery not supported (0),
        // route unhealthy FALSE (2 << 4), access timeout not supported.
        let mask = 1 | (2 << 4);
        assert_eq!(
            decode_health_mask(mask),
            vec![("degraded_bandwidth", true), ("route_unhealthy", false)]
        );
        assert!(decode_health_mask(0).is_empty());
    }

    #[test]
    fn registered_only_when_completed_with_success() {
        assert!(reading(FabricState::Completed, "success").registered());
        assert!(reading(FabricState::Completed, "success")
            .problem()
            .is_none());
        let failed = reading(FabricState::Completed, "insufficient_resources");
        assert!(!failed.registered());
        assert!(failed
            .problem()
            .is_some_and(|p| p.contains("insufficient_resources")));
        assert!(!reading(FabricState::InProgress, "not_ready").registered());
        assert!(!reading(FabricState::NotStarted, "success").registered());
    }
}
