//! What the simulator's FFI tests share: the built library, opening it
//! through nvml-wrapper with a scenario, and stepping scenario time.
#![allow(dead_code)] // each test binary uses a part

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use std::path::PathBuf;

/// The built simulator library (next to the test binary).
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps dir");
    let lib = deps.join(nvml_sim::LIBRARY_FILE_NAME);
    assert!(lib.exists(), "{} not built", lib.display());
    lib
}

/// Initialises NVML from the simulator with `scenario` (a path or
/// `builtin:NAME`), time frozen at `time` seconds when given.
pub fn open(scenario: &str, time: Option<&str>) -> Result<Nvml, NvmlError> {
    std::env::set_var(nvml_sim::ENV_SCENARIO, scenario);
    match time {
        Some(t) => std::env::set_var(nvml_sim::ENV_TIME, t),
        None => std::env::remove_var(nvml_sim::ENV_TIME),
    }
    Nvml::builder().lib_path(library().as_os_str()).init()
}

/// The loaded simulator library, for its nvmlSim* test helpers (dlopen
/// hands back the copy nvml-wrapper loaded).
pub fn helpers() -> libloading::Library {
    unsafe { libloading::Library::new(library()) }.expect("load the simulator")
}

/// Sets scenario time (`nvmlSimSetTime`); panics unless it succeeds.
pub fn set_time(seconds: f64) {
    let lib = helpers();
    let set: libloading::Symbol<unsafe extern "C" fn(f64) -> u32> =
        unsafe { lib.get(b"nvmlSimSetTime") }.expect("nvmlSimSetTime");
    assert_eq!(unsafe { set(seconds) }, 0, "nvmlSimSetTime({seconds})");
}

/// Calls of NVML function `name` so far.
pub fn call_count(name: &std::ffi::CStr) -> u64 {
    let lib = helpers();
    let count: libloading::Symbol<unsafe extern "C" fn(*const std::ffi::c_char) -> u64> =
        unsafe { lib.get(b"nvmlSimCallCount") }.expect("nvmlSimCallCount");
    unsafe { count(name.as_ptr()) }
}

/// Writes `text` to a scenario file under a directory of this process.
pub fn scenario_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nvml-sim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write scenario");
    path
}
