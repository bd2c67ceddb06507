use super::*;

#[test]
fn counts_per_gpu_and_code() {
    let table = XidTable::default();
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(10);
    let t1 = t0 + Duration::from_secs(5);
    table.record(1, 79, t0);
    table.record(1, 79, t1);
    table.record(1, 13, t0);
    table.record(2, 94, t0);
    let counts = table.counts();
    let gpu1 = &counts[&1].codes;
    assert_eq!(gpu1.len(), 2);
    assert_eq!((gpu1[0].code, gpu1[0].count), (13, 1));
    assert_eq!(
        (gpu1[1].code, gpu1[1].count, gpu1[1].last_seen),
        (79, 2, t1)
    );
    assert_eq!(counts[&2].codes[0].code, 94);
}

fn kernel(gpu: u32, code: u64, at: SystemTime, backlog: bool) -> KernelXid {
    KernelXid {
        gpu,
        code,
        at,
        pid: Some(1234),
        process: Some("python3".into()),
        text: "GPU has fallen off the bus.".into(),
        backlog,
    }
}

fn count(table: &XidTable, gpu: u32, code: u64) -> u64 {
    table
        .counts()
        .get(&gpu)
        .and_then(|c| c.codes.iter().find(|x| x.code == code).map(|x| x.count))
        .unwrap_or(0)
}

#[test]
fn one_error_seen_by_both_sources_counts_once_either_order() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let table = XidTable::default();
    table.record(0, 79, t0);
    table.record_kernel(kernel(0, 79, t0 + Duration::from_secs(2), false));
    assert_eq!(count(&table, 0, 79), 1);
    let log = table.node_health();
    assert_eq!(log.recent_xid.len(), 1);
    let first = &log.recent_xid[0];
    assert_eq!(first.source, XidSource::Nvml);
    assert_eq!(
        (first.pid, first.text.as_deref()),
        (Some(1234), Some("GPU has fallen off the bus."))
    );

    let table = XidTable::default();
    table.record_kernel(kernel(0, 79, t0, false));
    table.record(0, 79, t0 + Duration::from_secs(1));
    assert_eq!(count(&table, 0, 79), 1);
    assert_eq!(
        table.node_health().recent_xid[0].source,
        XidSource::KernelLog
    );
}

#[test]
fn distinct_errors_are_not_merged() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let table = XidTable::default();
    table.record(0, 79, t0);
    // Another GPU, another code, too far apart, or a second NVML event.
    table.record_kernel(kernel(1, 79, t0, false));
    table.record_kernel(kernel(0, 13, t0, false));
    table.record_kernel(kernel(0, 79, t0 + DEDUP_WINDOW * 2, false));
    table.record(0, 79, t0);
    assert_eq!(count(&table, 1, 79), 1);
    assert_eq!(count(&table, 0, 13), 1);
    // The NVML event at t0 pairs with nothing new: the kernel line of
    // t0 + 2 windows is too far; the second NVML event at t0 pairs with
    // nothing either (same source).
    assert_eq!(count(&table, 0, 79), 3);
    // One kernel line confirms one NVML event, not two.
    let table = XidTable::default();
    table.record(0, 48, t0);
    table.record(0, 48, t0);
    table.record_kernel(kernel(0, 48, t0, false));
    assert_eq!(count(&table, 0, 48), 2);
}

#[test]
fn backlog_is_kept_for_history_but_not_counted() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let table = XidTable::default();
    table.record_kernel(kernel(2, 79, t0, true));
    assert_eq!(count(&table, 2, 79), 0);
    // A live NVML event right after is a new error, not the backlog one.
    table.record(2, 79, t0 + Duration::from_secs(1));
    assert_eq!(count(&table, 2, 79), 1);
    let log = table.node_health();
    assert_eq!(log.recent_xid.len(), 2);
    assert!(log.recent_xid[0].backlog && !log.recent_xid[1].backlog);
    assert!(log.recent_xid[0].seq < log.recent_xid[1].seq);
}

#[test]
fn recent_occurrences_and_sxid_are_bounded_and_counted() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let table = XidTable::default();
    for i in 0..(RECENT_XID as u64 + 10) {
        table.record(0, 13, t0 + Duration::from_secs(i * 100));
    }
    let log = table.node_health();
    assert_eq!(log.recent_xid.len(), RECENT_XID);
    assert_eq!(count(&table, 0, 13), RECENT_XID as u64 + 10);
    table.record_sxid("0000:05:00.0".into(), 20034, t0);
    table.record_sxid("0000:05:00.0".into(), 20034, t0);
    table.record_sxid("0000:06:00.0".into(), 12028, t0);
    table.set_kernel_log_up(Some(true));
    let log = table.node_health();
    assert_eq!(log.kernel_log_up, Some(true));
    let sxid: Vec<_> = log
        .sxid
        .iter()
        .map(|s| (s.switch_pci.as_deref(), s.code, s.count))
        .collect();
    assert_eq!(
        sxid,
        [
            (Some("0000:05:00.0"), Some(20034), 2),
            (Some("0000:06:00.0"), Some(12028), 1)
        ]
    );
}

/// The catalog's codes, for the bounded-table tests.
fn known(code: u64) -> bool {
    crate::health::catalog::lookup(code).is_some()
}

#[test]
fn unknown_codes_past_the_bound_are_counted_together_and_catalog_codes_never_are() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let table = XidTable::default();
    table.set_known_codes(known);
    for (i, code) in (100_000..101_000u64).enumerate() {
        let at = t0 + Duration::from_millis(i as u64);
        if i % 2 == 0 {
            table.record(0, code, at);
        } else {
            table.record_kernel(kernel(0, code, at, false));
        }
    }
    table.record(0, 79, t0 + Duration::from_secs(5));
    table.record(1, 100_500, t0);
    let counts = table.counts();
    let gpu0 = &counts[&0];
    // The first 32 unknown codes on their own, Xid 79 (catalog) too.
    assert_eq!(gpu0.codes.len(), MAX_UNKNOWN_XID_CODES + 1);
    assert_eq!(count(&table, 0, 79), 1);
    assert_eq!(count(&table, 0, 100_031), 1);
    assert_eq!(count(&table, 0, 100_032), 0);
    let other = gpu0.other.expect("an other bucket");
    assert_eq!(other.count, 1000 - MAX_UNKNOWN_XID_CODES as u64);
    assert_eq!(other.last_seen, t0 + Duration::from_millis(999));
    // Another GPU has its own bound.
    assert_eq!(count(&table, 1, 100_500), 1);
    assert!(counts[&1].other.is_none());
    let health = table.node_health();
    assert_eq!(health.xid_folded, 1000 - MAX_UNKNOWN_XID_CODES as u64);
    // Consumers (history rows, the event list) see the codes counted on
    // their own and the first folded one, not the flood.
    assert_eq!(health.recent_xid.len(), MAX_UNKNOWN_XID_CODES + 1 + 1 + 1);
    assert!(health.recent_xid.iter().any(|o| o.code == 79));
}

#[test]
fn a_folded_code_reported_by_both_sources_counts_once() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let table = XidTable::default();
    table.set_known_codes(known);
    for code in 0..MAX_UNKNOWN_XID_CODES as u64 {
        table.record(0, 200_000 + code, t0);
    }
    table.record(0, 300_000, t0);
    table.record_kernel(kernel(0, 300_000, t0 + Duration::from_secs(1), false));
    let counts = table.counts();
    assert_eq!(counts[&0].other.map(|o| o.count), Some(1));
}

#[test]
fn sxid_switches_and_codes_are_bounded() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let table = XidTable::default();
    // 1000 random-looking switches, 100 codes on each of the first ones.
    for switch in 0..1000u32 {
        let address = format!("{:04x}:{:02x}:00.0", switch / 256, switch % 256);
        let codes = if switch < 4 { 100 } else { 1 };
        for code in 0..codes {
            table.record_sxid(address.clone(), 10_000 + code, t0);
        }
    }
    let health = table.node_health();
    let own_switches: std::collections::BTreeSet<_> = health
        .sxid
        .iter()
        .filter_map(|s| s.switch_pci.clone())
        .collect();
    assert_eq!(own_switches.len(), MAX_SXID_SWITCHES);
    assert!(
        health.sxid.len() <= MAX_SXID_SWITCHES * (MAX_SXID_CODES + 1) + 1,
        "{} SXid series",
        health.sxid.len()
    );
    let first = |code: Option<u64>| {
        health
            .sxid
            .iter()
            .find(|s| s.switch_pci.as_deref() == Some("0000:00:00.0") && s.code == code)
            .map(|s| s.count)
    };
    assert_eq!(first(Some(10_000)), Some(1));
    assert_eq!(first(None), Some(100 - MAX_SXID_CODES as u64));
    let other_switches = health
        .sxid
        .iter()
        .find(|s| s.switch_pci.is_none())
        .expect("an other-switches bucket");
    assert_eq!(
        (other_switches.code, other_switches.count),
        (None, 1000 - MAX_SXID_SWITCHES as u64)
    );
    let total: u64 = health.sxid.iter().map(|s| s.count).sum();
    assert_eq!(total, 4 * 100 + 996);
    assert_eq!(
        health.sxid_folded,
        4 * (100 - MAX_SXID_CODES as u64) + (1000 - MAX_SXID_SWITCHES as u64)
    );
}
