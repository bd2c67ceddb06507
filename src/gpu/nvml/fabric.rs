//! NVLink fabric registration (`nvmlDeviceGetGpuFabricInfoV`), read on the
//! slow tier: the state changes rarely (once at boot, then on a fabric
//! manager restart). nvml-wrapper 0.13 does not wrap the call, so this
//! module calls the raw symbol, asking for the v3 struct (with the health
//! summary) and falling back to v2 on drivers that do not know v3, then to
//! the unversioned call on drivers without `…InfoV` (no symbol, or
//! FUNCTION_NOT_FOUND).

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings::{
    nvmlGpuFabricInfoV_t, nvmlGpuFabricInfo_t, nvmlGpuFabricInfo_v2_t, nvmlGpuFabricInfo_v3_t,
    nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND, nvmlReturn_enum_NVML_SUCCESS, nvmlReturn_t,
};

use super::tally::error_name;
use super::{GpuDevice, Tally};
use crate::gpu::fabric::{decode_health_mask, FabricHealth, FabricReading, FabricState};
use crate::gpu::snapshot::FieldGroup;

/// `version` of a versioned NVML struct, as nvml.h's
/// `NVML_STRUCT_VERSION(GpuFabricInfo, n)`: its size | n << 24.
const fn struct_version(size: usize, version: u32) -> u32 {
    (size as u32) | (version << 24)
}

/// `nvmlGpuFabricInfo_v3`.
const V3: u32 = struct_version(std::mem::size_of::<nvmlGpuFabricInfo_v3_t>(), 3);
/// `nvmlGpuFabricInfo_v2`.
const V2: u32 = struct_version(std::mem::size_of::<nvmlGpuFabricInfo_v2_t>(), 2);

/// The fields of any version, before they are named.
struct Raw {
    cluster_uuid: [u8; 16],
    status: nvmlReturn_t,
    clique_id: u32,
    state: u8,
    health_mask: u32,
    health_summary: Option<u8>,
}

impl GpuDevice<'_> {
    /// The GPU's fabric registration; `None` where there is no fabric
    /// (NOT_SUPPORTED, state NOT_SUPPORTED, or no such symbol).
    pub(super) fn read_fabric(&self, tally: &mut Tally) -> Option<FabricReading> {
        let raw = tally.call(FieldGroup::Device, "nvmlDeviceGetGpuFabricInfoV", || {
            fabric_info(&self.device)
        })?;
        let state = FabricState::from_nvml(raw.state)?;
        Some(FabricReading {
            state,
            status: status_name(raw.status),
            clique_id: raw.clique_id,
            cluster_uuid: format_uuid(&raw.cluster_uuid),
            health: raw.health_summary.and_then(FabricHealth::from_nvml),
            issues: decode_health_mask(raw.health_mask),
        })
    }
}

/// Calls the newest fabric-info function the library has.
fn fabric_info(device: &Device<'_>) -> Result<Raw, NvmlError> {
    let lib = device.nvml().lib();
    let Ok(versioned) = lib.nvmlDeviceGetGpuFabricInfoV.as_ref() else {
        return unversioned(device);
    };
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: nvmlGpuFabricInfoV_t = unsafe { std::mem::zeroed() };
    info.version = V3;
    // SAFETY: as above; `info` is the v3 struct its version names.
    let code = unsafe { versioned(device.handle(), &mut info) };
    if code == nvmlReturn_enum_NVML_SUCCESS {
        return Ok(Raw {
            cluster_uuid: info.clusterUuid,
            status: info.status,
            clique_id: info.cliqueId,
            state: info.state,
            health_mask: info.healthMask,
            health_summary: Some(info.healthSummary),
        });
    }
    if code == nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND {
        return unversioned(device);
    }
    if code != nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH {
        return Err(code.into());
    }
    // A driver that predates v3: ask for v2 (no health summary).
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut v2: nvmlGpuFabricInfo_v2_t = unsafe { std::mem::zeroed() };
    v2.version = V2;
    // SAFETY: the v2 struct is a prefix of v3 and its version says v2, so
    // the library writes only v2's fields.
    nvml_try(unsafe {
        versioned(
            device.handle(),
            (&mut v2 as *mut nvmlGpuFabricInfo_v2_t).cast(),
        )
    })?;
    Ok(Raw {
        cluster_uuid: v2.clusterUuid,
        status: v2.status,
        clique_id: v2.cliqueId,
        state: v2.state,
        health_mask: v2.healthMask,
        health_summary: None,
    })
}

/// `nvmlDeviceGetGpuFabricInfo`, the call before the versioned one: no
/// health mask or summary.
fn unversioned(device: &Device<'_>) -> Result<Raw, NvmlError> {
    let plain = device
        .nvml()
        .lib()
        .nvmlDeviceGetGpuFabricInfo
        .as_ref()
        .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: nvmlGpuFabricInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: the handle comes from nvml-wrapper and stays valid while
    // `device` lives; `info` is a valid out pointer of the right type.
    nvml_try(unsafe { plain(device.handle(), &mut info) })?;
    Ok(Raw {
        cluster_uuid: info.clusterUuid,
        status: info.status,
        clique_id: info.cliqueId,
        state: info.state,
        health_mask: 0,
        health_summary: None,
    })
}

/// The registration status as a label value: `success` or NVML's error name.
fn status_name(code: nvmlReturn_t) -> String {
    use nvml_wrapper_sys::bindings::*;
    #[allow(non_upper_case_globals)]
    let name = match code {
        nvmlReturn_enum_NVML_SUCCESS => "success",
        nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_RESOURCES => "insufficient_resources",
        nvmlReturn_enum_NVML_ERROR_NOT_READY => "not_ready",
        nvmlReturn_enum_NVML_ERROR_INVALID_STATE => "invalid_state",
        nvmlReturn_enum_NVML_ERROR_GPU_NOT_FOUND => "gpu_not_found",
        other => match NvmlError::from(other) {
            NvmlError::UnexpectedVariant(code) => return format!("nvml_error_{code}"),
            error => error_name(&error),
        },
    };
    name.to_string()
}

/// 16 bytes as `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
fn format_uuid(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_size_and_number_as_nvml_h_builds_them() {
        assert_eq!(V3 >> 24, 3);
        assert_eq!(
            V3 & 0xFF_FFFF,
            std::mem::size_of::<nvmlGpuFabricInfo_v3_t>() as u32
        );
        assert_eq!(V2 >> 24, 2);
    }

    #[test]
    fn status_names_and_uuid_text() {
        assert_eq!(status_name(0), "success");
        assert_eq!(status_name(27), "not_ready");
        assert_eq!(status_name(3), "not_supported");
        assert_eq!(status_name(999), "unknown");
        assert_eq!(status_name(77), "nvml_error_77");
        let mut bytes = [0u8; 16];
        bytes[0] = 0x5c;
        bytes[15] = 0x6f;
        assert_eq!(format_uuid(&bytes), "5c000000-0000-0000-0000-00000000006f");
    }
}
