//! Kernel-log messages as the NVIDIA drivers print them (the scenario
//! writes them, the engine schedules them as `/dev/kmsg` records).
//!
//! Message formats follow the open GPU kernel modules' `kernel_rc.c`:
//! `NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s` (pid
//! `'<unknown>'` and name `<unknown>` when no channel owner is known; the
//! parenthesis carries ` GPU-I:%02u` / ` GPU-CI:%02u` on MIG), printed once
//! per GPU after `NVRM: GPU at PCI:...: <uuid>` and `NVRM: GPU Board Serial
//! Number: <serial>`; older drivers print `NVRM: Xid (PCI:...): %d, %s`.
//! NVSwitch errors read `nvidia-nvswitchN: SXid (PCI:dddd:bb:dd.f): code, text`.

/// NVRM prints with a bare `printk("%s")`: the kernel's default message
/// level, 4 (warning).
pub const NVRM_PRIORITY: u8 = 4;
/// The NVSwitch driver prints SXid errors at level 3 (err).
pub const SXID_PRIORITY: u8 = 3;
/// Level of plain `line` entries: 6 (info).
pub const INFO_PRIORITY: u8 = 6;

/// One Xid line to format.
#[derive(Debug, Clone, Copy)]
pub struct XidLine<'a> {
    /// The GPU's NVML bus id, e.g. `00000000:18:00.0`.
    pub pci_bus_id: &'a str,
    /// Xid code.
    pub code: u64,
    /// (pid, process name) of the channel owner; `None` prints `<unknown>`.
    pub process: Option<(u32, &'a str)>,
    /// MIG attribution: (GPU instance, compute instance).
    pub mig: Option<(u32, Option<u32>)>,
    /// Older drivers' form without pid and name.
    pub legacy: bool,
    /// The text after the code (default: [`default_xid_text`]).
    pub text: Option<&'a str>,
}

/// (domain, bus, device, function) of `00000000:18:00.0`, `0000:18:00.0` or `0000:18:00`.
pub fn parse_pci(text: &str) -> Option<(u32, u32, u32, u32)> {
    let mut parts = text.split(':');
    let (domain, bus, rest) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (device, function) = rest.split_once('.').unwrap_or((rest, "0"));
    let hex = |s: &str| {
        (!s.is_empty())
            .then(|| u32::from_str_radix(s, 16).ok())
            .flatten()
    };
    Some((hex(domain)?, hex(bus)?, hex(device)?, hex(function)?))
}

/// The GPU address as the driver prints it in Xid lines: `0000:18:00`.
pub fn driver_pci(pci_bus_id: &str) -> String {
    let (domain, bus, device, _) = parse_pci(pci_bus_id).unwrap_or_default();
    format!("{domain:04x}:{bus:02x}:{device:02x}")
}

/// The full Xid message.
pub fn xid_message(x: &XidLine) -> String {
    let mut address = format!("PCI:{}", driver_pci(x.pci_bus_id));
    if let Some((gi, ci)) = x.mig {
        address.push_str(&format!(" GPU-I:{gi:02}"));
        if let Some(ci) = ci {
            address.push_str(&format!(" GPU-CI:{ci:02}"));
        }
    }
    let text = x.text.unwrap_or_else(|| default_xid_text(x.code));
    if x.legacy {
        return format!("NVRM: Xid ({address}): {}, {text}", x.code);
    }
    let (pid, name) = match x.process {
        Some((pid, name)) => (pid.to_string(), name.to_string()),
        None => ("'<unknown>'".to_string(), "<unknown>".to_string()),
    };
    format!(
        "NVRM: Xid ({address}): {}, pid={pid}, name={name}, {text}",
        x.code
    )
}

/// The full SXid message of NVSwitch `switch` at `pci` (`0000:05:00.0`).
pub fn sxid_message(switch: u32, pci: &str, code: u64, text: Option<&str>) -> String {
    let text = text.unwrap_or_else(|| default_sxid_text(code));
    format!("nvidia-nvswitch{switch}: SXid (PCI:{pci}): {code}, {text}")
}

/// A typical text for common Xid codes (the simulator's own wording).
pub fn default_xid_text(code: u64) -> &'static str {
    match code {
        13 => "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
        31 => "Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f12_34560000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
        43 => "Ch 00000010",
        48 => "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.",
        63 => "Row Remapper: New row (0x00000000001a2b3c) was marked for remapping, reset gpu to activate.",
        64 => "Row Remapper: Failed to mark row (0x00000000001a2b3c) for remapping.",
        74 => "NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
        79 => "GPU has fallen off the bus.",
        92 => "High single-bit ECC error rate detected.",
        94 => "Contained: SM (0x1). RST: No, D-RST: No",
        95 => "Uncontained: FBHUB. RST: Yes, D-RST: No",
        109 => "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005",
        119 => "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20801813 0x4c).",
        120 => "GSP task exception.",
        _ => "Unspecified error.",
    }
}

/// A typical text for common SXid codes (the simulator's own wording).
pub fn default_sxid_text(code: u64) -> &'static str {
    match code {
        12028 => "Non-fatal, Link 32 egress non-posted PRIV error (First)",
        20034 => "Fatal, Link 48 LTSSM Fault Up",
        _ => "Non-fatal, Link 0",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xid_lines_in_the_drivers_forms() {
        let base = XidLine {
            pci_bus_id: "00000000:18:00.0",
            code: 79,
            process: Some((1234, "python3")),
            mig: None,
            legacy: false,
            text: None,
        };
        assert_eq!(
            xid_message(&base),
            "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
        );
        let unknown = XidLine {
            process: None,
            code: 13,
            text: Some("Graphics Exception"),
            ..base
        };
        assert_eq!(
            xid_message(&unknown),
            "NVRM: Xid (PCI:0000:18:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception"
        );
        let legacy = XidLine {
            process: None,
            legacy: true,
            code: 48,
            ..base
        };
        assert!(xid_message(&legacy)
            .starts_with("NVRM: Xid (PCI:0000:18:00): 48, An uncorrectable double bit error"));
        let mig = XidLine {
            mig: Some((1, Some(0))),
            pci_bus_id: "00000000:DB:00.0",
            ..base
        };
        assert!(xid_message(&mig)
            .starts_with("NVRM: Xid (PCI:0000:db:00 GPU-I:01 GPU-CI:00): 79, pid=1234"));
        assert_eq!(
            sxid_message(0, "0000:05:00.0", 12028, None),
            "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)"
        );
    }

    #[test]
    fn pci_addresses() {
        assert_eq!(parse_pci("00000000:18:00.0"), Some((0, 0x18, 0, 0)));
        assert_eq!(parse_pci("0000:cb:00"), Some((0, 0xcb, 0, 0)));
        assert_eq!(parse_pci("0000:05"), None);
        assert_eq!(parse_pci("zz:05:00.0"), None);
    }
}
