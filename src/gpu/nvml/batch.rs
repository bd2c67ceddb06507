//! One `nvmlDeviceGetFieldValues` batch (fast tier and slow tier alike):
//! the fields asked, each with its scope, and their answers looked up by
//! field rather than by position. The raw call is `raw::field_values`.

use nvml_wrapper::error::NvmlError;

use super::{raw, GpuDevice, Tally};
use crate::gpu::snapshot::FieldGroup;

/// The ids drivers from 580.82 renumber (`raw::wire_id`): NVML 12's
/// clock-event reasons, power sync and power smoothing, all device-wide.
const RENUMBERED: std::ops::RangeInclusive<u32> = 251..=273;

/// The id of a per-link NVLink field, asked with the link as `scopeId`.
///
/// NVML's per-link fields all lie outside 251..=273, the range the driver
/// numberings disagree on, which holds device-wide fields only: an id there
/// names no per-link field under either numbering, so it is refused here,
/// where the ids are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LinkFieldId(u32);

impl LinkFieldId {
    /// `id` as a per-link field id; `None` inside 251..=273.
    pub(super) const fn new(id: u32) -> Option<LinkFieldId> {
        if id >= *RENUMBERED.start() && id <= *RENUMBERED.end() {
            None
        } else {
            Some(LinkFieldId(id))
        }
    }

    /// The id (v12 numbering, which outside 251..=273 is every driver's).
    pub(super) const fn get(self) -> u32 {
        self.0
    }
}

/// A per-link field id built at compile time: an id [`LinkFieldId::new`]
/// refuses fails the build (for the `id` constants).
pub(super) const fn link_field(id: u32) -> LinkFieldId {
    match LinkFieldId::new(id) {
        Some(field) => field,
        None => panic!("ids 251..=273 are device-wide fields, renumbered by driver 580.82"),
    }
}

/// One field of a batch: a field id (v12 numbering; sent in the driver's)
/// and its scope (the NVLink link of a per-link field, 0 for a device field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Field {
    id: u32,
    scope: u32,
}

impl Field {
    /// A device-wide field (scope 0).
    pub(super) const fn device(id: u32) -> Field {
        Field { id, scope: 0 }
    }

    /// Per-link field `id` of NVLink link `link`.
    pub(super) const fn link(id: LinkFieldId, link: u32) -> Field {
        Field {
            id: id.get(),
            scope: link,
        }
    }

    /// The field id (v12 numbering).
    pub(super) fn id(self) -> u32 {
        self.id
    }

    /// The scope: the link, or 0.
    pub(super) fn scope(self) -> u32 {
        self.scope
    }
}

/// The answers of one batch; a field the GPU does not support (or the whole
/// call failing) reads as `None`.
#[derive(Debug, Default)]
pub(super) struct FieldValues {
    values: Vec<(Field, Result<f64, NvmlError>)>,
}

impl FieldValues {
    /// The value of `field`, if asked and answered.
    pub(super) fn get(&self, field: Field) -> Option<f64> {
        self.answer(field)
            .and_then(|answer| answer.as_ref().ok().copied())
    }

    /// Whether the call worked (each field then has its own answer).
    pub(super) fn answered(&self) -> bool {
        !self.values.is_empty()
    }

    /// What the driver answered for `field`: `None` when it was not asked or
    /// the whole call failed.
    pub(super) fn answer(&self, field: Field) -> Option<&Result<f64, NvmlError>> {
        self.values
            .iter()
            .find(|(asked, _)| *asked == field)
            .map(|(_, answer)| answer)
    }

    /// Logs (once, at debug) each field in `fields` the driver did not answer.
    pub(super) fn report_unsupported(&self, gpu: u32, fields: &[Field], tally: &mut Tally) {
        for (field, answer) in &self.values {
            if let (Err(error), true) = (answer, fields.contains(field)) {
                tally.field_unsupported(gpu, field.id, error);
            }
        }
    }
}

impl GpuDevice<'_> {
    /// One `nvmlDeviceGetFieldValues` call for `fields`. The fields the
    /// driver does not answer are left to the caller (e.g. the fields of
    /// links a GPU does not have): see [`FieldValues::report_unsupported`].
    pub(super) fn field_values(
        &self,
        group: FieldGroup,
        fields: &[Field],
        tally: &mut Tally,
    ) -> FieldValues {
        let Some(answers) = tally.call(group, "nvmlDeviceGetFieldValues", || {
            raw::field_values(&self.device, fields.iter().map(|f| (f.id, f.scope)))
        }) else {
            return FieldValues::default();
        };
        FieldValues {
            values: fields.iter().copied().zip(answers).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_per_link_id_in_the_renumbered_range_is_refused() {
        for id in [251, 252, 260, 269, 273] {
            assert_eq!(LinkFieldId::new(id), None, "id {id}");
        }
        for id in [138, 139, 161, 162, 163, 165, 250, 274] {
            assert_eq!(LinkFieldId::new(id).map(LinkFieldId::get), Some(id));
        }
    }

    #[test]
    fn answers_are_found_by_field_and_scope() {
        let state = LinkFieldId::new(165).map(|id| (Field::link(id, 3), Field::link(id, 4)));
        let Some((link3, link4)) = state else {
            panic!("165 is a per-link id");
        };
        let values = FieldValues {
            values: vec![
                (Field::device(230), Ok(1.0)),
                (link3, Ok(0.0)),
                (link4, Err(NvmlError::NotSupported)),
            ],
        };
        assert!(values.answered());
        assert_eq!(values.get(Field::device(230)), Some(1.0));
        assert_eq!(values.get(link3), Some(0.0));
        assert_eq!(values.get(link4), None);
        assert!(matches!(
            values.answer(link4),
            Some(Err(NvmlError::NotSupported))
        ));
        assert_eq!(
            values.get(Field::device(165)),
            None,
            "scope 0 was not asked"
        );
        assert!(!FieldValues::default().answered());
    }
}
