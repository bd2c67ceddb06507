//! `[gpu.nvlink]`, `[gpu.fabric]` and `recovery_action`: the hardware
//! health signals of a GPU beyond its readings.

use super::steps::Steps;
use super::timeline::TimelineSpec;
use serde::Deserialize;
use toml::Spanned;

/// NVLink links supported by NVML (`NVML_NVLINK_MAX_LINKS`).
pub const MAX_LINKS: u32 = 18;

/// `[gpu.nvlink]`: the GPU's NVLink links (absent: NVLink calls NOT_SUPPORTED).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NvLinkSpec {
    /// Links 0..links exist (H100/H200 SXM: 18, A100: 12).
    pub links: Spanned<u32>,
    /// NVLink version (A100: 3, H100: 4, B200: 5).
    pub version: u32,
    /// What the links lead to: NVSwitches (HGX) or peer GPUs (bridges).
    pub remote: RemoteKind,
    /// NVSwitches the links spread over (remote = "switch").
    pub switches: u32,
    /// Data sent per active link, MiB/s (GPM NVLINK_Ln_TX, field 138). Default 0.
    pub tx_mib_s: Option<Spanned<TimelineSpec>>,
    /// Data received per active link, MiB/s (GPM NVLINK_Ln_RX, field 139). Default 0.
    pub rx_mib_s: Option<Spanned<TimelineSpec>>,
    /// Whether fields 138/139 (the NVLink data counters) answer; `false`:
    /// NOT_SUPPORTED, as on drivers or boards without them. Default true.
    pub data_fields: bool,
    /// `[[gpu.nvlink.errors]]`: error counters that grow at a rate.
    pub errors: Vec<NvLinkErrorSpec>,
}

impl Default for NvLinkSpec {
    fn default() -> Self {
        NvLinkSpec {
            links: Spanned::new(0..0, MAX_LINKS),
            version: 4,
            remote: RemoteKind::Switch,
            switches: 4,
            tx_mib_s: None,
            rx_mib_s: None,
            data_fields: true,
            errors: Vec::new(),
        }
    }
}

/// The far end of the NVLink links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteKind {
    /// NVSwitch chips (NVML_NVLINK_DEVICE_TYPE_SWITCH).
    Switch,
    /// The next GPU (NVML_NVLINK_DEVICE_TYPE_GPU).
    Gpu,
}

/// The NVLink error counters (nvmlNvLinkErrorCounter_t).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvLinkCounter {
    /// NVML_NVLINK_ERROR_DL_REPLAY (0).
    Replay,
    /// NVML_NVLINK_ERROR_DL_RECOVERY (1).
    Recovery,
    /// NVML_NVLINK_ERROR_DL_CRC_FLIT (2).
    CrcFlit,
    /// NVML_NVLINK_ERROR_DL_CRC_DATA (3).
    CrcData,
    /// NVML_NVLINK_ERROR_DL_ECC_DATA (4).
    EccData,
}

impl NvLinkCounter {
    /// Every counter, in nvmlNvLinkErrorCounter_t order.
    pub const ALL: [NvLinkCounter; 5] = [
        NvLinkCounter::Replay,
        NvLinkCounter::Recovery,
        NvLinkCounter::CrcFlit,
        NvLinkCounter::CrcData,
        NvLinkCounter::EccData,
    ];

    /// The nvmlNvLinkErrorCounter_t value.
    pub fn code(self) -> u32 {
        self as u32
    }
}

/// `[[gpu.nvlink.errors]]`: one counter growing at a rate.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvLinkErrorSpec {
    /// The link (absent: every link).
    pub link: Option<Spanned<u32>>,
    /// Which counter.
    pub counter: NvLinkCounter,
    /// Errors per second (number or timeline); the counter is its integral.
    pub per_second: Spanned<TimelineSpec>,
}

/// `[gpu.fabric]`: what nvmlDeviceGetGpuFabricInfo(V) answers (absent:
/// NOT_SUPPORTED). Each key is a value or a `[[time, value], ...]` list.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FabricSpec {
    /// Registration with the fabric manager.
    pub state: Steps<FabricState>,
    /// Outcome of the registration: `SUCCESS` or an NVML error name.
    pub status: Spanned<Steps<String>>,
    /// Clique (NVLink domain partition) id.
    pub clique_id: u32,
    /// Cluster UUID (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`).
    pub cluster_uuid: Spanned<String>,
    /// v3 healthSummary.
    pub health_summary: Steps<HealthSummary>,
    /// healthMask: bandwidth degraded (absent: NOT_SUPPORTED).
    pub degraded_bandwidth: Option<Steps<bool>>,
    /// healthMask: route recovery in progress (absent: NOT_SUPPORTED).
    pub route_recovery: Option<Steps<bool>>,
    /// healthMask: route unhealthy (absent: NOT_SUPPORTED).
    pub route_unhealthy: Option<Steps<bool>>,
    /// healthMask: access timeout recovery in progress (absent: NOT_SUPPORTED).
    pub access_timeout_recovery: Option<Steps<bool>>,
    /// The newest nvmlGpuFabricInfo struct the driver knows: 3 (healthSummary,
    /// the default), 2 (healthMask only: a v3 request is
    /// ARGUMENT_VERSION_MISMATCH, as on 550-series drivers), or 1 (no
    /// versioned call: nvmlDeviceGetGpuFabricInfoV answers FUNCTION_NOT_FOUND,
    /// only nvmlDeviceGetGpuFabricInfo works).
    pub struct_version: Spanned<u32>,
}

impl Default for FabricSpec {
    fn default() -> Self {
        FabricSpec {
            state: Steps::constant(FabricState::Completed),
            status: Spanned::new(0..0, Steps::constant("SUCCESS".into())),
            clique_id: 0,
            cluster_uuid: Spanned::new(0..0, "00000000-0000-0000-0000-000000000000".into()),
            health_summary: Steps::constant(HealthSummary::Healthy),
            degraded_bandwidth: None,
            route_recovery: None,
            route_unhealthy: None,
            access_timeout_recovery: None,
            struct_version: Spanned::new(0..0, 3),
        }
    }
}

/// nvmlGpuFabricState_t.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FabricState {
    /// NVML_GPU_FABRIC_STATE_NOT_SUPPORTED (0).
    NotSupported,
    /// NVML_GPU_FABRIC_STATE_NOT_STARTED (1).
    NotStarted,
    /// NVML_GPU_FABRIC_STATE_IN_PROGRESS (2).
    InProgress,
    /// NVML_GPU_FABRIC_STATE_COMPLETED (3).
    Completed,
}

/// NVML_GPU_FABRIC_HEALTH_SUMMARY_*.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthSummary {
    /// 0.
    NotSupported,
    /// 1.
    Healthy,
    /// 2.
    Unhealthy,
    /// 3.
    LimitedCapacity,
}

/// nvmlDeviceGpuRecoveryAction_t (field 230): a name, or any raw number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryAction {
    /// NVML_GPU_RECOVERY_ACTION_NONE (0).
    None,
    /// GPU_RESET (1).
    GpuReset,
    /// NODE_REBOOT (2).
    NodeReboot,
    /// DRAIN_P2P (3).
    DrainP2p,
    /// DRAIN_AND_RESET (4).
    DrainAndReset,
    /// Any raw value (`recovery_action = 7`), e.g. one a later driver
    /// defines and the agent does not know yet.
    Raw(u32),
}

/// The names a scenario may give, in NVML's order.
const RECOVERY_ACTION_NAMES: [&str; 5] = [
    "none",
    "gpu_reset",
    "node_reboot",
    "drain_p2p",
    "drain_and_reset",
];

impl<'de> Deserialize<'de> for RecoveryAction {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = RecoveryAction;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(
                    f,
                    "one of {} or a raw value (0 to 4294967295)",
                    RECOVERY_ACTION_NAMES.join(", ")
                )
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<RecoveryAction, E> {
                Ok(match name {
                    "none" => RecoveryAction::None,
                    "gpu_reset" => RecoveryAction::GpuReset,
                    "node_reboot" => RecoveryAction::NodeReboot,
                    "drain_p2p" => RecoveryAction::DrainP2p,
                    "drain_and_reset" => RecoveryAction::DrainAndReset,
                    _ => return Err(E::unknown_variant(name, &RECOVERY_ACTION_NAMES)),
                })
            }
            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<RecoveryAction, E> {
                u32::try_from(value)
                    .map(RecoveryAction::Raw)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(value), &self))
            }
            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<RecoveryAction, E> {
                u32::try_from(value)
                    .map(RecoveryAction::Raw)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(value), &self))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` into 16 bytes.
pub fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let hex: String = text.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 || text.len() != 36 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(bytes)
}
