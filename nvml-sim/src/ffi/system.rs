//! Library lifecycle and system-level queries.

use super::calls::{count, guard};
use super::out::{out, write_str};
use super::{lifecycle, state};
use crate::functions::Func;
use nvml_wrapper_sys::bindings::*;
use std::ffi::{c_char, c_int, c_uint, CStr};

/// Initializes the library (reference counted); loads the scenario on the first call.
#[no_mangle]
pub unsafe extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    guard(Func::nvmlInit_v2, lifecycle::init)
}

/// Same as nvmlInit_v2 (flags are accepted and ignored).
#[no_mangle]
pub unsafe extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    guard(Func::nvmlInitWithFlags, lifecycle::init)
}

/// Drops one init reference; the scenario is unloaded at zero.
#[no_mangle]
pub unsafe extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    guard(Func::nvmlShutdown, lifecycle::shutdown)
}

/// Static description of a return code.
#[no_mangle]
pub unsafe extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    count(Func::nvmlErrorString);
    std::panic::catch_unwind(|| crate::codes::message(result).as_ptr())
        .unwrap_or(c"Unknown Error".as_ptr())
}

/// Driver version string from the scenario.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlSystemGetDriverVersion, || {
        let rt = state::runtime()?;
        // SAFETY: `version` is null or valid for `length` bytes of writes (the export's contract, module doc).
        unsafe { write_str(version, length, rt.engine.scenario().driver_version()) }
    })
}

/// NVML version string from the scenario.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlSystemGetNVMLVersion, || {
        let rt = state::runtime()?;
        // SAFETY: `version` is null or valid for `length` bytes of writes (the export's contract, module doc).
        unsafe { write_str(version, length, &rt.engine.scenario().nvml_version) }
    })
}

/// Shared body of the CUDA driver version calls.
///
/// # Safety
/// `version` must be null or valid for writes of a `c_int`.
unsafe fn cuda_version(func: Func, version: *mut c_int) -> nvmlReturn_t {
    guard(func, || {
        let rt = state::runtime()?;
        // SAFETY: `version` is null or writable (this function's contract); `out` checks null.
        *unsafe { out(version) }? = rt.engine.scenario().cuda_driver_version;
        Ok(())
    })
}

/// CUDA driver version (e.g. 12040).
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> nvmlReturn_t {
    // SAFETY: `version` is null or writable (the export's contract, module doc).
    unsafe { cuda_version(Func::nvmlSystemGetCudaDriverVersion, version) }
}

/// CUDA driver version (e.g. 12040).
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> nvmlReturn_t {
    // SAFETY: `version` is null or writable (the export's contract, module doc).
    unsafe { cuda_version(Func::nvmlSystemGetCudaDriverVersion_v2, version) }
}

/// Name of a simulated process (NOT_FOUND for other pids).
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetProcessName(
    pid: c_uint,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlSystemGetProcessName, || {
        let rt = state::runtime()?;
        let found = rt
            .engine
            .process_name(pid, rt.clock.now())
            .ok_or(nvmlReturn_enum_NVML_ERROR_NOT_FOUND)?;
        // SAFETY: `name` is null or valid for `length` bytes of writes (the export's contract, module doc).
        unsafe { write_str(name, length, &found) }
    })
}

/// Number of simulated GPUs.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(device_count: *mut c_uint) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetCount_v2, || {
        let rt = state::runtime()?;
        // SAFETY: `device_count` is null or writable (the export's contract, module doc); `out` checks null.
        *unsafe { out(device_count) }? = rt.engine.gpu_count() as c_uint;
        Ok(())
    })
}

/// Handle of GPU `index`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetHandleByIndex_v2, || {
        let rt = state::runtime()?;
        // SAFETY: `device` is null or writable (the export's contract, module doc); `out` checks null.
        let slot = unsafe { out(device) }?;
        if index as usize >= rt.engine.gpu_count() {
            return Err(nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT);
        }
        *slot = state::handle(index as usize);
        Ok(())
    })
}

/// Handle of the GPU with this UUID (NOT_FOUND otherwise).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetHandleByUUID, || {
        let rt = state::runtime()?;
        // SAFETY: `device` is null or writable (the export's contract, module doc); `out` checks null.
        let slot = unsafe { out(device) }?;
        if uuid.is_null() {
            return Err(nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT);
        }
        // SAFETY: `uuid` is non-null (checked above) and NUL-terminated (the
        // export's contract), read only during this call.
        let text = unsafe { CStr::from_ptr(uuid) }
            .to_str()
            .map_err(|_| nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT)?;
        let index = rt
            .engine
            .find_uuid(text)
            .ok_or(nvmlReturn_enum_NVML_ERROR_NOT_FOUND)?;
        *slot = state::handle(index);
        Ok(())
    })
}
