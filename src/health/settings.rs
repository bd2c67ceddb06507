//! Where the hardware-health readers look: plain settings that `config`
//! fills in from `[health]` (kept here so that health does not import the
//! configuration, which imports the rules that read health's catalog).

use std::path::PathBuf;

/// The kernel log read by default.
pub const DEFAULT_KERNEL_LOG: &str = "/dev/kmsg";
/// The kernel's boot id, read by default.
pub const DEFAULT_BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";
/// After how many resets or reboots a returning Xid asks for a hardware
/// inspection, by default.
pub const DEFAULT_XID_ESCALATE_AFTER: u32 = 2;
/// The PCI device tree read by default.
pub const DEFAULT_PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// Where the health readers look when the GPUs are simulated: the host's
/// kernel log and PCI bus do not describe them, so only what the file names
/// explicitly is read, and the kernel log is otherwise the simulator's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SimulatedInputs {
    /// The file the simulator writes its kernel-log records to, if any.
    pub kernel_log: Option<PathBuf>,
}

/// Hardware-health settings.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthConfig {
    /// The kernel log to follow: `/dev/kmsg`, or a regular file followed
    /// like `tail -F` (tests, replays); `None` when turned off (`""`).
    pub kernel_log: Option<PathBuf>,
    /// Whether the file set `kernel_log` (with `--simulate` the host's log
    /// is read only then: it does not describe simulated GPUs).
    pub kernel_log_explicit: bool,
    /// The sysfs PCI device tree to count GPUs in; `None` when turned off.
    pub pci_devices: Option<PathBuf>,
    /// Whether the file set `pci_devices` (with `--simulate` the host's bus
    /// is read only then).
    pub pci_devices_explicit: bool,
    /// The file holding the kernel's boot id (a reboot changes it); `None`
    /// when off (`""`): then only GPU resets count toward escalation.
    pub boot_id: Option<PathBuf>,
    /// After how many GPU resets or node reboots the same Xid coming back
    /// on the same GPU raises `GpuXidRecurring` (hardware inspection).
    pub xid_escalate_after: u32,
    /// Set by the agent when the GPUs are simulated (never by the file).
    pub simulated: Option<SimulatedInputs>,
}
