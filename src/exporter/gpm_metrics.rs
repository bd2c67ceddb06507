//! The GPM families (`gpuwatch_gpm_*`): SM activity and occupancy, tensor
//! and FP pipes, DRAM, PCIe and NVLink traffic, media engines — per GPU, and
//! per MIG GPU instance (`gpuwatch_gpm_mig_*`, with `gpu_instance`).
//!
//! Whole-GPU and per-instance figures are separate families so that a
//! `sum` over one never counts a GPU twice. Absent until the second GPM
//! sample, and on GPUs without GPM (`gpuwatch_gpm_supported` says which).

use std::fmt;

use crate::families::Sink;

use crate::gpu::gpm::GpmMetrics;
use crate::gpu::{GpuSnapshot, Snapshot};

use super::detail::{Detail, DetailSet};
use super::gpu_metrics::{flag, ids, number, with};
use crate::families::{unit, Family, Labels};

/// Reads one figure from a set of GPM metrics.
type Reading = fn(&GpmMetrics) -> Option<f64>;

/// The figures with a family of their own, per GPU and per MIG instance
/// (in the order of [`Activity`]'s `ratios`).
const RATIOS: [(&str, Reading); 5] = [
    ("graphics_engine", |m| m.graphics_engine_active_ratio),
    ("sm", |m| m.sm_active_ratio),
    ("sm_occupancy", |m| m.sm_occupancy_ratio),
    ("tensor", |m| m.tensor_active_ratio),
    ("dram", |m| m.dram_active_ratio),
];

/// The pipes of `gpm_pipe_active_ratio`, by `pipe` label.
const PIPES: [(&str, Reading); 7] = [
    ("tensor_hmma", |m| m.tensor_hmma_active_ratio),
    ("tensor_imma", |m| m.tensor_imma_active_ratio),
    ("tensor_dfma", |m| m.tensor_dfma_active_ratio),
    ("fp64", |m| m.fp64_active_ratio),
    ("fp32", |m| m.fp32_active_ratio),
    ("fp16", |m| m.fp16_active_ratio),
    ("integer", |m| m.integer_active_ratio),
];

/// One set of activity families: whole-GPU or per MIG instance.
struct Activity<'a> {
    ratios: [Family<'a>; 5],
    pipe: Family<'a>,
    media: Family<'a>,
}

impl<'a> Activity<'a> {
    fn gpu() -> Self {
        let r = |name, help| Family::gauge(name, help, unit("ratio"));
        Activity {
            ratios: [
                r("gpm_graphics_engine_active", "Share of the last interval the graphics/compute engine was active (GPM)."),
                r("gpm_sm_active", "Share of the last interval an SM had at least one warp assigned, averaged over all SMs (GPM): how much of the GPU the work used."),
                r("gpm_sm_occupancy", "Resident warps as a share of the maximum, averaged over all SMs (GPM)."),
                r("gpm_tensor_active", "Share of the last interval any tensor pipe was active (GPM)."),
                r("gpm_dram_active", "Share of the peak DRAM bandwidth used over the last interval (GPM)."),
            ],
            pipe: r("gpm_pipe_active", "Share of the last interval a pipe was active, by pipe (GPM)."),
            media: r("gpm_media_engine_active", "Share of the last interval a video decoder (nvdec), JPEG decoder (nvjpg) or optical-flow engine (nvofa) was active (GPM)."),
        }
    }

    fn mig() -> Self {
        let r = |name, help| Family::gauge(name, help, unit("ratio"));
        Activity {
            ratios: [
                r("gpm_mig_graphics_engine_active", "Share of the last interval the MIG instance's graphics/compute engines were active (GPM)."),
                r("gpm_mig_sm_active", "Share of the last interval the MIG instance's SMs had at least one warp assigned (GPM)."),
                r("gpm_mig_sm_occupancy", "Resident warps as a share of the maximum on the MIG instance's SMs (GPM)."),
                r("gpm_mig_tensor_active", "Share of the last interval any tensor pipe of the MIG instance was active (GPM)."),
                r("gpm_mig_dram_active", "Share of the MIG instance's peak DRAM bandwidth used over the last interval (GPM)."),
            ],
            pipe: r("gpm_mig_pipe_active", "Share of the last interval a pipe of the MIG instance was active, by pipe (GPM)."),
            media: r("gpm_mig_media_engine_active", "Share of the last interval a media engine of the MIG instance was active (GPM)."),
        }
    }

    fn add(&mut self, labels: impl Fn() -> Labels<'a>, m: &GpmMetrics, detail: Detail) {
        for (family, (_, value)) in self.ratios.iter_mut().zip(RATIOS) {
            family.push_some(labels(), value(m));
        }
        if detail.has(DetailSet::GpmPipes) {
            for (pipe, value) in PIPES {
                self.pipe.push_some(with(labels(), "pipe", pipe), value(m));
            }
        }
        if !detail.has(DetailSet::MediaEngines) {
            return;
        }
        for e in &m.media_engines {
            let l = with(
                with(labels(), "engine", e.engine),
                "engine_index",
                number(e.index),
            );
            self.media.push(l, e.active_ratio);
        }
    }

    fn encode(&self, encoder: &mut impl Sink) -> fmt::Result {
        for family in &self.ratios {
            family.encode(encoder)?;
        }
        self.pipe.encode(encoder)?;
        self.media.encode(encoder)
    }
}

/// Encodes the GPM families of `snapshot`; the per-pipe, per-engine and
/// per-link ones only with their detail sets.
pub fn encode(snapshot: &Snapshot, detail: Detail, encoder: &mut impl Sink) -> fmt::Result {
    let mut supported = Family::gauge(
        "gpm_supported",
        "Whether the GPU has GPM (1; Hopper and newer) or not (0): where it has, the gpuwatch_gpm_* families hold its SM-level figures.",
        None,
    );
    let rate = |name, help| Family::gauge(name, help, unit("bytes_per_second"));
    let mut pcie = rate(
        "gpm_pcie",
        "PCIe data sent (tx) and received (rx) by the GPU over the last interval (GPM).",
    );
    let mut nvlink = rate(
        "gpm_nvlink",
        "NVLink data sent (tx) and received (rx) over all links over the last interval (GPM).",
    );
    let mut link = rate(
        "gpm_nvlink_link",
        "NVLink data sent (tx) and received (rx) per link over the last interval (GPM).",
    );
    let mut gpu_activity = Activity::gpu();
    let mut mig_activity = Activity::mig();
    for gpu in &snapshot.gpus {
        let id = || ids(gpu);
        if let Some(on) = gpu.gpm.supported {
            supported.push(id(), flag(on));
        }
        if !gpu.is_up() {
            continue;
        }
        add_instances(&mut mig_activity, gpu, detail);
        let Some(m) = &gpu.gpm.gpu else { continue };
        gpu_activity.add(id, m, detail);
        for (direction, value) in [
            ("tx", m.pcie_tx_bytes_per_second),
            ("rx", m.pcie_rx_bytes_per_second),
        ] {
            pcie.push_some(with(id(), "direction", direction), value);
        }
        for (direction, value) in [
            ("tx", m.nvlink_tx_bytes_per_second),
            ("rx", m.nvlink_rx_bytes_per_second),
        ] {
            nvlink.push_some(with(id(), "direction", direction), value);
        }
        let links = if detail.has(DetailSet::NvlinkLinks) {
            &m.nvlink_links[..]
        } else {
            &[]
        };
        for l in links {
            for (direction, value) in [("tx", l.tx_bytes_per_second), ("rx", l.rx_bytes_per_second)]
            {
                let labels = with(with(id(), "link", number(l.link)), "direction", direction);
                link.push_some(labels, value);
            }
        }
    }
    supported.encode(encoder)?;
    gpu_activity.encode(encoder)?;
    pcie.encode(encoder)?;
    nvlink.encode(encoder)?;
    link.encode(encoder)?;
    mig_activity.encode(encoder)
}

fn add_instances<'a>(families: &mut Activity<'a>, gpu: &'a GpuSnapshot, detail: Detail) {
    for instance in &gpu.gpm.instances {
        let labels = || with(ids(gpu), "gpu_instance", number(instance.gpu_instance_id));
        families.add(labels, &instance.metrics, detail);
    }
}
