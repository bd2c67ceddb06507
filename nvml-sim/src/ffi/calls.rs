//! Per-function call counters (one atomic each) and the panic-safe call guard.

use crate::functions::{Func, NAMES};
use nvml_wrapper_sys::bindings::*;
use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

/// Result of an FFI body: `Err` carries the NVML error code.
pub(crate) type NvmlResult = Result<(), nvmlReturn_t>;

static COUNTS: [AtomicU64; NAMES.len()] = [const { AtomicU64::new(0) }; NAMES.len()];

/// Wall-clock µs each function takes (the scenario's `[latency]`; 0: none).
static LATENCY_US: [AtomicU64; NAMES.len()] = [const { AtomicU64::new(0) }; NAMES.len()];

/// Sets the per-function latencies of the scenario being run (names were
/// checked when the scenario was parsed); functions not named take none.
pub(crate) fn set_latencies(latency_us: &std::collections::BTreeMap<String, u64>) {
    for (i, name) in NAMES.iter().enumerate() {
        let us = latency_us.get(*name).copied().unwrap_or(0);
        LATENCY_US[i].store(us, Ordering::Relaxed);
    }
}

/// Takes `us` microseconds of wall-clock time, as a real driver's call
/// does. Short waits spin: a sleep costs at least the kernel's timer slack
/// (50 µs), which would make a 6 µs call ten times too slow.
pub(crate) fn take_time(us: u64) {
    const SPIN_BELOW_US: u64 = 200;
    let wait = std::time::Duration::from_micros(us);
    if us == 0 {
    } else if us < SPIN_BELOW_US {
        let start = std::time::Instant::now();
        while start.elapsed() < wait {
            std::hint::spin_loop();
        }
    } else {
        std::thread::sleep(wait);
    }
}

/// Counts the call, runs `body` and turns its result (or a panic) into an NVML code.
pub(crate) fn guard(func: Func, body: impl FnOnce() -> NvmlResult) -> nvmlReturn_t {
    COUNTS[func as usize].fetch_add(1, Ordering::Relaxed);
    take_time(LATENCY_US[func as usize].load(Ordering::Relaxed));
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => nvmlReturn_enum_NVML_SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => nvmlReturn_enum_NVML_ERROR_UNKNOWN,
    }
}

/// Counts a call of `func` whose body cannot fail (nvmlErrorString).
pub(crate) fn count(func: Func) {
    COUNTS[func as usize].fetch_add(1, Ordering::Relaxed);
}

/// Calls of the NVML function `name` since load or the last reset (0 for unknown names).
#[no_mangle]
pub unsafe extern "C" fn nvmlSimCallCount(name: *const c_char) -> u64 {
    catch_unwind(|| {
        if name.is_null() {
            return 0;
        }
        // SAFETY: `name` is non-null (checked above) and NUL-terminated (the
        // export's contract), read only during this call.
        let name = unsafe { CStr::from_ptr(name) }.to_str().unwrap_or("");
        NAMES
            .iter()
            .position(|n| *n == name)
            .map_or(0, |i| COUNTS[i].load(Ordering::Relaxed))
    })
    .unwrap_or(0)
}

/// Calls of all NVML functions since load or the last reset (nvmlSim* excluded).
#[no_mangle]
pub extern "C" fn nvmlSimTotalCalls() -> u64 {
    catch_unwind(|| COUNTS.iter().map(|c| c.load(Ordering::Relaxed)).sum()).unwrap_or(0)
}

/// Resets every call counter to zero.
#[no_mangle]
pub extern "C" fn nvmlSimResetCallCounts() {
    let _ = catch_unwind(|| COUNTS.iter().for_each(|c| c.store(0, Ordering::Relaxed)));
}
