//! GPM exports: device support, sample buffers, samples of a GPU or a MIG
//! GPU instance, the metrics between two samples, and the streaming flag.
//!
//! A sample handle points at a heap cell the simulator owns and tracks, so
//! a freed, foreign or never-filled handle is refused (INVALID_ARGUMENT)
//! rather than read. Where NVML documents no answer the simulator answers
//! INVALID_ARGUMENT: samples of different GPUs or instances, and samples
//! given newest first (sample2 must not be older than sample1).

use super::calls::{guard, NvmlResult};
use super::out::out;
use super::state::{self, on_gpu, with_device, MAX_DEVICES};
use crate::engine::Unavailable;
use crate::functions::Func;
use crate::scenario::Feature;
use nvml_wrapper_sys::bindings::*;
use std::collections::HashMap;
use std::ffi::c_uint;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

const INVALID: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;

/// What a sample buffer holds once filled: the GPU, the MIG GPU instance
/// (None: the whole GPU) and the scenario time. The counters at that time
/// are a pure function of it, so this is the whole snapshot.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Taken {
    gpu: usize,
    instance: Option<u32>,
    t: f64,
}

/// One allocated sample buffer (boxed: its address is the handle).
#[derive(Debug, Default)]
struct Cell {
    taken: Option<Taken>,
}

/// Allocated sample buffers by handle address.
static SAMPLES: Mutex<Option<HashMap<usize, Box<Cell>>>> = Mutex::new(None);

/// Per GPU: whether GPM streaming was switched on.
static STREAMING: [AtomicBool; MAX_DEVICES] = [const { AtomicBool::new(false) }; MAX_DEVICES];

fn samples() -> MutexGuard<'static, Option<HashMap<usize, Box<Cell>>>> {
    SAMPLES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Metric ids asked in all nvmlGpmMetricsGet calls since load (tests and
/// benchmarks read it to see what the agent asks a tick).
static METRICS_ASKED: AtomicU64 = AtomicU64::new(0);

/// Metric ids asked in all `nvmlGpmMetricsGet` calls since load: with the
/// call counts, what GPM costs a caller per tick.
#[no_mangle]
pub extern "C" fn nvmlSimGpmMetricsAsked() -> u64 {
    METRICS_ASKED.load(Ordering::Relaxed)
}

/// Frees every sample buffer and clears streaming (on the last nvmlShutdown).
pub(crate) fn free_all() {
    *samples() = None;
    STREAMING
        .iter()
        .for_each(|s| s.store(false, Ordering::Relaxed));
}

/// Records `taken` in the buffer behind `sample` (INVALID_ARGUMENT if unknown).
fn fill(sample: nvmlGpmSample_t, taken: Taken) -> NvmlResult {
    let mut guard = samples();
    let cell = guard
        .as_mut()
        .and_then(|m| m.get_mut(&(sample as usize)))
        .ok_or(INVALID)?;
    cell.taken = Some(taken);
    Ok(())
}

/// What the buffer behind `sample` holds (INVALID_ARGUMENT if unknown or empty).
fn taken(sample: nvmlGpmSample_t) -> Result<Taken, nvmlReturn_t> {
    samples()
        .as_ref()
        .and_then(|m| m.get(&(sample as usize)))
        .and_then(|c| c.taken)
        .ok_or(INVALID)
}

/// Whether the GPU supports GPM (`isSupportedDevice`); `version` must be
/// NVML_GPM_SUPPORT_VERSION.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(
    device: nvmlDevice_t,
    support: *mut nvmlGpmSupport_t,
) -> nvmlReturn_t {
    guard(Func::nvmlGpmQueryDeviceSupport, || {
        // SAFETY: `support` is null or writable (the export's contract, module doc); `out` checks null.
        let support = unsafe { out(support) }?;
        state::runtime()?;
        if support.version != NVML_GPM_SUPPORT_VERSION {
            return Err(nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        let supported = on_gpu(device, |g, t| match g.check(Some(Feature::Gpm), t) {
            Ok(()) => Ok(true),
            Err(Unavailable::NotSupported) => Ok(false),
            Err(why) => Err(why),
        })?;
        support.isSupportedDevice = c_uint::from(supported);
        Ok(())
    })
}

/// Allocates a sample buffer.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(sample: *mut nvmlGpmSample_t) -> nvmlReturn_t {
    guard(Func::nvmlGpmSampleAlloc, || {
        // SAFETY: `sample` is null or writable (the export's contract, module doc); `out` checks null.
        let slot = unsafe { out(sample) }?;
        state::runtime()?;
        let cell = Box::new(Cell::default());
        let handle = &*cell as *const Cell as nvmlGpmSample_t;
        samples()
            .get_or_insert_with(HashMap::new)
            .insert(handle as usize, cell);
        *slot = handle;
        Ok(())
    })
}

/// Frees a sample buffer.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleFree(sample: nvmlGpmSample_t) -> nvmlReturn_t {
    guard(Func::nvmlGpmSampleFree, || {
        state::runtime()?;
        samples()
            .as_mut()
            .and_then(|m| m.remove(&(sample as usize)))
            .map(drop)
            .ok_or(INVALID)
    })
}

/// Fills `sample` with the GPU (or MIG instance) counters now.
fn sample_get(device: nvmlDevice_t, instance: Option<u32>, sample: nvmlGpmSample_t) -> NvmlResult {
    let taken = with_device(device, |rt, gpu, t| {
        let sim = rt.engine.gpu(gpu).ok_or(INVALID)?;
        sim.gpm_sample_check(instance, t).map_err(state::code)?;
        Ok(Taken { gpu, instance, t })
    })?;
    fill(sample, taken)
}

/// Takes a GPM sample of a GPU.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleGet(
    device: nvmlDevice_t,
    sample: nvmlGpmSample_t,
) -> nvmlReturn_t {
    guard(Func::nvmlGpmSampleGet, || sample_get(device, None, sample))
}

/// Takes a GPM sample of MIG GPU instance `gpu_instance_id` of a GPU.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmMigSampleGet(
    device: nvmlDevice_t,
    gpu_instance_id: c_uint,
    sample: nvmlGpmSample_t,
) -> nvmlReturn_t {
    guard(Func::nvmlGpmMigSampleGet, || {
        sample_get(device, Some(gpu_instance_id), sample)
    })
}

/// Computes each requested metric from two samples (oldest first). Each
/// metric gets its own nvmlReturn; only `numMetrics` entries are touched,
/// so callers built against a smaller NVML_GPM_METRIC_MAX stay safe.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmMetricsGet(request: *mut nvmlGpmMetricsGet_t) -> nvmlReturn_t {
    guard(Func::nvmlGpmMetricsGet, || {
        if request.is_null() {
            return Err(INVALID);
        }
        let rt = state::runtime()?;
        // SAFETY: `request` is non-null (checked above) and points to an
        // nvmlGpmMetricsGet_t (the export's contract); fields are read by
        // value, without references.
        let version = unsafe { std::ptr::addr_of!((*request).version).read() };
        if version != NVML_GPM_METRICS_GET_VERSION {
            return Err(nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        // SAFETY: as above.
        let count = unsafe { std::ptr::addr_of!((*request).numMetrics).read() } as usize;
        if count > nvmlGpmMetricId_t_NVML_GPM_METRIC_MAX as usize {
            return Err(INVALID);
        }
        METRICS_ASKED.fetch_add(count as u64, Ordering::Relaxed);
        // SAFETY: as above.
        let (sample1, sample2) = unsafe {
            (
                std::ptr::addr_of!((*request).sample1).read(),
                std::ptr::addr_of!((*request).sample2).read(),
            )
        };
        let (first, second) = (taken(sample1)?, taken(sample2)?);
        if (first.gpu, first.instance) != (second.gpu, second.instance) {
            return Err(INVALID);
        }
        let gpu = rt.engine.gpu(first.gpu).ok_or(INVALID)?;
        let window = gpu
            .gpm_window(first.instance, first.t, second.t)
            .map_err(state::code)?;
        // SAFETY: as above; the address of the array, no reference made.
        let metrics =
            unsafe { std::ptr::addr_of_mut!((*request).metrics) }.cast::<nvmlGpmMetric_t>();
        for i in 0..count {
            // SAFETY: `count` ≤ NVML_GPM_METRIC_MAX (checked above), the
            // array's length in the caller's struct, so entry `i` exists;
            // only the first `count` entries are touched (a caller built
            // against a smaller METRIC_MAX owns no more than `numMetrics`).
            let m = unsafe { &mut *metrics.add(i) };
            match window.metric(m.metricId) {
                Ok(value) => (m.value, m.nvmlReturn) = (value, nvmlReturn_enum_NVML_SUCCESS),
                Err(why) => (m.value, m.nvmlReturn) = (0.0, state::code(why)),
            }
            m.metricInfo = match crate::gpm_metrics::info(m.metricId) {
                Some((short, long, unit)) => nvmlGpmMetric_t__bindgen_ty_1 {
                    shortName: short.as_ptr().cast_mut(),
                    longName: long.as_ptr().cast_mut(),
                    unit: unit.as_ptr().cast_mut(),
                },
                None => nvmlGpmMetric_t__bindgen_ty_1 {
                    shortName: std::ptr::null_mut(),
                    longName: std::ptr::null_mut(),
                    unit: std::ptr::null_mut(),
                },
            };
        }
        Ok(())
    })
}

/// Whether GPM streaming is on (off until switched on).
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmQueryIfStreamingEnabled(
    device: nvmlDevice_t,
    enabled: *mut c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlGpmQueryIfStreamingEnabled, || {
        // SAFETY: `enabled` is null or writable (the export's contract, module doc); `out` checks null.
        let enabled = unsafe { out(enabled) }?;
        let index = state::index_of(device)?;
        on_gpu(device, |g, t| g.check(Some(Feature::Gpm), t))?;
        *enabled = c_uint::from(STREAMING[index].load(Ordering::Relaxed));
        Ok(())
    })
}

/// Switches GPM streaming on (1) or off (0).
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSetStreamingEnabled(
    device: nvmlDevice_t,
    enabled: c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlGpmSetStreamingEnabled, || {
        let index = state::index_of(device)?;
        on_gpu(device, |g, t| g.check(Some(Feature::Gpm), t))?;
        if enabled > 1 {
            return Err(INVALID);
        }
        STREAMING[index].store(enabled == 1, Ordering::Relaxed);
        Ok(())
    })
}
