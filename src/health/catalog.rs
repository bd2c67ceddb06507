//! NVIDIA's Xid catalog: per code, what it means and what to do first.
//!
//! Sources, all NVIDIA's:
//! - codes 1 to 13, description and action: "Analyzing Xid Errors with the
//!   Xid Catalog", <https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html>
//!   (table "Xids", Ampere and newer), read 2026-12-01;
//! - codes 14 to 162, mnemonic and immediate action: the catalog as NVIDIA
//!   ships it in NVSentinel, `distros/kubernetes/nvsentinel/charts/
//!   gpu-health-monitor/xiderrorsmapping.csv` (github.com/NVIDIA/NVSentinel,
//!   commit 6f8b0fcf), read 2026-12-01. There the page's CONTACT_SUPPORT is
//!   spelled UNEXPECTED_ERR_REPORT_ISSUE (checked on codes 1 to 12, where
//!   both sources agree); it is kept as CONTACT_SUPPORT here;
//! - codes 14 to 162, description: the "Description" column of the same
//!   NVIDIA catalog's spreadsheet (Xid-Catalog.xlsx, sheet "Catalog", linked
//!   from the page above), as transcribed on 2025-10-29 in
//!   github.com/leptonai/gpud `components/accelerator/nvidia/xid/
//!   catalog_generated.go` (commit 73e270e3), read 2026-12-01. Where
//!   NVIDIA writes "Unused" the row says so. That copy names Xid 162
//!   (PSHC_REENGAGED) and gives it no action; NVSentinel's RESET_GPU is
//!   kept. It also differs from NVSentinel on the action of Xid 160
//!   (IGNORE there): NVSentinel's is kept, as for every action.
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

/// Xid 154: it accompanies another Xid, whose guidance applies.
const fn linked(code: u64, mnemonic: &'static str, description: &'static str) -> XidInfo {
    XidInfo {
        follows_another: true,
        ..row(code, mnemonic, description, Action::FollowLinkedXid)
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
    row(14, "ROBUST_CHANNEL_FAKE_ERROR", "Unused", Action::Ignore),
    row(15, "ROBUST_CHANNEL_SCANLINE_TIMEOUT", "Unused", Action::ContactSupport),
    row(16, "ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT", "Unused", Action::ContactSupport),
    row(17, "ROBUST_CHANNEL_PARAMETER_ERROR", "Unused", Action::ContactSupport),
    row(18, "ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR", "Unused", Action::ContactSupport),
    row(19, "ROBUST_CHANNEL_DISP_MISSED_NOTIFIER", "Unused", Action::ContactSupport),
    row(20, "ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD", "Unused", Action::ContactSupport),
    row(21, "ROBUST_CHANNEL_ME_ERROR_SW_METHOD", "Unused", Action::ContactSupport),
    row(22, "ROBUST_CHANNEL_VP_ERROR_SW_METHOD", "Unused", Action::ContactSupport),
    row(23, "ROBUST_CHANNEL_RC_LOGGING_ENABLED", "Unused", Action::ContactSupport),
    row(24, "ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT", "Unused", Action::ContactSupport),
    row(25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "Invalid or illegal push buffer stream", Action::RestartApp),
    row(26, "ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT", "Unused", Action::ContactSupport),
    row(27, "ROBUST_CHANNEL_VP_ERROR", "Unused", Action::ContactSupport),
    row(28, "ROBUST_CHANNEL_VP2_ERROR", "Unused", Action::ContactSupport),
    row(29, "ROBUST_CHANNEL_BSP_ERROR", "Unused", Action::ContactSupport),
    row(30, "ROBUST_CHANNEL_BAD_ADDR_ACCESS", "Unused", Action::ContactSupport),
    row(31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", Action::RestartApp),
    row(32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream", Action::RestartApp),
    row(33, "ROBUST_CHANNEL_SEC_ERROR", "Unused", Action::ContactSupport),
    row(34, "ROBUST_CHANNEL_MSVLD_ERROR", "Unused", Action::ContactSupport),
    row(35, "ROBUST_CHANNEL_MSPDEC_ERROR", "Unused", Action::ContactSupport),
    row(36, "ROBUST_CHANNEL_MSPPP_ERROR", "Unused", Action::ContactSupport),
    row(37, "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "Driver firmware error", Action::Ignore),
    row(38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", Action::Ignore),
    row(39, "ROBUST_CHANNEL_CE0_ERROR", "Copy Engine Exception", Action::RestartApp),
    row(40, "ROBUST_CHANNEL_CE1_ERROR", "Copy Engine Exception", Action::RestartApp),
    row(41, "ROBUST_CHANNEL_CE2_ERROR", "Copy Engine Exception", Action::RestartApp),
    row(42, "ROBUST_CHANNEL_VIC_ERROR", "Unused", Action::ContactSupport),
    row(43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing", Action::Ignore),
    row(44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "Graphics Engine fault during context switch", Action::Ignore),
    row(45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda applications and hitting a DBE", Action::WorkflowXid45),
    row(46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", Action::ResetGpu),
    row(47, "ROBUST_CHANNEL_NVENC0_ERROR", "Unused", Action::ContactSupport),
    row(48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", Action::WorkflowXid48),
    row(49, "SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY", "Unused", Action::ContactSupport),
    row(50, "SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR", "Unused", Action::ContactSupport),
    row(51, "SILENT_RUNNING_STRESS_TEST_FAILURE", "Unused", Action::ContactSupport),
    row(52, "SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE", "Unused", Action::ContactSupport),
    row(53, "SILENT_RUNNING_TEMP_REDUCED_CLOCKING", "Unused", Action::ContactSupport),
    row(54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "Auxiliary power is not connected to the GPU board", Action::CheckMechanicals),
    row(55, "SILENT_RUNNING_TEMPERATURE_READ_ERROR", "Unused", Action::ContactSupport),
    row(56, "DISPLAY_CHANNEL_EXCEPTION", "Unused", Action::ContactSupport),
    row(57, "FB_LINK_TRAINING_FAILURE_ERROR", "Unused", Action::ContactSupport),
    row(58, "FB_MEMORY_ERROR", "Unused", Action::ContactSupport),
    row(59, "PMU_ERROR", "Unused", Action::ContactSupport),
    row(60, "ROBUST_CHANNEL_SEC2_ERROR", "Video processor exception", Action::RestartApp),
    row(61, "PMU_BREAKPOINT", "Unused", Action::ContactSupport),
    row(62, "PMU_HALT_ERROR", "Internal micro-controller halt (newer drivers)", Action::ResetGpu),
    row(63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", Action::Ignore),
    row(64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", Action::ResetGpu),
    row(65, "ROBUST_CHANNEL_NVENC1_ERROR", "Unused", Action::ContactSupport),
    row(66, "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "Illegal access by driver", Action::Ignore),
    row(67, "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "Illegal access by driver", Action::Ignore),
    row(68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", Action::RestartApp),
    row(69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", Action::RestartApp),
    row(70, "ROBUST_CHANNEL_CE3_ERROR", "CE3: Unknown Error", Action::RestartApp),
    row(71, "ROBUST_CHANNEL_CE4_ERROR", "CE4: Unknown Error", Action::RestartApp),
    row(72, "ROBUST_CHANNEL_CE5_ERROR", "CE5: Unknown Error", Action::RestartApp),
    row(73, "ROBUST_CHANNEL_NVENC2_ERROR", "Unused", Action::ContactSupport),
    row(74, "NVLINK_ERROR", "NVLINK Error", Action::WorkflowNvlink),
    row(75, "ROBUST_CHANNEL_CE6_ERROR", "CE6: Unknown Error", Action::RestartApp),
    row(76, "ROBUST_CHANNEL_CE7_ERROR", "CE7: Unknown Error", Action::RestartApp),
    row(77, "ROBUST_CHANNEL_CE8_ERROR", "CE8: Unknown Error", Action::RestartApp),
    row(78, "VGPU_START_ERROR", "vGPU Start Error", Action::UpdateSwFw),
    row(79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", Action::RestartBm),
    row(80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "Corrupted data sent to GPU", Action::RestartApp),
    row(81, "ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", "Unused", Action::ContactSupport),
    row(82, "ROBUST_CHANNEL_NVJPG0_ERROR", "NVJPG0 Error", Action::RestartApp),
    row(83, "ROBUST_CHANNEL_NVDEC1_ERROR", "NVDEC1 Error", Action::RestartApp),
    row(84, "ROBUST_CHANNEL_NVDEC2_ERROR", "NVDEC2 Error", Action::RestartApp),
    row(85, "ROBUST_CHANNEL_CE9_ERROR", "CE9: Unknown Error", Action::RestartApp),
    row(86, "ROBUST_CHANNEL_OFA0_ERROR", "OFA Exception", Action::RestartApp),
    row(87, "NVTELEMETRY_DRIVER_REPORT", "Unused", Action::ContactSupport),
    row(88, "ROBUST_CHANNEL_NVDEC3_ERROR", "NVDEC3 Error", Action::RestartApp),
    row(89, "ROBUST_CHANNEL_NVDEC4_ERROR", "NVDEC4 Error", Action::RestartApp),
    row(90, "LTC_ERROR", "Unused", Action::ContactSupport),
    row(91, "RESERVED_XID", "Unused", Action::ContactSupport),
    row(92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", Action::Ignore),
    row(93, "INFOROM_ERASE_LIMIT_EXCEEDED", "Non-fatal violation of provisioned InfoROM wear limit", Action::Ignore),
    row(94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", Action::RestartApp),
    row(95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", Action::ResetGpu),
    row(96, "ROBUST_CHANNEL_NVDEC5_ERROR", "NVDEC5 Error", Action::RestartApp),
    row(97, "ROBUST_CHANNEL_NVDEC6_ERROR", "NVDEC6 Error", Action::RestartApp),
    row(98, "ROBUST_CHANNEL_NVDEC7_ERROR", "NVDEC7 Error", Action::RestartApp),
    row(99, "ROBUST_CHANNEL_NVJPG1_ERROR", "NVJPG1 Error", Action::RestartApp),
    row(100, "ROBUST_CHANNEL_NVJPG2_ERROR", "NVJPG2 Error", Action::RestartApp),
    row(101, "ROBUST_CHANNEL_NVJPG3_ERROR", "NVJPG3 Error", Action::RestartApp),
    row(102, "ROBUST_CHANNEL_NVJPG4_ERROR", "NVJPG4 Error", Action::RestartApp),
    row(103, "ROBUST_CHANNEL_NVJPG5_ERROR", "NVJPG5 Error", Action::RestartApp),
    row(104, "ROBUST_CHANNEL_NVJPG6_ERROR", "NVJPG6 Error", Action::RestartApp),
    row(105, "ROBUST_CHANNEL_NVJPG7_ERROR", "NVJPG7 Error", Action::RestartApp),
    row(106, "SMBPBI_TEST_MESSAGE", "SMBPBI Test Message", Action::Ignore),
    row(107, "SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI Test Message Silent", Action::Ignore),
    row(108, "DESTINATION_FLA_TRANSLATION_ERROR", "Unused", Action::ContactSupport),
    row(109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error", Action::ResetGpu),
    row(110, "SEC_FAULT_ERROR", "Security Fault Error", Action::ResetGpu),
    row(111, "BUNDLE_ERROR_EVENT", "Unused", Action::ContactSupport),
    row(112, "DISP_SUPERVISOR_ERROR", "Unused", Action::ContactSupport),
    row(113, "DP_LT_FAILURE", "Unused", Action::ContactSupport),
    row(114, "HEAD_RG_UNDERFLOW", "Unused", Action::ContactSupport),
    row(115, "CORE_CHANNEL_REGS", "Unused", Action::ContactSupport),
    row(116, "WINDOW_CHANNEL_REGS", "Unused", Action::ContactSupport),
    row(117, "CURSOR_CHANNEL_REGS", "Unused", Action::ContactSupport),
    row(118, "HEAD_REGS", "Unused", Action::ContactSupport),
    row(119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", Action::ResetGpu),
    row(120, "GSP_ERROR", "GSP Error", Action::ResetGpu),
    row(121, "C2C_ERROR", "C2C Error", Action::Ignore),
    row(122, "SPI_PMU_RPC_READ_FAIL", "Unused", Action::ContactSupport),
    row(123, "SPI_PMU_RPC_WRITE_FAIL", "Unused", Action::ContactSupport),
    row(124, "SPI_PMU_RPC_ERASE_FAIL", "Unused", Action::ContactSupport),
    row(125, "INFOROM_FS_ERROR", "Unused", Action::ContactSupport),
    row(126, "ROBUST_CHANNEL_CE10_ERROR", "CE10: Unknown Error", Action::RestartApp),
    row(127, "ROBUST_CHANNEL_CE11_ERROR", "CE11: Unknown Error", Action::RestartApp),
    row(128, "ROBUST_CHANNEL_CE12_ERROR", "CE12: Unknown Error", Action::RestartApp),
    row(129, "ROBUST_CHANNEL_CE13_ERROR", "CE13: Unknown Error", Action::RestartApp),
    row(130, "ROBUST_CHANNEL_CE14_ERROR", "CE14: Unknown Error", Action::RestartApp),
    row(131, "ROBUST_CHANNEL_CE15_ERROR", "CE15: Unknown Error", Action::RestartApp),
    row(132, "ROBUST_CHANNEL_CE16_ERROR", "CE16: Unknown Error", Action::RestartApp),
    row(133, "ROBUST_CHANNEL_CE17_ERROR", "CE17: Unknown Error", Action::RestartApp),
    row(134, "ROBUST_CHANNEL_CE18_ERROR", "CE18: Unknown Error", Action::RestartApp),
    row(135, "ROBUST_CHANNEL_CE19_ERROR", "CE19: Unknown Error", Action::RestartApp),
    row(136, "ALI_TRAINING_FAIL", "Link Training Failed", Action::ResetGpu),
    row(137, "NVLINK_FLA_PRIV_ERR", "NVLink Privilege Error", Action::Ignore),
    row(138, "ROBUST_CHANNEL_DLA_ERROR", "Unused", Action::ContactSupport),
    row(139, "ROBUST_CHANNEL_OFA1_ERROR", "OFA1 Error", Action::RestartApp),
    row(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", Action::ResetGpu),
    row(141, "ROBUST_CHANNEL_FAST_PATH_ERROR", "CUDA Fast Path Error", Action::Ignore),
    row(142, "ROBUST_CHANNEL_NVENC3_ERROR", "NVENC3 Error", Action::ContactSupport),
    row(143, "GPU_INIT_ERROR", "GPU Initialization Error", Action::ResetGpu),
    row(144, "NVLINK_SAW_ERROR", "NVLINK: SAW Error", Action::WorkflowNvlink5),
    row(145, "NVLINK_RLW_ERROR", "NVLINK: RLW Error", Action::WorkflowNvlink5),
    row(146, "NVLINK_TLW_ERROR", "NVLINK: TLW Error", Action::WorkflowNvlink5),
    row(147, "NVLINK_TREX_ERROR", "NVLINK: TREX Error", Action::WorkflowNvlink5),
    row(148, "NVLINK_NVLPW_CTRL_ERROR", "NVLINK: NVLPW_CTRL Error", Action::WorkflowNvlink5),
    row(149, "NVLINK_NETIR_ERROR", "NVLINK: NETIR Error", Action::WorkflowNvlink5),
    row(150, "NVLINK_MSE_ERROR", "NVLINK: MSE Error", Action::WorkflowNvlink5),
    row(151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "Key rotation Error", Action::RestartVm),
    row(152, "ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU Error", Action::Ignore),
    row(153, "ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout Error", Action::Ignore),
    linked(154, "GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed"),
    row(155, "NVLINK_SW_DEFINED_ERROR", "NVLINK: SW Defined Error", Action::ResetGpu),
    row(156, "RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", Action::ResetGpu),
    row(157, "RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure", Action::Ignore),
    row(158, "GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", Action::ResetGpu),
    row(159, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI Non-Data Error", Action::CheckUvm),
    row(160, "CHANNEL_RETIREMENT_EVENT", "Channel Retirement Event", Action::RestartBm),
    row(161, "CHANNEL_RETIREMENT_FAILURE", "Channel Retirement Failure", Action::Ignore),
    row(
        162,
        "PSHC_REENGAGED",
        "Power Smoothing HW Circuitry capability reengaged",
        Action::ResetGpu,
    ),
];

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
mod tests;
