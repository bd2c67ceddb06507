//! NVLink traffic on GPUs without GPM (issue 12): the per-link data
//! counters (NVML fields 138/139) exported as
//! `gpuwatch_nvlink_data_bytes_total`, on `tests/scenarios/nvlink-pre-hopper.toml`
//! with time frozen: exact on the A100, absent on the H100 (GPM gives its
//! NVLink figures), on the A100 whose fields answer NOT_SUPPORTED and on the
//! PCIe A100 without NVLink (with dcgm's NVLink totals); and what reading
//! them costs the slow tier, counted by the simulator.

mod common;

use std::time::Duration;

use common::{fixture, Agent};
use gpuwatch::gpu::nvml::Driver;
use gpuwatch::sampler::procnames::ProcessNames;
use gpuwatch::sampler::reader::{NodeReader, Tiers};

const SCENARIO: &str = "scenarios/nvlink-pre-hopper.toml";
const FAMILY: &str = "gpuwatch_nvlink_data_bytes_total";

/// KiB the simulator counts in 10 s at `mib_s` MiB/s, in bytes.
fn bytes_in_10s(mib_s: u64) -> f64 {
    (10 * mib_s * 1024 * 1024) as f64
}

#[test]
fn link_data_counters_are_exported_where_gpm_is_not() {
    let scenario = fixture(SCENARIO);
    let agent = Agent::start(
        scenario.to_str().expect("utf-8 path"),
        &[
            "--no-history",
            "--metrics-compat",
            "dcgm",
            "--metrics-detail",
            "nvlink_links",
        ],
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    let m = agent.wait_for("a slow tick", Duration::from_secs(20), |m| {
        m.find("gpuwatch_nvlink_up", &[]).len() == 12
    });
    // GPU 0 (A100, no GPM): every link, both directions, exact.
    assert_eq!(m.find(FAMILY, &[("gpu", "0")]).len(), 8);
    for link in ["0", "1", "2", "3"] {
        let value = |direction| {
            m.value(
                FAMILY,
                &[("gpu", "0"), ("link", link), ("direction", direction)],
            )
        };
        assert_eq!(value("tx"), Some(bytes_in_10s(100)), "link {link} tx");
        assert_eq!(value("rx"), Some(bytes_in_10s(300)), "link {link} rx");
    }
    // The default's per-GPU sum: 4 links at 100 MiB/s tx, 300 rx.
    assert_eq!(
        m.value(
            "gpuwatch_nvlink_gpu_data_bytes_total",
            &[("gpu", "0"), ("direction", "tx")]
        ),
        Some(4.0 * bytes_in_10s(100))
    );
    // GPU 1 (H100): GPM's NVLink figures win; the counters are not read.
    assert!(m.find(FAMILY, &[("gpu", "1")]).is_empty());
    assert_eq!(
        m.value("gpuwatch_gpm_supported", &[("gpu", "1")]),
        Some(1.0)
    );
    // GPU 2 (A100, fields 138/139 NOT_SUPPORTED): absent, not 0, while its
    // links are reported.
    assert!(m.find(FAMILY, &[("gpu", "2")]).is_empty());
    assert_eq!(m.find("gpuwatch_nvlink_up", &[("gpu", "2")]).len(), 4);
    assert_eq!(
        m.value(
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            &[("gpu", "0")]
        ),
        Some(0.0)
    );
    // GPU 3 (no NVLink): no link family at all, dcgm's totals included.
    for family in [
        FAMILY,
        "gpuwatch_nvlink_up",
        "gpuwatch_nvlink_errors_total",
        "gpuwatch_nvlink_links_down",
        "gpuwatch_nvlink_gpu_errors_total",
        "gpuwatch_nvlink_gpu_data_bytes_total",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    ] {
        assert!(m.find(family, &[("gpu", "3")]).is_empty(), "{family}");
    }
    assert_eq!(m.value("gpuwatch_gpu_up", &[("gpu", "3")]), Some(1.0));
}

/// Calls of `nvmlDeviceGetFieldValues` so far, counted by the simulator.
struct FieldCalls {
    _lib: libloading::Library,
    calls: unsafe extern "C" fn(*const std::ffi::c_char) -> u64,
}

impl FieldCalls {
    fn open(path: &std::path::Path) -> FieldCalls {
        // SAFETY: the simulator exports `nvmlSimCallCount(name) -> u64`;
        // loading the library again returns the loaded instance.
        unsafe {
            let lib = libloading::Library::new(path).expect("load the simulator library");
            let calls = *lib
                .get::<unsafe extern "C" fn(*const std::ffi::c_char) -> u64>(b"nvmlSimCallCount\0")
                .expect("nvmlSimCallCount is exported");
            FieldCalls { _lib: lib, calls }
        }
    }

    fn now(&self) -> u64 {
        // SAFETY: a NUL-terminated name; the function only reads it.
        unsafe { (self.calls)(c"nvmlDeviceGetFieldValues".as_ptr()) }
    }
}

/// The counters ride in the slow tier's one field-value batch (issue 23:
/// recovery action, each link's state and error counters, PCIe replays and
/// ECC): the A100 that reads them makes as many field-value calls per slow
/// tick as the H100 that does not and the A100 without NVLink — 1 each —,
/// no GPU asks a link's state or error counters with a call of its own
/// (links 0-11 all have fields), and the snapshot holds the exact counters.
#[test]
fn link_counters_cost_no_extra_call() {
    std::env::set_var("GPUWATCH_SIM_TIME", "10");
    std::env::set_var(nvml_sim::ENV_SCENARIO, fixture(SCENARIO));
    let library = gpuwatch::sim::locate_library().expect("the simulator library is built");
    let driver = Driver::open(Some(&library)).expect("open the simulator");
    let calls = FieldCalls::open(&library);
    let mut reader = NodeReader::new(&driver, "test".into(), ProcessNames::new(None));
    reader.tick(Tiers::ALL, None);
    let before = calls.now();
    reader.tick(Tiers::default(), None);
    let fast = calls.now() - before;
    let before = calls.now();
    let link_calls = || {
        common::sim_calls(&library, c"nvmlDeviceGetNvLinkState")
            + common::sim_calls(&library, c"nvmlDeviceGetNvLinkErrorCounter")
    };
    let links_before = link_calls();
    let snapshot = reader.tick(Tiers::ALL, None);
    let slow = calls.now() - before - fast;
    assert_eq!(fast, 4, "the fast tier's one batch per GPU is untouched");
    assert_eq!(slow, 4, "field-value calls of the slow tier, 4 GPUs");
    assert_eq!(link_calls(), links_before, "link calls of the slow tier");
    // Every link's state and error counters are there all the same.
    for gpu in [0, 1, 2] {
        let links = &snapshot.gpus[gpu].health.links.nvlink;
        assert_eq!(links.len(), 4, "GPU {gpu}");
        assert!(
            links.iter().all(|l| l.up && l.errors.len() == 4),
            "GPU {gpu}"
        );
    }
    assert!(snapshot.gpus[3].health.links.nvlink.is_empty());
    let traffic = &snapshot.gpus[0].health.nvlink_traffic;
    assert_eq!(traffic.len(), 4);
    assert!(traffic
        .iter()
        .all(|t| t.tx_bytes == Some(10 * 100 * 1024 * 1024)
            && t.rx_bytes == Some(10 * 300 * 1024 * 1024)));
    assert!(snapshot.gpus[1].health.nvlink_traffic.is_empty());
    assert!(snapshot.gpus[2].health.nvlink_traffic.is_empty());
}
