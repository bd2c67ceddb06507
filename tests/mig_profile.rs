//! The profile name of each MIG GPU instance (issue 12 §1), read in process
//! on the simulator: exact per instance, absent without MIG, and read once
//! per MIG device rather than on every tick.

mod common;

use gpuwatch::sampler::procnames::ProcessNames;
use gpuwatch::sampler::reader::{NodeReader, Tiers};

/// How often the simulator answered `nvmlDeviceGetAttributes_v2`.
fn attribute_calls(library: &std::path::Path) -> u64 {
    common::sim_calls(library, c"nvmlDeviceGetAttributes_v2")
}

#[test]
fn mig_instances_carry_their_profile_read_once_per_device() {
    let (library, driver) = common::frozen_simulator("scenarios/golden-full.toml");
    let mut reader = NodeReader::new(&driver, "test".into(), ProcessNames::new(None));
    let first = reader.tick(Tiers::ALL, None);

    // tests/scenarios/golden-full.toml: GPU 0 (A100 40GB) has instance 1
    // (3 slices, 19968 MiB) and 2 (2 slices, 9728 MiB); GPU 1 has no MIG.
    let profiles = |snapshot: &gpuwatch::gpu::Snapshot| -> Vec<(u32, Option<String>, String)> {
        snapshot.gpus[0]
            .mig_instances
            .iter()
            .map(|m| (m.gpu_instance_id, m.profile.clone(), m.uuid.clone()))
            .collect()
    };
    let expected = vec![
        (
            1,
            Some("3g.20gb".to_string()),
            "MIG-a0000000-0000-4000-8000-000000000000-1".to_string(),
        ),
        (
            2,
            Some("2g.10gb".to_string()),
            "MIG-a0000000-0000-4000-8000-000000000000-2".to_string(),
        ),
    ];
    assert_eq!(profiles(&first), expected);
    assert!(first.gpus[1].mig_instances.is_empty());
    assert_eq!(attribute_calls(&library), 2, "one call per MIG device");

    // Later process and slow ticks keep the names without asking again.
    for _ in 0..3 {
        let again = reader.tick(Tiers::ALL, None);
        assert_eq!(profiles(&again), expected);
    }
    assert_eq!(
        attribute_calls(&library),
        2,
        "no call while the layout stays"
    );
}
