//! The two process-tier calls nvml-wrapper makes twice — a count query,
//! then the list — made once here, into a buffer sized from the last answer
//! (issue 23: 2 of the 6 process-tier calls per GPU). A buffer too small
//! (NVML_ERROR_INSUFFICIENT_SIZE, which also tells the size needed) is grown
//! and the call made again.

use std::cell::Cell;
use std::ffi::c_uint;

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::struct_wrappers::device::{ProcessInfo, ProcessUtilizationSample};
use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings::{
    nvmlProcessInfo_t, nvmlProcessUtilizationSample_t,
    nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE, nvmlReturn_t,
};

use super::symbol;

/// Entries asked for the first time, and the headroom added when NVML
/// says more are needed (as nvml-wrapper adds for processes launched
/// between two calls).
const FIRST_CAPACITY: c_uint = 16;
const HEADROOM: c_uint = 5;

/// Buffer sizes kept per GPU between process ticks.
#[derive(Debug)]
pub(in crate::gpu::nvml) struct Capacities {
    compute: Cell<c_uint>,
    utilization: Cell<c_uint>,
}

impl Default for Capacities {
    fn default() -> Self {
        Capacities {
            compute: Cell::new(FIRST_CAPACITY),
            utilization: Cell::new(FIRST_CAPACITY),
        }
    }
}

/// Calls `call(count, buffer)` with a buffer of `capacity` entries, and
/// once more with a bigger one if NVML answers that it is too small; keeps
/// the size that worked.
fn sized<T: Clone>(
    capacity: &Cell<c_uint>,
    zero: T,
    mut call: impl FnMut(&mut c_uint, *mut T) -> nvmlReturn_t,
) -> Result<Vec<T>, NvmlError> {
    let mut attempts = 0;
    loop {
        let mut count = capacity.get().max(1);
        let mut buffer = vec![zero.clone(); count as usize];
        let code = call(&mut count, buffer.as_mut_ptr());
        attempts += 1;
        if code == nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE && attempts < 3 {
            capacity.set(count.saturating_add(HEADROOM));
            continue;
        }
        nvml_try(code)?;
        buffer.truncate(count as usize);
        return Ok(buffer);
    }
}

/// nvmlDeviceGetComputeRunningProcesses_v3, once when the buffer is big enough.
pub(in crate::gpu::nvml) fn compute_processes(
    device: &Device<'_>,
    capacities: &Capacities,
) -> Result<Vec<ProcessInfo>, NvmlError> {
    let sym = symbol(&device.nvml().lib().nvmlDeviceGetComputeRunningProcesses_v3)?;
    // SAFETY: nvmlProcessInfo_t is plain C data (integers), for which all
    // zero bytes is a valid value.
    let zero: nvmlProcessInfo_t = unsafe { std::mem::zeroed() };
    let infos = sized(&capacities.compute, zero, |count, buffer| {
        // SAFETY: the handle stays valid while `device` lives; `buffer`
        // holds `*count` entries for NVML to fill.
        unsafe { sym(device.handle(), count, buffer) }
    })?;
    Ok(infos.into_iter().map(ProcessInfo::from).collect())
}

/// nvmlDeviceGetProcessUtilization for samples newer than `last_seen` (µs),
/// once when the buffer is big enough.
pub(in crate::gpu::nvml) fn process_utilization(
    device: &Device<'_>,
    last_seen: u64,
    capacities: &Capacities,
) -> Result<Vec<ProcessUtilizationSample>, NvmlError> {
    let sym = symbol(&device.nvml().lib().nvmlDeviceGetProcessUtilization)?;
    // SAFETY: as above: plain C integers.
    let zero: nvmlProcessUtilizationSample_t = unsafe { std::mem::zeroed() };
    let samples = sized(&capacities.utilization, zero, |count, buffer| {
        // SAFETY: as above; `buffer` holds `*count` entries.
        unsafe { sym(device.handle(), buffer, count, last_seen) }
    })?;
    Ok(samples
        .into_iter()
        .map(ProcessUtilizationSample::from)
        .collect())
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};

    use super::*;

    /// nvml.h: `nvmlProcessInfo_t` (v2, what the `_v3` call fills) is pid
    /// (uint, padded to 8), usedGpuMemory (unsigned long long),
    /// gpuInstanceId, computeInstanceId (uint): 24 bytes.
    #[test]
    fn the_process_info_struct_has_nvml_h_layout() {
        assert_eq!(size_of::<nvmlProcessInfo_t>(), 24);
        let offsets = [
            offset_of!(nvmlProcessInfo_t, pid),
            offset_of!(nvmlProcessInfo_t, usedGpuMemory),
            offset_of!(nvmlProcessInfo_t, gpuInstanceId),
            offset_of!(nvmlProcessInfo_t, computeInstanceId),
        ];
        assert_eq!(offsets, [0, 8, 16, 20]);
    }

    /// nvml.h: `nvmlProcessUtilizationSample_t` is pid (uint, padded to 8),
    /// timeStamp (unsigned long long), then four uint utilizations: 32 bytes.
    #[test]
    fn the_utilization_sample_struct_has_nvml_h_layout() {
        assert_eq!(size_of::<nvmlProcessUtilizationSample_t>(), 32);
        let offsets = [
            offset_of!(nvmlProcessUtilizationSample_t, pid),
            offset_of!(nvmlProcessUtilizationSample_t, timeStamp),
            offset_of!(nvmlProcessUtilizationSample_t, smUtil),
            offset_of!(nvmlProcessUtilizationSample_t, memUtil),
            offset_of!(nvmlProcessUtilizationSample_t, encUtil),
            offset_of!(nvmlProcessUtilizationSample_t, decUtil),
        ];
        assert_eq!(offsets, [0, 8, 16, 20, 24, 28]);
    }

    /// A buffer NVML calls too small is grown to what it says plus the
    /// headroom, once; the size that worked is kept.
    #[test]
    fn a_short_buffer_is_grown_once_and_kept() {
        let capacity = Cell::new(2);
        let mut calls = 0;
        let got = sized(&capacity, 0u32, |count, buffer| {
            calls += 1;
            if *count < 4 {
                *count = 4;
                return nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
            }
            for i in 0..4 {
                // SAFETY: NVML's side of the contract: `buffer` holds
                // `*count` (at least 4) entries.
                unsafe { *buffer.add(i) = i as u32 + 10 };
            }
            *count = 4;
            0
        });
        assert_eq!(got.ok(), Some(vec![10, 11, 12, 13]));
        assert_eq!(calls, 2);
        assert_eq!(capacity.get(), 4 + HEADROOM);
    }
}
