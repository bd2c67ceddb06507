//! `nvmlDeviceGetAttributes_v2` on MIG device handles: what a MIG device's
//! profile is made of (GPU- and compute-instance slices, memory), from which
//! tools such as nvidia-smi and gpuwatch name it (`"<slices>g.<GiB>gb"`).
//!
//! The slice counts come from the scenario's `profile` key ("3g.40gb" →
//! 3 slices; one compute instance spanning the GPU instance) and the memory
//! from `memory_mib`. Engine counts (copy engines, decoders, SMs) are not
//! modelled and answer 0. A GPU handle, and a MIG instance whose profile
//! names no slice count, answer NOT_SUPPORTED.

use super::calls::guard;
use super::out::out;
use super::sharing::mig_memory;
use super::state;
use crate::functions::Func;
use nvml_wrapper_sys::bindings::*;

/// The GPU-instance slice count a profile name starts with ("3g.40gb" → 3),
/// or `None` when it names none.
pub(crate) fn profile_slices(profile: &str) -> Option<u32> {
    let (slices, _) = profile.split_once("g.")?;
    slices.parse().ok().filter(|&n| n > 0)
}

/// The attributes of a MIG device: slice counts and memory (see the module).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAttributes_v2(
    device: nvmlDevice_t,
    attributes: *mut nvmlDeviceAttributes_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceGetAttributes_v2, || {
        // SAFETY: `attributes` is null or writable (the export's contract, module doc); `out` checks null.
        let attributes = unsafe { out(attributes) }?;
        let Some(mig) = mig_memory(device)? else {
            state::index_of(device)?;
            return Err(nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED);
        };
        let slices =
            profile_slices(&mig.profile).ok_or(nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED)?;
        *attributes = nvmlDeviceAttributes_t {
            multiprocessorCount: 0,
            sharedCopyEngineCount: 0,
            sharedDecoderCount: 0,
            sharedEncoderCount: 0,
            sharedJpegCount: 0,
            sharedOfaCount: 0,
            gpuInstanceSliceCount: slices,
            computeInstanceSliceCount: slices,
            memorySizeMB: mig.memory_total / (1024 * 1024),
        };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::profile_slices;

    #[test]
    fn slices_come_from_the_profile_name() {
        assert_eq!(profile_slices("3g.40gb"), Some(3));
        assert_eq!(profile_slices("1g.10gb+me"), Some(1));
        assert_eq!(profile_slices("7g.141gb"), Some(7));
        assert_eq!(profile_slices(""), None);
        assert_eq!(profile_slices("0g.5gb"), None);
        assert_eq!(profile_slices("big"), None);
    }
}
