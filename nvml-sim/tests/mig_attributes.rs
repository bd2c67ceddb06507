//! `nvmlDeviceGetAttributes_v2` on MIG device handles, through nvml-wrapper
//! as the agent calls it: slices from the scenario's profile, memory from
//! `memory_mib`; NOT_SUPPORTED on a GPU handle and where the profile names
//! no slice count.

mod common;

use common::open;
use nvml_wrapper::error::NvmlError;

#[test]
fn mig_devices_answer_their_slices_and_memory() {
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mig-profiles.toml"
    );
    let nvml = open(scenario, Some("10")).expect("init mig-profiles");
    let plain = nvml.device_by_index(0).expect("gpu 0");
    assert!(matches!(plain.attributes(), Err(NvmlError::NotSupported)));

    let gpu = nvml.device_by_index(1).expect("gpu 1");
    assert_eq!(gpu.mig_device_count().expect("count"), 2);
    let named = gpu.mig_device_by_index(0).expect("mig 0");
    let a = named.attributes().expect("attributes of a named instance");
    assert_eq!(a.gpu_instance_slice_count, 2);
    assert_eq!(a.compute_instance_slice_count, 2);
    assert_eq!(a.memory_size_mb, 20096);
    assert!(matches!(gpu.attributes(), Err(NvmlError::NotSupported)));

    let unnamed = gpu.mig_device_by_index(1).expect("mig 1");
    assert!(matches!(unnamed.attributes(), Err(NvmlError::NotSupported)));
}
