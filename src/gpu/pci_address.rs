//! PCI addresses as the kernel log, NVML and sysfs write them, normalised
//! so they compare: NVML says `00000000:18:00.0`, the driver's Xid lines
//! `0000:18:00` (no function), sysfs `0000:18:00.0`, in either case.

use std::fmt;

/// A PCI address: domain, bus, device and, where given, function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PciAddress {
    /// PCI domain (segment); NVML prints 8 hex digits, the kernel 4.
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device (slot) number.
    pub device: u8,
    /// Function; `None` where the text had none (Xid lines).
    pub function: Option<u8>,
}

impl PciAddress {
    /// Parses `dddd:bb:dd[.f]` (any domain width up to 8 hex digits, any
    /// case); `None` for anything else.
    pub fn parse(text: &str) -> Option<PciAddress> {
        let text = text.trim();
        let mut parts = text.split(':');
        let (domain, bus, rest) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let (device, function) = match rest.split_once('.') {
            Some((device, function)) => (device, Some(function)),
            None => (rest, None),
        };
        let hex = |s: &str, max_len: usize| -> Option<u32> {
            if s.is_empty() || s.len() > max_len || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            u32::from_str_radix(s, 16).ok()
        };
        let function = match function {
            Some(f) => Some(u8::try_from(hex(f, 1)?).ok().filter(|f| *f < 8)?),
            None => None,
        };
        Some(PciAddress {
            domain: hex(domain, 8)?,
            bus: u8::try_from(hex(bus, 2)?).ok()?,
            device: u8::try_from(hex(device, 2)?).ok().filter(|d| *d < 32)?,
            function,
        })
    }

    /// The same slot: domain, bus and device equal, and functions equal
    /// where both name one (an Xid line names none).
    pub fn same_device(&self, other: &PciAddress) -> bool {
        self.domain == other.domain
            && self.bus == other.bus
            && self.device == other.device
            && match (self.function, other.function) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

impl fmt::Display for PciAddress {
    /// The kernel's form: `0000:18:00.0` (function 0 when none was given).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{}",
            self.domain,
            self.bus,
            self.device,
            self.function.unwrap_or(0)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_driver_and_sysfs_forms_compare_equal() {
        let nvml = PciAddress::parse("00000000:DB:00.0").unwrap();
        let xid = PciAddress::parse("0000:db:00").unwrap();
        let sysfs = PciAddress::parse("0000:db:00.0").unwrap();
        assert!(nvml.same_device(&xid));
        assert!(xid.same_device(&sysfs));
        assert_eq!(nvml, sysfs);
        assert_eq!(xid.to_string(), "0000:db:00.0");
        assert!(!nvml.same_device(&PciAddress::parse("0000:db:00.1").unwrap()));
        assert!(!nvml.same_device(&PciAddress::parse("0001:db:00.0").unwrap()));
    }

    #[test]
    fn rejects_what_is_not_an_address() {
        for bad in [
            "",
            "0000:05",
            "zz:05:00.0",
            "0000:100:00.0",
            "0000:05:20.0",
            "0000:05:00.8",
            "0000:05:00.0:1",
            "123456789:05:00.0",
            "0000:+5:00",
        ] {
            assert_eq!(PciAddress::parse(bad), None, "{bad}");
        }
    }
}
