//! The NVML call budget (issue 23 §2): on the built-in `h100x8` scenario
//! (8 GPUs, 18 NVLinks each, GPM, ~10 processes per GPU) at the default
//! tiers (fast 1 s, processes 5 s, slow 30 s), the agent makes at most 8 NVML
//! calls per GPU per second, GPM included, averaged over the tiers.
//!
//! Clocks and clock-event reasons are read every 5 s and GPM every 2 s
//! (`Cadence::for_interval`), identity facts once per handle, each link's
//! state and error counters in the slow tier's field-value batch, and the
//! process lists into buffers sized from the last answer.
//!
//! Counted where the calls land: the agent's own reader in process on the
//! simulator, driven on the sampler's schedule, every NVML export counted by
//! the simulator (`nvmlSimTotalCalls`). Time is not a factor: the count of
//! a tick does not depend on how long it takes.

mod common;

use gpuwatch::gpu::nvml::Driver;
use gpuwatch::sampler::procnames::ProcessNames;
use gpuwatch::sampler::reader::{Cadence, NodeReader, Tiers};
use std::time::Duration;

/// The defaults of `[sampler]`, in fast ticks (see docs/configuration.md).
const SLOW_EVERY: u64 = 30;
const PROCESSES_EVERY: u64 = 5;
/// Seconds counted: two slow periods, so each tier's share is exact.
const SECONDS: u64 = 2 * SLOW_EVERY;
/// The Xid thread's one `nvmlEventSetWait_v2` a second for the whole node
/// (src/sampler/xid.rs, `WAIT_MS`): it runs on its own thread, not in the
/// reader, so it is added here rather than counted.
const XID_WAITS_PER_SECOND: u64 = 1;

/// Every NVML call the simulator answered so far, and per function.
struct Calls {
    _lib: libloading::Library,
    total: unsafe extern "C" fn() -> u64,
    by_name: unsafe extern "C" fn(*const std::ffi::c_char) -> u64,
}

impl Calls {
    fn open(path: &std::path::Path) -> Calls {
        // SAFETY: the simulator exports both functions with these
        // signatures; loading the library again returns the loaded instance.
        unsafe {
            let lib = libloading::Library::new(path).expect("load the simulator library");
            let total = *lib
                .get::<unsafe extern "C" fn() -> u64>(b"nvmlSimTotalCalls\0")
                .expect("nvmlSimTotalCalls is exported");
            let by_name = *lib
                .get::<unsafe extern "C" fn(*const std::ffi::c_char) -> u64>(b"nvmlSimCallCount\0")
                .expect("nvmlSimCallCount is exported");
            Calls {
                _lib: lib,
                total,
                by_name,
            }
        }
    }

    fn total(&self) -> u64 {
        // SAFETY: a plain counter read.
        unsafe { (self.total)() }
    }

    fn of(&self, name: &std::ffi::CStr) -> u64 {
        // SAFETY: a NUL-terminated name; the function only reads it.
        unsafe { (self.by_name)(name.as_ptr()) }
    }
}

#[test]
fn h100x8_costs_at_most_8_nvml_calls_per_gpu_per_second() {
    std::env::set_var("GPUWATCH_SIM_TIME", "10");
    std::env::set_var(gpuwatch::sim::ENV_SCENARIO, "builtin:h100x8");
    let library = gpuwatch::sim::locate_library().expect("the simulator library is built");
    let driver = Driver::open(Some(&library)).expect("open the simulator");
    let calls = Calls::open(&library);
    let mut reader = NodeReader::new(&driver, "test".into(), ProcessNames::new(None));
    // The sampler's cadence at the default 1 s tick.
    reader.set_cadence(Cadence::for_interval(Duration::from_secs(1)));
    let gpus = reader.indices().len() as u64;
    assert_eq!(gpus, 8);
    // The first tick reads every tier, as the sampler's does.
    let first = reader.tick(Tiers::ALL, None);
    assert!(first.gpus.iter().all(|g| g.is_up()));
    assert_eq!(first.gpus[0].health.links.nvlink.len(), 18);

    let before = calls.total();
    let clock_calls = calls.of(c"nvmlDeviceGetClockInfo");
    let link_error_calls = calls.of(c"nvmlDeviceGetNvLinkErrorCounter");
    let process_calls = || {
        calls.of(c"nvmlDeviceGetComputeRunningProcesses_v3")
            + calls.of(c"nvmlDeviceGetProcessUtilization")
    };
    let process_calls_before = process_calls();
    let mut last = first;
    for second in 1..=SECONDS {
        let tiers = Tiers {
            slow: second % SLOW_EVERY == 0,
            processes: second % PROCESSES_EVERY == 0,
        };
        if tiers.slow {
            // The sampler's check for GPUs that came or went.
            assert!(!reader.device_count_changed());
        }
        last = reader.tick(tiers, None);
    }
    let reader_calls = calls.total() - before;
    let total = reader_calls + XID_WAITS_PER_SECOND * SECONDS;
    let per_gpu_second = total as f64 / (gpus * SECONDS) as f64;
    eprintln!(
        "h100x8: {total} NVML calls in {SECONDS} s for {gpus} GPUs \
         ({reader_calls} by the reader): {per_gpu_second:.2} per GPU per second"
    );
    assert!(
        per_gpu_second <= 8.0,
        "{per_gpu_second:.2} NVML calls per GPU per second, over the budget of 8"
    );
    // The clocks are read every 5 s (4 calls), the link state and error
    // counters ride in the slow tier's field-value batch but for the CRC
    // data counter of links 12-17, which has no field (6 calls).
    assert_eq!(
        calls.of(c"nvmlDeviceGetClockInfo") - clock_calls,
        gpus * 4 * SECONDS / 5
    );
    assert_eq!(
        calls.of(c"nvmlDeviceGetNvLinkErrorCounter") - link_error_calls,
        gpus * 6 * (SECONDS / SLOW_EVERY)
    );
    // The process lists and their utilization: one call each per GPU and
    // process tick, into buffers sized from the last answer.
    assert_eq!(
        process_calls() - process_calls_before,
        gpus * 2 * (SECONDS / PROCESSES_EVERY)
    );
    // And the readings are all there.
    let gpu = &last.gpus[0];
    assert!(gpu.readings.sm_clock_hertz.is_some());
    assert!(gpu.readings.memory_clock_hertz.is_some());
    assert!(gpu.readings.graphics_clock_hertz.is_some());
    assert!(gpu.readings.video_clock_hertz.is_some());
    assert!(gpu
        .health
        .links
        .nvlink
        .iter()
        .all(|l| l.up && l.errors.len() == 4));
    assert!(gpu.gpm.gpu.is_some());
    assert!(gpu.processes.len() >= 8);
    assert!(gpu
        .processes
        .iter()
        .all(|p| p.used_memory_bytes.is_some() && p.sm_utilization_ratio.is_some()));
}
