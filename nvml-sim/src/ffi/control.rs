//! Test controls beyond NVML (not counted as NVML calls).

use super::state;
use nvml_wrapper_sys::bindings::*;
use std::panic::catch_unwind;

/// Sets scenario time to `seconds` and holds it there until the next call
/// or the next scenario load, so tests can take GPM samples (or read
/// counters) at exact times; writes the kernel-log records now due.
/// UNINITIALIZED before nvmlInit; INVALID_ARGUMENT for a negative or
/// non-finite time.
#[no_mangle]
pub extern "C" fn nvmlSimSetTime(seconds: f64) -> nvmlReturn_t {
    catch_unwind(|| {
        if let Err(code) = state::runtime() {
            return code;
        }
        if !(seconds.is_finite() && seconds >= 0.0) {
            return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
        }
        crate::clock::set_time(Some(seconds));
        super::kmsg::write_due(seconds);
        nvmlReturn_enum_NVML_SUCCESS
    })
    .unwrap_or(nvmlReturn_enum_NVML_ERROR_UNKNOWN)
}
