//! NVLink fabric registration (`nvmlDeviceGetGpuFabricInfoV`), read on the
//! slow tier: the state changes rarely (once at boot, then on a fabric
//! manager restart). nvml-wrapper 0.13 does not wrap the call: the raw calls
//! (v3, then v2, then the unversioned call) are `raw::fabric_info`; this
//! module names what they answer.

use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings::nvmlReturn_t;

use super::tally::error_name;
use super::{raw, GpuDevice, Tally};
use crate::gpu::fabric::{decode_health_mask, FabricHealth, FabricReading, FabricState};
use crate::gpu::snapshot::FieldGroup;

impl GpuDevice<'_> {
    /// The GPU's fabric registration; `None` where there is no fabric
    /// (NOT_SUPPORTED, state NOT_SUPPORTED, or no such symbol).
    pub(super) fn read_fabric(&self, tally: &mut Tally) -> Option<FabricReading> {
        let raw = tally.call(FieldGroup::Device, "nvmlDeviceGetGpuFabricInfoV", || {
            raw::fabric_info(&self.device)
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
