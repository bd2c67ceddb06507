//! NVIDIA's DRA driver (`gpu.nvidia.com`) device names, mapped to the GPUs
//! and MIG instances of this node with no API server: the names carry the
//! GPU's device node minor number.
//!
//! - `gpu-<minor>`: a whole GPU, the one whose `nvmlDeviceGetMinorNumber`
//!   is `<minor>` (`/dev/nvidia<minor>`; not always the NVML index).
//! - `gpu-<minor>-mig-<profile>-<start>-<size>`: a MIG device on that GPU,
//!   `<profile>` the GPU instance profile (its id, `19`, in the driver's
//!   classic names; its name without dots, `1g10gb`, in newer ones),
//!   `<start>` and `<size>` its placement in memory slices.
//!
//! The snapshot knows each MIG instance's profile name but not its
//! placement, so a MIG device is matched to the one instance of its
//! profile on the GPU; where the GPU has several instances of that profile
//! the device is left unmatched rather than guessed (see docs/workloads.md).

use crate::gpu::MigInstance;

/// The driver name of NVIDIA's DRA driver for GPUs and MIG devices.
pub const NVIDIA_GPU_DRIVER: &str = "gpu.nvidia.com";

/// A device NVIDIA's DRA driver allocated, as its name tells.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DraDevice {
    /// A whole GPU.
    Gpu {
        /// The GPU's device node minor number.
        minor: u32,
    },
    /// A MIG device.
    Mig {
        /// The parent GPU's device node minor number.
        minor: u32,
        /// The GPU instance profile: a numeric profile id or a name
        /// without dots (`1g10gb`).
        profile: String,
        /// First memory slice of the placement.
        start: u32,
        /// Memory slices of the placement.
        size: u32,
    },
}

impl DraDevice {
    /// The parent GPU's minor number.
    pub fn minor(&self) -> u32 {
        match self {
            DraDevice::Gpu { minor } | DraDevice::Mig { minor, .. } => *minor,
        }
    }
}

/// The device `name` names, or `None` where it is not one of NVIDIA's GPU
/// or MIG device names (never panics, whatever the text).
pub fn parse_device_name(name: &str) -> Option<DraDevice> {
    let rest = name.strip_prefix("gpu-")?;
    let (minor, rest) = match rest.split_once('-') {
        Some((minor, rest)) => (number(minor)?, Some(rest)),
        None => (number(rest)?, None),
    };
    let Some(rest) = rest else {
        return Some(DraDevice::Gpu { minor });
    };
    let rest = rest.strip_prefix("mig-")?;
    let mut parts = rest.rsplitn(3, '-');
    let size = number(parts.next()?)?;
    let start = number(parts.next()?)?;
    let profile = parts.next()?;
    let valid =
        |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '+' | '-');
    if profile.is_empty() || profile.len() > 32 || !profile.chars().all(valid) {
        return None;
    }
    Some(DraDevice::Mig {
        minor,
        profile: profile.to_string(),
        start,
        size,
    })
}

/// A decimal number as the driver writes it: at most 9 digits, no sign,
/// no spaces, no leading zero.
fn number(text: &str) -> Option<u32> {
    if text.is_empty()
        || text.len() > 9
        || !text.bytes().all(|b| b.is_ascii_digit())
        || (text.len() > 1 && text.starts_with('0'))
    {
        return None;
    }
    text.parse().ok()
}

/// The GPU instance a MIG device of `profile` is, among a GPU's
/// `instances`: the only one whose profile fits; `None` where none or
/// several do.
pub fn mig_instance(profile: &str, instances: &[MigInstance]) -> Option<u32> {
    let mut fitting = instances
        .iter()
        .filter(|m| m.profile.as_deref().is_some_and(|p| fits(profile, p)));
    let first = fitting.next()?;
    fitting.next().is_none().then_some(first.gpu_instance_id)
}

/// Whether a device name's `profile` (id, or name without dots and with
/// `+` made `-` as DNS labels need) is the profile NVML names `name`
/// ("1g.10gb", "1g.10gb+me").
fn fits(profile: &str, name: &str) -> bool {
    let dotless = name.replace('.', "");
    if profile == name || profile == dotless || profile == dotless.replace('+', "-") {
        return true;
    }
    // Profile ids as `nvidia-smi mig -lgip` lists them on A100 and H100
    // (the same on both): 0 7g, 5 4g, 9 3g, 14 2g, 15 1g (2 memory
    // slices), 19 1g, 20 1g+me. Matched on the compute slices only.
    let slices = match number(profile) {
        Some(0) => "7g.",
        Some(5) => "4g.",
        Some(9) => "3g.",
        Some(14) => "2g.",
        Some(15 | 19 | 20) => "1g.",
        _ => return false,
    };
    name.starts_with(slices) && (profile == "20") == name.ends_with("+me")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn instance(id: u32, profile: &str) -> MigInstance {
        MigInstance {
            gpu_instance_id: id,
            uuid: format!("MIG-{id}"),
            profile: Some(profile.into()),
            memory_total_bytes: 0,
            memory_used_bytes: 0,
        }
    }

    #[test]
    fn names_of_whole_gpus_and_mig_devices() {
        assert_eq!(
            parse_device_name("gpu-0"),
            Some(DraDevice::Gpu { minor: 0 })
        );
        assert_eq!(
            parse_device_name("gpu-13"),
            Some(DraDevice::Gpu { minor: 13 })
        );
        assert_eq!(
            parse_device_name("gpu-2-mig-19-4-1"),
            Some(DraDevice::Mig {
                minor: 2,
                profile: "19".into(),
                start: 4,
                size: 1
            })
        );
        assert_eq!(
            parse_device_name("gpu-1-mig-1g10gb-6-1").map(|d| d.minor()),
            Some(1)
        );
    }

    #[test]
    fn malformed_names_are_not_mapped() {
        for name in [
            "",
            "gpu",
            "gpu-",
            "gpu--1",
            "gpu-+1",
            "gpu- 1",
            "gpu-1x",
            "gpu-99999999999",
            "GPU-0",
            "gpu-0-",
            "gpu-0-mig",
            "gpu-0-mig-",
            "gpu-0-mig-19",
            "gpu-0-mig-19-0",
            "gpu-0-mig--0-1",
            "gpu-0-mig-19-a-1",
            "gpu-0-mig-19-0-1-",
            "gpu-0-vfio",
            "gpu-vfio-0",
            "GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763",
            "gpu-0-mig-1G10GB-0-1",
            "gpu-07",
            "gpu-0-mig-19-00-1",
        ] {
            assert_eq!(parse_device_name(name), None, "{name:?}");
        }
    }

    #[test]
    fn a_mig_device_is_the_one_instance_of_its_profile() {
        let instances = [
            instance(1, "3g.40gb"),
            instance(2, "1g.10gb"),
            instance(3, "2g.20gb"),
            instance(4, "2g.20gb"),
            instance(5, "1g.10gb+me"),
        ];
        assert_eq!(mig_instance("3g40gb", &instances), Some(1));
        assert_eq!(mig_instance("3g.40gb", &instances), Some(1));
        assert_eq!(mig_instance("9", &instances), Some(1));
        assert_eq!(mig_instance("19", &instances), Some(2));
        assert_eq!(mig_instance("20", &instances), Some(5));
        assert_eq!(mig_instance("1g10gb-me", &instances), Some(5));
        assert_eq!(mig_instance("1g10gbme", &instances), None);
        // Two instances of the profile: not guessed.
        assert_eq!(mig_instance("2g20gb", &instances), None);
        assert_eq!(mig_instance("14", &instances), None);
        assert_eq!(mig_instance("0", &instances), None);
        assert_eq!(mig_instance("7", &instances), None);
    }

    proptest! {
        #[test]
        fn any_text_parses_without_panic(name in ".{0,64}") {
            let parsed = parse_device_name(&name);
            if let Some(device) = parsed {
                prop_assert!(name.starts_with("gpu-"));
                let prefix = format!("gpu-{}", device.minor());
                prop_assert!(name.starts_with(&prefix), "{} from {:?}", prefix, name);
            }
        }

        #[test]
        fn names_as_the_driver_writes_them_parse_back(
            minor in 0u32..1024,
            profile in "[0-9]{1,2}|[1-7]g[0-9]{1,3}gb",
            start in 0u32..8,
            size in 1u32..8,
        ) {
            prop_assert_eq!(
                parse_device_name(&format!("gpu-{minor}")),
                Some(DraDevice::Gpu { minor })
            );
            prop_assert_eq!(
                parse_device_name(&format!("gpu-{minor}-mig-{profile}-{start}-{size}")),
                Some(DraDevice::Mig { minor, profile, start, size })
            );
        }
    }
}
