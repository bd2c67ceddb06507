//! Xid critical-error events from NVML's event API: registration per GPU
//! and the blocking wait the Xid thread runs.

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::event::EventSet;
use tracing::{debug, warn};

use super::tally::describe;
use super::Driver;

/// NVML could not build the Xid event set; Xid errors from NVML's events
/// are then not counted.
#[derive(Debug, thiserror::Error)]
#[error("NVML cannot build the Xid event set: {}", describe(.0))]
pub struct XidListenError(#[source] NvmlError);

impl Driver {
    /// An event set that receives Xid critical errors from every GPU in
    /// `indices` that supports them.
    pub fn xid_listener(&self, indices: &[u32]) -> Result<XidListener<'_>, XidListenError> {
        let mut registered: Vec<u32> = Vec::new();
        let mut set = self.nvml.create_event_set().map_err(XidListenError)?;
        for &index in indices {
            let device = match self.nvml.device_by_index(index) {
                Ok(device) => device,
                Err(error) => {
                    debug!(gpu = index, error = %describe(&error), "No handle for Xid events.");
                    continue;
                }
            };
            let supported = device
                .supported_event_types()
                .map(|t| t.contains(EventTypes::CRITICAL_XID_ERROR))
                .unwrap_or(false);
            if !supported {
                debug!(gpu = index, "GPU does not report Xid events.");
                continue;
            }
            match device.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                Ok(kept) => {
                    set = kept;
                    registered.push(index);
                }
                Err(error) => {
                    warn!(gpu = index, error = %describe(&error.error),
                        "Cannot register for Xid events on this GPU; its Xid errors will not be counted.");
                    // A failed registration releases the set: build it again.
                    set = self.nvml.create_event_set().map_err(XidListenError)?;
                    for &again in &registered {
                        let device = self.nvml.device_by_index(again).map_err(XidListenError)?;
                        set = device
                            .register_events(EventTypes::CRITICAL_XID_ERROR, set)
                            .map_err(|e| XidListenError(e.error))?;
                    }
                }
            }
        }
        Ok(XidListener { set, registered })
    }
}

/// Waits for Xid events on the GPUs it registered.
pub struct XidListener<'d> {
    set: EventSet<'d>,
    registered: Vec<u32>,
}

/// What one wait on the Xid event set produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XidWait {
    /// An Xid error on GPU `gpu`.
    Event {
        /// NVML index of the GPU.
        gpu: u32,
        /// The Xid code.
        code: u64,
    },
    /// Nothing arrived within the timeout.
    Timeout,
    /// The wait failed; the message says why.
    Failed(String),
}

impl XidListener<'_> {
    /// The GPUs whose Xid errors this listener receives.
    pub fn registered(&self) -> &[u32] {
        &self.registered
    }

    /// Waits up to `timeout_ms` for the next event.
    pub fn wait(&self, timeout_ms: u32) -> XidWait {
        match self.set.wait(timeout_ms) {
            Ok(event) => {
                let code = match event.event_data {
                    Some(XidError::Value(code)) => code,
                    Some(XidError::Unknown) | None => 999,
                };
                match event.device.index() {
                    Ok(gpu) => XidWait::Event { gpu, code },
                    Err(error) => XidWait::Failed(describe(&error)),
                }
            }
            Err(NvmlError::Timeout) => XidWait::Timeout,
            Err(error) => XidWait::Failed(describe(&error)),
        }
    }
}
