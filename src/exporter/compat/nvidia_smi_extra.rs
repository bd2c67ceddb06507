//! The `nvidia_smi_*` families that nvidia_gpu_exporter writes itself rather
//! than from an `nvidia-smi --query-gpu` field: `nvidia_smi_index`, which its
//! dashboards' `$job`/`$node` variables read, the energy counter, the
//! per-process families, the Xid families, the MIG memory families, the
//! recovery action, PCIe throughput and the fabric state.
//! Names, types and label sets are those of its `internal/exporter`.
//!
//! `nvidia_smi_fabric_state` and `nvidia_smi_fabric_clique_id` follow
//! utkuozdemir/nvidia_gpu_exporter at e656cd8 (2026-08-21):
//! `internal/nvidiasmi/transform.go` maps the `fabric.state` field to
//! nvmlGpuFabricState_t's number (1 not started, 2 in progress, 3 completed)
//! and `internal/nvmlnative/backend_nvml.go` `collectFabric` prints N/A —
//! no series — when the call fails or the state is 0 (not supported);
//! `internal/integration/testdata/*h200*.metrics` show the HELP text (the
//! field name) and the `uuid` label alone.

use std::borrow::Cow;
use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;

use crate::families::{Family, Labels};
use crate::gpu::snapshot::unix_seconds_f64;
use crate::gpu::{FieldGroup, GpuSnapshot, ProcessKind, Snapshot};

use crate::families::uuid_label;
use crate::gpu::links::RECOVERY_ACTIONS;

struct Families<'a> {
    index: Family<'a>,
    energy: Family<'a>,
    app_info: Family<'a>,
    app_memory: Family<'a>,
    apps: Family<'a>,
    apps_success: Family<'a>,
    xid_count: Family<'a>,
    xid_time: Family<'a>,
    mig_info: Family<'a>,
    mig_total: Family<'a>,
    mig_used: Family<'a>,
    mig_sm: Family<'a>,
    mig_tensor: Family<'a>,
    recovery_action: Family<'a>,
    pcie_tx: Family<'a>,
    pcie_rx: Family<'a>,
    fabric_state: Family<'a>,
    fabric_clique: Family<'a>,
}

impl<'a> Families<'a> {
    fn new() -> Self {
        Families {
            index: Family::gauge("nvidia_smi_index", "index", None),
            // The encoder appends `_total`: nvidia_smi_energy_joules_total.
            energy: Family::counter(
                "nvidia_smi_energy_joules",
                "Total energy consumed by the GPU in joules since the driver was last loaded. Resets on a driver reload; absent on GPUs that cannot report it.",
                None,
            ),
            app_info: Family::gauge(
                "nvidia_smi_compute_app_info",
                "A metric with a constant '1' value labeled by the identity of a process with a compute context on a GPU.",
                None,
            ),
            app_memory: Family::gauge(
                "nvidia_smi_compute_app_used_memory_bytes",
                "GPU memory used by the process. Absent when the driver cannot report it (e.g. Windows WDDM).",
                None,
            ),
            apps: Family::gauge(
                "nvidia_smi_compute_apps",
                "Number of processes with a compute context on the GPU.",
                None,
            ),
            apps_success: Family::gauge(
                "nvidia_smi_compute_apps_last_collect_success",
                "Whether the most recent per-process collection succeeded (1) or not (0)",
                None,
            ),
            xid_count: Family::counter(
                "nvidia_smi_xid_errors",
                "Number of XID errors observed on the GPU since the exporter started. A series appears when its first event arrives; earlier history cannot be replayed.",
                None,
            ),
            xid_time: Family::gauge(
                "nvidia_smi_xid_last_timestamp_seconds",
                "Unix timestamp of the most recently observed XID error, as received by the exporter (the driver events carry no timestamp of their own).",
                None,
            ),
            mig_info: Family::gauge(
                "nvidia_smi_mig_info",
                "A metric with a constant '1' value labeled by the identity of a MIG device: the parent GPU's uuid, the MIG device's own uuid and its GPU instance id.",
                None,
            ),
            mig_total: Family::gauge(
                "nvidia_smi_mig_memory_total_bytes",
                "Memory of the GPU instance (total).",
                None,
            ),
            mig_used: Family::gauge(
                "nvidia_smi_mig_memory_used_bytes",
                "Memory of the GPU instance (used).",
                None,
            ),
            mig_sm: Family::gauge(
                "nvidia_smi_mig_sm_activity_ratio",
                "Share of time the GPU instance's SMs had a warp assigned (GPM), 0..1.",
                None,
            ),
            mig_tensor: Family::gauge(
                "nvidia_smi_mig_tensor_activity_ratio",
                "Share of time a tensor pipe of the GPU instance was active (GPM), 0..1.",
                None,
            ),
            recovery_action: Family::gauge(
                "nvidia_smi_gpu_recovery_action",
                "What the driver says the GPU needs (NVML field 230): 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset. Absent where the driver cannot tell.",
                None,
            ),
            pcie_tx: Family::gauge(
                "nvidia_smi_pcie_throughput_tx_bytes_per_second",
                "PCIe bytes per second the GPU sent over the last sample period (GPM; absent on GPUs without GPM).",
                None,
            ),
            pcie_rx: Family::gauge(
                "nvidia_smi_pcie_throughput_rx_bytes_per_second",
                "PCIe bytes per second the GPU received over the last sample period (GPM; absent on GPUs without GPM).",
                None,
            ),
            fabric_state: Family::gauge("nvidia_smi_fabric_state", "fabric.state", None),
            fabric_clique: Family::gauge("nvidia_smi_fabric_clique_id", "fabric.cliqueId", None),
        }
    }

    fn encode(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        for family in [
            &self.index,
            &self.energy,
            &self.app_info,
            &self.app_memory,
            &self.apps,
            &self.apps_success,
            &self.xid_count,
            &self.xid_time,
            &self.mig_info,
            &self.mig_total,
            &self.mig_used,
            &self.mig_sm,
            &self.mig_tensor,
            &self.recovery_action,
            &self.pcie_tx,
            &self.pcie_rx,
            &self.fabric_state,
            &self.fabric_clique,
        ] {
            family.encode(encoder)?;
        }
        Ok(())
    }

    fn add(&mut self, gpu: &'a GpuSnapshot) {
        let uuid = uuid_label(&gpu.uuid);
        let id = || -> Labels<'a> { vec![("uuid", Cow::Owned(uuid.clone()))] };
        self.index.push(id(), f64::from(gpu.index));
        self.energy.push_some(id(), gpu.readings.energy_joules);
        for xid in gpu.xid_errors.iter() {
            let mut labels = id();
            labels.push(("xid", Cow::Owned(xid.code.to_string())));
            self.xid_count.push(labels.clone(), xid.count as f64);
            self.xid_time.push(labels, unix_seconds_f64(xid.last_seen));
        }
        if !gpu.is_up() {
            return;
        }
        // nvidia-smi --query-compute-apps lists compute contexts only.
        if gpu.groups.contains_key(&FieldGroup::Processes) {
            let compute = gpu.processes.iter().filter(|p| {
                matches!(
                    p.kind,
                    ProcessKind::Compute | ProcessKind::ComputeAndGraphics
                )
            });
            let mut count = 0u32;
            for p in compute {
                count += 1;
                let mut labels = id();
                labels.push(("pid", Cow::Owned(p.pid.to_string())));
                labels.push((
                    "process_name",
                    Cow::Borrowed(p.name.as_deref().unwrap_or("")),
                ));
                self.app_info.push(labels.clone(), 1.0);
                self.app_memory
                    .push_some(labels, p.used_memory_bytes.map(|b| b as f64));
            }
            self.apps.push(id(), f64::from(count));
        }
        for mig in gpu.mig_instances.iter() {
            let mut labels = id();
            labels.push((
                "gpu_instance_id",
                Cow::Owned(mig.gpu_instance_id.to_string()),
            ));
            self.mig_total
                .push(labels.clone(), mig.memory_total_bytes as f64);
            self.mig_used
                .push(labels.clone(), mig.memory_used_bytes as f64);
            labels.push(("mig_uuid", Cow::Borrowed(mig.uuid.as_str())));
            self.mig_info.push(labels, 1.0);
        }
        // nvidia-smi's numbers are field 230's own values, unknown ones too.
        let recovery = gpu.health.links.recovery_action.and_then(|action| {
            RECOVERY_ACTIONS
                .iter()
                .position(|a| *a == action)
                .map(|i| i as f64)
                .or(gpu.health.links.recovery_action_value.map(|v| v as f64))
        });
        self.recovery_action.push_some(id(), recovery);
        if let Some(fabric) = &gpu.health.fabric {
            self.fabric_state
                .push(id(), f64::from(fabric.state.nvml_value()));
            self.fabric_clique.push(id(), f64::from(fabric.clique_id));
        }
        if let Some(m) = &gpu.gpm.gpu {
            self.pcie_tx.push_some(id(), m.pcie_tx_bytes_per_second);
            self.pcie_rx.push_some(id(), m.pcie_rx_bytes_per_second);
        }
        for instance in &gpu.gpm.instances {
            let mut labels = id();
            labels.push((
                "gpu_instance_id",
                Cow::Owned(instance.gpu_instance_id.to_string()),
            ));
            let m = &instance.metrics;
            self.mig_sm.push_some(labels.clone(), m.sm_active_ratio);
            self.mig_tensor.push_some(labels, m.tensor_active_ratio);
        }
    }
}

/// Encodes the extra `nvidia_smi_*` families of `snapshot`.
pub fn encode(snapshot: &Snapshot, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let mut f = Families::new();
    let mut process_reads = Vec::new();
    for gpu in &snapshot.gpus {
        f.add(gpu);
        if gpu.is_up() {
            process_reads.extend(gpu.groups.get(&FieldGroup::Processes).copied());
        }
    }
    // One value for the node, as there: did the last process read succeed
    // on every GPU that was read.
    if !process_reads.is_empty() {
        let ok = process_reads.iter().all(|ok| *ok);
        f.apps_success.push(Vec::new(), if ok { 1.0 } else { 0.0 });
    }
    f.encode(encoder)
}
