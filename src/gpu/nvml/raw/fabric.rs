//! The fabric-info calls (nvml-wrapper 0.13 does not wrap them): the
//! versioned `nvmlDeviceGetGpuFabricInfoV` asking for the v3 struct (with
//! the health summary), v2 on drivers that do not know v3, and the
//! unversioned `nvmlDeviceGetGpuFabricInfo` on drivers without `…InfoV` (no
//! symbol, or FUNCTION_NOT_FOUND).

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings::{
    nvmlGpuFabricInfoV_t, nvmlGpuFabricInfo_t, nvmlGpuFabricInfo_v2_t, nvmlGpuFabricInfo_v3_t,
    nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND, nvmlReturn_enum_NVML_SUCCESS, nvmlReturn_t,
};

use super::symbol;

/// `version` of a versioned NVML struct, as nvml.h's
/// `NVML_STRUCT_VERSION(GpuFabricInfo, n)` builds it: its size | n << 24.
/// The tests hold the results to nvml.h's numbers.
const fn struct_version(size: usize, version: u32) -> u32 {
    (size as u32) | (version << 24)
}

/// `nvmlGpuFabricInfo_v3` (0x0300_0028).
const V3: u32 = struct_version(std::mem::size_of::<nvmlGpuFabricInfo_v3_t>(), 3);
/// `nvmlGpuFabricInfo_v2` (0x0200_0024).
const V2: u32 = struct_version(std::mem::size_of::<nvmlGpuFabricInfo_v2_t>(), 2);

/// The fields of any version, before they are named.
pub(in crate::gpu::nvml) struct FabricInfo {
    /// The NVLink domain's UUID.
    pub cluster_uuid: [u8; 16],
    /// The registration's NVML return code.
    pub status: nvmlReturn_t,
    /// The clique within the domain.
    pub clique_id: u32,
    /// NVML_GPU_FABRIC_STATE_*.
    pub state: u8,
    /// NVML_GPU_FABRIC_HEALTH_MASK_* bits (0 from the unversioned call).
    pub health_mask: u32,
    /// NVML_GPU_FABRIC_HEALTH_SUMMARY_* (v3 only).
    pub health_summary: Option<u8>,
}

/// Calls the newest fabric-info function the library has.
pub(in crate::gpu::nvml) fn fabric_info(device: &Device<'_>) -> Result<FabricInfo, NvmlError> {
    let Ok(versioned) = symbol(&device.nvml().lib().nvmlDeviceGetGpuFabricInfoV) else {
        return unversioned(device);
    };
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: nvmlGpuFabricInfoV_t = unsafe { std::mem::zeroed() };
    info.version = V3;
    // SAFETY: the handle comes from nvml-wrapper and stays valid while
    // `device` lives; `info` is the v3 struct its version names.
    let code = unsafe { versioned(device.handle(), &mut info) };
    if code == nvmlReturn_enum_NVML_SUCCESS {
        return Ok(FabricInfo {
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
    // SAFETY: as above; the v2 struct is a prefix of v3 and its version says
    // v2, so the library writes only v2's fields.
    nvml_try(unsafe {
        versioned(
            device.handle(),
            (&mut v2 as *mut nvmlGpuFabricInfo_v2_t).cast(),
        )
    })?;
    Ok(FabricInfo {
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
fn unversioned(device: &Device<'_>) -> Result<FabricInfo, NvmlError> {
    let plain = symbol(&device.nvml().lib().nvmlDeviceGetGpuFabricInfo)?;
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: nvmlGpuFabricInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: the handle comes from nvml-wrapper and stays valid while
    // `device` lives; `info` is a valid out pointer of the right type.
    nvml_try(unsafe { plain(device.handle(), &mut info) })?;
    Ok(FabricInfo {
        cluster_uuid: info.clusterUuid,
        status: info.status,
        clique_id: info.cliqueId,
        state: info.state,
        health_mask: 0,
        health_summary: None,
    })
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};

    use super::*;

    /// nvml.h's version words, written out: `NVML_STRUCT_VERSION` of a
    /// 40-byte v3 and a 36-byte v2 struct. A binding whose size drifts
    /// (a field added, a `state` widened) changes V3/V2 and fails here.
    #[test]
    fn the_version_words_are_nvml_h_numbers() {
        assert_eq!(V3, 0x0300_0028);
        assert_eq!(V2, 0x0200_0024);
    }

    /// nvml.h: version (uint), clusterUuid[16], status, cliqueId (4 bytes
    /// each), state (uchar, padded to 4), healthMask (uint), then in v3
    /// healthSummary (uchar, padded to 4).
    #[test]
    fn the_fabric_structs_have_nvml_h_layout() {
        assert_eq!(size_of::<nvmlGpuFabricInfo_v3_t>(), 40);
        let v3 = [
            offset_of!(nvmlGpuFabricInfo_v3_t, version),
            offset_of!(nvmlGpuFabricInfo_v3_t, clusterUuid),
            offset_of!(nvmlGpuFabricInfo_v3_t, status),
            offset_of!(nvmlGpuFabricInfo_v3_t, cliqueId),
            offset_of!(nvmlGpuFabricInfo_v3_t, state),
            offset_of!(nvmlGpuFabricInfo_v3_t, healthMask),
            offset_of!(nvmlGpuFabricInfo_v3_t, healthSummary),
        ];
        assert_eq!(v3, [0, 4, 20, 24, 28, 32, 36]);
        assert_eq!(size_of::<nvmlGpuFabricInfo_v2_t>(), 36);
        let v2 = [
            offset_of!(nvmlGpuFabricInfo_v2_t, version),
            offset_of!(nvmlGpuFabricInfo_v2_t, clusterUuid),
            offset_of!(nvmlGpuFabricInfo_v2_t, status),
            offset_of!(nvmlGpuFabricInfo_v2_t, cliqueId),
            offset_of!(nvmlGpuFabricInfo_v2_t, state),
            offset_of!(nvmlGpuFabricInfo_v2_t, healthMask),
        ];
        assert_eq!(v2, [0, 4, 20, 24, 28, 32], "v2 is a prefix of v3");
        // The unversioned struct: no version word, no health.
        assert_eq!(size_of::<nvmlGpuFabricInfo_t>(), 28);
        let plain = [
            offset_of!(nvmlGpuFabricInfo_t, clusterUuid),
            offset_of!(nvmlGpuFabricInfo_t, status),
            offset_of!(nvmlGpuFabricInfo_t, cliqueId),
            offset_of!(nvmlGpuFabricInfo_t, state),
        ];
        assert_eq!(plain, [0, 16, 20, 24]);
    }
}
