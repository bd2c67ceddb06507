//! The per-GPU metric families, encoded from a snapshot.
//!
//! Every GPU series carries `gpu` (NVML index) and `uuid`; everything else
//! that identifies a GPU is on `gpuwatch_gpu_info`, to be joined in PromQL.

use std::borrow::Cow;
use std::fmt;

use crate::families::Sink;

use crate::gpu::reasons::CLOCK_EVENT_REASONS;
use crate::gpu::{unix_seconds_f64, GpuSnapshot, GpuStatus, Snapshot};

use super::detail::{Detail, DetailSet};
use crate::families::{counter, families, gauge, text, unit};
pub use crate::families::{flag, ids, number, with};

/// Encodes every per-GPU family of `snapshot`, then the process, sharing
/// and capacity families (see [`super::process_metrics`]).
pub fn encode(
    snapshot: &Snapshot,
    options: &super::process_metrics::ProcessExport,
    escalated: &crate::health::escalation::Escalated,
    detail: Detail,
    encoder: &mut impl Sink,
) -> fmt::Result {
    let mut f = Families::new();
    for gpu in &snapshot.gpus {
        f.add(snapshot, gpu, escalated, detail);
    }
    f.encode(encoder)?;
    super::gpm_metrics::encode(snapshot, detail, encoder)?;
    super::fabric_metrics::encode(snapshot, encoder)?;
    super::workload_metrics::encode(snapshot, detail.has(DetailSet::Processes), encoder)?;
    super::process_metrics::encode(snapshot, options, detail, encoder)
}

families! {
    info: gauge("gpu_info", "Identity of each GPU (value 1); join on gpu and uuid.", None),
    up: gauge("gpu_up", "Whether the GPU answered on the last sample (1) or is lost (0).", None),
    lost: gauge("gpu_lost", "Set (1) while a GPU is lost, with the NVML error as reason.", None),
    util_gpu: gauge("gpu_utilization", "Share of the last sample period in which a kernel ran on the GPU.", unit("ratio")),
    util_mem: gauge("memory_utilization", "Share of the last sample period in which device memory was read or written.", unit("ratio")),
    mem_total: gauge("memory_total", "Installed frame buffer memory.", unit("bytes")),
    mem_used: gauge("memory_used", "Allocated frame buffer memory.", unit("bytes")),
    mem_free: gauge("memory_free", "Unallocated frame buffer memory.", unit("bytes")),
    mem_reserved: gauge("memory_reserved", "Frame buffer memory reserved by the driver.", unit("bytes")),
    temp_gpu: gauge("gpu_temperature", "GPU die temperature.", unit("celsius")),
    temp_mem: gauge("memory_temperature", "Memory (HBM) temperature.", unit("celsius")),
    temp_threshold: gauge("temperature_threshold", "Temperature thresholds the GPU reports: slowdown, shutdown, gpu_max, memory_max.", unit("celsius")),
    power: gauge("power_usage", "Power draw.", unit("watts")),
    power_limit: gauge("power_limit", "Enforced power limit.", unit("watts")),
    power_default_limit: gauge("power_default_limit", "Default power limit.", unit("watts")),
    energy: counter("energy_consumption", "Energy used since the driver was loaded.", unit("joules")),
    clock: gauge("clock", "Current clock frequency, by clock (sm, memory, graphics, video).", unit("hertz")),
    clock_max: gauge("clock_max", "Maximum clock frequency, by clock (sm, memory, graphics).", unit("hertz")),
    event_active: gauge("clock_event_active", "Whether a clock-event (throttle) reason is active (1) or not (0).", None),
    event_seconds: counter("clock_event_duration", "Time clocks were held down by a reason, where NVML counts it.", unit("seconds")),
    pstate: gauge("performance_state", "Performance state: 0 is maximum performance, 15 minimum.", None),
    fan: gauge("fan_speed", "Fan speed as a share of its maximum, by fan.", unit("ratio")),
    pcie_gen: gauge("pcie_link_generation", "Current PCIe link generation.", None),
    pcie_width: gauge("pcie_link_width", "Current PCIe link width in lanes.", None),
    pcie_max_gen: gauge("pcie_link_max_generation", "Maximum PCIe link generation.", None),
    pcie_max_width: gauge("pcie_link_max_width", "Maximum PCIe link width in lanes.", None),
    pcie_replays: counter("pcie_replay_errors", "PCIe replays (link-level retransmissions) since the driver loaded.", None),
    ecc_enabled: gauge("ecc_enabled", "Whether ECC is enabled (1) or not (0).", None),
    ecc_errors: counter("ecc_errors", "ECC errors by type (corrected, uncorrected) and counter (volatile: since driver load; aggregate: lifetime).", None),
    retired: gauge("retired_pages", "Memory pages retired, by cause (single_bit, double_bit).", None),
    retired_pending: gauge("retired_pages_pending", "Whether a page retirement waits for a reboot (1) or not (0).", None),
    remapped: gauge("remapped_rows", "Memory rows remapped, by cause (correctable, uncorrectable).", None),
    remap_pending: gauge("remapped_rows_pending", "Whether a row remap waits for a GPU reset (1) or not (0).", None),
    remap_failure: gauge("remapped_rows_failure", "Whether a row remap has failed (1) or not (0).", None),
    xid: counter("xid_errors", "Xid critical errors reported by the driver since the agent started, by Xid code; xid=\"other\" counts the codes outside NVIDIA's catalog past the first 32 of a GPU.", None),
    xid_last: gauge("xid_last_seen_timestamp", "When an Xid code was last reported.", unit("seconds")),
    xid_info: gauge("xid_info", "What NVIDIA's Xid catalog says of each Xid code counted on the GPU (value 1): its mnemonic and the action to take first; join on gpu, uuid and xid.", None),
    nvlink_down: gauge("nvlink_links_down", "NVLink links of the GPU that are down (which ones: /api/v1/gpus, the web view, or gpuwatch_nvlink_up with detail set nvlink_links); absent without NVLink.", None),
    nvlink_gpu_errors: counter("nvlink_gpu_errors", "NVLink errors since the driver loaded, summed over the GPU's links and error types (by link and type: gpuwatch_nvlink_errors_total with detail set nvlink_links); absent without NVLink.", None),
    nvlink_gpu_data: counter("nvlink_gpu_data", "Data sent (direction tx) or received (rx) over all the GPU's NVLink links since the driver loaded (NVML fields 138/139); only on GPUs without GPM NVLink figures.", unit("bytes")),
    nvlink_up: gauge("nvlink_up", "Whether an NVLink link is active (1) or down (0), by link; absent without NVLink.", None),
    nvlink_errors: counter("nvlink_errors", "NVLink errors since the driver loaded, by link and type (replay, recovery, crc_flit, crc_data).", None),
    nvlink_data: counter("nvlink_data", "Data sent (direction tx) or received (rx) on an NVLink link since the driver loaded (NVML fields 138/139); only on GPUs without GPM NVLink figures.", unit("bytes")),
    gpu_health: gauge("gpu_health", "The GPU's health verdict: one series per state (healthy, degraded, unhealthy), the current one at 1; reasons in /api/v1/health.", None),
    recovery_action: gauge("recovery_action", "What the driver says the GPU needs (NVML field 230): one series at 1, action none, gpu_reset, node_reboot, drain_p2p or drain_and_reset, or unknown (a value this release does not know, in label value: the GPU is unhealthy); absent when unsupported.", None),
    encoder: gauge("encoder_utilization", "Video encoder utilization.", unit("ratio")),
    decoder: gauge("decoder_utilization", "Video decoder utilization.", unit("ratio")),
    compute_mode: gauge("compute_mode", "The GPU's compute mode (value 1), by mode.", None),
    mig: gauge("mig_enabled", "Whether MIG mode is enabled (1) or not (0).", None),
    groups: gauge("collector_success", "Whether a field group was read without error on its last read (1) or not (0).", None),
}

impl<'a> Families<'a> {
    fn add(
        &mut self,
        snapshot: &'a Snapshot,
        gpu: &'a GpuSnapshot,
        escalated: &crate::health::escalation::Escalated,
        detail: Detail,
    ) {
        let id = || ids(gpu);
        let identity = &gpu.identity;
        let mut info = id();
        info.push(("name", text(&identity.name)));
        info.push(("serial", text(&identity.serial)));
        info.push(("pci_bus_id", text(&identity.pci_bus_id)));
        info.push(("driver_version", text(&snapshot.system.driver_version)));
        info.push(("cuda_version", text(&snapshot.system.cuda_driver_version)));
        self.info.push(info, 1.0);
        self.up.push(id(), flag(gpu.is_up()));
        if let GpuStatus::Lost { reason } = &gpu.status {
            self.lost.push(with(id(), "reason", reason.as_str()), 1.0);
        }
        if detail.has(DetailSet::CollectorGroups) {
            for (group, ok) in &gpu.groups {
                self.groups
                    .push(with(id(), "group", group.as_str()), flag(*ok));
            }
        }
        self.add_readings(gpu);
        self.add_health(gpu);
        for xid in gpu.xid_errors.iter() {
            let labels = with(id(), "xid", xid.code.to_string());
            self.xid.push(labels.clone(), xid.count as f64);
            self.xid_last
                .push(labels.clone(), unix_seconds_f64(xid.last_seen));
            if let Some(info) = crate::health::catalog::lookup(xid.code) {
                let labels = with(labels, "mnemonic", info.mnemonic);
                self.xid_info
                    .push(with(labels, "action", info.action.as_str()), 1.0);
            }
        }
        if let Some(other) = gpu.xid_other {
            let labels = with(id(), "xid", super::self_metrics::OTHER);
            self.xid.push(labels.clone(), other.count as f64);
            self.xid_last
                .push(labels, unix_seconds_f64(other.last_seen));
        }
        self.add_links(gpu);
        if detail.has(DetailSet::NvlinkLinks) {
            self.add_link_detail(gpu);
        }
        let state = crate::health::verdict::judge(snapshot, gpu, escalated).state;
        for candidate in crate::health::verdict::State::ALL {
            self.gpu_health.push(
                with(id(), "state", candidate.as_str()),
                flag(candidate == state),
            );
        }
    }

    /// The per-GPU NVLink figures: links down, errors and (without GPM)
    /// data summed over the links, the recovery action.
    fn add_links(&mut self, gpu: &'a GpuSnapshot) {
        let id = || ids(gpu);
        let links = &gpu.health.links;
        if !links.nvlink.is_empty() {
            self.nvlink_down.push(id(), links.links_down() as f64);
            let errors: u64 = links
                .nvlink
                .iter()
                .flat_map(|l| l.errors.values())
                .fold(0, |sum, n| sum.saturating_add(*n));
            self.nvlink_gpu_errors.push(id(), errors as f64);
        }
        let traffic = &gpu.health.nvlink_traffic;
        for (direction, bytes) in [
            ("tx", sum_bytes(traffic.iter().map(|t| t.tx_bytes))),
            ("rx", sum_bytes(traffic.iter().map(|t| t.rx_bytes))),
        ] {
            self.nvlink_gpu_data
                .push_some(with(id(), "direction", direction), bytes);
        }
        if let Some(action) = links.recovery_action {
            let mut labels = with(id(), "action", action);
            if action == crate::gpu::links::UNKNOWN_RECOVERY_ACTION {
                // What "unknown" stands for: field 230's raw value.
                let raw = links.recovery_action_value.unwrap_or_default();
                labels = with(labels, "value", raw.to_string());
            }
            self.recovery_action.push(labels, 1.0);
        }
    }

    /// The per-link NVLink families (detail set `nvlink_links`).
    fn add_link_detail(&mut self, gpu: &'a GpuSnapshot) {
        let id = || ids(gpu);
        for link in &gpu.health.links.nvlink {
            let labels = with(id(), "link", number(link.link));
            self.nvlink_up.push(labels.clone(), flag(link.up));
            for (kind, count) in &link.errors {
                self.nvlink_errors
                    .push(with(labels.clone(), "type", *kind), *count as f64);
            }
        }
        for traffic in &gpu.health.nvlink_traffic {
            let labels = with(id(), "link", number(traffic.link));
            for (direction, bytes) in [("tx", traffic.tx_bytes), ("rx", traffic.rx_bytes)] {
                if let Some(bytes) = bytes {
                    self.nvlink_data
                        .push(with(labels.clone(), "direction", direction), bytes as f64);
                }
            }
        }
    }

    fn add_readings(&mut self, gpu: &'a GpuSnapshot) {
        let id = || ids(gpu);
        let r = &gpu.readings;
        let identity = &gpu.identity;
        self.util_gpu.push_some(id(), r.utilization_gpu_ratio);
        self.util_mem.push_some(id(), r.utilization_memory_ratio);
        if let Some(m) = &r.memory {
            self.mem_total.push(id(), m.total_bytes as f64);
            self.mem_used.push(id(), m.used_bytes as f64);
            self.mem_free.push(id(), m.free_bytes as f64);
            self.mem_reserved.push(id(), m.reserved_bytes as f64);
        }
        self.temp_gpu.push_some(id(), r.temperature_gpu_celsius);
        self.temp_mem.push_some(id(), r.temperature_memory_celsius);
        for (name, value) in [
            ("slowdown", identity.temperature_slowdown_celsius),
            ("shutdown", identity.temperature_shutdown_celsius),
            ("gpu_max", identity.temperature_gpu_max_celsius),
            ("memory_max", identity.temperature_memory_max_celsius),
        ] {
            self.temp_threshold
                .push_some(with(id(), "threshold", name), value);
        }
        self.power.push_some(id(), r.power_watts);
        self.energy.push_some(id(), r.energy_joules);
        self.clock
            .push_some(with(id(), "clock", "sm"), r.sm_clock_hertz);
        self.clock
            .push_some(with(id(), "clock", "memory"), r.memory_clock_hertz);
        self.clock
            .push_some(with(id(), "clock", "graphics"), r.graphics_clock_hertz);
        self.clock
            .push_some(with(id(), "clock", "video"), r.video_clock_hertz);
        self.clock_max
            .push_some(with(id(), "clock", "sm"), identity.max_sm_clock_hertz);
        self.clock_max.push_some(
            with(id(), "clock", "memory"),
            identity.max_memory_clock_hertz,
        );
        self.clock_max.push_some(
            with(id(), "clock", "graphics"),
            identity.max_graphics_clock_hertz,
        );
        if let Some(mask) = r.clock_event_reasons {
            for reason in CLOCK_EVENT_REASONS {
                self.event_active.push(
                    with(id(), "reason", reason.name),
                    flag(mask & reason.bit != 0),
                );
            }
        }
        for (name, seconds) in &r.clock_event_seconds {
            self.event_seconds
                .push(with(id(), "reason", *name), *seconds);
        }
        self.pcie_max_gen
            .push_some(id(), identity.pcie_max_link_gen.map(f64::from));
        self.pcie_max_width
            .push_some(id(), identity.pcie_max_link_width.map(f64::from));
    }

    fn add_health(&mut self, gpu: &'a GpuSnapshot) {
        if !gpu.is_up() {
            return;
        }
        let id = || ids(gpu);
        let h = &gpu.health;
        let count = |v: Option<u64>| v.map(|c| c as f64);
        let bit = |v: Option<bool>| v.map(flag);
        self.power_limit.push_some(id(), h.power_limit_watts);
        self.power_default_limit
            .push_some(id(), h.power_default_limit_watts);
        self.pstate
            .push_some(id(), h.performance_state.map(f64::from));
        for (fan, speed) in h.fan_speed_ratio.iter().enumerate() {
            self.fan
                .push_some(with(id(), "fan", fan.to_string()), *speed);
        }
        self.pcie_gen
            .push_some(id(), h.pcie_link_gen.map(f64::from));
        self.pcie_width
            .push_some(id(), h.pcie_link_width.map(f64::from));
        self.pcie_replays
            .push_some(id(), count(h.pcie_replay_errors));
        self.ecc_enabled.push_some(id(), bit(h.ecc_enabled));
        for (kind, counter, value) in [
            ("corrected", "volatile", h.ecc.corrected_volatile),
            ("uncorrected", "volatile", h.ecc.uncorrected_volatile),
            ("corrected", "aggregate", h.ecc.corrected_aggregate),
            ("uncorrected", "aggregate", h.ecc.uncorrected_aggregate),
        ] {
            let mut labels = with(id(), "type", kind);
            labels.push(("counter", Cow::Borrowed(counter)));
            self.ecc_errors.push_some(labels, count(value));
        }
        self.retired.push_some(
            with(id(), "cause", "single_bit"),
            count(h.retired_pages_single_bit),
        );
        self.retired.push_some(
            with(id(), "cause", "double_bit"),
            count(h.retired_pages_double_bit),
        );
        self.retired_pending
            .push_some(id(), bit(h.retired_pages_pending));
        self.remapped.push_some(
            with(id(), "cause", "correctable"),
            count(h.remapped_rows_correctable),
        );
        self.remapped.push_some(
            with(id(), "cause", "uncorrectable"),
            count(h.remapped_rows_uncorrectable),
        );
        self.remap_pending
            .push_some(id(), bit(h.remapped_rows_pending));
        self.remap_failure
            .push_some(id(), bit(h.remapped_rows_failure));
        self.encoder.push_some(id(), h.encoder_utilization_ratio);
        self.decoder.push_some(id(), h.decoder_utilization_ratio);
        if let Some(mode) = h.compute_mode {
            self.compute_mode.push(with(id(), "mode", mode), 1.0);
        }
        self.mig.push_some(id(), bit(h.mig_enabled));
    }
}

/// The sum of the links' byte counters that answered; `None` when none did.
fn sum_bytes(values: impl Iterator<Item = Option<u64>>) -> Option<f64> {
    values
        .flatten()
        .fold(None, |sum: Option<u64>, v| {
            Some(sum.unwrap_or(0).saturating_add(v))
        })
        .map(|v| v as f64)
}
