//! The raw GPM calls the hot path makes, each behind a safe wrapper.
//!
//! nvml-wrapper's GPM API allocates a new sample buffer per sample (and frees
//! the old one: 2 extra NVML calls per GPU per tick) and turns each metric's
//! three name strings into `String`s (3 allocations per metric, 70 metrics per
//! call). Here a sample buffer is allocated once and refilled each tick, and
//! one metrics request is built once per stream and reused, its answers read
//! in place without the names.
//!
//! Version check: the request struct is laid out by nvml-wrapper-sys's
//! bindings for `NVML_GPM_METRICS_GET_VERSION` 1 (asserted at build time,
//! its layout in the tests); a driver that wants another version answers
//! ARGUMENT_VERSION_MISMATCH, which reaches the caller as an error like any
//! failed call.

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, GpmSample, Nvml};
use nvml_wrapper_sys::bindings::{
    nvmlGpmMetricId_t_NVML_GPM_METRIC_MAX, nvmlGpmMetricsGet_t, nvmlGpmSample_t,
    NVML_GPM_METRICS_GET_VERSION,
};

use super::symbol;

// The layout below (`metrics` holding METRIC_MAX entries) is version 1's.
const _: () = assert!(NVML_GPM_METRICS_GET_VERSION == 1);

/// Most metric ids one request holds (`NVML_GPM_METRIC_MAX` of the header
/// the bindings were made from: 210; nvml.h has grown it since, which does
/// not matter: the driver reads the first `numMetrics` entries).
pub(in crate::gpu::nvml) const MAX_METRICS: usize = nvmlGpmMetricId_t_NVML_GPM_METRIC_MAX as usize;

/// A GPM sample buffer, allocated once (`nvmlGpmSampleAlloc`) and refilled
/// on every tick; freed on drop (nvml-wrapper's `GpmSample` owns it).
pub(in crate::gpu::nvml) struct SampleBuffer<'d> {
    sample: GpmSample<'d>,
}

impl<'d> SampleBuffer<'d> {
    /// Allocates an empty sample buffer.
    pub(in crate::gpu::nvml) fn alloc(nvml: &'d Nvml) -> Result<Self, NvmlError> {
        let alloc = symbol(&nvml.lib().nvmlGpmSampleAlloc)?;
        let mut handle: nvmlGpmSample_t = std::ptr::null_mut();
        // SAFETY: `handle` is a valid out pointer; on success NVML gives a
        // fresh buffer that nothing else owns, so `GpmSample` may free it.
        unsafe {
            nvml_try(alloc(&mut handle))?;
            Ok(SampleBuffer {
                sample: GpmSample::from_handle(nvml, handle),
            })
        }
    }

    /// Fills the buffer with the counters of `device` now, or of its MIG GPU
    /// instance `instance` (`nvmlGpmSampleGet` / `nvmlGpmMigSampleGet`).
    pub(in crate::gpu::nvml) fn fill(
        &mut self,
        device: &Device<'d>,
        instance: Option<u32>,
    ) -> Result<(), NvmlError> {
        let lib = device.nvml().lib();
        let code = match instance {
            None => {
                let get = symbol(&lib.nvmlGpmSampleGet)?;
                // SAFETY: the device handle comes from nvml-wrapper and lives
                // as long as `device`; the sample handle is owned by `self`
                // and not freed.
                unsafe { get(device.handle(), self.sample.handle()) }
            }
            Some(id) => {
                let get = symbol(&lib.nvmlGpmMigSampleGet)?;
                // SAFETY: as above, for a MIG GPU instance id of the device.
                unsafe { get(device.handle(), id, self.sample.handle()) }
            }
        };
        nvml_try(code)
    }
}

/// One `nvmlGpmMetricsGet` request, built once for a list of metric ids and
/// reused between any two samples.
pub(in crate::gpu::nvml) struct MetricsRequest {
    /// 8.2 KiB (8 424 bytes): boxed, and kept rather than zeroed again each tick.
    raw: Box<nvmlGpmMetricsGet_t>,
}

impl MetricsRequest {
    /// A request for `ids` (NVML metric numbers), at most [`MAX_METRICS`]:
    /// more is a programming error, caught by the tables' unit test.
    pub(in crate::gpu::nvml) fn new(ids: impl IntoIterator<Item = u32>) -> Self {
        // SAFETY: the struct is plain C data (integers, a float, raw
        // pointers): all zeroes is a valid value.
        let mut raw: Box<nvmlGpmMetricsGet_t> = Box::new(unsafe { std::mem::zeroed() });
        raw.version = NVML_GPM_METRICS_GET_VERSION;
        let mut count = 0;
        for (slot, id) in raw
            .metrics
            .iter_mut()
            .zip(ids.into_iter().take(MAX_METRICS))
        {
            slot.metricId = id;
            count += 1;
        }
        raw.numMetrics = count;
        MetricsRequest { raw }
    }

    /// How many metric ids are asked.
    pub(in crate::gpu::nvml) fn len(&self) -> usize {
        self.raw.numMetrics as usize
    }

    /// Computes the metrics between `first` and `second` (oldest first):
    /// per asked id in order, (id, its value or its own error).
    pub(in crate::gpu::nvml) fn get<'r>(
        &'r mut self,
        nvml: &Nvml,
        first: &SampleBuffer<'_>,
        second: &SampleBuffer<'_>,
    ) -> Result<impl Iterator<Item = (u32, Result<f64, NvmlError>)> + 'r, NvmlError> {
        let sym = symbol(&nvml.lib().nvmlGpmMetricsGet)?;
        // SAFETY: both sample handles are live buffers owned by their
        // `SampleBuffer`s; `raw` is a valid version-1 request whose first
        // `numMetrics` (≤ METRIC_MAX) entries hold metric ids. NVML writes
        // only into `raw`; the name pointers it leaves there are not read.
        unsafe {
            self.raw.sample1 = first.sample.handle();
            self.raw.sample2 = second.sample.handle();
            nvml_try(sym(&mut *self.raw))?;
        }
        let count = self.len();
        Ok(self.raw.metrics[..count]
            .iter()
            .map(|m| (m.metricId, nvml_try(m.nvmlReturn).map(|()| m.value))))
    }
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};

    use nvml_wrapper_sys::bindings::nvmlGpmMetric_t;

    use super::*;

    /// nvml.h: `nvmlGpmMetric_t` is metricId, nvmlReturn (4 bytes each),
    /// value (double), then three name pointers: 40 bytes; the request is
    /// version, numMetrics (4 each), two sample handles (8 each), then the
    /// metrics: 24 + 210 × 40 = 8 424 bytes with the bindings' 210 entries.
    #[test]
    fn the_metrics_request_has_nvml_h_layout() {
        assert_eq!(size_of::<nvmlGpmMetric_t>(), 40);
        let metric = [
            offset_of!(nvmlGpmMetric_t, metricId),
            offset_of!(nvmlGpmMetric_t, nvmlReturn),
            offset_of!(nvmlGpmMetric_t, value),
            offset_of!(nvmlGpmMetric_t, metricInfo),
        ];
        assert_eq!(metric, [0, 4, 8, 16]);
        let request = [
            offset_of!(nvmlGpmMetricsGet_t, version),
            offset_of!(nvmlGpmMetricsGet_t, numMetrics),
            offset_of!(nvmlGpmMetricsGet_t, sample1),
            offset_of!(nvmlGpmMetricsGet_t, sample2),
            offset_of!(nvmlGpmMetricsGet_t, metrics),
        ];
        assert_eq!(request, [0, 4, 8, 16, 24]);
        assert_eq!(MAX_METRICS, 210);
        assert_eq!(size_of::<nvmlGpmMetricsGet_t>(), 8_424);
    }

    #[test]
    fn a_request_holds_the_ids_asked_and_no_more_than_fit() {
        let request = MetricsRequest::new([1, 2, 3]);
        assert_eq!(request.len(), 3);
        assert_eq!(request.raw.version, 1);
        let ids: Vec<u32> = request.raw.metrics[..3]
            .iter()
            .map(|m| m.metricId)
            .collect();
        assert_eq!(ids, [1, 2, 3]);
        assert_eq!(MetricsRequest::new(0..1000).len(), MAX_METRICS);
    }
}
