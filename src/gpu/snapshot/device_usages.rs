//! A workload's use of each device, sorted by device: what the accounting
//! adds to on every tick (its own vector), and what a snapshot carries (a
//! range of one block shared by every workload of the snapshot, so that
//! publishing the table each tick costs one allocation, not one per
//! workload). Reads like the `BTreeMap<Device, Usage>` it replaces.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use serde::Serialize;

use super::{Device, Usage};

/// Use per device, sorted by device, each device once.
#[derive(Debug, Clone)]
pub struct DeviceUsages(Store);

#[derive(Debug, Clone)]
enum Store {
    /// Its own, being added to (the accounting's).
    Owned(Vec<(Device, Usage)>),
    /// Part of a block shared by a snapshot's workloads.
    Shared {
        block: Arc<[(Device, Usage)]>,
        range: Range<usize>,
    },
}

impl Default for DeviceUsages {
    fn default() -> Self {
        DeviceUsages(Store::Owned(Vec::new()))
    }
}

impl DeviceUsages {
    /// The devices and their use, sorted by device.
    pub fn as_slice(&self) -> &[(Device, Usage)] {
        match &self.0 {
            Store::Owned(list) => list,
            Store::Shared { block, range } => &block[range.clone()],
        }
    }

    /// Each device and its use, sorted by device.
    pub fn iter(&self) -> impl Iterator<Item = (&Device, &Usage)> + Clone {
        self.as_slice().iter().map(|(d, u)| (d, u))
    }

    /// The devices, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &Device> + Clone {
        self.as_slice().iter().map(|(d, _)| d)
    }

    /// The use of each device, in device order.
    pub fn values(&self) -> impl Iterator<Item = &Usage> + Clone {
        self.as_slice().iter().map(|(_, u)| u)
    }

    /// The use of `device`, if it was used.
    pub fn get(&self, device: &Device) -> Option<&Usage> {
        let list = self.as_slice();
        list.binary_search_by(|(d, _)| d.cmp(device))
            .ok()
            .map(|i| &list[i].1)
    }

    /// How many devices.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Whether no device was used.
    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// Its own vector (copied out of a shared block first).
    fn owned(&mut self) -> &mut Vec<(Device, Usage)> {
        if let Store::Shared { .. } = self.0 {
            self.0 = Store::Owned(self.as_slice().to_vec());
        }
        match &mut self.0 {
            Store::Owned(list) => list,
            Store::Shared { .. } => unreachable!("made owned just above"),
        }
    }

    /// The use of each device, to change.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Usage> {
        self.owned().iter_mut().map(|(_, u)| u)
    }

    /// The use of `device`, added (zero) where it was not used yet.
    pub fn usage_mut(&mut self, device: Device) -> &mut Usage {
        let list = self.owned();
        // A workload uses few devices: a linear search is the quickest.
        let at = match list.iter().position(|(d, _)| *d >= device) {
            Some(i) if list[i].0 == device => i,
            Some(i) => {
                list.insert(i, (device, Usage::default()));
                i
            }
            None => {
                list.push((device, Usage::default()));
                list.len() - 1
            }
        };
        &mut list[at].1
    }

    /// The same use, as a part of `block` (which holds it at `range`).
    pub fn shared(block: &Arc<[(Device, Usage)]>, range: Range<usize>) -> DeviceUsages {
        DeviceUsages(Store::Shared {
            block: block.clone(),
            range,
        })
    }
}

impl PartialEq for DeviceUsages {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl FromIterator<(Device, Usage)> for DeviceUsages {
    /// Sorted by device; a device given twice keeps its last use (as a map).
    fn from_iter<I: IntoIterator<Item = (Device, Usage)>>(items: I) -> Self {
        items.into_iter().collect::<BTreeMap<_, _>>().into()
    }
}

impl From<BTreeMap<Device, Usage>> for DeviceUsages {
    fn from(map: BTreeMap<Device, Usage>) -> Self {
        DeviceUsages(Store::Owned(map.into_iter().collect()))
    }
}

impl<'a> IntoIterator for &'a DeviceUsages {
    type Item = (&'a Device, &'a Usage);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Device, Usage)>,
        fn(&'a (Device, Usage)) -> (&'a Device, &'a Usage),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter().map(|(d, u)| (d, u))
    }
}

impl Serialize for DeviceUsages {
    /// A JSON list (a JSON object's keys cannot be structs): each device's
    /// `gpu`, `gpu_instance_id` and usage side by side.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Entry<'a> {
            #[serde(flatten)]
            device: &'a Device,
            #[serde(flatten)]
            usage: &'a Usage,
        }
        s.collect_seq(self.iter().map(|(device, usage)| Entry { device, usage }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(gpu: u32) -> Device {
        Device {
            gpu,
            gpu_instance_id: None,
        }
    }

    #[test]
    fn reads_like_a_map_owned_or_shared() {
        let mut own = DeviceUsages::default();
        own.usage_mut(device(3)).gpu_seconds = 3.0;
        own.usage_mut(device(1)).gpu_seconds = 1.0;
        own.usage_mut(device(3)).gpu_seconds += 0.5;
        assert_eq!(own.keys().map(|d| d.gpu).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(own.get(&device(3)).map(|u| u.gpu_seconds), Some(3.5));
        assert_eq!(own.get(&device(2)), None);
        let block: Arc<[(Device, Usage)]> = [own.as_slice(), own.as_slice()].concat().into();
        let mut shared = DeviceUsages::shared(&block, 2..4);
        assert_eq!(shared, own);
        assert_eq!(shared.len(), 2);
        shared.values_mut().for_each(|u| u.gpu_seconds = 9.0);
        assert_eq!(
            block[2].1.gpu_seconds, 1.0,
            "the shared block is not changed"
        );
        assert_eq!(shared.values().map(|u| u.gpu_seconds).sum::<f64>(), 18.0);
        let collected: DeviceUsages =
            [(device(2), Usage::default()), (device(0), Usage::default())]
                .into_iter()
                .collect();
        assert_eq!(collected.keys().map(|d| d.gpu).collect::<Vec<_>>(), [0, 2]);
    }
}
