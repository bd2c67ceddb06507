//! Kernel-log lines: `/dev/kmsg` records (`PRI,SEQ,TS_USEC,FLAGS;MESSAGE`),
//! `dmesg` lines (`[  123.456789] MESSAGE`) and bare messages, and in their
//! messages the NVIDIA driver's `NVRM: Xid` and the NVSwitch driver's `SXid`
//! reports. Pure and total: any input gives an answer, never a panic, and
//! nothing it keeps is longer than [`MAX_LINE`].

use crate::gpu::pci_address::PciAddress;

/// Longest line considered, in bytes; the rest of a longer line is cut off
/// (the kernel's own record limit is about 1 KiB; this leaves room).
pub const MAX_LINE: usize = 4096;
/// Longest message text kept with an event, in bytes.
pub const MAX_TEXT: usize = 512;
/// Longest process name kept (the kernel's comm is 16 bytes).
pub const MAX_NAME: usize = 64;

/// One kernel-log line, split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine<'a> {
    /// Time since boot in µs, where the line carries one.
    pub since_boot_us: Option<u64>,
    /// The kernel's record sequence number (kmsg records only).
    pub seq: Option<u64>,
    /// The message.
    pub message: &'a str,
}

/// What a message reports, when it is one the agent reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelEvent {
    /// `NVRM: Xid (PCI:dddd:bb:dd): code, [pid=..., name=...,] text`.
    Xid(XidReport),
    /// `nvidia-nvswitchN: SXid (PCI:dddd:bb:dd.f): code, text`.
    Sxid {
        /// The switch's PCI address.
        pci: PciAddress,
        /// SXid code.
        code: u64,
        /// The text after the code.
        text: String,
    },
}

/// One Xid line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidReport {
    /// The GPU's PCI address (no function).
    pub pci: PciAddress,
    /// Xid code.
    pub code: u64,
    /// Process that owned the channel, where the driver knew it.
    pub pid: Option<u32>,
    /// Its name, where the driver knew it.
    pub process: Option<String>,
    /// The text after the code (and after pid and name).
    pub text: String,
}

/// Cuts `text` to at most `max` bytes at a character boundary.
fn cap(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Splits one line (without its newline). kmsg continuation lines (they
/// start with a space: `KEY=value` dictionary lines) and empty lines give
/// `None`.
pub fn split_line(line: &str) -> Option<LogLine<'_>> {
    let line = cap(line.trim_end_matches(['\n', '\r']), MAX_LINE);
    if line.is_empty() || line.starts_with(' ') {
        return None;
    }
    if let Some(record) = kmsg_record(line) {
        return Some(record);
    }
    if let Some(rest) = line.strip_prefix('[') {
        if let Some((stamp, message)) = rest.split_once(']') {
            if let Some(us) = dmesg_seconds(stamp.trim()) {
                return Some(LogLine {
                    since_boot_us: Some(us),
                    seq: None,
                    message: message.trim_start(),
                });
            }
        }
    }
    Some(LogLine {
        since_boot_us: None,
        seq: None,
        message: line,
    })
}

/// `PRI,SEQ,TS_USEC,FLAGS[,...];MESSAGE`.
fn kmsg_record(line: &str) -> Option<LogLine<'_>> {
    let (prefix, message) = line.split_once(';')?;
    let mut fields = prefix.split(',');
    let _priority: u32 = fields.next()?.parse().ok()?;
    let seq: u64 = fields.next()?.parse().ok()?;
    let ts: u64 = fields.next()?.parse().ok()?;
    Some(LogLine {
        since_boot_us: Some(ts),
        seq: Some(seq),
        message,
    })
}

/// `123.456789` → µs.
fn dmesg_seconds(stamp: &str) -> Option<u64> {
    let (secs, frac) = stamp.split_once('.').unwrap_or((stamp, ""));
    if secs.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let mut micros = 0u64;
    for (i, digit) in frac.bytes().take(6).enumerate() {
        micros += u64::from(digit - b'0') * 10u64.pow(5 - i as u32);
    }
    secs.checked_mul(1_000_000)?.checked_add(micros)
}

/// Reads the event a message reports, if it is an Xid or SXid line.
pub fn parse_message(message: &str) -> Option<KernelEvent> {
    let message = cap(message, MAX_LINE);
    if let Some(at) = message.find("NVRM: Xid (") {
        return parse_xid(&message[at + "NVRM: Xid (".len()..]).map(KernelEvent::Xid);
    }
    if let Some(at) = message.find("SXid (") {
        let (pci, code, text) = address_and_code(&message[at + "SXid (".len()..])?;
        return Some(KernelEvent::Sxid {
            pci,
            code,
            text: cap(text.trim(), MAX_TEXT).to_string(),
        });
    }
    None
}

/// `PCI:dddd:bb:dd[ GPU-I:..]): code, rest` → (address, code, rest).
fn address_and_code(rest: &str) -> Option<(PciAddress, u64, &str)> {
    let (inside, after) = rest.split_once("):")?;
    let address = inside.strip_prefix("PCI:").unwrap_or(inside);
    let address = address.split_whitespace().next()?;
    let pci = PciAddress::parse(address)?;
    let after = after.trim_start();
    let (code, text) = after.split_once(',').unwrap_or((after, ""));
    let code: u64 = code.trim().parse().ok()?;
    Some((pci, code, text))
}

fn parse_xid(rest: &str) -> Option<XidReport> {
    let (pci, code, mut text) = address_and_code(rest)?;
    let mut pid = None;
    let mut process = None;
    text = text.trim_start();
    if let Some(after) = text.strip_prefix("pid=") {
        let (value, remainder) = after.split_once(',').unwrap_or((after, ""));
        pid = value.trim().parse().ok();
        text = remainder.trim_start();
        if let Some(after) = text.strip_prefix("name=") {
            let (value, remainder) = after.split_once(',').unwrap_or((after, ""));
            let value = value.trim();
            if !value.is_empty() && value != "<unknown>" {
                process = Some(cap(value, MAX_NAME).to_string());
            }
            text = remainder.trim_start();
        }
    }
    Some(XidReport {
        pci,
        code,
        pid,
        process,
        text: cap(text.trim(), MAX_TEXT).to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xid(line: &str) -> XidReport {
        let line = split_line(line).unwrap();
        match parse_message(line.message) {
            Some(KernelEvent::Xid(x)) => x,
            other => panic!("not an Xid: {other:?}"),
        }
    }

    #[test]
    fn kmsg_record_with_pid_and_name() {
        let line = "4,1002,5000000,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python3, GPU has fallen off the bus.";
        let split = split_line(line).unwrap();
        assert_eq!(
            (split.seq, split.since_boot_us),
            (Some(1002), Some(5_000_000))
        );
        let x = xid(line);
        assert_eq!(x.pci, PciAddress::parse("0000:18:00").unwrap());
        assert_eq!((x.code, x.pid), (79, Some(1234)));
        assert_eq!(x.process.as_deref(), Some("python3"));
        assert_eq!(x.text, "GPU has fallen off the bus.");
    }

    #[test]
    fn driver_variants() {
        let unknown = xid("4,1,1,-;NVRM: Xid (PCI:0000:18:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception");
        assert_eq!((unknown.pid, unknown.process), (None, None));
        assert_eq!(unknown.text, "Graphics Exception");
        let legacy = xid("[  123.456789] NVRM: Xid (PCI:0000:18:00): 48, An uncorrectable double bit error (DBE) has been detected.");
        assert_eq!((legacy.code, legacy.pid), (48, None));
        assert!(legacy.text.starts_with("An uncorrectable double bit error"));
        let mig = xid(
            "NVRM: Xid (PCI:0000:db:00 GPU-I:01 GPU-CI:00): 94, pid=7, name=train, Contained: SM",
        );
        assert_eq!((mig.pci.bus, mig.code, mig.pid), (0xdb, 94, Some(7)));
        let old = xid("Dec  1 10:00:00 host kernel: NVRM: Xid (0000:03:00): 14, Channel 00000001");
        assert_eq!((old.pci.bus, old.code), (3, 14));
        assert_eq!(old.text, "Channel 00000001");
    }

    #[test]
    fn sxid_and_other_lines() {
        let line = split_line("3,1005,9000000,-;nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 12 LTSSM Fault Up").unwrap();
        assert_eq!(
            parse_message(line.message),
            Some(KernelEvent::Sxid {
                pci: PciAddress::parse("0000:05:00.0").unwrap(),
                code: 20034,
                text: "Fatal, Link 12 LTSSM Fault Up".into()
            })
        );
        let plain = split_line("6,1006,9100000,-;nvidia-nvswitch0: Link 12 is up again").unwrap();
        assert_eq!(parse_message(plain.message), None);
        assert_eq!(split_line(" SUBSYSTEM=pci"), None);
        assert_eq!(split_line(""), None);
        assert_eq!(
            parse_message("NVRM: Xid (PCI:0000:18:00): seventy-nine, x"),
            None
        );
    }

    #[test]
    fn dmesg_stamps() {
        assert_eq!(dmesg_seconds("123.456789"), Some(123_456_789));
        assert_eq!(dmesg_seconds("5.5"), Some(5_500_000));
        assert_eq!(dmesg_seconds("x.5"), None);
        assert_eq!(dmesg_seconds("18446744073709551615.0"), None);
    }
}
