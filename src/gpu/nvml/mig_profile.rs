//! The profile name of a MIG device ("3g.40gb"), from its attributes.
//!
//! `nvmlDeviceGetAttributes_v2` on a MIG device handle gives the GPU
//! instance's slice count and memory; the profile is named
//! `"<slices>g.<GiB rounded up>gb"`, as nvidia-smi and dcgm-exporter
//! (`GPU_I_PROFILE`) write it (A100 40GB: 1g.5gb has 4864 MiB; H100 80GB:
//! 3g.40gb has 40192 MiB). Read once per MIG device: the sampler keeps the
//! name while the device's UUID stays.

use nvml_wrapper::struct_wrappers::device::DeviceAttributes;
use nvml_wrapper::Device;

use super::Tally;
use crate::gpu::snapshot::{FieldGroup, MigInstance};

/// The GPU-instance profile name of a MIG device with these attributes;
/// `None` when they name no slices or memory (not a MIG device).
pub fn profile_name(attributes: &DeviceAttributes) -> Option<String> {
    let slices = attributes.gpu_instance_slice_count;
    let mib = attributes.memory_size_mb;
    (slices > 0 && mib > 0).then(|| format!("{slices}g.{}gb", mib.div_ceil(1024)))
}

/// The profile of MIG device `mig` (UUID `uuid`): the one `known` holds for
/// that UUID, else read from NVML; `None` when NVML cannot tell.
pub(super) fn read_profile(
    mig: &Device<'_>,
    uuid: &str,
    known: &[MigInstance],
    tally: &mut Tally,
) -> Option<String> {
    let kept = known
        .iter()
        .find(|m| !uuid.is_empty() && m.uuid == uuid)
        .and_then(|m| m.profile.clone());
    kept.or_else(|| {
        tally
            .call(FieldGroup::Device, "nvmlDeviceGetAttributes_v2", || {
                mig.attributes()
            })
            .as_ref()
            .and_then(profile_name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attributes(slices: u32, mib: u64) -> DeviceAttributes {
        DeviceAttributes {
            multiprocessor_count: 0,
            shared_copy_engine_count: 0,
            shared_decoder_count: 0,
            shared_encoder_count: 0,
            shared_jpeg_count: 0,
            shared_ofa_count: 0,
            gpu_instance_slice_count: slices,
            compute_instance_slice_count: slices,
            memory_size_mb: mib,
        }
    }

    #[test]
    fn names_follow_nvidia_smi() {
        // A100 40GB and H100 80GB profiles with their MIG memory sizes.
        assert_eq!(
            profile_name(&attributes(1, 4864)).as_deref(),
            Some("1g.5gb")
        );
        assert_eq!(
            profile_name(&attributes(7, 40192)).as_deref(),
            Some("7g.40gb")
        );
        assert_eq!(
            profile_name(&attributes(1, 9856)).as_deref(),
            Some("1g.10gb")
        );
        assert_eq!(
            profile_name(&attributes(3, 40192)).as_deref(),
            Some("3g.40gb")
        );
        assert_eq!(
            profile_name(&attributes(2, 10240)).as_deref(),
            Some("2g.10gb")
        );
    }

    #[test]
    fn no_slices_or_memory_is_no_name() {
        assert_eq!(profile_name(&attributes(0, 9856)), None);
        assert_eq!(profile_name(&attributes(1, 0)), None);
    }
}
