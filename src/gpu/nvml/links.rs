//! NVLink link state and error counters, the recovery action (field 230)
//! and, where GPM gives no NVLink figures, the per-link data counters
//! (fields 138/139), read on the slow tier.
//!
//! The data counters ride in the recovery action's field-value batch: no
//! extra NVML call, two more fields per link (a scoped batch, since
//! nvml-wrapper cannot send a link as `scopeId`).

use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::error::NvmlError;

use super::fields::id;
use super::scoped_fields::Scoped;
use super::{GpuDevice, Tally};
use crate::gpu::links::{recovery_action_name, LinkHealth, NvLinkState, NvLinkTraffic};
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
    /// The GPU's NVLink links and recovery action, and the links' data
    /// counters where GPM does not give NVLink traffic (see
    /// [`reads_link_traffic`]).
    pub(super) fn read_links(&self, tally: &mut Tally) -> (LinkHealth, Vec<NvLinkTraffic>) {
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
        let traffic_links: Vec<u32> = if reads_link_traffic(self.gpm_supported()) {
            nvlink.iter().map(|l| l.link).collect()
        } else {
            Vec::new()
        };
        let values = self.scoped_field_values(group, &batch(&traffic_links), tally);
        // A value beyond NVML's 0-4 is kept as "unknown" with its raw
        // value, never dropped: the driver asks for something.
        let recovery_action_value = values
            .get(id::RECOVERY_ACTION, 0)
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| v as u64);
        let recovery_action = recovery_action_value.map(recovery_action_name);
        // KiB counters (integral values held in an f64 up to 2^53 KiB = 8 EiB).
        let bytes = |field, link| {
            values
                .get(field, link)
                .map(|kib| (kib as u64).saturating_mul(1024))
        };
        let traffic = traffic_links
            .iter()
            .map(|&link| NvLinkTraffic {
                link,
                tx_bytes: bytes(id::NVLINK_DATA_TX, link),
                rx_bytes: bytes(id::NVLINK_DATA_RX, link),
            })
            .filter(|t| t.tx_bytes.is_some() || t.rx_bytes.is_some())
            .collect();
        let health = LinkHealth {
            nvlink,
            recovery_action,
            recovery_action_value,
        };
        (health, traffic)
    }
}

/// Whether the NVLink data counters are read: only where GPM's NVLink
/// figures are not (GPM `Some(false)`: pre-Hopper; `None`: not asked, as with
/// `sampler.gpm = false`, or NVML could not tell). GPM's figures win.
fn reads_link_traffic(gpm_supported: Option<bool>) -> bool {
    gpm_supported != Some(true)
}

/// The slow tier's link batch: the recovery action, then the two data
/// counters of each link in `links`.
fn batch(links: &[u32]) -> Vec<Scoped> {
    let mut fields = vec![Scoped {
        id: id::RECOVERY_ACTION,
        scope: 0,
    }];
    for &link in links {
        for field in [id::NVLINK_DATA_TX, id::NVLINK_DATA_RX] {
            fields.push(Scoped {
                id: field,
                scope: link,
            });
        }
    }
    fields
}

// None of these ids is in the range nvml-wrapper renumbers (251..=273), so
// the raw batch may send them as they are.
const _: () = {
    let ids = [id::RECOVERY_ACTION, id::NVLINK_DATA_TX, id::NVLINK_DATA_RX];
    let mut i = 0;
    while i < ids.len() {
        assert!(ids[i] < 251 || ids[i] > 273);
        i += 1;
    }
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpm_figures_win_where_gpm_is_read() {
        assert!(!reads_link_traffic(Some(true)));
        assert!(reads_link_traffic(Some(false)));
        assert!(reads_link_traffic(None));
    }

    #[test]
    fn the_batch_asks_the_recovery_action_then_tx_and_rx_per_link() {
        let pairs: Vec<(u32, u32)> = batch(&[0, 3]).iter().map(|f| (f.id, f.scope)).collect();
        assert_eq!(pairs, [(230, 0), (138, 0), (139, 0), (138, 3), (139, 3)]);
        assert_eq!(batch(&[]).len(), 1);
    }
}
