//! `[health]`: where the hardware-health readers look (the kernel log for
//! Xid and SXid lines, the PCI bus for GPUs the driver never saw).

use std::path::PathBuf;

use super::raw::RawHealth;
use super::Validator;

pub use crate::health::settings::{
    HealthConfig, DEFAULT_BOOT_ID, DEFAULT_KERNEL_LOG, DEFAULT_PCI_DEVICES,
    DEFAULT_XID_ESCALATE_AFTER,
};

impl Validator<'_> {
    /// Checks `[health]` (paths: "" turns a reader off; the escalation
    /// count: 1 to 1000).
    pub(super) fn health(&mut self, raw: RawHealth) -> HealthConfig {
        let path = |value: Option<PathBuf>, default: &str| {
            let path = value.unwrap_or_else(|| PathBuf::from(default));
            (!path.as_os_str().is_empty()).then_some(path)
        };
        HealthConfig {
            kernel_log_explicit: raw.kernel_log.is_some(),
            kernel_log: path(raw.kernel_log, DEFAULT_KERNEL_LOG),
            pci_devices_explicit: raw.pci_devices.is_some(),
            pci_devices: path(raw.pci_devices, DEFAULT_PCI_DEVICES),
            boot_id: path(raw.boot_id, DEFAULT_BOOT_ID),
            simulated: None,
            xid_escalate_after: match raw.xid_escalate_after {
                None => DEFAULT_XID_ESCALATE_AFTER,
                Some(n) => match u32::try_from(*n.get_ref()) {
                    Ok(value)
                        if (super::limits::XID_ESCALATE_AFTER.min
                            ..=super::limits::XID_ESCALATE_AFTER.max)
                            .contains(&u64::from(value)) =>
                    {
                        value
                    }
                    _ => {
                        self.problem(
                            "health.xid_escalate_after",
                            n.span(),
                            &format!(
                                "{} is not a number of resets/reboots; use {} (default {DEFAULT_XID_ESCALATE_AFTER})",
                                n.get_ref(),
                                super::limits::XID_ESCALATE_AFTER.describe_count()
                            ),
                        );
                        DEFAULT_XID_ESCALATE_AFTER
                    }
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError};

    #[test]
    fn kernel_log_and_pci_tree_default_named_or_off() {
        let default = Config::default().health;
        assert_eq!(default.kernel_log.as_deref(), Some(Path::new("/dev/kmsg")));
        assert!(!default.kernel_log_explicit);
        assert_eq!(
            default.pci_devices.as_deref(),
            Some(Path::new("/sys/bus/pci/devices"))
        );
        let named = Config::parse(
            "[health]\nkernel_log = \"/var/log/kern.replay\"\npci_devices = \"/srv/pci\"\n",
            "h.toml",
        )
        .expect("valid")
        .health;
        assert_eq!(
            named.kernel_log.as_deref(),
            Some(Path::new("/var/log/kern.replay"))
        );
        assert!(named.kernel_log_explicit);
        assert_eq!(named.pci_devices.as_deref(), Some(Path::new("/srv/pci")));
        let off = Config::parse(
            "[health]\nkernel_log = \"\"\npci_devices = \"\"\n",
            "h.toml",
        )
        .expect("valid")
        .health;
        assert_eq!((off.kernel_log, off.pci_devices), (None, None));
        assert!(off.kernel_log_explicit);
        match Config::parse("[health]\nkmsg = \"/dev/kmsg\"\n", "h.toml") {
            Err(ConfigError::Invalid(problems)) => {
                let text = problems[0].to_string();
                assert!(
                    text.starts_with("h.toml:2:1:") && text.contains("kmsg"),
                    "{text}"
                );
            }
            other => panic!("expected a problem, got {other:?}"),
        }
    }

    #[test]
    fn boot_id_and_xid_escalation_default_named_or_checked() {
        use crate::rules::Condition;
        let default = Config::default();
        assert_eq!(
            default.health.boot_id.as_deref(),
            Some(Path::new("/proc/sys/kernel/random/boot_id"))
        );
        assert_eq!(default.health.xid_escalate_after, 2);
        let recurring = |c: &Config| {
            c.rules
                .iter()
                .find(|r| r.name == "GpuXidRecurring")
                .map(|r| r.condition.clone())
        };
        assert_eq!(
            recurring(&default),
            Some(Condition::XidRecurring { after: 2 })
        );
        let named = Config::parse(
            "[health]\nboot_id = \"/srv/boot_id\"\nxid_escalate_after = 3\n",
            "h.toml",
        )
        .expect("valid");
        assert_eq!(
            named.health.boot_id.as_deref(),
            Some(Path::new("/srv/boot_id"))
        );
        assert_eq!(
            recurring(&named),
            Some(Condition::XidRecurring { after: 3 })
        );
        // A rule file's own condition stands.
        let own = Config::parse(
            "[health]\nxid_escalate_after = 3\n\n[[rules]]\nname = \"GpuXidRecurring\"\ncondition = \"xid_recurring(5)\"\n",
            "h.toml",
        )
        .expect("valid");
        assert_eq!(recurring(&own), Some(Condition::XidRecurring { after: 5 }));
        let off = Config::parse("[health]\nboot_id = \"\"\n", "h.toml").expect("valid");
        assert_eq!(off.health.boot_id, None);
        match Config::parse("[health]\nxid_escalate_after = 0\n", "h.toml") {
            Err(ConfigError::Invalid(problems)) => {
                let text = problems[0].to_string();
                assert!(
                    text.starts_with("h.toml:2:")
                        && text.contains("health.xid_escalate_after")
                        && text.contains("1 to 1000"),
                    "{text}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
