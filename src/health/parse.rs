//! Kernel-log lines: `/dev/kmsg` records (`PRI,SEQ,TS_USEC,FLAGS;MESSAGE`),
//! syslog lines (`Dec  1 10:00:00 host kernel: [ 123.4] MESSAGE`, or with
//! an RFC 3339 time), `dmesg` lines (`[  123.456789] MESSAGE`) and bare
//! messages, and in their messages the NVIDIA driver's `NVRM: Xid` and the
//! NVSwitch driver's `SXid` reports. Pure and total: any input gives an
//! answer, never a panic, and nothing it keeps is longer than [`MAX_LINE`].
//!
//! Trust: any local user can put text into the kernel log (a process or
//! library name in a segfault line, `logger`, a write to `/dev/kmsg`), so a
//! report counts only when the record is the kernel's own ([`LogLine::
//! from_kernel`]: kmsg facility 0, syslog program `kernel`) and its message
//! *starts* with the driver's prefix ([`kernel_event`]).

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
    /// Whether the line's format says the kernel wrote it: a kmsg record of
    /// facility 0 (`/dev/kmsg` forces user writes to LOG_USER, facility 1,
    /// see `devkmsg_write` in the kernel's `printk.c`), a syslog line whose
    /// program is `kernel`, or a `dmesg` line or bare message (a text file
    /// cannot prove its origin: it is trusted for its format).
    pub from_kernel: bool,
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
    if let Some((program, message)) = syslog_line(line) {
        let (since_boot_us, message) = match program == "kernel" {
            true => uptime_prefix(message).unwrap_or((None, message)),
            false => (None, message),
        };
        return Some(LogLine {
            since_boot_us,
            seq: None,
            message,
            from_kernel: program == "kernel",
        });
    }
    if let Some((us, message)) = uptime_prefix(line) {
        return Some(LogLine {
            since_boot_us: us,
            seq: None,
            message,
            from_kernel: true,
        });
    }
    Some(LogLine {
        since_boot_us: None,
        seq: None,
        message: line,
        from_kernel: true,
    })
}

/// `[  123.456789] rest` → (µs, rest).
fn uptime_prefix(line: &str) -> Option<(Option<u64>, &str)> {
    let (stamp, message) = line.strip_prefix('[')?.split_once(']')?;
    let us = dmesg_seconds(stamp.trim())?;
    Some((Some(us), message.trim_start()))
}

/// `PRI,SEQ,TS_USEC,FLAGS[,...];MESSAGE`.
fn kmsg_record(line: &str) -> Option<LogLine<'_>> {
    let (prefix, message) = line.split_once(';')?;
    let mut fields = prefix.split(',');
    let priority: u32 = fields.next()?.parse().ok()?;
    let seq: u64 = fields.next()?.parse().ok()?;
    let ts: u64 = fields.next()?.parse().ok()?;
    Some(LogLine {
        since_boot_us: Some(ts),
        seq: Some(seq),
        message,
        from_kernel: priority >> 3 == 0,
    })
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A syslog line's program (without `[pid]`) and message: a time
/// (`Dec  1 10:00:00`, or RFC 3339 `2026-12-01T10:00:00.123+00:00`), the
/// host, then `program[pid]: message`.
fn syslog_line(line: &str) -> Option<(&str, &str)> {
    let rest = bsd_time(line).or_else(|| rfc3339_time(line))?;
    let (host, rest) = rest.strip_prefix(' ')?.split_once(' ')?;
    if host.is_empty() {
        return None;
    }
    let (tag, message) = rest.split_once(':')?;
    if tag.is_empty() || tag.contains(' ') {
        return None;
    }
    let program = tag.split_once('[').map_or(tag, |(name, _)| name);
    Some((program, message.strip_prefix(' ').unwrap_or(message)))
}

/// `Mmm dd hh:mm:ss` (day space-padded or not) → the rest of the line.
fn bsd_time(line: &str) -> Option<&str> {
    let stamp = line.get(..15)?.as_bytes();
    let digit = |i: usize| stamp[i].is_ascii_digit();
    let ok = MONTHS.contains(&line.get(..3)?)
        && stamp[3] == b' '
        && (stamp[4] == b' ' || digit(4))
        && digit(5)
        && stamp[6] == b' '
        && digit(7)
        && digit(8)
        && stamp[9] == b':'
        && digit(10)
        && digit(11)
        && stamp[12] == b':'
        && digit(13)
        && digit(14);
    ok.then(|| &line[15..])
}

/// `YYYY-MM-DDThh:mm:ss[...]` up to the first space → the rest of the line.
fn rfc3339_time(line: &str) -> Option<&str> {
    let end = line.find(' ')?;
    let stamp = &line.as_bytes()[..end];
    let shape = b"dddd-dd-ddTdd:dd:dd";
    let ok = stamp.len() >= shape.len()
        && shape.iter().zip(stamp).all(|(want, got)| match want {
            b'd' => got.is_ascii_digit(),
            _ => want == got,
        });
    ok.then(|| &line[end..])
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

/// The driver's prefix of an Xid message.
pub const XID_PREFIX: &str = "NVRM: Xid (";

/// The event a line reports, when the kernel wrote it (see
/// [`LogLine::from_kernel`]) and its message is an Xid or SXid report.
pub fn kernel_event(line: &LogLine<'_>) -> Option<KernelEvent> {
    if !line.from_kernel {
        return None;
    }
    parse_message(line.message)
}

/// Reads the event a message reports, if it *starts* as the NVIDIA driver's
/// Xid line (`NVRM: Xid (`) or the NVSwitch driver's SXid line
/// (`nvidia-nvswitchN: SXid (`): the same text later in a message (a file
/// or process name quoted by another kernel message) is not a report.
pub fn parse_message(message: &str) -> Option<KernelEvent> {
    let message = cap(message, MAX_LINE);
    if let Some(rest) = message.strip_prefix(XID_PREFIX) {
        return parse_xid(rest).map(KernelEvent::Xid);
    }
    let rest = message.strip_prefix("nvidia-nvswitch")?;
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = rest.strip_prefix(": SXid (")?;
    let (pci, code, text) = address_and_code(rest)?;
    Some(KernelEvent::Sxid {
        pci,
        code,
        text: cap(text.trim(), MAX_TEXT).to_string(),
    })
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

    /// The event a whole line reports, trust included.
    fn event(line: &str) -> Option<KernelEvent> {
        kernel_event(&split_line(line)?)
    }

    #[test]
    fn forged_reports_do_not_count() {
        // issue 22: a segfault in a library named like an Xid line, written
        // by the kernel itself (facility 0), quotes the text mid-message.
        let segfault = "6,2201,9000000,-;a.out[4242]: segfault at 0 ip 00007f1e2a001000 sp 00007ffd error 4 in NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, y.so[7f1e2a001000+1000]";
        assert_eq!(event(segfault), None);
        // A user's write to /dev/kmsg: facility 1 (LOG_USER), 14 = user.info.
        assert_eq!(
            event("14,2202,9000001,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, forged"),
            None
        );
        // Facility 0, level 4: the driver's own record.
        assert!(
            event("4,2203,9000002,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, real").is_some()
        );
        // syslog: `logger` lines carry the user's program name.
        assert_eq!(
            event("Dec  1 10:00:00 node1 alice: NVRM: Xid (PCI:0000:18:00): 79, forged"),
            None
        );
        assert_eq!(
            event("2026-12-01T10:00:00.123456+00:00 node1 alice[77]: NVRM: Xid (PCI:0000:18:00): 79, forged"),
            None
        );
        // An AppArmor audit line naming a file after the report.
        assert_eq!(
            event("Dec  1 10:00:00 node1 kernel: [ 12.5] audit: type=1400 apparmor=\"DENIED\" name=\"/tmp/NVRM: Xid (PCI:0000:18:00): 79, x\""),
            None
        );
        let kernel = split_line("2026-12-01T10:00:00.123456+00:00 node1 kernel: [  812.345678] NVRM: Xid (PCI:0000:18:00): 79, real").unwrap();
        assert_eq!(kernel.since_boot_us, Some(812_345_678));
        assert!(matches!(kernel_event(&kernel), Some(KernelEvent::Xid(x)) if x.code == 79));
        // SXid: only the NVSwitch driver's own prefix.
        assert!(event("3,1,1,-;nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 20034, Fatal").is_some());
        assert_eq!(
            event("3,1,1,-;evil: SXid (PCI:0000:05:00.0): 20034, Fatal"),
            None
        );
        assert_eq!(
            event("Dec  1 10:00:00 node1 bob: nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 1, x"),
            None
        );
        // A dmesg line is the kernel's format; its message must still start
        // with the prefix.
        assert_eq!(
            event("[  5.0] python3[1]: NVRM: Xid (PCI:0000:18:00): 79, x"),
            None
        );
        // A process name (comm, 15 bytes) cannot hold a whole address.
        assert_eq!(
            event("4,1,1,-;NVRM: Xid (PCI:[4242]: segfault at 0 ip 0 error 4"),
            None
        );
        assert_eq!(event("4,1,1,-;NVRM: Xid (0:0) (123): drop_caches: 1"), None);
    }

    #[test]
    fn dmesg_stamps() {
        assert_eq!(dmesg_seconds("123.456789"), Some(123_456_789));
        assert_eq!(dmesg_seconds("5.5"), Some(5_500_000));
        assert_eq!(dmesg_seconds("x.5"), None);
        assert_eq!(dmesg_seconds("18446744073709551615.0"), None);
    }
}
