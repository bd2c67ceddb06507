//! NVIDIA's Xid catalog: per code, what it means and what to do first.
//!
//! Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog",
//! <https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html>
//! (table "Xids", Ampere and newer), as read on 2026-12-01. Only the rows
//! that could be read from that page are encoded (codes 1 to 13: the
//! copy available to this session ended there); every other code answers
//! `None` and is shown without advice rather than with a guess. The
//! "Xid 154 linkage" column (whether an Xid usually follows another) was
//! empty for every row read, so no entry carries it yet.

use serde::Serialize;

/// NVIDIA's "Resolution Bucket (Immediate Action)".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Action {
    /// Restart the application that hit it.
    RestartApp,
    /// Reset the GPU (`nvidia-smi -r`).
    ResetGpu,
    /// Reboot the node (bare metal).
    RestartBm,
    /// Collect a bug report and contact NVIDIA support.
    ContactSupport,
    /// Nothing to do.
    Ignore,
    /// Follow NVIDIA's NVLink workflow.
    WorkflowNvlink,
}

impl Action {
    /// The bucket's name as NVIDIA writes it (used in labels and
    /// annotations).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::RestartApp => "RESTART_APP",
            Action::ResetGpu => "RESET_GPU",
            Action::RestartBm => "RESTART_BM",
            Action::ContactSupport => "CONTACT_SUPPORT",
            Action::Ignore => "IGNORE",
            Action::WorkflowNvlink => "WORKFLOW_NVLINK",
        }
    }
}

/// One catalog row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct XidInfo {
    /// The Xid code.
    pub code: u64,
    /// NVIDIA's mnemonic, e.g. `ROBUST_CHANNEL_GR_EXCEPTION`.
    pub mnemonic: &'static str,
    /// NVIDIA's description.
    pub description: &'static str,
    /// What to do first.
    pub action: Action,
    /// Whether the Xid usually follows another one (then act on that one).
    pub follows_another: bool,
}

const fn row(
    code: u64,
    mnemonic: &'static str,
    description: &'static str,
    action: Action,
) -> XidInfo {
    XidInfo {
        code,
        mnemonic,
        description,
        action,
        follows_another: false,
    }
}

/// The rows read from NVIDIA's catalog, codes ascending.
const CATALOG: &[XidInfo] = &[
    row(
        1,
        "ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD",
        "Unused",
        Action::ContactSupport,
    ),
    row(
        2,
        "ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD",
        "Unused",
        Action::ContactSupport,
    ),
    row(
        3,
        "ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD",
        "Unused",
        Action::ContactSupport,
    ),
    row(
        4,
        "ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY",
        "Unused",
        Action::ContactSupport,
    ),
    row(
        5,
        "ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW",
        "Unused",
        Action::ContactSupport,
    ),
    row(
        6,
        "ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR",
        "Unused",
        Action::ContactSupport,
    ),
    row(
        7,
        "ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR",
        "Unused",
        Action::ContactSupport,
    ),
    row(
        8,
        "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT",
        "GPU stopped processing",
        Action::RestartApp,
    ),
    row(
        9,
        "ROBUST_CHANNEL_GR_ERROR_INSTANCE",
        "Unused",
        Action::ContactSupport,
    ),
    row(
        10,
        "ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP",
        "Unused",
        Action::ContactSupport,
    ),
    row(
        11,
        "ROBUST_CHANNEL_GR_ERROR_MISSING_HW",
        "Invalid or corrupted push buffer stream",
        Action::RestartApp,
    ),
    row(
        12,
        "ROBUST_CHANNEL_GR_ERROR_SW_METHOD",
        "Unused",
        Action::ContactSupport,
    ),
    row(
        13,
        "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY",
        "Graphics Engine Exception",
        Action::RestartApp,
    ),
];

/// Where the catalog comes from, for the README and `gpuwatch events`.
pub const SOURCE: &str =
    "NVIDIA Xid Catalog, https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (read 2026-12-01)";

/// The catalog row of `code`, where one was read.
pub fn lookup(code: u64) -> Option<&'static XidInfo> {
    CATALOG
        .binary_search_by_key(&code, |info| info.code)
        .ok()
        .and_then(|i| CATALOG.get(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_sorted_and_unique() {
        assert!(CATALOG.windows(2).all(|w| w[0].code < w[1].code));
    }

    #[test]
    fn lookup_answers_read_rows_only() {
        let info = lookup(13).unwrap();
        assert_eq!(info.action.as_str(), "RESTART_APP");
        assert_eq!(info.description, "Graphics Engine Exception");
        assert_eq!(lookup(8).unwrap().action, Action::RestartApp);
        assert_eq!(lookup(1).unwrap().action, Action::ContactSupport);
        // Not read from the catalog in this session: no advice rather than a guess.
        assert_eq!(lookup(79), None);
        assert_eq!(lookup(0), None);
    }

    #[test]
    fn xid_alerts_carry_the_catalogs_action_and_description() {
        use crate::rules::template::Context;
        for name in ["GpuXidFatal", "GpuXidContained"] {
            let rule = crate::rules::builtin_rules()
                .into_iter()
                .find(|r| r.name == name)
                .unwrap();
            let render = |key: &str, code: f64| {
                rule.annotations[key].render(&Context {
                    value: Some(code),
                    host: "n1",
                    ..Context::default()
                })
            };
            assert_eq!(render("action", 13.0), "RESTART_APP", "{name}");
            assert_eq!(render("xid_description", 13.0), "Graphics Engine Exception");
            assert_eq!(render("action", 79.0), "n/a", "not read yet: no guess");
            assert!(render("xid_description", 79.0).contains("not in"));
        }
    }
}
