//! ECC exports: ECC mode, error totals, retired pages and remapped rows.

use super::calls::{guard, NvmlResult};
use super::out::out;
use super::state::on_gpu;
use crate::functions::Func;
use nvml_wrapper_sys::bindings::*;
use std::ffi::{c_uint, c_ulonglong};

const ENABLED: nvmlEnableState_t = nvmlEnableState_enum_NVML_FEATURE_ENABLED;
const DISABLED: nvmlEnableState_t = nvmlEnableState_enum_NVML_FEATURE_DISABLED;
const INVALID: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
const INSUFFICIENT: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;

/// ECC mode (current and pending are both enabled when ECC exists).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    device: nvmlDevice_t,
    current: *mut nvmlEnableState_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetEccMode, || {
        // SAFETY: `current`, `pending` are null or writable (the export's contract, module doc); `out` checks null.
        let (current, pending) = (unsafe { out(current) }?, unsafe { out(pending) }?);
        let on = if on_gpu(device, |g, t| g.ecc_enabled(t))? {
            ENABLED
        } else {
            DISABLED
        };
        (*current, *pending) = (on, on);
        Ok(())
    })
}

/// ECC totals: errorType 0 corrected / 1 uncorrected; counterType 0 volatile / 1 aggregate.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error_type: nvmlMemoryErrorType_t,
    counter_type: nvmlEccCounterType_t,
    counts: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetTotalEccErrors, || {
        // SAFETY: `counts` is null or writable (the export's contract, module doc); `out` checks null.
        let counts = unsafe { out(counts) }?;
        if error_type > 1 || counter_type > 1 {
            return Err(INVALID);
        }
        let ecc = on_gpu(device, |g, t| g.ecc(t))?;
        *counts = if error_type == 0 {
            ecc.corrected
        } else {
            ecc.uncorrected
        };
        Ok(())
    })
}

/// Shared body of the retired-pages calls (count query protocol).
///
/// # Safety
/// `count` must be null or valid for reads and writes; `addresses` (and
/// `timestamps`, where not null) null or valid for `*count` entries.
unsafe fn retired_pages(
    device: nvmlDevice_t,
    cause: c_uint,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> NvmlResult {
    // SAFETY: `count` is null or writable (this function's contract); `out` checks null.
    let count = unsafe { out(count) }?;
    if cause > 1 {
        return Err(INVALID);
    }
    let pages = on_gpu(device, |g, t| g.retired_pages(cause, t))?;
    let capacity = *count as usize;
    *count = pages.len() as c_uint;
    if pages.is_empty() {
        return Ok(());
    }
    if addresses.is_null() || capacity < pages.len() {
        return Err(INSUFFICIENT);
    }
    for (i, (address, stamp)) in pages.into_iter().enumerate() {
        // SAFETY: `addresses` is non-null and holds `capacity` ≥ `pages.len()`
        // entries (checked above; the count protocol of the export's
        // contract), so `i` is in bounds.
        unsafe { *addresses.add(i) = address };
        if !timestamps.is_null() {
            // SAFETY: a non-null `timestamps` has as many entries as
            // `addresses` (the export's contract).
            unsafe { *timestamps.add(i) = stamp };
        }
    }
    Ok(())
}

/// Retired page addresses for a cause (0 multiple SBE, 1 DBE).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetRetiredPages, || {
        // SAFETY: the pointers are the export's, under its contract (module doc); a null `timestamps` is allowed.
        unsafe { retired_pages(device, cause, count, addresses, std::ptr::null_mut()) }
    })
}

/// Retired page addresses and timestamps for a cause.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages_v2(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetRetiredPages_v2, || {
        // SAFETY: the pointers are the export's, under its contract (module doc); a null `timestamps` is allowed.
        unsafe { retired_pages(device, cause, count, addresses, timestamps) }
    })
}

/// Remapped rows: corrected, uncorrected, pending, failure.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: nvmlDevice_t,
    corr: *mut c_uint,
    unc: *mut c_uint,
    pending: *mut c_uint,
    failure: *mut c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetRemappedRows, || {
        // SAFETY: `corr`, `unc`, `pending`, `failure` are null or writable (the export's contract, module doc); `out` checks null.
        let (corr, unc, pending, failure) = (
            unsafe { out(corr) }?,
            unsafe { out(unc) }?,
            unsafe { out(pending) }?,
            unsafe { out(failure) }?,
        );
        let rows = on_gpu(device, |g, t| g.remapped_rows(t))?;
        (*corr, *unc, *pending, *failure) = (rows.0, rows.1, rows.2.into(), rows.3.into());
        Ok(())
    })
}
