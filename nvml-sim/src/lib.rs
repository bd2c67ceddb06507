//! `nvml-sim`: a drop-in `libnvidia-ml.so` driven by scenario files.
//!
//! The crate builds as a cdylib exporting the real NVML C symbols (see
//! [`ffi`]) and as an rlib exposing the scenario parser ([`Scenario`]), the
//! simulation [`Engine`] and the shipped scenarios ([`builtin`]). See
//! `README.md` for the scenario format.
//!
//! Dependencies point one way (`tests/layering.rs` checks it):
//! [`scenario`] (the parsed, checked description) → [`engine`] (the model
//! that answers "GPU i at time t") → [`ffi`] (the C ABI over the engine).
//! What more than one layer reads lives in leaves below them all:
//! [`duration`], [`codes`], [`functions`], [`driver_messages`],
//! [`gpm_metrics`], [`clock`], [`builtin`].

// Every unsafe operation is in an `unsafe` block (also inside `unsafe fn`),
// and every `unsafe` block says why it holds (`// SAFETY:`).
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod builtin;
pub mod clock;
pub mod codes;
pub mod driver_messages;
pub mod duration;
pub mod engine;
pub mod ffi;
pub mod functions;
pub mod gpm_metrics;
mod rng;
pub mod scenario;

pub use engine::Engine;
pub use scenario::{Scenario, ScenarioError};

/// Env var selecting the scenario: a file path or `builtin:NAME` (default `builtin:demo`).
pub const ENV_SCENARIO: &str = "GPUWATCH_SIM_SCENARIO";
/// Env var overriding the scenario's speed (scenario seconds per real second).
pub const ENV_SPEED: &str = "GPUWATCH_SIM_SPEED";
/// Env var freezing scenario time at this many seconds.
pub const ENV_TIME: &str = "GPUWATCH_SIM_TIME";
/// Env var setting the scenario time at the first nvmlInit (default 0).
pub const ENV_START: &str = "GPUWATCH_SIM_START";
/// Env var naming the file the simulator appends kernel-log records to
/// (`/dev/kmsg` format); unset: no kernel log is written.
pub const ENV_KMSG: &str = "GPUWATCH_SIM_KMSG";
/// Env var naming a file of `SCENARIO_PID REAL_PID` pairs: the simulator
/// reports those scenario processes under real pids (see [`engine::pid_map`]).
pub const ENV_PID_MAP: &str = "GPUWATCH_SIM_PID_MAP";
/// File name of the built simulator library.
pub const LIBRARY_FILE_NAME: &str = "libnvml_sim.so";
