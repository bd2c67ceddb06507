//! The two process-tier calls nvml-wrapper makes twice — a count query,
//! then the list — made once here, into a buffer sized from the last answer
//! (issue 23: 2 of the 6 process-tier calls per GPU). A buffer too small
//! (NVML_ERROR_INSUFFICIENT_SIZE, which also tells the size needed) is grown
//! and the call made again. The only `unsafe` code of the process reads.

use std::cell::Cell;
use std::ffi::c_uint;

use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::struct_wrappers::device::{ProcessInfo, ProcessUtilizationSample};
use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings::{
    nvmlProcessInfo_t, nvmlProcessUtilizationSample_t,
    nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE, nvmlReturn_t,
};

/// Entries asked for the first time, and the headroom added when NVML
/// says more are needed (as nvml-wrapper adds for processes launched
/// between two calls).
const FIRST_CAPACITY: c_uint = 16;
const HEADROOM: c_uint = 5;

/// Buffer sizes kept per GPU between process ticks.
#[derive(Debug)]
pub(super) struct Capacities {
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
pub(super) fn compute_processes(
    device: &Device<'_>,
    capacities: &Capacities,
) -> Result<Vec<ProcessInfo>, NvmlError> {
    let sym = nvml_sym(
        device
            .nvml()
            .lib()
            .nvmlDeviceGetComputeRunningProcesses_v3
            .as_ref(),
    )?;
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
pub(super) fn process_utilization(
    device: &Device<'_>,
    last_seen: u64,
    capacities: &Capacities,
) -> Result<Vec<ProcessUtilizationSample>, NvmlError> {
    let sym = nvml_sym(device.nvml().lib().nvmlDeviceGetProcessUtilization.as_ref())?;
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
