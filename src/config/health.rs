//! `[health]`: where the hardware-health readers look (the kernel log for
//! Xid and SXid lines, the PCI bus for GPUs the driver never saw).

use std::path::PathBuf;

use super::raw::RawHealth;
use super::Validator;

/// The kernel log read by default.
pub const DEFAULT_KERNEL_LOG: &str = "/dev/kmsg";
/// The PCI device tree read by default.
pub const DEFAULT_PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// Hardware-health settings.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthConfig {
    /// The kernel log to follow: `/dev/kmsg`, or a regular file followed
    /// like `tail -F` (tests, replays); `None` when turned off (`""`).
    pub kernel_log: Option<PathBuf>,
    /// The sysfs PCI device tree to count GPUs in; `None` when turned off.
    pub pci_devices: Option<PathBuf>,
}

impl Validator<'_> {
    /// Checks `[health]` (paths only: "" turns a reader off).
    pub(super) fn health(&mut self, raw: RawHealth) -> HealthConfig {
        let path = |value: Option<PathBuf>, default: &str| {
            let path = value.unwrap_or_else(|| PathBuf::from(default));
            (!path.as_os_str().is_empty()).then_some(path)
        };
        HealthConfig {
            kernel_log: path(raw.kernel_log, DEFAULT_KERNEL_LOG),
            pci_devices: path(raw.pci_devices, DEFAULT_PCI_DEVICES),
        }
    }
}
