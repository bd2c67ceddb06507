//! Property tests for the kernel-log parser: any process can make the
//! kernel log a line (a process name, a device name), so every line is
//! hostile input. Any bytes give an answer, never a panic, and nothing
//! kept is longer than its cap.

use proptest::prelude::*;

use super::parse::{parse_message, split_line, KernelEvent, MAX_LINE, MAX_NAME, MAX_TEXT};
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
}
