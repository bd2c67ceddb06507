//! Property tests for the kernel-log parser: any process can make the
//! kernel log a line (a process name, a device name), so every line is
//! hostile input. Any bytes give an answer, never a panic, and nothing
//! kept is longer than its cap.

use proptest::prelude::*;

use super::parse::{
    kernel_event, parse_message, split_line, KernelEvent, MAX_LINE, MAX_NAME, MAX_TEXT,
};
use crate::gpu::pci_address::PciAddress;

/// Pieces real lines are made of, to reach deep into the parser.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,12}",
        "[0-9]{1,22}",
        prop::sample::select(vec![
            "NVRM: Xid (",
            "SXid (",
            "PCI:",
            "0000:18:00",
            "00000000:DB:00.0",
            "):",
            ", ",
            "pid=",
            "name=",
            "'<unknown>'",
            "<unknown>",
            ";",
            ",",
            "[",
            "]",
            " GPU-I:01",
            "\n",
            "é",
            "\u{0}",
        ])
        .prop_map(str::to_string),
    ]
}

fn hostile_line() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..24).prop_map(|p| p.concat())
}

proptest! {
    #[test]
    fn any_line_parses_without_panic_and_bounded(line in hostile_line(), pad in 0usize..3 * MAX_LINE) {
        for line in [line.clone(), format!("{line}{}", "x".repeat(pad)), format!("4,1,2,-;{line}")] {
            if let Some(split) = split_line(&line) {
                prop_assert!(split.message.len() <= MAX_LINE);
                match parse_message(split.message) {
                    Some(KernelEvent::Xid(x)) => {
                        prop_assert!(x.text.len() <= MAX_TEXT);
                        prop_assert!(x.process.as_ref().map_or(0, String::len) <= MAX_NAME);
                    }
                    Some(KernelEvent::Sxid { text, .. }) => prop_assert!(text.len() <= MAX_TEXT),
                    None => {}
                }
            }
        }
    }

    #[test]
    fn any_bytes_are_no_problem(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Some(split) = split_line(&text) {
            let _ = parse_message(split.message);
        }
        let _ = PciAddress::parse(&text);
    }

    #[test]
    fn well_formed_xid_lines_round_trip(
        domain in 0u32..0x10000, bus in any::<u8>(), device in 0u8..32, code in 1u64..1000,
        pid in proptest::option::of(1u32..4_000_000), name in "[a-z][a-z0-9_]{0,14}",
        text in "[A-Z][ -~]{0,60}", seq in any::<u32>(), ts in any::<u32>(),
    ) {
        let owner = match pid {
            Some(pid) => format!("pid={pid}, name={name}, "),
            None => String::new(),
        };
        let line = format!("4,{seq},{ts},-;NVRM: Xid (PCI:{domain:04x}:{bus:02x}:{device:02x}): {code}, {owner}{text}");
        let split = split_line(&line).unwrap();
        prop_assert_eq!(split.seq, Some(u64::from(seq)));
        let Some(KernelEvent::Xid(x)) = parse_message(split.message) else {
            return Err(TestCaseError::fail("not parsed"));
        };
        prop_assert_eq!((x.pci.domain, x.pci.bus, x.pci.device, x.code), (domain, bus, device, code));
        prop_assert_eq!(x.pid, pid);
        prop_assert_eq!(x.process, pid.map(|_| name.clone()));
        prop_assert_eq!(x.text, text.trim().to_string());
    }

    /// Text before the driver's prefix: another message quoting it.
    #[test]
    fn text_before_the_prefix_is_not_a_report(
        junk in "[ -~]{1,40}", code in 1u64..200, sxid in any::<bool>(),
    ) {
        // Leading spaces are the formats' own padding: junk is the rest.
        let shown = junk.trim_start();
        prop_assume!(!shown.is_empty() && !shown.starts_with("NVRM") && !shown.starts_with("nvidia-nvswitch"));
        let report = match sxid {
            false => format!("NVRM: Xid (PCI:0000:18:00): {code}, pid=1, name=x, text"),
            true => format!("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): {code}, text"),
        };
        for line in [
            format!("4,7,1000,-;{junk}{report}"),
            format!("[  12.345678] {junk}{report}"),
            format!("Dec  1 10:00:00 node1 kernel: {junk}{report}"),
            format!("{junk}{report}"),
        ] {
            let counted = split_line(&line).and_then(|l| kernel_event(&l));
            prop_assert!(counted.is_none(), "{line} counted as {counted:?}");
        }
        // Control: the same report at the start counts.
        let line = format!("4,7,1000,-;{report}");
        prop_assert!(split_line(&line).and_then(|l| kernel_event(&l)).is_some());
    }

    /// Records a user wrote to `/dev/kmsg` (any facility but the kernel's).
    #[test]
    fn user_facilities_are_not_reports(facility in 1u32..(u32::MAX >> 3), level in 0u32..8) {
        let priority = facility << 3 | level;
        let line = format!("{priority},7,1000,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, forged");
        let split = split_line(&line).unwrap();
        prop_assert!(!split.from_kernel);
        prop_assert!(kernel_event(&split).is_none());
        let kernel = format!("{level},7,1000,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, real");
        prop_assert!(kernel_event(&split_line(&kernel).unwrap()).is_some());
    }

    /// syslog lines from any program but the kernel (`logger -t name`).
    #[test]
    fn programs_other_than_the_kernel_are_not_reports(
        program in "[a-zA-Z][a-zA-Z0-9_.-]{0,15}", pid in proptest::option::of(1u32..4_000_000),
        rfc3339 in any::<bool>(), uptime in any::<bool>(),
    ) {
        let time = match rfc3339 {
            true => "2026-12-01T10:00:00.123456+00:00",
            false => "Dec  1 10:00:00",
        };
        let tag = match pid {
            Some(pid) => format!("{program}[{pid}]"),
            None => program.clone(),
        };
        let stamp = if uptime { "[  812.345678] " } else { "" };
        let line = format!("{time} node1 {tag}: {stamp}NVRM: Xid (PCI:0000:18:00): 79, text");
        let counted = split_line(&line).and_then(|l| kernel_event(&l));
        prop_assert_eq!(counted.is_some(), program == "kernel", "{}", line);
    }

    /// Any kmsg time is kept as written (clamping is the router's job).
    #[test]
    fn kmsg_times_are_read_whole(ts in any::<u64>(), seq in any::<u64>()) {
        let line = format!("4,{seq},{ts},-;NVRM: Xid (PCI:0000:18:00): 79, x");
        let split = split_line(&line).unwrap();
        prop_assert_eq!((split.since_boot_us, split.seq), (Some(ts), Some(seq)));
    }

    /// Whatever time a line carries, the router places it no later than
    /// when it was read and no earlier than boot.
    #[test]
    fn line_times_are_clamped_between_boot_and_the_read_time(
        ts in proptest::option::of(any::<u64>()), boot_s in 0u64..4_000_000_000, up_s in 0u64..1_000_000_000,
    ) {
        use std::time::{Duration, SystemTime};
        let boot = SystemTime::UNIX_EPOCH + Duration::from_secs(boot_s);
        let read_at = boot + Duration::from_secs(up_s);
        let at = super::router::Router::new(boot).time(ts, read_at);
        prop_assert!(at <= read_at && at >= boot, "{at:?} outside [{boot:?}, {read_at:?}]");
        if let Some(us) = ts {
            if Duration::from_micros(us) <= Duration::from_secs(up_s) {
                prop_assert_eq!(at, boot + Duration::from_micros(us));
            }
        }
    }
}
