//! The exported NVML C API (`#[no_mangle] extern "C"`), a thin translation
//! of [`Engine`](crate::Engine) answers into NVML structs and return codes.
//!
//! Safety contract of every export: pointer arguments must be null or valid
//! for the access NVML documents (the simulator checks for null, never for
//! dangling pointers). Panics never cross the boundary: they become
//! `NVML_ERROR_UNKNOWN`.
#![allow(clippy::missing_safety_doc)]

mod calls;
mod check;
mod control;
mod device;
mod ecc;
mod events;
mod gpm;
mod kmsg;
mod lifecycle;
mod mig_attributes;
mod nvlink;
mod out;
mod processes;
mod sharing;
mod state;
mod system;

pub use calls::{nvmlSimCallCount, nvmlSimResetCallCounts, nvmlSimTotalCalls};
pub use check::*;
pub use control::nvmlSimSetTime;
pub use device::*;
pub use ecc::*;
pub use events::*;
pub use gpm::*;
pub use nvlink::*;
pub use processes::*;
pub use sharing::*;
pub use system::*;
