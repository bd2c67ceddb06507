//! Per-device queries: identity, memory, temperatures, power, clocks, fans,
//! PCIe, encoder/decoder, modes, field values and violation time (ECC in
//! `ecc.rs`, process lists in `processes.rs`).

use super::calls::guard;
use super::out::{epoch_us, fill_array, out, write_str};
use super::state::{self, on_gpu, with_device};
use crate::engine::{FieldValue, Unavailable, Violation};
use crate::functions::Func;
use crate::scenario::Feature;
use nvml_wrapper_sys::bindings::*;
use std::ffi::{c_char, c_int, c_uint, c_ulonglong};

const ENABLED: nvmlEnableState_t = nvmlEnableState_enum_NVML_FEATURE_ENABLED;
const DISABLED: nvmlEnableState_t = nvmlEnableState_enum_NVML_FEATURE_DISABLED;
const INVALID: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;

/// Defines an export `fn(device, *mut T)` that stores one engine reading.
macro_rules! getter {
    ($(#[$doc:meta])* $name:ident, $ty:ty, |$gpu:ident, $t:ident| $value:expr) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "C" fn $name(device: nvmlDevice_t, value: *mut $ty) -> nvmlReturn_t {
            guard(Func::$name, || {
                // SAFETY: `value` is null or writable (the export's contract, module doc); `out` checks null.
                let value = unsafe { out(value) }?;
                *value = on_gpu(device, |$gpu, $t| $value)?;
                Ok(())
            })
        }
    };
}

getter!(/// NVML index of the device.
    nvmlDeviceGetIndex, c_uint, |gpu, _t| Ok(gpu.config().index as c_uint));
getter!(/// Device node minor number (`/dev/nvidia<N>`).
    nvmlDeviceGetMinorNumber, c_uint, |gpu, _t| Ok(gpu.config().minor_number as c_uint));
getter!(/// Utilization rates, %.
    nvmlDeviceGetUtilizationRates, nvmlUtilization_t, |gpu, t| gpu
        .utilization(t)
        .map(|(g, m)| nvmlUtilization_t { gpu: g, memory: m }));
getter!(/// Power draw, mW.
    nvmlDeviceGetPowerUsage, c_uint, |gpu, t| gpu.power_mw(t));
getter!(/// Enforced power limit, mW.
    nvmlDeviceGetEnforcedPowerLimit, c_uint, |gpu, t| gpu.power_limit_mw(t));
getter!(/// Power management limit, mW.
    nvmlDeviceGetPowerManagementLimit, c_uint, |gpu, t| gpu.power_limit_mw(t));
getter!(/// Default power management limit, mW.
    nvmlDeviceGetPowerManagementDefaultLimit, c_uint, |gpu, t| gpu.power_default_limit_mw(t));
getter!(/// Energy since the simulated boot, mJ.
    nvmlDeviceGetTotalEnergyConsumption, c_ulonglong, |gpu, t| gpu.energy_mj(t));
getter!(/// Current clock event reasons.
    nvmlDeviceGetCurrentClocksThrottleReasons, c_ulonglong, |gpu, t| gpu.clocks_event_reasons(t));
getter!(/// Current clock event reasons.
    nvmlDeviceGetCurrentClocksEventReasons, c_ulonglong, |gpu, t| gpu.clocks_event_reasons(t));
getter!(/// Supported clock event reasons.
    nvmlDeviceGetSupportedClocksThrottleReasons, c_ulonglong, |gpu, t| gpu.supported_clocks_event_reasons(t));
getter!(/// Performance state.
    nvmlDeviceGetPerformanceState, nvmlPstates_t, |gpu, t| gpu.pstate(t));
getter!(/// Number of fans.
    nvmlDeviceGetNumFans, c_uint, |gpu, t| gpu.fan_count(t));
getter!(/// Speed of fan 0, %.
    nvmlDeviceGetFanSpeed, c_uint, |gpu, t| gpu.fan_percent(0, t));
getter!(/// Current PCIe generation.
    nvmlDeviceGetCurrPcieLinkGeneration, c_uint, |gpu, t| gpu.pcie(t).map(|p| p.0));
getter!(/// Current PCIe width.
    nvmlDeviceGetCurrPcieLinkWidth, c_uint, |gpu, t| gpu.pcie(t).map(|p| p.1));
getter!(/// Maximum PCIe generation.
    nvmlDeviceGetMaxPcieLinkGeneration, c_uint, |gpu, t| gpu.pcie(t).map(|p| p.2));
getter!(/// Maximum PCIe width.
    nvmlDeviceGetMaxPcieLinkWidth, c_uint, |gpu, t| gpu.pcie(t).map(|p| p.3));
getter!(/// Compute mode.
    nvmlDeviceGetComputeMode, nvmlComputeMode_t, |gpu, t| gpu.compute_mode(t));
getter!(/// Whether page retirement is pending.
    nvmlDeviceGetRetiredPagesPendingStatus, nvmlEnableState_t, |gpu, t| gpu
        .retired_pending(t)
        .map(|p| if p { ENABLED } else { DISABLED }));
getter!(/// Supported event types.
    nvmlDeviceGetSupportedEventTypes, c_ulonglong, |gpu, t| gpu.check(None, t).map(|()| gpu.supported_events()));

/// Copies a device string (looked up by `text`) into a caller buffer.
///
/// # Safety
/// `buf` must be null or valid for `len` bytes of writes.
unsafe fn device_str(
    func: Func,
    device: nvmlDevice_t,
    buf: *mut c_char,
    len: c_uint,
    text: impl FnOnce(&crate::engine::GpuSim, f64) -> Result<String, Unavailable>,
) -> nvmlReturn_t {
    guard(func, || {
        if buf.is_null() {
            return Err(INVALID);
        }
        let value = on_gpu(device, text)?;
        // SAFETY: `buf` is null or valid for `len` bytes of writes (this function's contract).
        unsafe { write_str(buf, len, &value) }
    })
}

/// Product name.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: nvmlDevice_t,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    // SAFETY: the pointer and length are the export's, under its contract (module doc).
    unsafe {
        device_str(Func::nvmlDeviceGetName, device, name, length, |g, _| {
            Ok(g.config().spec.name.clone())
        })
    }
}

/// UUID.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: nvmlDevice_t,
    uuid: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    if let Ok(Some(mig_uuid)) = super::sharing::mig_uuid(device) {
        return guard(Func::nvmlDeviceGetUUID, || {
            // SAFETY: `uuid` is null or valid for `length` bytes of writes (the export's contract, module doc).
            unsafe { write_str(uuid, length, &mig_uuid) }
        });
    }
    // SAFETY: the pointer and length are the export's, under its contract (module doc).
    unsafe {
        device_str(Func::nvmlDeviceGetUUID, device, uuid, length, |g, _| {
            Ok(g.config().uuid.clone())
        })
    }
}

/// Board serial.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetSerial(
    device: nvmlDevice_t,
    serial: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    // SAFETY: the pointer and length are the export's, under its contract (module doc).
    unsafe {
        device_str(Func::nvmlDeviceGetSerial, device, serial, length, |g, t| {
            g.serial(t).map(str::to_string)
        })
    }
}

/// PCI information.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetPciInfo_v3, || {
        // SAFETY: `pci` is null or writable (the export's contract, module doc); `out` checks null.
        let pci = unsafe { out(pci) }?;
        let config = on_gpu(device, |g, _| Ok(g.config().clone()))?;
        // SAFETY: nvmlPciInfo_t is plain C data (integers and char arrays):
        // all-zero bytes are a valid value.
        *pci = unsafe { std::mem::zeroed() };
        pci.domain = 0;
        pci.bus = config.bus;
        pci.device = 0;
        pci.pciDeviceId = config.spec.pci_device_id;
        pci.pciSubSystemId = (config.spec.pci_device_id & 0xFFFF) | 0x16C1_0000;
        fill_array(&mut pci.busId, &config.pci_bus_id);
        let legacy = config.pci_bus_id.get(4..).unwrap_or(&config.pci_bus_id);
        fill_array(&mut pci.busIdLegacy, legacy);
        Ok(())
    })
}

/// Memory info (v2: total/reserved/free/used, `version` must be size | 2 << 24).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetMemoryInfo_v2, || {
        // SAFETY: `memory` is null or writable (the export's contract, module doc); `out` checks null.
        let memory = unsafe { out(memory) }?;
        let expected = (std::mem::size_of::<nvmlMemory_v2_t>() | (2 << 24)) as c_uint;
        if memory.version != expected {
            return Err(nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        if let Some(mig) = super::sharing::mig_memory(device)? {
            (memory.total, memory.reserved, memory.used) = (mig.memory_total, 0, mig.memory_used);
            memory.free = mig.memory_total - mig.memory_used;
            return Ok(());
        }
        let m = on_gpu(device, |g, t| g.memory(t))?;
        memory.total = m.total;
        memory.reserved = m.reserved;
        memory.used = m.used - m.reserved;
        memory.free = m.total - m.used;
        Ok(())
    })
}

/// Memory info (v1: used includes the reserved part).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetMemoryInfo, || {
        // SAFETY: `memory` is null or writable (the export's contract, module doc); `out` checks null.
        let memory = unsafe { out(memory) }?;
        let m = on_gpu(device, |g, t| g.memory(t))?;
        *memory = nvmlMemory_t {
            total: m.total,
            used: m.used,
            free: m.total - m.used,
        };
        Ok(())
    })
}

/// Temperature of sensor 0 (the GPU die), °C.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    sensor: nvmlTemperatureSensors_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetTemperature, || {
        // SAFETY: `temp` is null or writable (the export's contract, module doc); `out` checks null.
        let temp = unsafe { out(temp) }?;
        if sensor != nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU {
            return Err(INVALID);
        }
        *temp = on_gpu(device, |g, t| g.temperature(t))?;
        Ok(())
    })
}

/// Temperature thresholds: 0 shutdown, 1 slowdown, 2 memory max, 3 GPU max.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperatureThreshold(
    device: nvmlDevice_t,
    kind: nvmlTemperatureThresholds_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetTemperatureThreshold, || {
        // SAFETY: `temp` is null or writable (the export's contract, module doc); `out` checks null.
        let temp = unsafe { out(temp) }?;
        *temp = on_gpu(device, |g, t| g.temperature_threshold(kind, t))?;
        Ok(())
    })
}

/// Current clock (0 graphics, 1 SM, 2 memory, 3 video), MHz.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: nvmlDevice_t,
    kind: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetClockInfo, || {
        // SAFETY: `clock` is null or writable (the export's contract, module doc); `out` checks null.
        let clock = unsafe { out(clock) }?;
        *clock = on_gpu(device, |g, t| g.clock_mhz(kind, t))?;
        Ok(())
    })
}

/// Maximum clock (0 graphics, 1 SM, 2 memory, 3 video), MHz.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxClockInfo(
    device: nvmlDevice_t,
    kind: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetMaxClockInfo, || {
        // SAFETY: `clock` is null or writable (the export's contract, module doc); `out` checks null.
        let clock = unsafe { out(clock) }?;
        *clock = on_gpu(device, |g, t| g.max_clock_mhz(kind, t))?;
        Ok(())
    })
}

/// Speed of fan `fan`, %.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFanSpeed_v2(
    device: nvmlDevice_t,
    fan: c_uint,
    speed: *mut c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetFanSpeed_v2, || {
        // SAFETY: `speed` is null or writable (the export's contract, module doc); `out` checks null.
        let speed = unsafe { out(speed) }?;
        *speed = on_gpu(device, |g, t| g.fan_percent(fan, t))?;
        Ok(())
    })
}

/// Encoder or decoder utilization with a fixed 167 ms sampling period.
///
/// # Safety
/// `util` and `period` must each be null or valid for writes.
unsafe fn codec(
    func: Func,
    device: nvmlDevice_t,
    util: *mut c_uint,
    period: *mut c_uint,
    feature: Feature,
) -> nvmlReturn_t {
    guard(func, || {
        // SAFETY: `util`, `period` are null or writable (this function's contract); `out` checks null.
        let (util, period) = (unsafe { out(util) }?, unsafe { out(period) }?);
        *util = on_gpu(device, |g, t| {
            if feature == Feature::Encoder {
                g.encoder(t)
            } else {
                g.decoder(t)
            }
        })?;
        *period = 167_000;
        Ok(())
    })
}

/// Encoder utilization, %.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEncoderUtilization(
    device: nvmlDevice_t,
    util: *mut c_uint,
    period: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: the pointers are the export's, under its contract (module doc).
    unsafe {
        codec(
            Func::nvmlDeviceGetEncoderUtilization,
            device,
            util,
            period,
            Feature::Encoder,
        )
    }
}

/// Decoder utilization, %.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDecoderUtilization(
    device: nvmlDevice_t,
    util: *mut c_uint,
    period: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: the pointers are the export's, under its contract (module doc).
    unsafe {
        codec(
            Func::nvmlDeviceGetDecoderUtilization,
            device,
            util,
            period,
            Feature::Decoder,
        )
    }
}

/// MIG mode (current and pending).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetMigMode, || {
        // SAFETY: `current`, `pending` are null or writable (the export's contract, module doc); `out` checks null.
        let (current, pending) = (unsafe { out(current) }?, unsafe { out(pending) }?);
        let on = c_uint::from(on_gpu(device, |g, t| g.mig(t))?);
        (*current, *pending) = (on, on);
        Ok(())
    })
}

/// Field values; unknown or unsupported ids set the entry's nvmlReturn only.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: nvmlDevice_t,
    count: c_int,
    values: *mut nvmlFieldValue_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetFieldValues, || {
        if count < 0 || (count > 0 && values.is_null()) {
            return Err(INVALID);
        }
        with_device(device, |rt, index, t| {
            let gpu = rt.engine.gpu(index).ok_or(INVALID)?;
            gpu.check(None, t).map_err(state::code)?;
            let stamp = epoch_us() as i64;
            let mut batch_us = 0;
            for i in 0..count as usize {
                // SAFETY: `values` is non-null (checked above) and points to
                // `count` entries (the export's contract); `i < count`.
                let entry = unsafe { &mut *values.add(i) };
                let field_us = rt.engine.field_latency_us(entry.fieldId);
                batch_us += field_us;
                entry.timestamp = stamp;
                entry.latencyUsec = field_us as i64;
                match rt.engine.field(index, entry.fieldId, entry.scopeId, t) {
                    Ok(FieldValue::Uint(v)) => {
                        entry.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
                        entry.value.uiVal = v;
                        entry.nvmlReturn = nvmlReturn_enum_NVML_SUCCESS;
                    }
                    Ok(FieldValue::Ull(v)) => {
                        entry.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                        entry.value.ullVal = v;
                        entry.nvmlReturn = nvmlReturn_enum_NVML_SUCCESS;
                    }
                    Err(why) => entry.nvmlReturn = state::code(why),
                }
            }
            super::calls::take_time(batch_us);
            Ok(())
        })
    })
}

/// Violation time for a performance policy (0 power, 1 thermal, 2 sync boost,
/// 3 board limit, 4 low utilization, 5 reliability).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetViolationStatus(
    device: nvmlDevice_t,
    policy: nvmlPerfPolicyType_t,
    time: *mut nvmlViolationTime_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetViolationStatus, || {
        // SAFETY: `time` is null or writable (the export's contract, module doc); `out` checks null.
        let time = unsafe { out(time) }?;
        let which = match policy {
            0 => Some(Violation::PowerPolicy),
            1 => Some(Violation::ThermalPolicy),
            2 => Some(Violation::Reason(crate::engine::reasons::SYNC_BOOST)),
            3 => Some(Violation::Reason(crate::engine::reasons::HW_SLOWDOWN)),
            4 => Some(Violation::Reason(crate::engine::reasons::IDLE)),
            5 => None,
            _ => return Err(INVALID),
        };
        let ns = on_gpu(device, |g, t| match which {
            Some(which) => g.violation_ns(which, t),
            None => g.check(Some(Feature::Violation), t).map(|()| 0),
        })?;
        *time = nvmlViolationTime_t {
            referenceTime: epoch_us(),
            violationTime: ns,
        };
        Ok(())
    })
}
