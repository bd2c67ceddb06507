//! Every NVML call gpuwatch makes past nvml-wrapper, each behind a safe
//! function: the NVML adapter's only `unsafe` code (its other modules are
//! `#[forbid(unsafe_code)]`, see `nvml/mod.rs`).
//!
//! One way through: a symbol is looked up with [`symbol`] (a library without
//! it answers `FailedToLoadSymbol`, which the tally treats as unsupported),
//! a return code becomes a `Result` with `nvml_try`, and a field value's C
//! union becomes a number through one table, [`number`]. The struct layouts
//! these calls share with the driver are asserted in tests against nvml.h's
//! numbers (sizes, offsets, version words written out), so a binding that
//! drifts fails a test rather than a driver call.
//!
//! Here: `nvmlDeviceGetFieldValues` (both field batches) and
//! `nvmlDeviceGetGpuInstanceId`; in [`fabric`] the fabric-info calls, in
//! [`gpm`] the GPM sample and metrics calls, in [`processes`] the two
//! process-list calls made with a kept buffer.

mod fabric;
mod gpm;
mod processes;

use std::ffi::c_uint;

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, FieldIdScheme};
use nvml_wrapper_sys::bindings::{
    nvmlFieldValue_t, nvmlValueType_enum_NVML_VALUE_TYPE_DOUBLE as DOUBLE,
    nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT as SIGNED_INT,
    nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG as SIGNED_LONG_LONG,
    nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT as UNSIGNED_INT,
    nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG as UNSIGNED_LONG,
    nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG as UNSIGNED_LONG_LONG,
    nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_SHORT as UNSIGNED_SHORT, nvmlValueType_t,
    nvmlValue_t,
};

pub(super) use fabric::fabric_info;
#[cfg(test)]
pub(super) use gpm::MAX_METRICS;
pub(super) use gpm::{MetricsRequest, SampleBuffer};
pub(super) use processes::{compute_processes, process_utilization, Capacities};

/// The one symbol lookup: the function nvml-wrapper's loader found, or
/// `FailedToLoadSymbol` saying why not (a driver that predates it).
fn symbol<T, E: std::fmt::Display>(found: &Result<T, E>) -> Result<&T, NvmlError> {
    found
        .as_ref()
        .map_err(|error| NvmlError::FailedToLoadSymbol(error.to_string()))
}

/// One `nvmlDeviceGetFieldValues` call for `fields`, each a field id (in
/// NVML 12's numbering, sent in the loaded driver's: [`wire_id`]) and its
/// scope: per field, in order, its value or its own error.
pub(super) fn field_values(
    device: &Device<'_>,
    fields: impl ExactSizeIterator<Item = (u32, u32)>,
) -> Result<Vec<Result<f64, NvmlError>>, NvmlError> {
    let get = symbol(&device.nvml().lib().nvmlDeviceGetFieldValues)?;
    let count = i32::try_from(fields.len()).map_err(|_| NvmlError::InvalidArg)?;
    let scheme = device.nvml().field_id_scheme();
    let mut raw: Vec<nvmlFieldValue_t> = fields
        .map(|(id, scope)| {
            // SAFETY: nvmlFieldValue_t is plain C data (integers and a union
            // of numbers), for which all zero bytes is a valid value.
            let mut value: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
            value.fieldId = wire_id(scheme, id);
            value.scopeId = scope;
            value
        })
        .collect();
    // SAFETY: the device handle comes from nvml-wrapper and stays valid while
    // `device` lives; `raw` holds exactly `count` entries for NVML to fill.
    nvml_try(unsafe { get(device.handle(), count, raw.as_mut_ptr()) })?;
    Ok(raw.iter().map(answer).collect())
}

/// One field's answer: its own return code, then its value as a number.
fn answer(field: &nvmlFieldValue_t) -> Result<f64, NvmlError> {
    nvml_try(field.nvmlReturn)?;
    number(field.valueType, field.value)
}

/// The value-type table (nvml.h's `nvmlValueType_t`, 0..=6): which member
/// of `nvmlValue_t` holds the value, read as a number. The one conversion
/// of field values; a type nvml.h does not define is `UnexpectedVariant`
/// (counted as `unexpected_value`).
fn number(value_type: nvmlValueType_t, value: nvmlValue_t) -> Result<f64, NvmlError> {
    // SAFETY: every member of the union is a plain number, for which any
    // bit pattern is valid, and the union was zeroed in full (8 bytes)
    // before NVML wrote the member `value_type` names: whichever member is
    // read, its bytes are initialised.
    let number = unsafe {
        match value_type {
            DOUBLE => value.dVal,
            UNSIGNED_INT => f64::from(value.uiVal),
            UNSIGNED_LONG => value.ulVal as f64,
            UNSIGNED_LONG_LONG => value.ullVal as f64,
            SIGNED_LONG_LONG => value.sllVal as f64,
            SIGNED_INT => f64::from(value.siVal),
            UNSIGNED_SHORT => f64::from(value.usVal),
            other => return Err(NvmlError::UnexpectedVariant(other)),
        }
    };
    Ok(number)
}

/// The id the loaded driver knows field `id` (NVML 12's numbering) by.
/// Drivers from 580.82 (CUDA 13.0 Update 1) renumber 251..=273: NVML 12's
/// clock-event reason and power-sync fields (251..=255) move to 269..=273,
/// the power-smoothing fields (256..=273) to 251..=268 (NVML's "known
/// issues"; nvml-wrapper detects the scheme from the driver version at init
/// and renumbers the same way in its own calls).
fn wire_id(scheme: FieldIdScheme, id: u32) -> u32 {
    match (scheme, id) {
        (FieldIdScheme::V13Update1, 251..=255) => id + 18,
        (FieldIdScheme::V13Update1, 256..=273) => id - 5,
        _ => id,
    }
}

/// `nvmlDeviceGetGpuInstanceId` of a MIG device handle (nvml-wrapper does
/// not wrap it).
pub(super) fn gpu_instance_id(mig: &Device<'_>) -> Result<u32, NvmlError> {
    let get = symbol(&mig.nvml().lib().nvmlDeviceGetGpuInstanceId)?;
    let mut id: c_uint = 0;
    // SAFETY: the handle comes from nvml-wrapper and stays valid while `mig`
    // lives; `id` is a valid out pointer.
    nvml_try(unsafe { get(mig.handle(), &mut id) })?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};

    use super::*;

    /// nvml.h: `nvmlFieldValue_t` is fieldId, scopeId (unsigned int),
    /// timestamp, latencyUsec (long long), valueType, nvmlReturn (4 bytes
    /// each), value (an 8-byte union): 40 bytes on x86-64 and aarch64.
    #[test]
    fn the_field_value_struct_has_nvml_h_layout() {
        assert_eq!(size_of::<nvmlValue_t>(), 8);
        assert_eq!(size_of::<nvmlFieldValue_t>(), 40);
        let offsets = [
            offset_of!(nvmlFieldValue_t, fieldId),
            offset_of!(nvmlFieldValue_t, scopeId),
            offset_of!(nvmlFieldValue_t, timestamp),
            offset_of!(nvmlFieldValue_t, latencyUsec),
            offset_of!(nvmlFieldValue_t, valueType),
            offset_of!(nvmlFieldValue_t, nvmlReturn),
            offset_of!(nvmlFieldValue_t, value),
        ];
        assert_eq!(offsets, [0, 4, 8, 16, 24, 28, 32]);
    }

    /// nvml.h's `nvmlValueType_t` numbers, written out: the table reads the
    /// member each names.
    #[test]
    fn the_value_table_reads_the_member_each_nvml_h_type_names() {
        let read = |value_type: u32, value: nvmlValue_t| number(value_type, value).ok();
        assert_eq!(read(0, nvmlValue_t { dVal: 2.5 }), Some(2.5));
        assert_eq!(
            read(1, nvmlValue_t { uiVal: u32::MAX }),
            Some(4_294_967_295.0)
        );
        assert_eq!(read(2, nvmlValue_t { ulVal: 7 }), Some(7.0));
        assert_eq!(
            read(3, nvmlValue_t { ullVal: 1 << 40 }),
            Some(1_099_511_627_776.0)
        );
        assert_eq!(read(4, nvmlValue_t { sllVal: -3 }), Some(-3.0));
        assert_eq!(read(5, nvmlValue_t { siVal: -4 }), Some(-4.0));
        assert_eq!(read(6, nvmlValue_t { usVal: 65_535 }), Some(65_535.0));
        assert!(matches!(
            number(7, nvmlValue_t { ullVal: 1 }),
            Err(NvmlError::UnexpectedVariant(7))
        ));
    }

    #[test]
    fn a_field_answers_its_own_error_before_its_value() {
        // SAFETY: plain C data, all zeroes is valid.
        let mut field: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
        field.valueType = 3;
        field.value = nvmlValue_t { ullVal: 42 };
        assert_eq!(answer(&field).ok(), Some(42.0));
        field.nvmlReturn = 3; // NVML_ERROR_NOT_SUPPORTED
        assert!(matches!(answer(&field), Err(NvmlError::NotSupported)));
    }

    /// The renumbering of NVML's known issue: 13.0 Update 1 moved
    /// CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN (251) to 269 and
    /// PWR_SMOOTHING_ENABLED (256) to 251; nothing else moves.
    #[test]
    fn ids_are_sent_in_the_drivers_numbering() {
        let v13 = FieldIdScheme::V13Update1;
        for id in [0, 39, 161, 165, 230, 250, 274, 1000] {
            assert_eq!(wire_id(v13, id), id);
            assert_eq!(wire_id(FieldIdScheme::V12, id), id);
        }
        assert_eq!(wire_id(FieldIdScheme::V12, 251), 251);
        let moved: Vec<u32> = [251, 253, 255, 256, 273]
            .map(|id| wire_id(v13, id))
            .to_vec();
        assert_eq!(moved, [269, 271, 273, 251, 268]);
        let mut all: Vec<u32> = (251..=273).map(|id| wire_id(v13, id)).collect();
        all.sort_unstable();
        assert_eq!(
            all,
            (251..=273).collect::<Vec<u32>>(),
            "a one-to-one renumbering"
        );
    }

    #[test]
    fn a_missing_symbol_is_failed_to_load_symbol() {
        let missing: Result<u8, &str> = Err("undefined symbol: nvmlFoo");
        assert!(matches!(
            symbol(&missing),
            Err(NvmlError::FailedToLoadSymbol(text)) if text.contains("nvmlFoo")
        ));
        assert_eq!(symbol(&Ok::<u8, &str>(1)).ok(), Some(&1));
    }
}
