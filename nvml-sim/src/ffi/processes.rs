//! Process-list exports: compute, graphics and MPS client processes.

use super::calls::{guard, NvmlResult};
use super::out::out;
use super::state::on_gpu;
use crate::functions::Func;
use crate::scenario::schema::ProcessKind;
use nvml_wrapper_sys::bindings::*;
use std::ffi::c_uint;

const INSUFFICIENT: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;

/// Shared body of the process-list calls (count query protocol).
///
/// # Safety
/// `count` must be null or valid for reads and writes; `infos` null or
/// valid for `*count` entries.
unsafe fn processes(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
    kind: Option<ProcessKind>,
) -> NvmlResult {
    // SAFETY: `count` is null or writable (this function's contract); `out` checks null.
    let count = unsafe { out(count) }?;
    let list = on_gpu(device, |g, t| match kind {
        Some(kind) => g.processes(kind, t),
        None => g.mps_processes(t),
    })?;
    let capacity = *count as usize;
    *count = list.len() as c_uint;
    if list.is_empty() {
        return Ok(());
    }
    if infos.is_null() || capacity < list.len() {
        return Err(INSUFFICIENT);
    }
    for (i, p) in list.iter().enumerate() {
        let info = nvmlProcessInfo_t {
            pid: p.pid,
            usedGpuMemory: p.used_bytes,
            gpuInstanceId: p.gpu_instance.unwrap_or(u32::MAX),
            computeInstanceId: p.gpu_instance.map_or(u32::MAX, |_| 0),
        };
        // SAFETY: `infos` is non-null and holds `capacity` ≥ `list.len()`
        // entries (checked above; the count protocol of the export's
        // contract), so `i` is in bounds.
        unsafe { *infos.add(i) = info };
    }
    Ok(())
}

/// Compute processes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetComputeRunningProcesses_v3, || {
        // SAFETY: the pointers are the export's, under its contract (module doc).
        unsafe { processes(device, count, infos, Some(ProcessKind::Compute)) }
    })
}

/// Graphics processes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetGraphicsRunningProcesses_v3, || {
        // SAFETY: the pointers are the export's, under its contract (module doc).
        unsafe { processes(device, count, infos, Some(ProcessKind::Graphics)) }
    })
}

/// MPS client processes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMPSComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetMPSComputeRunningProcesses_v3, || {
        // SAFETY: the pointers are the export's, under its contract (module doc).
        unsafe { processes(device, count, infos, None) }
    })
}
