//! Measuring helpers shared by the benchmarks.

#![allow(dead_code)] // Each benchmark uses its own subset.

use std::time::Duration;

/// CPU time this thread has used (CLOCK_THREAD_CPUTIME_ID): what a piece of
/// work costs, whatever else the machine is doing.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The median (sorts `values`).
pub fn median(values: &mut [f64]) -> f64 {
    percentile(values, 0.5)
}

/// The `p` quantile by nearest rank (sorts `values`).
pub fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() as f64 - 1.0) * p).round() as usize]
}

/// (smoke, quick): `cargo bench` passes `--bench`; `cargo test --all-targets`
/// runs benchmarks without it, as smoke tests with a few rounds so they
/// cannot rot (said on stdout: their figures mean nothing). `-- --quick`
/// asks for a shorter real run; a smoke run is quick too.
pub fn run_size() -> (bool, bool) {
    let smoke = !std::env::args().any(|a| a == "--bench");
    if smoke {
        println!("smoke run (cargo test): figures below are not representative; use `cargo bench`");
    }
    (smoke, smoke || std::env::args().any(|a| a == "--quick"))
}

/// The simulator's own call counter (`nvmlSimTotalCalls`), through the
/// same loaded library: NVML calls per tick, counted where they land.
pub struct CallCounter {
    _lib: libloading::Library,
    total: unsafe extern "C" fn() -> u64,
}

impl CallCounter {
    pub fn open(path: &std::path::Path) -> CallCounter {
        // SAFETY: the simulator library exports `nvmlSimTotalCalls() -> u64`;
        // loading it again returns the already-loaded instance.
        unsafe {
            let lib = libloading::Library::new(path).expect("load the simulator library");
            let total = *lib
                .get::<unsafe extern "C" fn() -> u64>(b"nvmlSimTotalCalls\0")
                .expect("nvmlSimTotalCalls is exported");
            CallCounter { _lib: lib, total }
        }
    }

    pub fn total(&self) -> u64 {
        // SAFETY: a plain counter read with no arguments.
        unsafe { (self.total)() }
    }
}

/// Ticks to time: few for a smoke run, some for `--quick`, else 3 000.
pub fn tick_rounds(smoke: bool, quick: bool) -> usize {
    if smoke {
        20
    } else if quick {
        300
    } else {
        3000
    }
}

/// The simulator library playing `scenario`, NVML opened on it, and its call
/// counter: the setup of the benchmarks that tick a `NodeReader`.
pub fn simulated(scenario: &str) -> (std::path::PathBuf, gpuwatch::gpu::nvml::Driver, CallCounter) {
    std::env::set_var(nvml_sim::ENV_SCENARIO, scenario);
    let library = gpuwatch::sim::locate_library()
        .expect("build the simulator first: cargo build --workspace --release");
    let driver = gpuwatch::gpu::nvml::Driver::open(Some(&library)).expect("open the simulator");
    let counter = CallCounter::open(&library);
    (library, driver, counter)
}
