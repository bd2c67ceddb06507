//! NVIDIA's Xid catalog: per code, what it means and what to do first.
//!
//! Two sources, both NVIDIA's, read on 2026-12-01:
//! - codes 1 to 13 with their descriptions: "Analyzing Xid Errors with the
//!   Xid Catalog", <https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html>
//!   (table "Xids", Ampere and newer; the copy available here ended at 13);
//! - codes 14 to 162, mnemonic and immediate action only: the catalog as
//!   NVIDIA ships it in NVSentinel, `distros/kubernetes/nvsentinel/charts/
//!   gpu-health-monitor/xiderrorsmapping.csv` (github.com/NVIDIA/NVSentinel,
//!   commit 6f8b0fcf). There the page's CONTACT_SUPPORT is spelled
//!   UNEXPECTED_ERR_REPORT_ISSUE (checked on codes 1 to 12, where both
//!   sources agree); it is kept as CONTACT_SUPPORT here. These rows have no
//!   description: NVIDIA's mnemonic stands in for it.
//!
//! Xid 154 ("GPU recovery action changed") accompanies another Xid: act on
//! that one (`follows_another`).

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
    /// Follow NVIDIA's NVLink 5 workflow (Blackwell NVLink errors).
    WorkflowNvlink5,
    /// Follow NVIDIA's workflow for Xid 45 (preemptive cleanup after an
    /// earlier error: act on that one).
    WorkflowXid45,
    /// Follow NVIDIA's workflow for Xid 48 (double-bit ECC error).
    WorkflowXid48,
    /// Check cooling and power delivery.
    CheckMechanicals,
    /// Update the driver or firmware.
    UpdateSwFw,
    /// Restart the virtual machine.
    RestartVm,
    /// Check the unified-memory (UVM) driver.
    CheckUvm,
    /// Follow the guidance of the Xid this one accompanies (Xid 154).
    FollowLinkedXid,
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
            Action::WorkflowNvlink => "WORKFLOW_NVLINK_ERR",
            Action::WorkflowNvlink5 => "WORKFLOW_NVLINK5_ERR",
            Action::WorkflowXid45 => "WORKFLOW_XID_45",
            Action::WorkflowXid48 => "WORKFLOW_XID_48",
            Action::CheckMechanicals => "CHECK_MECHANICALS",
            Action::UpdateSwFw => "UPDATE_SWFW",
            Action::RestartVm => "RESTART_VM",
            Action::CheckUvm => "CHECK_UVM",
            Action::FollowLinkedXid => "FOLLOW_LINKED_XID",
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

/// A row from NVSentinel's copy: mnemonic and action, no description.
const fn mapped(code: u64, mnemonic: &'static str, action: Action) -> XidInfo {
    row(code, mnemonic, mnemonic, action)
}

/// Xid 154: it accompanies another Xid, whose guidance applies.
const fn linked(code: u64, mnemonic: &'static str) -> XidInfo {
    XidInfo {
        follows_another: true,
        ..row(code, mnemonic, mnemonic, Action::FollowLinkedXid)
    }
}

/// The catalog's rows, codes ascending.
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
    mapped(14, "ROBUST_CHANNEL_FAKE_ERROR", Action::Ignore),
    mapped(
        15,
        "ROBUST_CHANNEL_SCANLINE_TIMEOUT",
        Action::ContactSupport,
    ),
    mapped(
        16,
        "ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT",
        Action::ContactSupport,
    ),
    mapped(17, "ROBUST_CHANNEL_PARAMETER_ERROR", Action::ContactSupport),
    mapped(
        18,
        "ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR",
        Action::ContactSupport,
    ),
    mapped(
        19,
        "ROBUST_CHANNEL_DISP_MISSED_NOTIFIER",
        Action::ContactSupport,
    ),
    mapped(
        20,
        "ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD",
        Action::ContactSupport,
    ),
    mapped(
        21,
        "ROBUST_CHANNEL_ME_ERROR_SW_METHOD",
        Action::ContactSupport,
    ),
    mapped(
        22,
        "ROBUST_CHANNEL_VP_ERROR_SW_METHOD",
        Action::ContactSupport,
    ),
    mapped(
        23,
        "ROBUST_CHANNEL_RC_LOGGING_ENABLED",
        Action::ContactSupport,
    ),
    mapped(
        24,
        "ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT",
        Action::ContactSupport,
    ),
    mapped(25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", Action::RestartApp),
    mapped(
        26,
        "ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT",
        Action::ContactSupport,
    ),
    mapped(27, "ROBUST_CHANNEL_VP_ERROR", Action::ContactSupport),
    mapped(28, "ROBUST_CHANNEL_VP2_ERROR", Action::ContactSupport),
    mapped(29, "ROBUST_CHANNEL_BSP_ERROR", Action::ContactSupport),
    mapped(30, "ROBUST_CHANNEL_BAD_ADDR_ACCESS", Action::ContactSupport),
    mapped(
        31,
        "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT",
        Action::RestartApp,
    ),
    mapped(32, "ROBUST_CHANNEL_PBDMA_ERROR", Action::RestartApp),
    mapped(33, "ROBUST_CHANNEL_SEC_ERROR", Action::ContactSupport),
    mapped(34, "ROBUST_CHANNEL_MSVLD_ERROR", Action::ContactSupport),
    mapped(35, "ROBUST_CHANNEL_MSPDEC_ERROR", Action::ContactSupport),
    mapped(36, "ROBUST_CHANNEL_MSPPP_ERROR", Action::ContactSupport),
    mapped(
        37,
        "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD",
        Action::Ignore,
    ),
    mapped(
        38,
        "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT",
        Action::Ignore,
    ),
    mapped(39, "ROBUST_CHANNEL_CE0_ERROR", Action::RestartApp),
    mapped(40, "ROBUST_CHANNEL_CE1_ERROR", Action::RestartApp),
    mapped(41, "ROBUST_CHANNEL_CE2_ERROR", Action::RestartApp),
    mapped(42, "ROBUST_CHANNEL_VIC_ERROR", Action::ContactSupport),
    mapped(
        43,
        "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
        Action::Ignore,
    ),
    mapped(44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", Action::Ignore),
    mapped(
        45,
        "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
        Action::WorkflowXid45,
    ),
    mapped(46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", Action::ResetGpu),
    mapped(47, "ROBUST_CHANNEL_NVENC0_ERROR", Action::ContactSupport),
    mapped(48, "ROBUST_CHANNEL_GPU_ECC_DBE", Action::WorkflowXid48),
    mapped(
        49,
        "SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY",
        Action::ContactSupport,
    ),
    mapped(
        50,
        "SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR",
        Action::ContactSupport,
    ),
    mapped(
        51,
        "SILENT_RUNNING_STRESS_TEST_FAILURE",
        Action::ContactSupport,
    ),
    mapped(
        52,
        "SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE",
        Action::ContactSupport,
    ),
    mapped(
        53,
        "SILENT_RUNNING_TEMP_REDUCED_CLOCKING",
        Action::ContactSupport,
    ),
    mapped(
        54,
        "SILENT_RUNNING_PWR_REDUCED_CLOCKING",
        Action::CheckMechanicals,
    ),
    mapped(
        55,
        "SILENT_RUNNING_TEMPERATURE_READ_ERROR",
        Action::ContactSupport,
    ),
    mapped(56, "DISPLAY_CHANNEL_EXCEPTION", Action::ContactSupport),
    mapped(57, "FB_LINK_TRAINING_FAILURE_ERROR", Action::ContactSupport),
    mapped(58, "FB_MEMORY_ERROR", Action::ContactSupport),
    mapped(59, "PMU_ERROR", Action::ContactSupport),
    mapped(60, "ROBUST_CHANNEL_SEC2_ERROR", Action::RestartApp),
    mapped(61, "PMU_BREAKPOINT", Action::ContactSupport),
    mapped(62, "PMU_HALT_ERROR", Action::ResetGpu),
    mapped(63, "INFOROM_DRAM_RETIREMENT_EVENT", Action::Ignore),
    mapped(64, "INFOROM_DRAM_RETIREMENT_FAILURE", Action::ResetGpu),
    mapped(65, "ROBUST_CHANNEL_NVENC1_ERROR", Action::ContactSupport),
    mapped(
        66,
        "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION",
        Action::Ignore,
    ),
    mapped(
        67,
        "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION",
        Action::Ignore,
    ),
    mapped(68, "ROBUST_CHANNEL_NVDEC0_ERROR", Action::RestartApp),
    mapped(69, "ROBUST_CHANNEL_GR_CLASS_ERROR", Action::RestartApp),
    mapped(70, "ROBUST_CHANNEL_CE3_ERROR", Action::RestartApp),
    mapped(71, "ROBUST_CHANNEL_CE4_ERROR", Action::RestartApp),
    mapped(72, "ROBUST_CHANNEL_CE5_ERROR", Action::RestartApp),
    mapped(73, "ROBUST_CHANNEL_NVENC2_ERROR", Action::ContactSupport),
    mapped(74, "NVLINK_ERROR", Action::WorkflowNvlink),
    mapped(75, "ROBUST_CHANNEL_CE6_ERROR", Action::RestartApp),
    mapped(76, "ROBUST_CHANNEL_CE7_ERROR", Action::RestartApp),
    mapped(77, "ROBUST_CHANNEL_CE8_ERROR", Action::RestartApp),
    mapped(78, "VGPU_START_ERROR", Action::UpdateSwFw),
    mapped(
        79,
        "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
        Action::RestartBm,
    ),
    mapped(80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", Action::RestartApp),
    mapped(
        81,
        "ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR",
        Action::ContactSupport,
    ),
    mapped(82, "ROBUST_CHANNEL_NVJPG0_ERROR", Action::RestartApp),
    mapped(83, "ROBUST_CHANNEL_NVDEC1_ERROR", Action::RestartApp),
    mapped(84, "ROBUST_CHANNEL_NVDEC2_ERROR", Action::RestartApp),
    mapped(85, "ROBUST_CHANNEL_CE9_ERROR", Action::RestartApp),
    mapped(86, "ROBUST_CHANNEL_OFA0_ERROR", Action::RestartApp),
    mapped(87, "NVTELEMETRY_DRIVER_REPORT", Action::ContactSupport),
    mapped(88, "ROBUST_CHANNEL_NVDEC3_ERROR", Action::RestartApp),
    mapped(89, "ROBUST_CHANNEL_NVDEC4_ERROR", Action::RestartApp),
    mapped(90, "LTC_ERROR", Action::ContactSupport),
    mapped(91, "RESERVED_XID", Action::ContactSupport),
    mapped(92, "EXCESSIVE_SBE_INTERRUPTS", Action::Ignore),
    mapped(93, "INFOROM_ERASE_LIMIT_EXCEEDED", Action::Ignore),
    mapped(94, "ROBUST_CHANNEL_CONTAINED_ERROR", Action::RestartApp),
    mapped(95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", Action::ResetGpu),
    mapped(96, "ROBUST_CHANNEL_NVDEC5_ERROR", Action::RestartApp),
    mapped(97, "ROBUST_CHANNEL_NVDEC6_ERROR", Action::RestartApp),
    mapped(98, "ROBUST_CHANNEL_NVDEC7_ERROR", Action::RestartApp),
    mapped(99, "ROBUST_CHANNEL_NVJPG1_ERROR", Action::RestartApp),
    mapped(100, "ROBUST_CHANNEL_NVJPG2_ERROR", Action::RestartApp),
    mapped(101, "ROBUST_CHANNEL_NVJPG3_ERROR", Action::RestartApp),
    mapped(102, "ROBUST_CHANNEL_NVJPG4_ERROR", Action::RestartApp),
    mapped(103, "ROBUST_CHANNEL_NVJPG5_ERROR", Action::RestartApp),
    mapped(104, "ROBUST_CHANNEL_NVJPG6_ERROR", Action::RestartApp),
    mapped(105, "ROBUST_CHANNEL_NVJPG7_ERROR", Action::RestartApp),
    mapped(106, "SMBPBI_TEST_MESSAGE", Action::Ignore),
    mapped(107, "SMBPBI_TEST_MESSAGE_SILENT", Action::Ignore),
    mapped(
        108,
        "DESTINATION_FLA_TRANSLATION_ERROR",
        Action::ContactSupport,
    ),
    mapped(109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", Action::ResetGpu),
    mapped(110, "SEC_FAULT_ERROR", Action::ResetGpu),
    mapped(111, "BUNDLE_ERROR_EVENT", Action::ContactSupport),
    mapped(112, "DISP_SUPERVISOR_ERROR", Action::ContactSupport),
    mapped(113, "DP_LT_FAILURE", Action::ContactSupport),
    mapped(114, "HEAD_RG_UNDERFLOW", Action::ContactSupport),
    mapped(115, "CORE_CHANNEL_REGS", Action::ContactSupport),
    mapped(116, "WINDOW_CHANNEL_REGS", Action::ContactSupport),
    mapped(117, "CURSOR_CHANNEL_REGS", Action::ContactSupport),
    mapped(118, "HEAD_REGS", Action::ContactSupport),
    mapped(119, "GSP_RPC_TIMEOUT", Action::ResetGpu),
    mapped(120, "GSP_ERROR", Action::ResetGpu),
    mapped(121, "C2C_ERROR", Action::Ignore),
    mapped(122, "SPI_PMU_RPC_READ_FAIL", Action::ContactSupport),
    mapped(123, "SPI_PMU_RPC_WRITE_FAIL", Action::ContactSupport),
    mapped(124, "SPI_PMU_RPC_ERASE_FAIL", Action::ContactSupport),
    mapped(125, "INFOROM_FS_ERROR", Action::ContactSupport),
    mapped(126, "ROBUST_CHANNEL_CE10_ERROR", Action::RestartApp),
    mapped(127, "ROBUST_CHANNEL_CE11_ERROR", Action::RestartApp),
    mapped(128, "ROBUST_CHANNEL_CE12_ERROR", Action::RestartApp),
    mapped(129, "ROBUST_CHANNEL_CE13_ERROR", Action::RestartApp),
    mapped(130, "ROBUST_CHANNEL_CE14_ERROR", Action::RestartApp),
    mapped(131, "ROBUST_CHANNEL_CE15_ERROR", Action::RestartApp),
    mapped(132, "ROBUST_CHANNEL_CE16_ERROR", Action::RestartApp),
    mapped(133, "ROBUST_CHANNEL_CE17_ERROR", Action::RestartApp),
    mapped(134, "ROBUST_CHANNEL_CE18_ERROR", Action::RestartApp),
    mapped(135, "ROBUST_CHANNEL_CE19_ERROR", Action::RestartApp),
    mapped(136, "ALI_TRAINING_FAIL", Action::ResetGpu),
    mapped(137, "NVLINK_FLA_PRIV_ERR", Action::Ignore),
    mapped(138, "ROBUST_CHANNEL_DLA_ERROR", Action::ContactSupport),
    mapped(139, "ROBUST_CHANNEL_OFA1_ERROR", Action::RestartApp),
    mapped(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", Action::ResetGpu),
    mapped(141, "ROBUST_CHANNEL_FAST_PATH_ERROR", Action::Ignore),
    mapped(142, "ROBUST_CHANNEL_NVENC3_ERROR", Action::ContactSupport),
    mapped(143, "GPU_INIT_ERROR", Action::ResetGpu),
    mapped(144, "NVLINK_SAW_ERROR", Action::WorkflowNvlink5),
    mapped(145, "NVLINK_RLW_ERROR", Action::WorkflowNvlink5),
    mapped(146, "NVLINK_TLW_ERROR", Action::WorkflowNvlink5),
    mapped(147, "NVLINK_TREX_ERROR", Action::WorkflowNvlink5),
    mapped(148, "NVLINK_NVLPW_CTRL_ERROR", Action::WorkflowNvlink5),
    mapped(149, "NVLINK_NETIR_ERROR", Action::WorkflowNvlink5),
    mapped(150, "NVLINK_MSE_ERROR", Action::WorkflowNvlink5),
    mapped(151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", Action::RestartVm),
    mapped(152, "ROBUST_CHANNEL_DLA_SMMU_ERROR", Action::Ignore),
    mapped(153, "ROBUST_CHANNEL_DLA_TIMEOUT", Action::Ignore),
    linked(154, "GPU_RECOVERY_ACTION_CHANGED"),
    mapped(155, "NVLINK_SW_DEFINED_ERROR", Action::ResetGpu),
    mapped(156, "RESOURCE_RETIREMENT_EVENT", Action::ResetGpu),
    mapped(157, "RESOURCE_RETIREMENT_FAILURE", Action::Ignore),
    mapped(158, "GPU_FATAL_TIMEOUT", Action::ResetGpu),
    mapped(159, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", Action::CheckUvm),
    mapped(160, "CHANNEL_RETIREMENT_EVENT", Action::RestartBm),
    mapped(161, "CHANNEL_RETIREMENT_FAILURE", Action::Ignore),
    row(162, "", "not named in NVIDIA's table", Action::ResetGpu),
];

/// Where the catalog comes from, for the README and `gpuwatch events`.
pub const SOURCE: &str = "NVIDIA Xid Catalog, https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, and NVIDIA NVSentinel's xiderrorsmapping.csv (commit 6f8b0fcf), read 2026-12-01";

/// How urgent an Xid is, from its catalog action. The built-in Xid rules
/// follow these classes (one rule per class), so a catalog row added or
/// changed changes the rules with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The GPU needs a reset, the node (or VM) a reboot, or an NVIDIA
    /// recovery workflow (NVLink, Xid 48) that starts with a reset: drain it.
    /// Rule `GpuXidFatal`, critical.
    Reset,
    /// The error was contained to the application that hit it (RESTART_APP,
    /// CHECK_UVM): restart it; the GPU keeps working. Rule
    /// `GpuXidContained`, warning.
    Contained,
    /// Unexpected: collect a bug report for NVIDIA (CONTACT_SUPPORT), or
    /// check the cooling (CHECK_MECHANICALS) or update the driver
    /// (UPDATE_SWFW). Rule `GpuXidContactSupport`, warning.
    Support,
    /// Nothing to do for this Xid itself (IGNORE), or it accompanies
    /// another Xid whose advice applies (WORKFLOW_XID_45, FOLLOW_LINKED_XID):
    /// no alert.
    Ignore,
}

impl Class {
    /// Every class, most urgent first.
    pub const ALL: [Class; 4] = [
        Class::Reset,
        Class::Contained,
        Class::Support,
        Class::Ignore,
    ];

    /// The built-in rule that alerts on this class (none for `Ignore`).
    pub fn rule(self) -> Option<&'static str> {
        match self {
            Class::Reset => Some("GpuXidFatal"),
            Class::Contained => Some("GpuXidContained"),
            Class::Support => Some("GpuXidContactSupport"),
            Class::Ignore => None,
        }
    }
}

impl Action {
    /// The class of an Xid with this action.
    pub fn class(self) -> Class {
        match self {
            Action::ResetGpu
            | Action::RestartBm
            | Action::RestartVm
            | Action::WorkflowXid48
            | Action::WorkflowNvlink
            | Action::WorkflowNvlink5 => Class::Reset,
            Action::RestartApp | Action::CheckUvm => Class::Contained,
            Action::ContactSupport | Action::CheckMechanicals | Action::UpdateSwFw => {
                Class::Support
            }
            Action::Ignore | Action::WorkflowXid45 | Action::FollowLinkedXid => Class::Ignore,
        }
    }
}

/// The catalog's codes of one class, ascending.
pub fn codes_of(class: Class) -> Vec<u64> {
    CATALOG
        .iter()
        .filter(|info| info.action.class() == class)
        .map(|info| info.code)
        .collect()
}

/// The class of `code`; `None` for a code beyond the catalog (no advice,
/// no alert of its own).
pub fn class_of(code: u64) -> Option<Class> {
    lookup(code).map(|info| info.action.class())
}

/// Xid codes that report row remapping (63: a row was remapped or a page
/// retired; 64: that failed). Where the GPU gives row-remap readings the
/// row-remap rules (`GpuRowRemapPending`, `GpuRowRemapFailure`) speak for
/// them and the Xid rules stay quiet; without those readings (older GPUs
/// retire pages instead) the Xid alert stands.
pub const XID_DEFER_TO_REMAP: &[u64] = &[63, 64];

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
        let fell_off = lookup(79).unwrap();
        assert_eq!(fell_off.action, Action::RestartBm);
        assert_eq!(
            fell_off.description,
            "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
        );
        assert_eq!(lookup(94).unwrap().action, Action::RestartApp);
        assert_eq!(lookup(48).unwrap().action, Action::WorkflowXid48);
        assert!(lookup(154).unwrap().follows_another);
        assert_eq!(CATALOG.len(), 162);
        // Codes NVIDIA has not published: no advice rather than a guess.
        assert_eq!(lookup(163), None);
        assert_eq!(lookup(0), None);
    }

    #[test]
    fn classes_follow_the_actions() {
        let fatal = codes_of(Class::Reset);
        for code in [
            46, 48, 62, 64, 74, 79, 95, 119, 120, 136, 140, 143, 144, 151,
        ] {
            assert!(fatal.contains(&code), "Xid {code}");
        }
        assert_eq!(class_of(13), Some(Class::Contained));
        assert_eq!(class_of(94), Some(Class::Contained));
        assert_eq!(class_of(159), Some(Class::Contained), "CHECK_UVM");
        assert_eq!(
            class_of(61),
            Some(Class::Support),
            "NVIDIA: CONTACT_SUPPORT"
        );
        assert_eq!(class_of(54), Some(Class::Support), "CHECK_MECHANICALS");
        assert_eq!(class_of(63), Some(Class::Ignore));
        assert_eq!(class_of(45), Some(Class::Ignore), "follows another Xid");
        assert_eq!(class_of(154), Some(Class::Ignore), "follows another Xid");
        assert_eq!(class_of(163), None);
        // Every row is in exactly one class.
        let total: usize = Class::ALL.iter().map(|c| codes_of(*c).len()).sum();
        assert_eq!(total, CATALOG.len());
        assert_eq!(Class::Ignore.rule(), None);
    }

    #[test]
    fn xid_alerts_carry_the_catalogs_action_and_description() {
        use crate::rules::template::Context;
        for name in ["GpuXidFatal", "GpuXidContained", "GpuXidContactSupport"] {
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
            assert_eq!(render("action", 79.0), "RESTART_BM", "{name}");
            assert_eq!(render("action", 163.0), "n/a", "not published: no guess");
            assert!(render("xid_description", 163.0).contains("not in"));
        }
    }
}
