//! Exports for GPU sharing: per-process utilization and MIG device handles.
//!
//! MIG device handles point into their own static table (8 per GPU), apart
//! from the GPU handles, so every other export rejects them as foreign;
//! `nvmlDeviceGetMemoryInfo_v2` and `nvmlDeviceGetUUID` ask [`mig_memory`]
//! and [`mig_uuid`] first.

use super::calls::guard;
use super::out::{epoch_us, out};
use super::state::{self, on_gpu, MAX_DEVICES};
use crate::engine::MigInstance;
use crate::functions::Func;
use nvml_wrapper_sys::bindings::*;
use std::ffi::{c_uint, c_ulonglong};

/// MIG devices per GPU the simulator can hand out.
const MIG_PER_GPU: usize = 8;

static MIG_SLOTS: [u8; MAX_DEVICES * MIG_PER_GPU] = [0; MAX_DEVICES * MIG_PER_GPU];

const INVALID: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;

/// (GPU index, MIG device index) behind a MIG handle, or `None` for others.
fn mig_slot(device: nvmlDevice_t) -> Option<(usize, usize)> {
    let offset = (device as usize).wrapping_sub(MIG_SLOTS.as_ptr() as usize);
    (!device.is_null() && offset < MIG_SLOTS.len())
        .then_some((offset / MIG_PER_GPU, offset % MIG_PER_GPU))
}

/// The MIG instance behind a MIG handle at the current time; `Ok(None)` when
/// `device` is not a MIG handle.
fn mig_instance(device: nvmlDevice_t) -> Result<Option<(usize, MigInstance)>, nvmlReturn_t> {
    let Some((gpu, slot)) = mig_slot(device) else {
        return Ok(None);
    };
    let rt = state::runtime()?;
    let sim = rt.engine.gpu(gpu).ok_or(INVALID)?;
    let list = sim.mig_instances(rt.clock.now()).map_err(state::code)?;
    let instance = list.into_iter().nth(slot).ok_or(INVALID)?;
    Ok(Some((gpu, instance)))
}

/// The memory of a MIG instance, when `device` is a MIG handle.
pub(crate) fn mig_memory(device: nvmlDevice_t) -> Result<Option<MigInstance>, nvmlReturn_t> {
    Ok(mig_instance(device)?.map(|(_, m)| m))
}

/// The UUID of a MIG device (`MIG-<parent uuid without GPU->-<id>`), when
/// `device` is a MIG handle.
pub(crate) fn mig_uuid(device: nvmlDevice_t) -> Result<Option<String>, nvmlReturn_t> {
    let Some((gpu, m)) = mig_instance(device)? else {
        return Ok(None);
    };
    let rt = state::runtime()?;
    let parent = rt.engine.gpu(gpu).ok_or(INVALID)?.config().uuid.clone();
    let base = parent.strip_prefix("GPU-").unwrap_or(&parent);
    Ok(Some(format!("MIG-{base}-{}", m.id)))
}

/// Per-process utilization samples newer than `last_seen` (µs); the count
/// protocol: a null buffer or a short one answers INSUFFICIENT_SIZE with the
/// count; no newer sample answers NOT_FOUND, as NVML does.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: nvmlDevice_t,
    utilization: *mut nvmlProcessUtilizationSample_t,
    count: *mut c_uint,
    last_seen: c_ulonglong,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetProcessUtilization, || {
        // SAFETY: `count` is null or writable (the export's contract, module doc); `out` checks null.
        let count = unsafe { out(count) }?;
        let list = on_gpu(device, |g, t| g.process_utilization(t))?;
        let now = epoch_us();
        if list.is_empty() || last_seen >= now {
            *count = 0;
            return Err(nvmlReturn_enum_NVML_ERROR_NOT_FOUND);
        }
        let capacity = *count as usize;
        *count = list.len() as c_uint;
        if utilization.is_null() || capacity < list.len() {
            return Err(nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE);
        }
        for (i, p) in list.iter().enumerate() {
            let sample = nvmlProcessUtilizationSample_t {
                pid: p.pid,
                timeStamp: now,
                smUtil: p.sm_percent,
                memUtil: p.memory_percent,
                encUtil: 0,
                decUtil: 0,
            };
            // SAFETY: `utilization` is non-null and holds `capacity` ≥
            // `list.len()` entries (checked above; the count protocol of the
            // export's contract), so `i` is in bounds.
            unsafe { *utilization.add(i) = sample };
        }
        Ok(())
    })
}

/// How many MIG devices the GPU has (the configured instances while MIG is on).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: nvmlDevice_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetMaxMigDeviceCount, || {
        // SAFETY: `count` is null or writable (the export's contract, module doc); `out` checks null.
        let count = unsafe { out(count) }?;
        let list = on_gpu(device, |g, t| g.mig_instances(t))?;
        *count = list.len().min(MIG_PER_GPU) as c_uint;
        Ok(())
    })
}

/// The handle of MIG device `index` of a GPU.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetMigDeviceHandleByIndex, || {
        // SAFETY: `mig` is null or writable (the export's contract, module doc); `out` checks null.
        let mig = unsafe { out(mig) }?;
        let gpu = state::index_of(device)?;
        let list = on_gpu(device, |g, t| g.mig_instances(t))?;
        let index = index as usize;
        if index >= list.len().min(MIG_PER_GPU) {
            return Err(nvmlReturn_enum_NVML_ERROR_NOT_FOUND);
        }
        *mig = MIG_SLOTS[gpu * MIG_PER_GPU + index..].as_ptr() as nvmlDevice_t;
        Ok(())
    })
}

/// The GPU instance id of a MIG device.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetGpuInstanceId, || {
        // SAFETY: `id` is null or writable (the export's contract, module doc); `out` checks null.
        let id = unsafe { out(id) }?;
        let (_, m) = mig_instance(device)?.ok_or(INVALID)?;
        *id = m.id;
        Ok(())
    })
}

/// Whether a handle is a MIG device's.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: nvmlDevice_t,
    is_mig: *mut c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceIsMigDeviceHandle, || {
        // SAFETY: `is_mig` is null or writable (the export's contract, module doc); `out` checks null.
        *unsafe { out(is_mig) }? = c_uint::from(mig_slot(device).is_some());
        Ok(())
    })
}
