//! NVIDIA GPUs on the PCI bus, read from sysfs (`/sys/bus/pci/devices/*/
//! {vendor,class}`): the GPUs that sit in the machine whether or not the
//! driver enumerated them. A GPU that fell off the bus before the driver
//! started is one NVML simply does not count; this count does.
//!
//! Every entry of the tree is looked at (a host with thousands of SR-IOV
//! functions has thousands), cheaply: names that are no PCI address are
//! skipped unopened, and of each attribute only the first
//! [`MAX_ATTRIBUTE_BYTES`] are read, from a regular file opened without
//! blocking (`files::read_prefix`): a FIFO, `/dev/zero` or a huge
//! file in place of `vendor` or `class` neither hangs the scan nor costs
//! memory; such a device is not counted.

use std::path::{Path, PathBuf};

use crate::gpu::pci_address::PciAddress;

/// NVIDIA's PCI vendor id.
pub const NVIDIA_VENDOR: u32 = 0x10de;
/// The most bytes read of an attribute file (`0x030200\n` is 9).
pub const MAX_ATTRIBUTE_BYTES: u64 = 64;

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

/// The hex number (`0x10de`) at the start of the attribute file `path`;
/// `None` when it is not a readable regular file or holds no such number.
fn hex_file(path: &Path) -> Option<u32> {
    let bytes = crate::files::read_prefix(path, MAX_ATTRIBUTE_BYTES).ok()?;
    // Only the start matters: a cut in the middle of a character is fine.
    let valid = match std::str::from_utf8(&bytes) {
        Ok(_) => bytes.len(),
        Err(error) => error.valid_up_to(),
    };
    let text = std::str::from_utf8(bytes.get(..valid)?).ok()?;
    let first = text
        .split(|c: char| c.is_whitespace() || c == '\0')
        .next()?;
    let digits = first.strip_prefix("0x").unwrap_or(first);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// The NVIDIA GPUs under `root`, addresses ascending (`0000:18:00.0`).
/// Every entry is looked at; those that are not PCI addresses are skipped
/// without a read, those that lack a readable vendor or class (the first
/// bytes of a regular file) are not counted.
pub fn scan(root: &Path) -> Result<Vec<String>, ScanError> {
    let entries = std::fs::read_dir(root).map_err(|source| ScanError {
        path: root.to_path_buf(),
        source,
    })?;
    let mut gpus: Vec<PciAddress> = entries
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

    /// A device directory with the given vendor and class text.
    fn device(root: &Path, address: &str, vendor: &str, class: &str) -> PathBuf {
        let dir = root.join(address);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("vendor"), vendor).unwrap();
        std::fs::write(dir.join("class"), class).unwrap();
        dir
    }

    /// Bytes this thread has read so far (`rchar` of
    /// `/proc/thread-self/io`: every `read` of any file, `/dev/zero` too).
    fn bytes_read_by_this_thread() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io")
            .expect("/proc/thread-self/io (task I/O accounting) is readable");
        io.lines()
            .find_map(|line| line.strip_prefix("rchar: "))
            .and_then(|n| n.trim().parse().ok())
            .expect("/proc/thread-self/io has an rchar line")
    }

    /// `scan(root)` on another thread, with the bytes it read; a failure
    /// when it takes longer than a generous deadline (a scan that blocks on
    /// a file never ends).
    fn scan_within_deadline(root: &Path) -> (Vec<String>, u64) {
        let (done, result) = std::sync::mpsc::channel();
        let root = root.to_path_buf();
        std::thread::spawn(move || {
            let before = bytes_read_by_this_thread();
            let gpus = scan(&root);
            let _ = done.send((gpus, bytes_read_by_this_thread() - before));
        });
        let (gpus, read) = result
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the PCI scan ended (a blocking open or read would hang it)");
        (gpus.expect("the fixture tree is readable"), read)
    }

    /// The most a scan of the small fixture trees below may read: a few
    /// attributes of 64 bytes each, and the directories.
    const SMALL_SCAN_BYTES: u64 = 64 << 10;

    #[test]
    fn a_fifo_as_vendor_neither_hangs_the_scan_nor_counts() {
        let dir = tempfile::tempdir().unwrap();
        fixture(dir.path());
        let odd = dir.path().join("0000:40:00.0");
        std::fs::create_dir_all(&odd).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(odd.join("vendor"))
            .status()
            .expect("mkfifo (coreutils) runs");
        assert!(status.success(), "mkfifo failed");
        std::fs::write(odd.join("class"), "0x030200\n").unwrap();
        let (gpus, read) = scan_within_deadline(dir.path());
        assert_eq!(gpus, ["0000:18:00.0", "0000:2a:00.0"]);
        assert!(read <= SMALL_SCAN_BYTES, "the scan read {read} bytes");
    }

    #[test]
    fn dev_zero_as_vendor_or_class_is_not_read() {
        // Read whole, /dev/zero never ends: the scan would allocate until
        // the process dies (2.1 GB RSS before the fix, then an abort).
        let dir = tempfile::tempdir().unwrap();
        fixture(dir.path());
        let vendor = dir.path().join("0000:41:00.0");
        std::fs::create_dir_all(&vendor).unwrap();
        std::os::unix::fs::symlink("/dev/zero", vendor.join("vendor")).unwrap();
        std::fs::write(vendor.join("class"), "0x030200\n").unwrap();
        let class = device(dir.path(), "0000:42:00.0", "0x10de\n", "");
        std::fs::remove_file(class.join("class")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", class.join("class")).unwrap();
        let (gpus, read) = scan_within_deadline(dir.path());
        assert_eq!(gpus, ["0000:18:00.0", "0000:2a:00.0"]);
        assert!(read <= SMALL_SCAN_BYTES, "the scan read {read} bytes");
    }

    #[test]
    fn only_the_start_of_a_huge_class_file_is_read() {
        // A class attribute padded (sparse) to 500 MB: its value is in its
        // first bytes, and only those are read. Read whole (before the fix)
        // it cost 500 MB and its NUL padding made it unreadable.
        let dir = tempfile::tempdir().unwrap();
        let gpu = device(dir.path(), "0000:43:00.0", "0x10de\n", "0x030200\n");
        let class = std::fs::OpenOptions::new()
            .write(true)
            .open(gpu.join("class"))
            .unwrap();
        class.set_len(500 << 20).unwrap();
        let (gpus, read) = scan_within_deadline(dir.path());
        assert_eq!(gpus, ["0000:43:00.0"]);
        assert!(read <= SMALL_SCAN_BYTES, "the scan read {read} bytes");
        assert_eq!(hex_file(&gpu.join("class")), Some(0x030200));
    }

    #[test]
    fn every_entry_is_scanned_past_thousands_of_other_devices() {
        // An SR-IOV host: 5000 virtual functions of a NIC, with GPUs made
        // before and after them (so whichever order the directory lists
        // them in, some GPUs come after the first 4096 entries; before the
        // fix those were never counted). Names that are no PCI address are
        // skipped.
        let dir = tempfile::tempdir().unwrap();
        let mut expected = Vec::new();
        for bus in 0..20u32 {
            let address = format!("0000:{bus:02x}:00.0");
            device(dir.path(), &address, "0x10de\n", "0x030200\n");
            expected.push(address);
        }
        for n in 0..5000u32 {
            let address = format!("0001:{:02x}:{:02x}.{}", n / 256, (n / 8) % 32, n % 8);
            let dir = dir.path().join(address);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("vendor"), "0x15b3\n").unwrap();
        }
        for n in 0..20u32 {
            std::fs::create_dir_all(dir.path().join(format!("virtfn{n}"))).unwrap();
        }
        for bus in 0xe0..0xf4u32 {
            let address = format!("0002:{bus:02x}:00.0");
            device(dir.path(), &address, "0x10de\n", "0x030000\n");
            expected.push(address);
        }
        expected.sort();
        assert_eq!(scan_within_deadline(dir.path()).0, expected);
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
