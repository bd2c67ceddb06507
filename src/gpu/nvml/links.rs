//! NVLink link state and error counters, the recovery action (field 230)
//! and, where GPM gives no NVLink figures, the per-link data counters
//! (fields 138/139), read on the slow tier in one field-value batch.
//!
//! Each link's state and error counters are fields of that batch (issue 23:
//! 90 calls per GPU per slow tick before, on 18 links): the state (165) and
//! the replay (161), recovery (162) and CRC flit (163) counters are scoped
//! by link (`scopeId`); the CRC data counter has per-link field ids for
//! links 0-11 only (39-44, 102-107), so links 12-17 ask it with
//! `nvmlDeviceGetNvLinkErrorCounter`. The slow tier adds its other device
//! fields (PCIe replays, ECC) to the same batch (`extra`).

use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::error::NvmlError;

use super::batch::{Field, FieldValues, LinkFieldId};
use super::fields::id;
use super::{GpuDevice, Tally};
use crate::gpu::links::{recovery_action_name, LinkHealth, NvLinkState, NvLinkTraffic};
use crate::gpu::snapshot::FieldGroup;

/// NVML_NVLINK_MAX_LINKS.
const MAX_LINKS: u32 = 18;

/// The error counters read per link, with their label, as per-link fields
/// (`scopeId` = link).
const SCOPED_COUNTERS: [(LinkFieldId, &str); 3] = [
    (id::NVLINK_ERROR_DL_REPLAY, "replay"),
    (id::NVLINK_ERROR_DL_RECOVERY, "recovery"),
    (id::NVLINK_ERROR_DL_CRC, "crc_flit"),
];

/// The label of the CRC data counter, read per link without a scope.
const CRC_DATA: &str = "crc_data";

/// NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_L`link`, for links 0-11; links
/// 12-17 have no such field.
fn crc_data_field(link: u32) -> Option<u32> {
    match link {
        0..=5 => Some(id::NVLINK_CRC_DATA_L0 + link),
        6..=11 => Some(id::NVLINK_CRC_DATA_L6 + link - 6),
        _ => None,
    }
}

/// Whether an error means "no such link here" rather than a failure.
fn no_link(error: &NvmlError) -> bool {
    matches!(
        error,
        NvmlError::NotSupported | NvmlError::InvalidArg | NvmlError::NotFound
    )
}

/// The slow tier's batch: the recovery action, each link's state and error
/// counters, the data counters of every link when `traffic`, then `extra`
/// (device fields, scope 0).
fn batch(traffic: bool, extra: &[u32]) -> Vec<Field> {
    let mut fields = vec![Field::device(id::RECOVERY_ACTION)];
    for link in 0..MAX_LINKS {
        let scoped = |id| Field::link(id, link);
        fields.push(scoped(id::NVLINK_GET_STATE));
        fields.extend(SCOPED_COUNTERS.iter().map(|&(id, _)| scoped(id)));
        fields.extend(crc_data_field(link).map(Field::device));
        if traffic {
            fields.extend([scoped(id::NVLINK_DATA_TX), scoped(id::NVLINK_DATA_RX)]);
        }
    }
    fields.extend(extra.iter().map(|&id| Field::device(id)));
    fields
}

impl GpuDevice<'_> {
    /// The GPU's NVLink links and recovery action, and the links' data
    /// counters where GPM does not give NVLink traffic (see
    /// [`reads_link_traffic`]), with the answers of the `extra` device
    /// fields asked in the same batch.
    pub(super) fn read_links(
        &self,
        extra: &[u32],
        tally: &mut Tally,
    ) -> (LinkHealth, Vec<NvLinkTraffic>, FieldValues) {
        let group = FieldGroup::Device;
        let traffic_asked = reads_link_traffic(self.gpm_supported());
        let fields = batch(traffic_asked, extra);
        let values = self.field_values(group, &fields, tally);
        let mut nvlink = Vec::new();
        for link in 0..MAX_LINKS {
            let up = match values.answer(Field::link(id::NVLINK_GET_STATE, link)) {
                None => continue,
                Some(Ok(state)) => *state != 0.0,
                Some(Err(error)) if no_link(error) => continue,
                Some(Err(error)) => {
                    tally.count("nvmlDeviceGetFieldValues", error);
                    continue;
                }
            };
            let mut errors = std::collections::BTreeMap::new();
            let mut counted =
                |name, answer: Option<Result<u64, &NvmlError>>, tally: &mut Tally| match answer {
                    Some(Ok(value)) => {
                        errors.insert(name, value);
                    }
                    Some(Err(error)) if !no_link(error) => {
                        tally.count("nvmlDeviceGetFieldValues", error);
                    }
                    _ => {}
                };
            for (field, name) in SCOPED_COUNTERS {
                let answer = values.answer(Field::link(field, link)).map(as_count);
                counted(name, answer, tally);
            }
            if let Some(field) = crc_data_field(link) {
                let answer = values.answer(Field::device(field)).map(as_count);
                counted(CRC_DATA, answer, tally);
            }
            nvlink.push(NvLinkState { link, up, errors });
        }
        let without_field = nvlink
            .iter()
            .map(|l| l.link)
            .filter(|&link| crc_data_field(link).is_none())
            .collect::<Vec<_>>();
        let crc_data = crc_data_by_call(&without_field, group, tally, |link| {
            self.device
                .link_wrapper_for(link)
                .error_counter(ErrorCounter::DlCrcData)
        });
        for (link, value) in crc_data {
            if let Some(state) = nvlink.iter_mut().find(|l| l.link == link) {
                state.errors.insert(CRC_DATA, value);
            }
        }
        // A value beyond NVML's 0-4 is kept as "unknown" with its raw
        // value, never dropped: the driver asks for something.
        let recovery_action_value = values
            .get(Field::device(id::RECOVERY_ACTION))
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| v as u64);
        let recovery_action = recovery_action_value.map(recovery_action_name);
        // Only the fields of links the GPU has, and of the device, are worth
        // a (debug) line when unanswered.
        let data = [id::NVLINK_DATA_TX.get(), id::NVLINK_DATA_RX.get()];
        let expected: Vec<Field> = fields
            .iter()
            .filter(|f| {
                if data.contains(&f.id()) {
                    nvlink.iter().any(|l| l.link == f.scope())
                } else {
                    f.id() == id::RECOVERY_ACTION || extra.contains(&f.id())
                }
            })
            .copied()
            .collect();
        values.report_unsupported(self.index, &expected, tally);
        // KiB counters (integral values held in an f64 up to 2^53 KiB = 8 EiB).
        let bytes = |field, link| {
            values
                .get(Field::link(field, link))
                .map(|kib| (kib as u64).saturating_mul(1024))
        };
        let traffic = if traffic_asked {
            nvlink
                .iter()
                .map(|l| NvLinkTraffic {
                    link: l.link,
                    tx_bytes: bytes(id::NVLINK_DATA_TX, l.link),
                    rx_bytes: bytes(id::NVLINK_DATA_RX, l.link),
                })
                .filter(|t| t.tx_bytes.is_some() || t.rx_bytes.is_some())
                .collect()
        } else {
            Vec::new()
        };
        let health = LinkHealth {
            nvlink,
            recovery_action,
            recovery_action_value,
        };
        (health, traffic, values)
    }
}

/// The CRC data counters of `links` (those without a per-link field),
/// one `nvmlDeviceGetNvLinkErrorCounter` call each through the tally: "no
/// such link" is an answer (absent), an error is counted under that
/// function, and once the GPU is lost no further call is made.
fn crc_data_by_call(
    links: &[u32],
    group: FieldGroup,
    tally: &mut Tally,
    mut read: impl FnMut(u32) -> Result<u64, NvmlError>,
) -> Vec<(u32, u64)> {
    links
        .iter()
        .filter_map(|&link| {
            let answer = tally.call(group, "nvmlDeviceGetNvLinkErrorCounter", || {
                match read(link) {
                    Err(error) if no_link(&error) => Ok(None),
                    other => other.map(Some),
                }
            });
            answer.flatten().map(|value| (link, value))
        })
        .collect()
}

/// A counter's answer as a count.
fn as_count(answer: &Result<f64, NvmlError>) -> Result<u64, &NvmlError> {
    answer.as_ref().map(|&v| v as u64)
}

/// Whether the NVLink data counters are read: only where GPM's NVLink
/// figures are not (GPM `Some(false)`: pre-Hopper; `None`: not asked, as with
/// `sampler.gpm = false`, or NVML could not tell). GPM's figures win.
fn reads_link_traffic(gpm_supported: Option<bool>) -> bool {
    gpm_supported != Some(true)
}

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
    fn the_batch_asks_each_link_then_the_extra_fields() {
        let fields = batch(false, &[94]);
        let pairs: Vec<(u32, u32)> = fields.iter().map(|f| (f.id(), f.scope())).collect();
        // Recovery action; link 0: state, replay, recovery, CRC flit (scoped)
        // and its CRC data field (39); ...; link 17 without a CRC data field.
        assert_eq!(
            pairs[..6],
            [(230, 0), (165, 0), (161, 0), (162, 0), (163, 0), (39, 0)]
        );
        assert_eq!(
            pairs[pairs.len() - 5..],
            [(165, 17), (161, 17), (162, 17), (163, 17), (94, 0)]
        );
        // 12 links with 5 fields, 6 with 4.
        assert_eq!(fields.len(), 1 + 12 * 5 + 6 * 4 + 1);
        let with_traffic = batch(true, &[]);
        assert_eq!(with_traffic.len(), 1 + 12 * 7 + 6 * 6);
        assert!(with_traffic.contains(&Field::link(id::NVLINK_DATA_RX, 17)));
        assert_eq!(id::NVLINK_DATA_RX.get(), 139);
    }

    /// Links 12-17 are read one call each through the tally: a lost GPU
    /// stops the calls at the first, and is counted once; "no such link"
    /// is no error.
    #[test]
    fn crc_data_calls_go_through_the_tally_and_stop_at_a_lost_gpu() {
        let mut tally = Tally::default();
        let mut calls = 0;
        let got = crc_data_by_call(&[12, 13, 14, 15], FieldGroup::Device, &mut tally, |link| {
            calls += 1;
            match link {
                12 => Ok(7),
                13 => Err(NvmlError::NotSupported),
                _ => Err(NvmlError::GpuLost),
            }
        });
        assert_eq!(got, vec![(12, 7)]);
        assert_eq!(calls, 3, "no call after the GPU was lost");
        assert!(tally.lost.is_some());
        let counted: Vec<_> = tally.errors.iter().collect();
        assert_eq!(
            counted,
            vec![(
                &(
                    "nvmlDeviceGetNvLinkErrorCounter".to_string(),
                    "gpu_lost".to_string()
                ),
                &1
            )]
        );
    }

    #[test]
    fn crc_data_fields_of_links_0_to_11() {
        let ids: Vec<Option<u32>> = [0, 5, 6, 11, 12, 17].map(crc_data_field).to_vec();
        assert_eq!(ids, [Some(39), Some(44), Some(102), Some(107), None, None]);
    }
}
