//! Health signals through nvml-wrapper (and the raw symbols where it has no
//! method): NVLink links and error counters, GPU fabric info, the recovery
//! action and NVLink fields, and the kernel log the simulator writes.

mod common;

use common::{open, scenario_file, set_time};
use nvml_wrapper::enum_wrappers::nv_link::{Capability, ErrorCounter};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::Nvml;
use nvml_wrapper_sys::bindings::*;
use std::time::{Duration, Instant};

fn nvlink(nvml: &Nvml) {
    set_time(60.0); // time may go back: every reading is a function of t
    let d1 = nvml.device_by_index(1).expect("gpu 1");
    let link = d1.link_wrapper_for(3);
    assert!(link.is_active().expect("state"));
    assert_eq!(link.version().expect("version"), 4);
    assert!(link.has_capability(Capability::P2p).expect("p2p"));
    assert!(!link
        .has_capability(Capability::SysMemAccess)
        .expect("sysmem"));
    assert!(link.has_capability(Capability::ValidLink).expect("valid"));
    let remote = link.remote_pci_info().expect("remote");
    assert_eq!(
        (remote.bus_id.as_str(), remote.pci_device_id),
        ("00000000:05:00.0", 0x22A3_10DE)
    );
    assert_eq!(link.error_counter(ErrorCounter::DlCrcFlit).expect("crc"), 0);
    // CRC flit errors at 5/s and replays at 1/s from 60 s; down 120-240 s.
    set_time(90.0);
    assert_eq!(
        link.error_counter(ErrorCounter::DlCrcFlit).expect("crc"),
        150
    );
    assert_eq!(
        link.error_counter(ErrorCounter::DlReplay).expect("replay"),
        30
    );
    assert_eq!(
        link.error_counter(ErrorCounter::DlCrcData)
            .expect("crc data"),
        0
    );
    set_time(150.0);
    assert!(!link.is_active().expect("down"));
    assert!(d1.link_wrapper_for(2).is_active().expect("others up"));
    set_time(240.0);
    assert!(link.is_active().expect("back up"));
    assert!(matches!(
        d1.link_wrapper_for(18).is_active(),
        Err(NvmlError::InvalidArg)
    ));
    // nvml-wrapper drops the remote type; the raw call answers SWITCH.
    let remote_type = nvml
        .lib()
        .nvmlDeviceGetNvLinkRemoteDeviceType
        .as_ref()
        .expect("symbol");
    let mut kind = 0;
    assert_eq!(unsafe { remote_type(d1.handle(), 3, &mut kind) }, 0);
    assert_eq!(
        kind,
        nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_SWITCH
    );
    // Fields: link count, CRC flit total, data TX KiB (scope 0: link 0).
    let fields = d1
        .field_values_for(&[FieldId(91), FieldId(38), FieldId(138), FieldId(230)])
        .expect("fields");
    let value = |i: usize| format!("{:?}", fields[i].as_ref().expect("field").value);
    assert!(value(0).contains("(18)"), "{}", value(0));
    assert!(value(1).contains("(900)"), "{}", value(1)); // 180 s × 5/s
    assert!(
        value(2).contains(&format!("({})", 240u64 * 10000 * 1024)),
        "{}",
        value(2)
    );
    assert!(value(3).contains("(0)"), "{}", value(3));
    // All links at once: scopeId UINT_MAX (the raw call: nvml-wrapper sends 0).
    let mut raw: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
    raw.fieldId = 139;
    raw.scopeId = u32::MAX;
    let get = nvml
        .lib()
        .nvmlDeviceGetFieldValues
        .as_ref()
        .expect("symbol");
    assert_eq!(unsafe { get(d1.handle(), 1, &mut raw) }, 0);
    assert_eq!(raw.nvmlReturn, 0);
    // 17 links up all 240 s and link 3 up 120 s, at 10000 MiB/s.
    assert_eq!(
        unsafe { raw.value.ullVal },
        (17 * 240 + 120) * 10000 * 1024u64
    );
}

fn fabric_and_recovery(nvml: &Nvml) {
    let d2 = nvml.device_by_index(2).expect("gpu 2");
    let lib = nvml.lib();
    let versioned = lib.nvmlDeviceGetGpuFabricInfoV.as_ref().expect("symbol");
    let v3 = (std::mem::size_of::<nvmlGpuFabricInfo_v3_t>() as u32) | (3 << 24);
    let v2 = (std::mem::size_of::<nvmlGpuFabricInfo_v2_t>() as u32) | (2 << 24);
    let read = |t: f64| {
        set_time(t);
        let mut info: nvmlGpuFabricInfoV_t = unsafe { std::mem::zeroed() };
        info.version = v3;
        assert_eq!(unsafe { versioned(d2.handle(), &mut info) }, 0);
        info
    };
    let early = read(10.0);
    assert_eq!(
        (early.state, early.status),
        (2, nvmlReturn_enum_NVML_ERROR_NOT_READY)
    );
    let done = read(60.0);
    assert_eq!(
        (done.state, done.status, done.cliqueId, done.healthSummary),
        (3, 0, 1, 1)
    );
    assert_eq!(done.healthMask, 2, "degraded bandwidth: FALSE");
    assert_eq!(&done.clusterUuid[..4], &[0x5c, 0x1f, 0x3d, 0x2e]);
    let degraded = read(200.0);
    assert_eq!((degraded.healthMask, degraded.healthSummary), (1, 3));
    // v2 has no healthSummary; other versions are refused.
    let mut small: nvmlGpuFabricInfo_v2_t = unsafe { std::mem::zeroed() };
    small.version = v2;
    assert_eq!(
        unsafe {
            versioned(
                d2.handle(),
                (&mut small as *mut nvmlGpuFabricInfo_v2_t).cast(),
            )
        },
        0
    );
    assert_eq!((small.state, small.healthMask), (3, 1));
    let mut wrong: nvmlGpuFabricInfoV_t = unsafe { std::mem::zeroed() };
    wrong.version = 1 << 24;
    assert_eq!(
        unsafe { versioned(d2.handle(), &mut wrong) },
        nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    );
    let plain = lib.nvmlDeviceGetGpuFabricInfo.as_ref().expect("symbol");
    let mut v1: nvmlGpuFabricInfo_t = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { plain(d2.handle(), &mut v1) }, 0);
    assert_eq!((v1.state, v1.cliqueId), (3, 1));
    // GPU 3 asks for a GPU reset after its Xid 95 at 5 min.
    let d3 = nvml.device_by_index(3).expect("gpu 3");
    let action = |t: f64| {
        set_time(t);
        let fields = d3.field_values_for(&[FieldId(230)]).expect("field 230");
        format!("{:?}", fields[0].as_ref().expect("field").value)
    };
    assert!(action(299.0).contains("(0)"));
    assert!(action(300.0).contains("(1)"));
}

/// One `/dev/kmsg` record: (priority, sequence, µs timestamp, message).
fn record(line: &str) -> (u8, u64, u64, String) {
    let (prefix, message) = line.split_once(';').expect("PRI,SEQ,TS,FLAGS;MESSAGE");
    let parts: Vec<&str> = prefix.split(',').collect();
    assert_eq!((parts.len(), parts[3]), (4, "-"), "{line}");
    (
        parts[0].parse().expect("priority"),
        parts[1].parse().expect("sequence"),
        parts[2].parse().expect("timestamp"),
        message.to_string(),
    )
}

fn records(path: &std::path::Path) -> Vec<(u8, u64, u64, String)> {
    std::fs::read_to_string(path)
        .expect("kernel log")
        .lines()
        .map(record)
        .collect()
}

fn uptime_us() -> u64 {
    let text = std::fs::read_to_string("/proc/uptime").expect("uptime");
    let secs: f64 = text
        .split_whitespace()
        .next()
        .expect("field")
        .parse()
        .expect("number");
    (secs * 1e6) as u64
}

fn kernel_log_at_init_and_later(nvml: &Nvml, path: &std::path::Path, uptime_at_init: u64) {
    // At the first init (t = 60 s): the lines from before the agent started.
    let early = records(path);
    let messages: Vec<&str> = early.iter().map(|r| r.3.as_str()).collect();
    assert_eq!(early.len(), 6, "{messages:#?}");
    assert!(messages[0].starts_with("NVRM: GPU at PCI:0000:18:00: GPU-"));
    assert!(messages[1].starts_with("NVRM: GPU Board Serial Number: "));
    assert!(messages[2].starts_with("NVRM: Xid (PCI:0000:18:00): 13, pid=2231, name=python3, "));
    assert!(messages[5]
        .starts_with("NVRM: Xid (PCI:0000:3a:00): 48, An uncorrectable double bit error"));
    assert_eq!(
        early.iter().map(|r| r.1).collect::<Vec<_>>(),
        (1000..1006).collect::<Vec<_>>()
    );
    assert!(early.iter().all(|r| r.0 == 4));
    // 10 min and 5 min before the init, 5 min apart, in the host's uptime.
    assert_eq!(early[5].2 - early[2].2, 300_000_000);
    let init_ts = early[2].2 + 600_000_000;
    assert!(
        init_ts.abs_diff(uptime_at_init) < 2_000_000,
        "{init_ts} vs {uptime_at_init}"
    );
    // Stepping time writes what fell due: GPU 1's Xid 74 and the SXid at
    // 2 min, the switch line at 4 min, GPU 3's Xid 95 (the fault) at 5 min.
    set_time(310.0);
    let all = records(path);
    let later: Vec<&str> = all[6..].iter().map(|r| r.3.as_str()).collect();
    assert_eq!(later.len(), 8, "{later:#?}");
    assert!(later[0].starts_with("NVRM: GPU at PCI:0000:2a:00"));
    assert!(later[2].starts_with(
        "NVRM: Xid (PCI:0000:2a:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error"
    ));
    assert_eq!(
        later[3],
        "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 12 LTSSM Fault Up"
    );
    assert_eq!(all[9].0, 3, "SXid at the nvswitch driver's error level");
    assert_eq!(later[4], "nvidia-nvswitch0: Link 12 is up again");
    assert!(later[5].starts_with("NVRM: GPU at PCI:0000:5d:00"));
    assert_eq!(later[7], "NVRM: Xid (PCI:0000:5d:00): 95, pid='<unknown>', name=<unknown>, Uncontained: FBHUB. RST: Yes, D-RST: No");
    assert_eq!(all.last().expect("last").1, 1013);
    assert_eq!(
        all[13].2 - all[2].2,
        840_000_000,
        "Xid 95 is 14 min after the Xid 13"
    );
    // A re-initialised library continues the log rather than starting over.
    let again = open("builtin:health", Some("60")).expect("second init");
    drop(again);
    assert_eq!(records(path).len(), 14);
    let _ = nvml;
}

/// With a running clock the writer thread appends lines as they fall due.
/// Runs first: scenario time starts at the process's first nvmlInit, so the
/// line (2 s in, 0.1 s real) falls due after the init, for the thread.
fn kernel_log_follows_a_running_clock() {
    let dir = std::env::temp_dir().join(format!("nvml-sim-kmsg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let log = dir.join("running.kmsg");
    std::env::set_var(nvml_sim::ENV_KMSG, &log);
    std::env::set_var(nvml_sim::ENV_SPEED, "20");
    let scenario = scenario_file(
        "running.toml",
        "[[gpu]]\n[[kernel_log]]\nat = \"2s\"\nkind = \"xid\"\ngpu = 0\ncode = 31\npid = 7\nname = \"a.out\"\n\n[[kernel_log]]\nat = \"1h\"\nkind = \"line\"\nmessage = \"late\"\n",
    );
    let nvml = open(scenario.to_str().expect("utf-8"), None).expect("init");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        seen = records(&log);
        if seen.len() == 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        seen.len(),
        3,
        "the Xid and its GPU identity lines: {seen:?}"
    );
    assert!(seen[2]
        .3
        .starts_with("NVRM: Xid (PCI:0000:18:00): 31, pid=7, name=a.out, "));
    drop(nvml);
    std::env::remove_var(nvml_sim::ENV_SPEED);
    std::env::remove_var(nvml_sim::ENV_KMSG);
    // The next scenario has no kernel log: the old one's late line is not
    // written when time passes it.
    let other = open("builtin:golden", Some("10")).expect("golden");
    set_time(7200.0);
    assert_eq!(records(&log).len(), 3, "{:?}", records(&log));
    drop(other);
}

#[test]
fn health_signals_through_nvml_wrapper() {
    kernel_log_follows_a_running_clock();
    let dir = std::env::temp_dir().join(format!("nvml-sim-health-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let log = dir.join("kmsg");
    std::fs::write(&log, "stale line from an earlier run\n").expect("write");
    std::env::set_var(nvml_sim::ENV_KMSG, &log);
    let uptime_at_init = uptime_us();
    let nvml = open("builtin:health", Some("60")).expect("init health");
    kernel_log_at_init_and_later(&nvml, &log, uptime_at_init);
    nvlink(&nvml);
    fabric_and_recovery(&nvml);
    // Without [gpu.nvlink] / [gpu.fabric] (the golden A100): NOT_SUPPORTED.
    drop(nvml);
    std::env::remove_var(nvml_sim::ENV_KMSG);
    let golden = open("builtin:golden", Some("10")).expect("golden");
    let d0 = golden.device_by_index(0).expect("gpu 0");
    assert!(matches!(
        d0.link_wrapper_for(0).is_active(),
        Err(NvmlError::NotSupported)
    ));
    let plain = golden
        .lib()
        .nvmlDeviceGetGpuFabricInfo
        .as_ref()
        .expect("symbol");
    let mut info: nvmlGpuFabricInfo_t = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { plain(d0.handle(), &mut info) },
        nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED
    );
    drop(golden);
}
