//! utkuozdemir/nvidia_gpu_exporter's names: `nvidia_smi_*` gauges named
//! after `nvidia-smi --query-gpu` fields, labelled `uuid` (lower case,
//! without the `GPU-` prefix, as that exporter writes it), in its units:
//! `[%]` fields become `_ratio` (0..1), `[MiB]` `_bytes`, `[MHz]`
//! `_clock_hz`, `[W]` `_watts`; temperatures stay in °C. Every family is a
//! gauge there, the ECC `..._total` ones included, and so here.

use std::borrow::Cow;
use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;

use super::flag;
use crate::families::{families, text, uuid_label, Family, Labels};
use crate::gpu::reasons::CLOCK_EVENT_REASONS;
use crate::gpu::{GpuSnapshot, Snapshot};

/// nvidia_gpu_exporter's numbers for the compute modes.
fn compute_mode_number(mode: &str) -> Option<f64> {
    match mode {
        "default" => Some(0.0),
        "exclusive_thread" => Some(1.0),
        "prohibited" => Some(2.0),
        "exclusive_process" => Some(3.0),
        _ => None,
    }
}

/// Every family of nvidia_gpu_exporter is a gauge without a unit.
fn gauge<'a>(name: &'static str, help: &'static str) -> Family<'a> {
    Family::gauge(name, help, None)
}

// HELP is the nvidia-smi field name with its unit, as that exporter writes it.
families! {
    info: gauge("nvidia_smi_gpu_info", "A metric with a constant '1' value labeled by gpu uuid, name, driver_version, pci_bus_id, serial and index."),
    util_gpu: gauge("nvidia_smi_utilization_gpu_ratio", "utilization.gpu [%]"),
    util_mem: gauge("nvidia_smi_utilization_memory_ratio", "utilization.memory [%]"),
    mem_total: gauge("nvidia_smi_memory_total_bytes", "memory.total [MiB]"),
    mem_used: gauge("nvidia_smi_memory_used_bytes", "memory.used [MiB]"),
    mem_free: gauge("nvidia_smi_memory_free_bytes", "memory.free [MiB]"),
    mem_reserved: gauge("nvidia_smi_memory_reserved_bytes", "memory.reserved [MiB]"),
    temp_gpu: gauge("nvidia_smi_temperature_gpu", "temperature.gpu"),
    temp_mem: gauge("nvidia_smi_temperature_memory", "temperature.memory"),
    power_draw: gauge("nvidia_smi_power_draw_watts", "power.draw [W]"),
    enforced_limit: gauge("nvidia_smi_enforced_power_limit_watts", "enforced.power.limit [W]"),
    default_limit: gauge("nvidia_smi_power_default_limit_watts", "power.default_limit [W]"),
    sm_clock: gauge("nvidia_smi_clocks_current_sm_clock_hz", "clocks.current.sm [MHz]"),
    mem_clock: gauge("nvidia_smi_clocks_current_memory_clock_hz", "clocks.current.memory [MHz]"),
    max_sm_clock: gauge("nvidia_smi_clocks_max_sm_clock_hz", "clocks.max.sm [MHz]"),
    max_mem_clock: gauge("nvidia_smi_clocks_max_memory_clock_hz", "clocks.max.memory [MHz]"),
    graphics_clock: gauge("nvidia_smi_clocks_current_graphics_clock_hz", "clocks.current.graphics [MHz]"),
    video_clock: gauge("nvidia_smi_clocks_current_video_clock_hz", "clocks.current.video [MHz]"),
    max_graphics_clock: gauge("nvidia_smi_clocks_max_graphics_clock_hz", "clocks.max.graphics [MHz]"),
    reasons_active: gauge("nvidia_smi_clocks_event_reasons_active", "clocks_event_reasons.active"),
    reason_gpu_idle: gauge("nvidia_smi_clocks_event_reasons_gpu_idle", "clocks_event_reasons.gpu_idle"),
    reason_app: gauge("nvidia_smi_clocks_event_reasons_applications_clocks_setting", "clocks_event_reasons.applications_clocks_setting"),
    reason_sw_power: gauge("nvidia_smi_clocks_event_reasons_sw_power_cap", "clocks_event_reasons.sw_power_cap"),
    reason_hw: gauge("nvidia_smi_clocks_event_reasons_hw_slowdown", "clocks_event_reasons.hw_slowdown"),
    reason_hw_thermal: gauge("nvidia_smi_clocks_event_reasons_hw_thermal_slowdown", "clocks_event_reasons.hw_thermal_slowdown"),
    reason_hw_brake: gauge("nvidia_smi_clocks_event_reasons_hw_power_brake_slowdown", "clocks_event_reasons.hw_power_brake_slowdown"),
    reason_sw_thermal: gauge("nvidia_smi_clocks_event_reasons_sw_thermal_slowdown", "clocks_event_reasons.sw_thermal_slowdown"),
    reason_sync: gauge("nvidia_smi_clocks_event_reasons_sync_boost", "clocks_event_reasons.sync_boost"),
    pstate: gauge("nvidia_smi_pstate", "pstate"),
    fan: gauge("nvidia_smi_fan_speed_ratio", "fan.speed [%]"),
    pcie_gen: gauge("nvidia_smi_pcie_link_gen_current", "pcie.link.gen.current"),
    pcie_gen_max: gauge("nvidia_smi_pcie_link_gen_max", "pcie.link.gen.max"),
    pcie_width: gauge("nvidia_smi_pcie_link_width_current", "pcie.link.width.current"),
    pcie_width_max: gauge("nvidia_smi_pcie_link_width_max", "pcie.link.width.max"),
    compute_mode: gauge("nvidia_smi_compute_mode", "compute_mode"),
    ecc_mode: gauge("nvidia_smi_ecc_mode_current", "ecc.mode.current"),
    ecc_cor_vol: gauge("nvidia_smi_ecc_errors_corrected_volatile_total", "ecc.errors.corrected.volatile.total"),
    ecc_unc_vol: gauge("nvidia_smi_ecc_errors_uncorrected_volatile_total", "ecc.errors.uncorrected.volatile.total"),
    ecc_cor_agg: gauge("nvidia_smi_ecc_errors_corrected_aggregate_total", "ecc.errors.corrected.aggregate.total"),
    ecc_unc_agg: gauge("nvidia_smi_ecc_errors_uncorrected_aggregate_total", "ecc.errors.uncorrected.aggregate.total"),
    retired_sbe: gauge("nvidia_smi_retired_pages_single_bit_ecc_count", "retired_pages.single_bit_ecc.count"),
    retired_dbe: gauge("nvidia_smi_retired_pages_double_bit_count", "retired_pages.double_bit.count"),
    retired_pending: gauge("nvidia_smi_retired_pages_pending", "retired_pages.pending"),
    mig_mode: gauge("nvidia_smi_mig_mode_current", "mig.mode.current"),
}

/// Encodes the `nvidia_smi_*` families of `snapshot`.
pub fn encode(snapshot: &Snapshot, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let mut f = Families::new();
    for gpu in &snapshot.gpus {
        f.add(snapshot, gpu);
    }
    f.encode(encoder)?;
    super::nvidia_smi_extra::encode(snapshot, encoder)
}

impl<'a> Families<'a> {
    fn add(&mut self, snapshot: &'a Snapshot, gpu: &'a GpuSnapshot) {
        let uuid = uuid_label(&gpu.uuid);
        let id = || -> Labels<'a> { vec![("uuid", Cow::Owned(uuid.clone()))] };
        let identity = &gpu.identity;
        let mut info = id();
        info.push(("name", text(&identity.name)));
        info.push(("driver_version", text(&snapshot.system.driver_version)));
        info.push(("pci_bus_id", text(&identity.pci_bus_id)));
        info.push(("serial", text(&identity.serial)));
        info.push(("index", Cow::Owned(gpu.index.to_string())));
        self.info.push(info, 1.0);

        let r = &gpu.readings;
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
        self.power_draw.push_some(id(), r.power_watts);
        self.sm_clock.push_some(id(), r.sm_clock_hertz);
        self.mem_clock.push_some(id(), r.memory_clock_hertz);
        self.graphics_clock.push_some(id(), r.graphics_clock_hertz);
        self.video_clock.push_some(id(), r.video_clock_hertz);
        self.max_graphics_clock
            .push_some(id(), identity.max_graphics_clock_hertz);
        self.max_sm_clock
            .push_some(id(), identity.max_sm_clock_hertz);
        self.max_mem_clock
            .push_some(id(), identity.max_memory_clock_hertz);
        if let Some(mask) = r.clock_event_reasons {
            self.reasons_active.push(id(), mask as f64);
            for reason in CLOCK_EVENT_REASONS {
                let active = if mask & reason.bit != 0 { 1.0 } else { 0.0 };
                let family = match reason.name {
                    "gpu_idle" => &mut self.reason_gpu_idle,
                    "applications_clocks_setting" => &mut self.reason_app,
                    "sw_power_cap" => &mut self.reason_sw_power,
                    "hw_slowdown" => &mut self.reason_hw,
                    "hw_thermal_slowdown" => &mut self.reason_hw_thermal,
                    "hw_power_brake_slowdown" => &mut self.reason_hw_brake,
                    "sw_thermal_slowdown" => &mut self.reason_sw_thermal,
                    "sync_boost" => &mut self.reason_sync,
                    // nvidia-smi has no query field for display_clock_setting.
                    _ => continue,
                };
                family.push(id(), active);
            }
        }
        self.pcie_gen_max
            .push_some(id(), identity.pcie_max_link_gen.map(f64::from));
        self.pcie_width_max
            .push_some(id(), identity.pcie_max_link_width.map(f64::from));
        if !gpu.is_up() {
            return;
        }
        let h = &gpu.health;
        self.enforced_limit.push_some(id(), h.power_limit_watts);
        self.default_limit
            .push_some(id(), h.power_default_limit_watts);
        self.pstate
            .push_some(id(), h.performance_state.map(f64::from));
        // nvidia-smi's fan.speed is one value per GPU: the first fan's.
        self.fan
            .push_some(id(), h.fan_speed_ratio.first().copied().flatten());
        self.pcie_gen
            .push_some(id(), h.pcie_link_gen.map(f64::from));
        self.pcie_width
            .push_some(id(), h.pcie_link_width.map(f64::from));
        self.compute_mode
            .push_some(id(), h.compute_mode.and_then(compute_mode_number));
        self.ecc_mode.push_some(id(), flag(h.ecc_enabled));
        let count = |v: Option<u64>| v.map(|c| c as f64);
        self.ecc_cor_vol
            .push_some(id(), count(h.ecc.corrected_volatile));
        self.ecc_unc_vol
            .push_some(id(), count(h.ecc.uncorrected_volatile));
        self.ecc_cor_agg
            .push_some(id(), count(h.ecc.corrected_aggregate));
        self.ecc_unc_agg
            .push_some(id(), count(h.ecc.uncorrected_aggregate));
        self.retired_sbe
            .push_some(id(), count(h.retired_pages_single_bit));
        self.retired_dbe
            .push_some(id(), count(h.retired_pages_double_bit));
        self.retired_pending
            .push_some(id(), flag(h.retired_pages_pending));
        self.mig_mode.push_some(id(), flag(h.mig_enabled));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_label_is_lower_case_without_the_prefix() {
        assert_eq!(
            uuid_label("GPU-A0000000-0000-4000-8000-000000000000"),
            "a0000000-0000-4000-8000-000000000000"
        );
        assert_eq!(uuid_label("MIG-abc"), "mig-abc");
    }

    #[test]
    fn compute_modes_are_numbered_as_nvidia_gpu_exporter_does() {
        assert_eq!(compute_mode_number("default"), Some(0.0));
        assert_eq!(compute_mode_number("exclusive_process"), Some(3.0));
        assert_eq!(compute_mode_number("other"), None);
    }
}
