//! Health signal tests: NVLink links and counters, fabric info, recovery
//! action and the kernel-log schedule, on the shipped `health` scenario.

use super::*;
use crate::builtin;
use crate::Scenario;

fn health() -> Engine {
    Engine::new(Scenario::parse(builtin::get("health").expect("health"), "health").expect("valid"))
}

#[test]
fn links_go_down_and_count_errors() {
    let e = health();
    let g = e.gpu(1).expect("gpu 1");
    assert_eq!(g.nvlink_active(3, 119.0), Ok(true));
    assert_eq!(g.nvlink_active(3, 120.0), Ok(false));
    assert_eq!(g.nvlink_active(2, 150.0), Ok(true));
    assert_eq!(g.nvlink_active(3, 240.0), Ok(true));
    assert_eq!(g.nvlink_active(18, 1.0), Err(Unavailable::InvalidArgument));
    // CRC flit errors (counter 2) at 5/s from 60 s to 240 s; replays (0) at 1/s.
    assert_eq!(g.nvlink_errors(3, 2, 60.0), Ok(0));
    assert_eq!(g.nvlink_errors(3, 2, 90.0), Ok(150));
    assert_eq!(g.nvlink_errors(3, 2, 1000.0), Ok(900));
    assert_eq!(g.nvlink_errors(3, 0, 90.0), Ok(30));
    assert_eq!(g.nvlink_errors(2, 2, 90.0), Ok(0));
    assert_eq!(
        g.nvlink_errors(3, 5, 90.0),
        Err(Unavailable::InvalidArgument)
    );
    assert_eq!(g.nvlink_version(0, 1.0), Ok(4));
    let remote = g.nvlink_remote(3, 1.0).expect("remote");
    assert_eq!(remote.pci_bus_id, "00000000:05:00.0");
    assert_eq!(
        g.nvlink_remote(17, 1.0).expect("remote").pci_bus_id,
        "00000000:08:00.0"
    );
    // Field values: link count, totals, throughput (KiB) per link and in all.
    assert_eq!(e.field(1, 91, 0, 1.0), Ok(FieldValue::Uint(18)));
    assert_eq!(e.field(1, 38, 0, 90.0), Ok(FieldValue::Ull(150)));
    assert_eq!(e.field(1, 52, 0, 90.0), Ok(FieldValue::Ull(30)));
    assert_eq!(
        e.field(0, 138, 0, 10.0),
        Ok(FieldValue::Ull(10 * 10000 * 1024))
    );
    assert_eq!(
        e.field(0, 139, u32::MAX, 10.0),
        Ok(FieldValue::Ull(18 * 10 * 10000 * 1024))
    );
    assert_eq!(e.field(0, 138, 18, 10.0), Err(Unavailable::NotSupported));
    // The down link carries nothing: 120 s up, then 2 min down, at 300 s.
    assert_eq!(
        e.field(1, 138, 3, 300.0),
        Ok(FieldValue::Ull(180 * 10000 * 1024))
    );
}

#[test]
fn fabric_registers_then_degrades() {
    let e = health();
    let g = e.gpu(2).expect("gpu 2");
    let early = g.fabric(10.0).expect("fabric");
    let not_ready = nvml_wrapper_sys::bindings::nvmlReturn_enum_NVML_ERROR_NOT_READY;
    assert_eq!((early.state, early.status), (2, not_ready)); // IN_PROGRESS
    let ok = g.fabric(60.0).expect("fabric");
    assert_eq!((ok.state, ok.status, ok.clique_id), (3, 0, 1));
    assert_eq!((ok.health_mask, ok.health_summary), (2, 1)); // degraded bw FALSE, healthy
    let degraded = g.fabric(200.0).expect("fabric");
    assert_eq!((degraded.health_mask, degraded.health_summary), (1, 3));
    assert_eq!(degraded.cluster_uuid[..2], [0x5c, 0x1f]);
    // Without [gpu.fabric] (an A100, the demo's GPUs): NOT_SUPPORTED.
    let demo =
        Engine::new(Scenario::parse(builtin::get("demo").expect("demo"), "demo").expect("valid"));
    assert_eq!(
        demo.gpu(0).expect("gpu").fabric(1.0),
        Err(Unavailable::NotSupported)
    );
    assert_eq!(
        demo.gpu(0).expect("gpu").nvlink_active(0, 1.0),
        Err(Unavailable::NotSupported)
    );
}

#[test]
fn recovery_action_changes_after_the_xid() {
    let e = health();
    assert_eq!(e.field(3, 230, 0, 299.0), Ok(FieldValue::Uint(0)));
    assert_eq!(e.field(3, 230, 0, 300.0), Ok(FieldValue::Uint(1)));
    assert_eq!(e.field(0, 230, 0, 300.0), Ok(FieldValue::Uint(0)));
    let golden =
        Engine::new(Scenario::parse(builtin::get("golden").expect("golden"), "g").expect("valid"));
    assert_eq!(golden.field(0, 230, 0, 1.0), Err(Unavailable::NotSupported));
}

#[test]
fn kernel_log_puts_past_lines_first_and_identity_lines_before_each_gpus_first_xid() {
    let e = health();
    let records = e.kernel_log(60.0);
    let lines: Vec<(f64, &str)> = records.iter().map(|r| (r.t, r.message.as_str())).collect();
    let uuid0 = &e.scenario().gpus()[0].uuid;
    assert_eq!(
        lines[0],
        (
            -540.0,
            format!("NVRM: GPU at PCI:0000:18:00: {uuid0}").as_str()
        )
    );
    assert!(lines[1].1.starts_with("NVRM: GPU Board Serial Number: "));
    assert_eq!(
        lines[2],
        (-540.0, "NVRM: Xid (PCI:0000:18:00): 13, pid=2231, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address")
    );
    assert_eq!(lines[5].0, -240.0);
    assert!(lines[5]
        .1
        .starts_with("NVRM: Xid (PCI:0000:3a:00): 48, An uncorrectable double bit error"));
    let sxid = lines.iter().find(|l| l.1.contains("SXid")).expect("sxid");
    assert_eq!(
        sxid,
        &(
            120.0,
            "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 12 LTSSM Fault Up"
        )
    );
    // The Xid fault at 5 min logs its line too, after GPU 3's identity lines.
    let last = &records[records.len() - 1];
    assert_eq!(
        (last.t, last.priority, last.message.as_str()),
        (300.0, 4, "NVRM: Xid (PCI:0000:5d:00): 95, pid='<unknown>', name=<unknown>, Uncontained: FBHUB. RST: Yes, D-RST: No")
    );
    assert!(records[records.len() - 2]
        .message
        .starts_with("NVRM: GPU Board Serial Number"));
    // Each GPU's identity is printed once.
    let identities = records
        .iter()
        .filter(|r| r.message.starts_with("NVRM: GPU at"))
        .count();
    assert_eq!(identities, 4);
}

#[test]
fn data_fields_false_answers_not_supported_but_keeps_the_links() {
    let mut spec = builtin::get("health").expect("health").to_string();
    spec = spec.replacen("[gpu.nvlink]", "[gpu.nvlink]\ndata_fields = false", 1);
    let e = Engine::new(Scenario::parse(&spec, "health").expect("valid"));
    assert_eq!(e.field(0, 138, 0, 10.0), Err(Unavailable::NotSupported));
    assert_eq!(
        e.field(0, 139, u32::MAX, 10.0),
        Err(Unavailable::NotSupported)
    );
    assert_eq!(e.gpu(0).expect("gpu 0").nvlink_active(0, 10.0), Ok(true));
}

/// The field-value forms of link state and error counters answer what the
/// per-link calls answer for the same link and time (one engine): the
/// scoped fields 161/162/163/165 (scopeId = link) and the per-link ids
/// 32.. / 96.. of links 0-11.
#[test]
fn link_fields_answer_as_the_per_link_calls() {
    let e = health();
    let g = e.gpu(1).expect("gpu 1");
    for t in [90.0, 130.0, 1000.0] {
        for link in 0..18 {
            let up = g.nvlink_active(link, t).expect("a link");
            assert_eq!(e.field(1, 165, link, t), Ok(FieldValue::Uint(up.into())));
            for (field, counter) in [(161, 0), (162, 1), (163, 2)] {
                let value = g.nvlink_errors(link, counter, t).expect("a counter");
                assert_eq!(e.field(1, field, link, t), Ok(FieldValue::Ull(value)));
            }
        }
        for link in 0..12u32 {
            let low = link < 6;
            for (base_low, base_high, counter) in
                [(32, 96, 2), (39, 102, 3), (46, 108, 0), (53, 114, 1)]
            {
                let id = if low {
                    base_low + link
                } else {
                    base_high + link - 6
                };
                let value = g.nvlink_errors(link, counter, t).expect("a counter");
                assert_eq!(
                    e.field(1, id, 0, t),
                    Ok(FieldValue::Ull(value)),
                    "field {id}"
                );
            }
        }
    }
    // Past the GPU's links or NVML's 18, as the calls answer.
    assert_eq!(e.field(1, 165, 18, 1.0), Err(Unavailable::InvalidArgument));
    assert_eq!(e.field(1, 163, 18, 1.0), Err(Unavailable::InvalidArgument));
    // Errors counted on link 3 from 60 s: the scoped CRC field sees them.
    assert_eq!(e.field(1, 163, 3, 90.0), Ok(FieldValue::Ull(150)));
}
