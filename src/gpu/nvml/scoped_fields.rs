//! One `nvmlDeviceGetFieldValues` batch whose fields each carry a scope
//! (`scopeId`: the NVLink link for fields 138/139). nvml-wrapper's
//! `field_values_for` always sends scope 0, so this is the raw call behind
//! a safe wrapper: the only `unsafe` code of the field-value reads.
//!
//! Field ids go to the driver as given: callers pass ids outside 251..=273,
//! the range nvml-wrapper renumbers for NVML 13 update 1 drivers (checked at
//! build time for the ids read here).

use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings::nvmlFieldValue_t;

use super::{GpuDevice, Tally};
use crate::gpu::snapshot::FieldGroup;

/// One field asked for one scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Scoped {
    /// The field id (v12 numbering).
    pub id: u32,
    /// The scope: the NVLink link for per-link fields, 0 for device fields.
    pub scope: u32,
}

/// The answers of one scoped batch; a field the GPU does not support (or the
/// whole call failing) reads as `None`.
#[derive(Debug, Default)]
pub(super) struct ScopedValues {
    values: Vec<(Scoped, Result<f64, NvmlError>)>,
}

impl ScopedValues {
    /// The value of field `id` at `scope`, if asked and answered.
    pub(super) fn get(&self, id: u32, scope: u32) -> Option<f64> {
        self.answer(id, scope)
            .and_then(|answer| answer.as_ref().ok().copied())
    }

    /// Whether the call worked (each field then has its own answer).
    pub(super) fn answered(&self) -> bool {
        !self.values.is_empty()
    }

    /// What the driver answered for field `id` at `scope`: `None` when it
    /// was not asked or the whole call failed.
    pub(super) fn answer(&self, id: u32, scope: u32) -> Option<&Result<f64, NvmlError>> {
        self.values
            .iter()
            .find(|(field, _)| *field == Scoped { id, scope })
            .map(|(_, answer)| answer)
    }

    /// Logs (once, at debug) each field in `fields` the driver did not answer.
    pub(super) fn report_unsupported(&self, gpu: u32, fields: &[Scoped], tally: &mut Tally) {
        for (field, answer) in &self.values {
            if let (Err(error), true) = (answer, fields.contains(field)) {
                tally.field_unsupported(gpu, field.id, error);
            }
        }
    }
}

impl GpuDevice<'_> {
    /// One `nvmlDeviceGetFieldValues` call for `fields`, each with its
    /// scope. The fields the driver does not answer are left to the caller
    /// (e.g. the fields of links a GPU does not have): see
    /// [`ScopedValues::report_unsupported`].
    pub(super) fn scoped_field_answers(
        &self,
        group: FieldGroup,
        fields: &[Scoped],
        tally: &mut Tally,
    ) -> ScopedValues {
        let Some(samples) = tally.call(group, "nvmlDeviceGetFieldValues", || {
            raw_field_values(&self.device, fields)
        }) else {
            return ScopedValues::default();
        };
        let values = fields
            .iter()
            .zip(samples)
            .map(|(field, sample)| {
                let value = sample.map(|sample| match sample {
                    SampleValue::F64(v) => v,
                    SampleValue::U32(v) => f64::from(v),
                    SampleValue::U64(v) => v as f64,
                    SampleValue::I64(v) => v as f64,
                });
                (*field, value)
            })
            .collect();
        ScopedValues { values }
    }
}

/// The raw call: one `nvmlFieldValue_t` per field, answered in place.
fn raw_field_values(
    device: &Device<'_>,
    fields: &[Scoped],
) -> Result<Vec<Result<SampleValue, NvmlError>>, NvmlError> {
    let sym = nvml_sym(device.nvml().lib().nvmlDeviceGetFieldValues.as_ref())?;
    let count = i32::try_from(fields.len()).map_err(|_| NvmlError::InvalidArg)?;
    let mut raw: Vec<nvmlFieldValue_t> = fields
        .iter()
        .map(|field| {
            // SAFETY: nvmlFieldValue_t is plain C data (integers and a union
            // of numbers), for which all zero bytes is a valid value.
            let mut value: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
            value.fieldId = field.id;
            value.scopeId = field.scope;
            value
        })
        .collect();
    // SAFETY: the device handle comes from nvml-wrapper and stays valid while
    // `device` lives; `raw` holds exactly `count` entries for NVML to fill.
    unsafe { nvml_try(sym(device.handle(), count, raw.as_mut_ptr()))? };
    Ok(raw
        .into_iter()
        .map(|value| FieldValueSample::try_from(value).and_then(|sample| sample.value))
        .collect())
}
