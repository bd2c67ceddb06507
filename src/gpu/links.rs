//! Per-GPU interconnect health read on the slow tier: NVLink links (up or
//! down, error counters) and the driver's recovery action (NVML field 230).
//! Absent when unsupported (PCIe cards, older drivers), never 0.

use std::collections::BTreeMap;

use serde::Serialize;

/// A GPU's links and recovery action.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LinkHealth {
    /// The NVLink links NVML reports, by link number; empty without NVLink.
    pub nvlink: Vec<NvLinkState>,
    /// What the driver says the GPU needs (field 230): `none`, `gpu_reset`,
    /// `node_reboot`, `drain_p2p`, `drain_and_reset`, or `unknown` for a
    /// value this release does not know (the driver asks for *something*:
    /// the raw value is in `recovery_action_value`); `None` when
    /// unsupported.
    pub recovery_action: Option<&'static str>,
    /// Field 230's raw value (`nvmlDeviceGpuRecoveryAction_t`), where read:
    /// what `unknown` stands for.
    pub recovery_action_value: Option<u64>,
}

/// The cumulative NVLink data counters of one link (NVML fields 138/139,
/// KiB in NVML, bytes here), for `rate()` where GPM has no NVLink figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NvLinkTraffic {
    /// Link number, as in [`NvLinkState::link`].
    pub link: u32,
    /// Bytes sent since the driver loaded; `None` when the field answers
    /// an error (unsupported).
    pub tx_bytes: Option<u64>,
    /// Bytes received since the driver loaded; `None` likewise.
    pub rx_bytes: Option<u64>,
}

/// One NVLink link.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NvLinkState {
    /// Link number, 0..18.
    pub link: u32,
    /// Whether the link is active.
    pub up: bool,
    /// Error counters that the driver gives, by type (`replay`,
    /// `recovery`, `crc_flit`, `crc_data`), since the driver loaded.
    pub errors: BTreeMap<&'static str, u64>,
}

impl LinkHealth {
    /// Links that are down.
    pub fn links_down(&self) -> usize {
        self.nvlink.iter().filter(|l| !l.up).count()
    }
}

/// The action of a field-230 value this release does not know (NVML 0–4
/// are known): the driver asks for something, so the GPU is unhealthy.
pub const UNKNOWN_RECOVERY_ACTION: &str = "unknown";

/// The name of a recovery-action value (`nvmlDeviceGpuRecoveryAction_t`);
/// [`UNKNOWN_RECOVERY_ACTION`] beyond the values NVML defines (0–4).
pub fn recovery_action_name(value: u64) -> &'static str {
    match value {
        0 => "none",
        1 => "gpu_reset",
        2 => "node_reboot",
        3 => "drain_p2p",
        4 => "drain_and_reset",
        _ => UNKNOWN_RECOVERY_ACTION,
    }
}

/// Every recovery action, for the one-series-at-1 gauge.
pub const RECOVERY_ACTIONS: &[&str] = &[
    "none",
    "gpu_reset",
    "node_reboot",
    "drain_p2p",
    "drain_and_reset",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_actions_and_links_down() {
        assert_eq!(recovery_action_name(0), "none");
        assert_eq!(recovery_action_name(4), "drain_and_reset");
        // Values beyond NVML's 0-4 are an action this release does not
        // know, not "no reading" (which hid them before).
        assert_eq!(recovery_action_name(7), UNKNOWN_RECOVERY_ACTION);
        assert_eq!(recovery_action_name(4_294_967_295), UNKNOWN_RECOVERY_ACTION);
        for v in 0..5 {
            assert!(RECOVERY_ACTIONS.contains(&recovery_action_name(v)));
        }
        let health = LinkHealth {
            nvlink: (0..4)
                .map(|link| NvLinkState {
                    link,
                    up: link != 3,
                    errors: BTreeMap::new(),
                })
                .collect(),
            recovery_action: None,
            recovery_action_value: None,
        };
        assert_eq!(health.links_down(), 1);
    }
}
