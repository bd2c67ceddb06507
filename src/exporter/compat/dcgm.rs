//! dcgm-exporter's names: `DCGM_FI_*` families with its labels (`gpu`,
//! `UUID`, `pci_bus_id`, `device`, `modelName`, `Hostname`,
//! `DCGM_FI_DRIVER_VERSION`) and units (%, MiB, MHz, W, mJ, °C); with
//! `hpc_job` and DRA claims, one copy of a GPU's series per job and claim
//! device (see `dcgm_workload`).
//!
//! HELP texts and types are those of dcgm-exporter's
//! `etc/default-counters.csv` and `etc/dcp-metrics-included.csv`, with one
//! exception: the fields dcgm-exporter declares `counter` are exported
//! untyped. dcgm-exporter writes `# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION
//! counter` with samples that lack `_total`; prometheus_client appends
//! `_total` to every counter sample, and OpenMetrics (which Prometheus asks
//! for first) requires it, so a counter family could not keep the name that
//! dashboards and alerts query. Untyped keeps the name in both formats, and
//! `rate()` and `increase()` work on it as on the original.

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;

use super::flag;
use crate::families::{families, Family};
use crate::gpu::{GpuSnapshot, Snapshot};

use super::dcgm_labels::labels;
use super::dcgm_workload::{copies, Extra};
use super::tidy;

const MIB: u64 = 1024 * 1024;

fn percent(ratio: Option<f64>) -> Option<f64> {
    ratio.map(|r| tidy(r * 100.0))
}

fn count(value: Option<u64>) -> Option<f64> {
    value.map(|v| v as f64)
}

/// A gauge in dcgm-exporter's CSV.
fn gauge<'a>(name: &'static str, help: &'static str) -> Family<'a> {
    Family::gauge(name, help, None)
}

/// A counter in dcgm-exporter's CSV, exported untyped (see the module
/// documentation).
fn counter<'a>(name: &'static str, help: &'static str) -> Family<'a> {
    Family::untyped(name, help)
}

// `counter` here means "a counter in dcgm-exporter's CSV", exported untyped
// (see the module documentation).
families! {
    sm_clock: gauge("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz)."),
    mem_clock: gauge("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz)."),
    memory_temp: gauge("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C)."),
    gpu_temp: gauge("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),
    power: gauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
    energy: counter("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ)."),
    gpu_util: gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
    mem_copy_util: gauge("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %)."),
    enc_util: gauge("DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %)."),
    dec_util: gauge("DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %)."),
    xid: gauge("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered."),
    fb_free: gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
    fb_used: gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
    fb_reserved: gauge("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB)."),
    throttle: gauge("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Current clock throttle reasons (bitmask of DCGM_CLOCKS_THROTTLE_REASON_*)."),
    ecc_sbe_vol: counter("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors."),
    ecc_dbe_vol: counter("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors."),
    pcie_replay: counter("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries."),
    ecc_sbe_agg: counter("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "Total number of single-bit persistent ECC errors."),
    ecc_dbe_agg: counter("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "Total number of double-bit persistent ECC errors."),
    retired_sbe: counter("DCGM_FI_DEV_RETIRED_SBE", "Total number of retired pages due to single-bit errors."),
    retired_dbe: counter("DCGM_FI_DEV_RETIRED_DBE", "Total number of retired pages due to double-bit errors."),
    retired_pending: counter("DCGM_FI_DEV_RETIRED_PENDING", "Total number of pages pending retirement."),
    remap_unc: counter("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for uncorrectable errors"),
    remap_cor: counter("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors"),
    remap_failure: gauge("DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed"),
    remap_pending: gauge("DCGM_FI_DEV_ROW_REMAP_PENDING", "Whether remapping of rows is pending"),
    nvlink_crc_flit: counter("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "Total number of NVLink flow-control CRC errors."),
    nvlink_crc_data: counter("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "Total number of NVLink data CRC errors."),
    nvlink_replay: counter("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "Total number of NVLink retries."),
    nvlink_recovery: counter("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "Total number of NVLink recovery errors."),
}

/// The sum over a GPU's links of the error counter `kind` (DCGM's `_TOTAL`
/// fields are per GPU, all links together); `None` when no link gives it.
fn nvlink_total(gpu: &GpuSnapshot, kind: &str) -> Option<f64> {
    gpu.health
        .links
        .nvlink
        .iter()
        .filter_map(|link| link.errors.get(kind))
        .fold(None, |sum, n| Some(sum.unwrap_or(0) + n))
        .map(|n| n as f64)
}

/// Encodes the `DCGM_FI_*` families of `snapshot`; with `hpc_job`, one
/// copy of a GPU's series per Slurm job on it.
pub fn encode(snapshot: &Snapshot, hpc_job: bool, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let mut f = Families::new();
    for gpu in &snapshot.gpus {
        for extra in copies(gpu, None, hpc_job) {
            f.add(snapshot, gpu, &extra);
        }
    }
    f.encode(encoder)?;
    super::dcgm_prof::encode(snapshot, hpc_job, encoder)
}

impl<'a> Families<'a> {
    fn add(&mut self, snapshot: &'a Snapshot, gpu: &'a GpuSnapshot, extra: &Extra) {
        let id = || {
            let mut l = labels(snapshot, gpu);
            l.extend(extra.iter().cloned());
            l
        };
        let r = &gpu.readings;
        self.sm_clock
            .push_some(id(), r.sm_clock_hertz.map(|hz| tidy(hz / 1e6)));
        self.mem_clock
            .push_some(id(), r.memory_clock_hertz.map(|hz| tidy(hz / 1e6)));
        self.memory_temp
            .push_some(id(), r.temperature_memory_celsius);
        self.gpu_temp.push_some(id(), r.temperature_gpu_celsius);
        self.power.push_some(id(), r.power_watts);
        self.energy
            .push_some(id(), r.energy_joules.map(|j| (j * 1000.0).round()));
        self.gpu_util
            .push_some(id(), percent(r.utilization_gpu_ratio));
        self.mem_copy_util
            .push_some(id(), percent(r.utilization_memory_ratio));
        if let Some(m) = &r.memory {
            // Whole MiB, as DCGM reports them.
            self.fb_free.push(id(), (m.free_bytes / MIB) as f64);
            self.fb_used.push(id(), (m.used_bytes / MIB) as f64);
            self.fb_reserved.push(id(), (m.reserved_bytes / MIB) as f64);
        }
        self.throttle
            .push_some(id(), r.clock_event_reasons.map(|mask| mask as f64));
        // DCGM's value: the code of the most recent Xid, 0 before any (the
        // agent counts from its own start, as dcgm-exporter from its own).
        // A lost GPU shows its last Xid (79, say) but no made-up 0.
        match gpu.xid_errors.iter().max_by_key(|x| x.last_seen) {
            Some(last) => self.xid.push(id(), last.code as f64),
            None if gpu.is_up() => self.xid.push(id(), 0.0),
            None => {}
        }
        if !gpu.is_up() {
            return;
        }
        let h = &gpu.health;
        self.enc_util
            .push_some(id(), percent(h.encoder_utilization_ratio));
        self.dec_util
            .push_some(id(), percent(h.decoder_utilization_ratio));
        self.ecc_sbe_vol
            .push_some(id(), count(h.ecc.corrected_volatile));
        self.ecc_dbe_vol
            .push_some(id(), count(h.ecc.uncorrected_volatile));
        self.pcie_replay
            .push_some(id(), count(h.pcie_replay_errors));
        self.ecc_sbe_agg
            .push_some(id(), count(h.ecc.corrected_aggregate));
        self.ecc_dbe_agg
            .push_some(id(), count(h.ecc.uncorrected_aggregate));
        self.retired_sbe
            .push_some(id(), count(h.retired_pages_single_bit));
        self.retired_dbe
            .push_some(id(), count(h.retired_pages_double_bit));
        self.retired_pending
            .push_some(id(), flag(h.retired_pages_pending));
        self.remap_unc
            .push_some(id(), count(h.remapped_rows_uncorrectable));
        self.remap_cor
            .push_some(id(), count(h.remapped_rows_correctable));
        self.remap_failure
            .push_some(id(), flag(h.remapped_rows_failure));
        self.remap_pending
            .push_some(id(), flag(h.remapped_rows_pending));
        self.nvlink_crc_flit
            .push_some(id(), nvlink_total(gpu, "crc_flit"));
        self.nvlink_crc_data
            .push_some(id(), nvlink_total(gpu, "crc_data"));
        self.nvlink_replay
            .push_some(id(), nvlink_total(gpu, "replay"));
        self.nvlink_recovery
            .push_some(id(), nvlink_total(gpu, "recovery"));
    }
}
