//! NVIDIA GPUs on the PCI bus, read from sysfs (`/sys/bus/pci/devices/*/
//! {vendor,class}`): the GPUs that sit in the machine whether or not the
//! driver enumerated them. A GPU that fell off the bus before the driver
//! started is one NVML simply does not count; this count does.

use std::path::{Path, PathBuf};

use crate::gpu::pci_address::PciAddress;

/// NVIDIA's PCI vendor id.
pub const NVIDIA_VENDOR: u32 = 0x10de;
/// Most directory entries read (a large server has a few hundred devices).
const MAX_DEVICES: usize = 4096;

/// Why the PCI tree could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the PCI device tree {path}: {source}. Check [health] pci_devices, or set it to \"\" to not count GPUs on the bus")]
pub struct ScanError {
    /// The tree.
    pub path: PathBuf,
    /// What failed.
    #[source]
    pub source: std::io::Error,
}

/// Whether a PCI class code is a GPU: a VGA controller (`0x0300xx`) or a
/// 3D controller (`0x0302xx`). NVSwitches (bridges, `0x0680xx`) and the
/// GPUs' HDMI audio functions (`0x0403xx`) are not.
pub fn is_gpu_class(class: u32) -> bool {
    matches!(class >> 8, 0x0300 | 0x0302)
}

fn hex_file(path: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    u32::from_str_radix(text.strip_prefix("0x").unwrap_or(text), 16).ok()
}

/// The NVIDIA GPUs under `root`, addresses ascending (`0000:18:00.0`).
/// Entries that are not PCI addresses or lack readable vendor and class
/// files are skipped.
pub fn scan(root: &Path) -> Result<Vec<String>, ScanError> {
    let entries = std::fs::read_dir(root).map_err(|source| ScanError {
        path: root.to_path_buf(),
        source,
    })?;
    let mut gpus: Vec<PciAddress> = entries
        .take(MAX_DEVICES)
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let address = PciAddress::parse(entry.file_name().to_str()?)?;
            let dir = entry.path();
            let nvidia = hex_file(&dir.join("vendor"))? == NVIDIA_VENDOR;
            (nvidia && is_gpu_class(hex_file(&dir.join("class"))?)).then_some(address)
        })
        .collect();
    gpus.sort();
    gpus.dedup();
    Ok(gpus.iter().map(PciAddress::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture tree: two NVIDIA GPUs (a 3D and a VGA controller), their
    /// audio function, an NVSwitch, a NIC, and entries that are no device.
    pub fn fixture(root: &Path) {
        for (address, vendor, class) in [
            ("0000:18:00.0", "0x10de", "0x030200"),
            ("0000:2a:00.0", "0x10de", "0x030000"),
            ("0000:2a:00.1", "0x10de", "0x040300"),
            ("0000:05:00.0", "0x10de", "0x068000"),
            ("0000:3b:00.0", "0x15b3", "0x020000"),
        ] {
            let dir = root.join(address);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("vendor"), format!("{vendor}\n")).unwrap();
            std::fs::write(dir.join("class"), format!("{class}\n")).unwrap();
        }
        std::fs::create_dir_all(root.join("not-a-device")).unwrap();
        std::fs::create_dir_all(root.join("0000:9a:00.0")).unwrap(); // no files
    }

    #[test]
    fn counts_nvidia_gpus_only() {
        let dir = tempfile::tempdir().unwrap();
        fixture(dir.path());
        assert_eq!(scan(dir.path()).unwrap(), ["0000:18:00.0", "0000:2a:00.0"]);
        let missing = scan(&dir.path().join("none")).unwrap_err();
        assert!(missing.to_string().contains("pci_devices"), "{missing}");
    }

    #[test]
    fn gpu_classes() {
        assert!(is_gpu_class(0x030200) && is_gpu_class(0x030000));
        assert!(!is_gpu_class(0x068000) && !is_gpu_class(0x040300) && !is_gpu_class(0x0302));
    }

    #[test]
    fn missing_from_driver_compares_normalised_addresses() {
        use crate::gpu::node_health::NodeHealth;
        use std::sync::Arc;
        let health = NodeHealth {
            pci_gpus: Some(Arc::new(vec!["0000:18:00.0".into(), "0000:2a:00.0".into()])),
            ..NodeHealth::default()
        };
        let nvml = ["00000000:18:00.0"];
        assert_eq!(
            health.missing_from_driver(nvml.iter().copied()),
            ["0000:2a:00.0"]
        );
        let both = ["00000000:2A:00.0", "00000000:18:00.0"];
        assert!(health.missing_from_driver(both.iter().copied()).is_empty());
        assert!(NodeHealth::default()
            .missing_from_driver(nvml.iter().copied())
            .is_empty());
    }
}
