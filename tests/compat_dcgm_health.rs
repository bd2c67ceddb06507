//! dcgm-exporter's names for health fields (`--metrics-compat dcgm`): the
//! Xid and NVLink error families are those dcgm-exporter's
//! `etc/default-counters.csv` lists (name, type, HELP; a copy in
//! tests/fixtures/peers/), and the NVLink error totals are the sums over a
//! GPU's links of gpuwatch's per-link counters, on the health scenario
//! where GPU 1's link 3 counts CRC errors.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{fixture, Agent};

/// dcgm-exporter's fields: name → (type, help), commented-out ones too
/// (the NVLink error fields are off by default there, but named and typed
/// all the same).
fn dcgm_csv() -> BTreeMap<String, (String, String)> {
    let path = fixture("fixtures/peers/dcgm-exporter-default-counters.csv");
    let text = std::fs::read_to_string(&path).expect("dcgm-exporter's default-counters.csv");
    text.lines()
        .map(|l| l.trim_start_matches('#').trim())
        .filter(|l| l.starts_with("DCGM_FI_"))
        .filter_map(|l| {
            let mut cells = l.splitn(3, ',').map(str::trim);
            Some((
                cells.next()?.to_string(),
                (cells.next()?.to_string(), cells.next()?.to_string()),
            ))
        })
        .collect()
}

#[test]
fn dcgm_health_fields_are_dcgm_exporters_and_nvlink_totals_sum_the_links() {
    let agent = Agent::start(
        "health",
        &[
            "--metrics-compat",
            "dcgm",
            "--metrics-detail",
            "nvlink_links",
        ],
        &[("GPUWATCH_SIM_START", "125")],
    );
    let m = agent.wait_for("GPU 1's NVLink CRC errors", Duration::from_secs(60), |m| {
        m.value(
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            &[("gpu", "1")],
        )
        .is_some_and(|v| v > 0.0)
    });
    let csv = dcgm_csv();
    let health_fields = [
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    ];
    for name in health_fields {
        let kind = m
            .types
            .get(name)
            .unwrap_or_else(|| panic!("{name} is exported"));
        let (csv_kind, csv_help) = csv
            .get(name)
            .unwrap_or_else(|| panic!("{name} is not one of dcgm-exporter's fields"));
        // dcgm-exporter's counters are exported untyped (see
        // src/exporter/compat/dcgm.rs).
        let want = if csv_kind == "counter" {
            "unknown"
        } else {
            csv_kind.as_str()
        };
        assert!(
            kind == want || (want == "unknown" && kind == "untyped"),
            "{name}: {kind} vs {csv_kind}"
        );
        assert!(
            m.text.contains(&format!("# HELP {name} {csv_help}\n")),
            "{name}: HELP is dcgm-exporter's \"{csv_help}\""
        );
    }
    for (field, kind) in [
        ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "crc_flit"),
        ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "crc_data"),
        ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "replay"),
        ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "recovery"),
    ] {
        for gpu in ["0", "1"] {
            let links: f64 = m
                .find(
                    "gpuwatch_nvlink_errors_total",
                    &[("gpu", gpu), ("type", kind)],
                )
                .iter()
                .map(|s| s.value)
                .sum();
            assert_eq!(
                m.value(field, &[("gpu", gpu)]),
                Some(links),
                "{field} on GPU {gpu}"
            );
        }
    }
    // No Xid yet on GPU 0: dcgm-exporter's 0.
    assert_eq!(
        m.value("DCGM_FI_DEV_XID_ERRORS", &[("gpu", "0")]),
        Some(0.0)
    );
}
