//! NVLink link state and error counters, and the recovery action (field
//! 230), read on the slow tier.

use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::error::NvmlError;

use super::fields::id;
use super::{GpuDevice, Tally};
use crate::gpu::links::{recovery_action_name, LinkHealth, NvLinkState};
use crate::gpu::snapshot::FieldGroup;

/// NVML_NVLINK_MAX_LINKS.
const MAX_LINKS: u32 = 18;

/// The error counters read per link, with their label.
const COUNTERS: [(ErrorCounter, &str); 4] = [
    (ErrorCounter::DlReplay, "replay"),
    (ErrorCounter::DlRecovery, "recovery"),
    (ErrorCounter::DlCrcFlit, "crc_flit"),
    (ErrorCounter::DlCrcData, "crc_data"),
];

/// Whether an error means "no such link here" rather than a failure.
fn no_link(error: &NvmlError) -> bool {
    matches!(
        error,
        NvmlError::NotSupported | NvmlError::InvalidArg | NvmlError::NotFound
    )
}

impl GpuDevice<'_> {
    /// The GPU's NVLink links and recovery action.
    pub(super) fn read_links(&self, tally: &mut Tally) -> LinkHealth {
        let group = FieldGroup::Device;
        let mut nvlink = Vec::new();
        for link in 0..MAX_LINKS {
            let wrapper = self.device.link_wrapper_for(link);
            let up = match wrapper.is_active() {
                Ok(up) => up,
                Err(error) if no_link(&error) => continue,
                Err(error) => {
                    let _ = tally.call(group, "nvmlDeviceGetNvLinkState", || Err::<(), _>(error));
                    continue;
                }
            };
            let mut errors = std::collections::BTreeMap::new();
            for (counter, name) in COUNTERS {
                match wrapper.error_counter(counter) {
                    Ok(value) => {
                        errors.insert(name, value);
                    }
                    Err(error) if no_link(&error) => {}
                    Err(error) => {
                        let _ = tally.call(group, "nvmlDeviceGetNvLinkErrorCounter", || {
                            Err::<(), _>(error)
                        });
                    }
                }
            }
            nvlink.push(NvLinkState { link, up, errors });
        }
        let recovery_action = self
            .field_values(group, &[id::RECOVERY_ACTION], tally)
            .get(id::RECOVERY_ACTION)
            .and_then(|v| recovery_action_name(v as u64));
        LinkHealth {
            nvlink,
            recovery_action,
        }
    }
}
