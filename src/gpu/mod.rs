//! GPU data: the snapshot types that every component reads, the clock-event
//! reason table, and the NVML adapter — the only code that calls NVML.

pub mod fabric;
pub mod gpm;
pub mod links;
pub mod node_health;
pub mod nvml;
pub mod pci_address;
pub mod reasons;
pub mod snapshot;
#[cfg(test)]
pub mod testing;
pub mod unix_time;

pub use snapshot::*;
