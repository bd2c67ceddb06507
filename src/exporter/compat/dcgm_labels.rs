//! dcgm-exporter's labels of a GPU, shared by its device fields (`dcgm`)
//! and its profiling fields (`dcgm_prof`).

use std::borrow::Cow;

use crate::families::{text, Labels};
use crate::gpu::{GpuSnapshot, Snapshot};

/// dcgm-exporter's labels of one GPU.
pub(super) fn labels<'a>(snapshot: &'a Snapshot, gpu: &'a GpuSnapshot) -> Labels<'a> {
    let identity = &gpu.identity;
    vec![
        ("gpu", Cow::Owned(gpu.index.to_string())),
        ("UUID", Cow::Borrowed(gpu.uuid.as_str())),
        ("pci_bus_id", text(&identity.pci_bus_id)),
        // dcgm-exporter names the device node, /dev/nvidia<minor>; the NVML
        // index stands in while the minor number is not known.
        (
            "device",
            Cow::Owned(format!(
                "nvidia{}",
                identity.minor_number.unwrap_or(gpu.index)
            )),
        ),
        ("modelName", text(&identity.name)),
        ("Hostname", Cow::Borrowed(snapshot.hostname.as_str())),
        (
            "DCGM_FI_DRIVER_VERSION",
            text(&snapshot.system.driver_version),
        ),
    ]
}
