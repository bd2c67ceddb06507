//! NVLink and GPU fabric exports.

use super::calls::guard;
use super::out::{fill_array, out};
use super::state::on_gpu;
use crate::functions::Func;
use crate::scenario::health::RemoteKind;
use nvml_wrapper_sys::bindings::*;
use std::ffi::{c_uint, c_ulonglong};

/// Whether `link` is active (ENABLED) or down (DISABLED).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: nvmlDevice_t,
    link: c_uint,
    active: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetNvLinkState, || {
        // SAFETY: `active` is null or writable (the export's contract, module doc); `out` checks null.
        let active = unsafe { out(active) }?;
        *active = if on_gpu(device, |g, t| g.nvlink_active(link, t))? {
            nvmlEnableState_enum_NVML_FEATURE_ENABLED
        } else {
            nvmlEnableState_enum_NVML_FEATURE_DISABLED
        };
        Ok(())
    })
}

/// NVLink version of `link`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkVersion(
    device: nvmlDevice_t,
    link: c_uint,
    version: *mut c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetNvLinkVersion, || {
        // SAFETY: `version` is null or writable (the export's contract, module doc); `out` checks null.
        let version = unsafe { out(version) }?;
        *version = on_gpu(device, |g, t| g.nvlink_version(link, t))?;
        Ok(())
    })
}

/// Capability `cap` of `link` (1 yes, 0 no).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkCapability(
    device: nvmlDevice_t,
    link: c_uint,
    cap: nvmlNvLinkCapability_t,
    result: *mut c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetNvLinkCapability, || {
        // SAFETY: `result` is null or writable (the export's contract, module doc); `out` checks null.
        let result = unsafe { out(result) }?;
        *result = on_gpu(device, |g, t| g.nvlink_capability(link, cap, t))?;
        Ok(())
    })
}

/// PCI information of the device at the far end of `link`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    device: nvmlDevice_t,
    link: c_uint,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetNvLinkRemotePciInfo_v2, || {
        // SAFETY: `pci` is null or writable (the export's contract, module doc); `out` checks null.
        let pci = unsafe { out(pci) }?;
        let remote = on_gpu(device, |g, t| g.nvlink_remote(link, t))?;
        // SAFETY: nvmlPciInfo_t is plain C data (integers and char arrays):
        // all-zero bytes are a valid value.
        *pci = unsafe { std::mem::zeroed() };
        pci.bus = remote.bus;
        pci.pciDeviceId = remote.pci_device_id;
        fill_array(&mut pci.busId, &remote.pci_bus_id);
        let legacy = remote.pci_bus_id.get(4..).unwrap_or(&remote.pci_bus_id);
        fill_array(&mut pci.busIdLegacy, legacy);
        Ok(())
    })
}

/// Error counter `counter` of `link`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkErrorCounter(
    device: nvmlDevice_t,
    link: c_uint,
    counter: nvmlNvLinkErrorCounter_t,
    value: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetNvLinkErrorCounter, || {
        // SAFETY: `value` is null or writable (the export's contract, module doc); `out` checks null.
        let value = unsafe { out(value) }?;
        *value = on_gpu(device, |g, t| g.nvlink_errors(link, counter, t))?;
        Ok(())
    })
}

/// What `link` leads to: an NVSwitch or a GPU.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemoteDeviceType(
    device: nvmlDevice_t,
    link: c_uint,
    kind: *mut nvmlIntNvLinkDeviceType_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetNvLinkRemoteDeviceType, || {
        // SAFETY: `kind` is null or writable (the export's contract, module doc); `out` checks null.
        let kind = unsafe { out(kind) }?;
        *kind = match on_gpu(device, |g, t| g.nvlink_remote(link, t))?.kind {
            RemoteKind::Switch => nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_SWITCH,
            RemoteKind::Gpu => nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_GPU,
        };
        Ok(())
    })
}

/// GPU fabric info (the unversioned struct).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfo(
    device: nvmlDevice_t,
    info: *mut nvmlGpuFabricInfo_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetGpuFabricInfo, || {
        // SAFETY: `info` is null or writable (the export's contract, module doc); `out` checks null.
        let info = unsafe { out(info) }?;
        let f = on_gpu(device, |g, t| g.fabric(t))?;
        *info = nvmlGpuFabricInfo_t {
            clusterUuid: f.cluster_uuid,
            status: f.status,
            cliqueId: f.clique_id,
            state: f.state,
        };
        Ok(())
    })
}

/// `version` of a versioned NVML struct: its size | version << 24.
const fn struct_version(size: usize, version: u32) -> c_uint {
    (size as c_uint) | (version << 24)
}

/// GPU fabric info, versioned: v2 adds `healthMask`, v3 `healthSummary`;
/// any other `version`, or one newer than the scenario's driver knows
/// (`struct_version`), is ARGUMENT_VERSION_MISMATCH; a driver without the
/// call (`struct_version = 1`) answers FUNCTION_NOT_FOUND.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfoV(
    device: nvmlDevice_t,
    info: *mut nvmlGpuFabricInfoV_t,
) -> nvmlReturn_t {
    const V2: c_uint = struct_version(std::mem::size_of::<nvmlGpuFabricInfo_v2_t>(), 2);
    const V3: c_uint = struct_version(std::mem::size_of::<nvmlGpuFabricInfo_v3_t>(), 3);
    guard(Func::nvmlDeviceGetGpuFabricInfoV, || {
        if info.is_null() {
            return Err(nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT);
        }
        // Read the version alone: a v2 caller's struct is smaller than v3.
        // SAFETY: `info` is non-null (checked above) and points to a fabric
        // info struct of some version (the export's contract); every version
        // starts with the `version` field, read alone without a reference.
        let version = unsafe { std::ptr::addr_of!((*info).version).read() };
        if version != V2 && version != V3 {
            return Err(nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        let f = on_gpu(device, |g, t| g.fabric(t))?;
        if f.struct_version < 2 {
            return Err(nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND);
        }
        if version == V3 && f.struct_version < 3 {
            return Err(nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        // SAFETY: `info` is non-null and points to a struct of the version
        // it names (the export's contract); V2 and V3 both begin with the v2
        // layout, so the v2 view is in bounds either way.
        let v2 = unsafe { &mut *info.cast::<nvmlGpuFabricInfo_v2_t>() };
        v2.clusterUuid = f.cluster_uuid;
        v2.status = f.status;
        v2.cliqueId = f.clique_id;
        v2.state = f.state;
        v2.healthMask = f.health_mask;
        if version == V3 {
            // SAFETY: the caller's struct is a V3 (its version says so), which
            // has `healthSummary`; `v2` is not used after this point.
            unsafe { (*info).healthSummary = f.health_summary };
        }
        Ok(())
    })
}
