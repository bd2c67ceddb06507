//! Deterministic identities (UUID, serial, PCI bus id) for GPUs that do not
//! spell them out.

use crate::rng;

/// Typical PCI bus numbers of an 8-GPU HGX board, used for the first GPUs.
const HGX_BUSES: [u32; 8] = [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB];

/// PCI bus number of GPU `index`.
pub fn bus(index: usize) -> u32 {
    HGX_BUSES
        .get(index)
        .copied()
        .unwrap_or((0xE0 + index as u32) % 0x100)
}

/// `00000000:18:00.0`-style bus id of GPU `index`.
pub fn pci_bus_id(index: usize) -> String {
    format!("00000000:{:02X}:00.0", bus(index))
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` derived from the seed and index.
pub fn uuid(seed: u64, index: usize) -> String {
    let a = rng::mix(seed, 0x5555_0000 + index as u64);
    let b = rng::mix(a, 1);
    format!(
        "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xFFFF,
        (a & 0x0FFF) | 0x4000,
        (b >> 48) & 0x3FFF | 0x8000,
        b & 0xFFFF_FFFF_FFFF
    )
}

/// A 13-digit board serial derived from the seed and index.
pub fn serial(seed: u64, index: usize) -> String {
    format!(
        "165{:010}",
        rng::mix(seed, 0xAAAA_0000 + index as u64) % 10_000_000_000
    )
}

/// Parses the bus number out of a `domain:bus:device.function` id.
pub fn parse_bus(bus_id: &str) -> Option<u32> {
    let mut parts = bus_id.split(':');
    let (_domain, bus) = (parts.next()?, parts.next()?);
    u32::from_str_radix(bus, 16).ok()
}
