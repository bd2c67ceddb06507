//! Hardware health readings of a simulated GPU: NVLink links, GPU fabric
//! info and the recovery action the driver recommends.

use super::GpuSim;
use crate::codes;
use crate::engine::nvlink::NvLinkSim;
use crate::engine::Unavailable;
use crate::rng;
use crate::scenario::health::{
    parse_uuid, FabricState, HealthSummary, NvLinkCounter, RecoveryAction, RemoteKind, MAX_LINKS,
};
use crate::scenario::schema::GpuSpec;
use crate::scenario::steps::Steps;
use crate::scenario::{Fault, Feature};

/// PCI device/vendor id of a third-generation NVSwitch (HGX H100/H200).
const NVSWITCH_DEVICE_ID: u32 = 0x22A3_10DE;

/// The device at the far end of an NVLink link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvLinkRemote {
    /// NVSwitch or GPU.
    pub kind: RemoteKind,
    /// Its PCI bus id (`00000000:05:00.0`).
    pub pci_bus_id: String,
    /// Its PCI bus number.
    pub bus: u32,
    /// Its combined PCI device/vendor id.
    pub pci_device_id: u32,
}

/// What nvmlDeviceGetGpuFabricInfo(V) reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FabricInfo {
    /// Cluster UUID bytes.
    pub cluster_uuid: [u8; 16],
    /// Registration status (an nvmlReturn_t).
    pub status: u32,
    /// Clique id.
    pub clique_id: u32,
    /// nvmlGpuFabricState_t.
    pub state: u8,
    /// NVML_GPU_FABRIC_HEALTH_MASK_* bits.
    pub health_mask: u32,
    /// NVML_GPU_FABRIC_HEALTH_SUMMARY_*.
    pub health_summary: u8,
    /// The newest struct version the driver knows (1, 2 or 3).
    pub struct_version: u32,
}

/// The NVLink model of a GPU (none without `[gpu.nvlink]`); `faults` are its faults.
pub(super) fn compile(spec: &GpuSpec, faults: &[Fault], seed: u64) -> Option<NvLinkSim> {
    spec.nvlink
        .as_ref()
        .map(|n| NvLinkSim::new(n, faults, rng::mix(seed, rng::hash_str("nvlink"))))
}

impl GpuSim {
    /// Sets the bus id of the GPU its links lead to (remote = "gpu").
    pub(crate) fn set_nvlink_peer(&mut self, bus_id: String) {
        self.nvlink_peer = Some(bus_id);
    }

    /// The links, when `link` can be asked about at `t`: INVALID_ARGUMENT
    /// beyond NVML's 18 links, NOT_SUPPORTED beyond the GPU's own.
    fn link(&self, link: u32, t: f64) -> Result<&NvLinkSim, Unavailable> {
        self.check(Some(Feature::Nvlink), t)?;
        if link >= MAX_LINKS {
            return Err(Unavailable::InvalidArgument);
        }
        let sim = self.nvlink.as_ref().ok_or(Unavailable::NotSupported)?;
        if link < sim.links() {
            Ok(sim)
        } else {
            Err(Unavailable::NotSupported)
        }
    }

    /// Whether `link` is active (up).
    pub fn nvlink_active(&self, link: u32, t: f64) -> Result<bool, Unavailable> {
        Ok(self.link(link, t)?.is_up(link, t))
    }

    /// NVLink version of `link`.
    pub fn nvlink_version(&self, link: u32, t: f64) -> Result<u32, Unavailable> {
        Ok(self.link(link, t)?.version())
    }

    /// Capability `cap` (nvmlNvLinkCapability_t) of `link`: P2P and P2P
    /// atomics yes, system memory access and atomics no (x86 hosts), no
    /// SLI bridge, the link valid.
    pub fn nvlink_capability(&self, link: u32, cap: u32, t: f64) -> Result<u32, Unavailable> {
        self.link(link, t)?;
        match cap {
            0 | 2 | 5 => Ok(1),
            1 | 3 | 4 => Ok(0),
            _ => Err(Unavailable::InvalidArgument),
        }
    }

    /// The device at the far end of `link`.
    pub fn nvlink_remote(&self, link: u32, t: f64) -> Result<NvLinkRemote, Unavailable> {
        let sim = self.link(link, t)?;
        Ok(match (sim.remote(), &self.nvlink_peer) {
            (RemoteKind::Gpu, Some(peer)) => NvLinkRemote {
                kind: RemoteKind::Gpu,
                bus: crate::driver_messages::parse_pci(peer).map_or(0, |p| p.1),
                pci_bus_id: peer.clone(),
                pci_device_id: self.spec().pci_device_id,
            },
            _ => {
                let bus = 0x05 + sim.switch_of(link);
                NvLinkRemote {
                    kind: RemoteKind::Switch,
                    pci_bus_id: format!("00000000:{bus:02X}:00.0"),
                    bus,
                    pci_device_id: NVSWITCH_DEVICE_ID,
                }
            }
        })
    }

    /// Error counter `counter` (nvmlNvLinkErrorCounter_t) of `link`.
    pub fn nvlink_errors(&self, link: u32, counter: u32, t: f64) -> Result<u64, Unavailable> {
        let sim = self.link(link, t)?;
        let counter = *NvLinkCounter::ALL
            .get(counter as usize)
            .ok_or(Unavailable::InvalidArgument)?;
        Ok(sim.errors(link, counter, t))
    }

    /// The GPU's NVLinks once `check` passes (field values).
    fn nvlink_sim(&self, t: f64) -> Result<&NvLinkSim, Unavailable> {
        self.check(Some(Feature::Nvlink), t)?;
        self.nvlink.as_ref().ok_or(Unavailable::NotSupported)
    }

    /// Error counter `counter` summed over the links (fields 38, 45, 52, 59, 160).
    pub fn nvlink_errors_total(&self, counter: NvLinkCounter, t: f64) -> Result<u64, Unavailable> {
        Ok(self.nvlink_sim(t)?.errors_total(counter, t))
    }

    /// Number of links (field 91).
    pub fn nvlink_link_count(&self, t: f64) -> Result<u32, Unavailable> {
        Ok(self.nvlink_sim(t)?.links())
    }

    /// Data KiB sent (`tx`) or received on link `scope`, or on every link
    /// when `scope` is `u32::MAX` (fields 138/139).
    pub fn nvlink_data_kib(&self, scope: u32, tx: bool, t: f64) -> Result<u64, Unavailable> {
        let sim = self.nvlink_sim(t)?;
        if !sim.has_data_fields() {
            return Err(Unavailable::NotSupported);
        }
        if scope == u32::MAX {
            return Ok((0..sim.links()).map(|l| sim.data_kib(l, tx, t)).sum());
        }
        if scope >= sim.links() {
            return Err(Unavailable::NotSupported);
        }
        Ok(sim.data_kib(scope, tx, t))
    }

    /// GPU fabric info at `t`.
    pub fn fabric(&self, t: f64) -> Result<FabricInfo, Unavailable> {
        self.check(Some(Feature::Fabric), t)?;
        let f = self
            .spec()
            .fabric
            .as_ref()
            .ok_or(Unavailable::NotSupported)?;
        let status = f.status.get_ref().at(t);
        let flag = |steps: &Option<Steps<bool>>, shift: u32| {
            steps.as_ref().map_or(0, |s| if *s.at(t) { 1 } else { 2 }) << shift
        };
        Ok(FabricInfo {
            cluster_uuid: parse_uuid(f.cluster_uuid.get_ref()).unwrap_or_default(),
            status: if status == "SUCCESS" {
                0
            } else {
                codes::code_for_name(status)
                    .unwrap_or(nvml_wrapper_sys::bindings::nvmlReturn_enum_NVML_ERROR_UNKNOWN)
            },
            clique_id: f.clique_id,
            state: match f.state.at(t) {
                FabricState::NotSupported => 0,
                FabricState::NotStarted => 1,
                FabricState::InProgress => 2,
                FabricState::Completed => 3,
            },
            health_mask: flag(&f.degraded_bandwidth, 0)
                | flag(&f.route_recovery, 2)
                | flag(&f.route_unhealthy, 4)
                | flag(&f.access_timeout_recovery, 6),
            health_summary: match f.health_summary.at(t) {
                HealthSummary::NotSupported => 0,
                HealthSummary::Healthy => 1,
                HealthSummary::Unhealthy => 2,
                HealthSummary::LimitedCapacity => 3,
            },
            struct_version: *f.struct_version.get_ref(),
        })
    }

    /// The recovery action (nvmlDeviceGpuRecoveryAction_t, field 230).
    pub fn recovery_action(&self, t: f64) -> Result<u32, Unavailable> {
        self.check(None, t)?;
        let action = self
            .spec()
            .recovery_action
            .as_ref()
            .ok_or(Unavailable::NotSupported)?;
        Ok(match action.at(t) {
            RecoveryAction::None => 0,
            RecoveryAction::GpuReset => 1,
            RecoveryAction::NodeReboot => 2,
            RecoveryAction::DrainP2p => 3,
            RecoveryAction::DrainAndReset => 4,
            RecoveryAction::Raw(value) => *value,
        })
    }
}
