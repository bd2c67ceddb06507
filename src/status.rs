//! `gpuwatch status`: one snapshot as a table, like nvidia-smi's.

use std::fmt::Write;

use crate::gpu::reasons::active_reason_names;
use crate::gpu::{GpuStatus, Snapshot};
use crate::health::escalation::Escalated;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const MIB: f64 = 1024.0 * 1024.0;

/// Renders `snapshot` as a plain-text table, its health judged with the
/// Xid escalations `escalated`.
pub fn render(snapshot: &Snapshot, escalated: &Escalated) -> String {
    let mut out = String::new();
    let sys = &snapshot.system;
    let _ = writeln!(
        out,
        "{}  driver {}  CUDA {}  {} GPU{}",
        snapshot.hostname,
        sys.driver_version.as_deref().unwrap_or("?"),
        sys.cuda_driver_version.as_deref().unwrap_or("?"),
        snapshot.gpus.len(),
        if snapshot.gpus.len() == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        out,
        "{:>3}  {:<26} {:>5} {:>17} {:>9} {:>15} {:>14}  Clock events",
        "GPU", "Name", "Util", "Memory used/total", "Temp", "Power/limit", "SM/mem MHz"
    );
    for gpu in &snapshot.gpus {
        let name = gpu.identity.name.as_deref().unwrap_or("?");
        if let GpuStatus::Lost { reason } = &gpu.status {
            let _ = writeln!(
                out,
                "{:>3}  {:<26} LOST ({reason})",
                gpu.index,
                truncate(name, 26)
            );
            continue;
        }
        let r = &gpu.readings;
        let h = &gpu.health;
        let dash = || "-".to_string();
        let util = r
            .utilization_gpu_ratio
            .map_or_else(dash, |u| format!("{:.0}%", u * 100.0));
        let memory = r.memory.map_or_else(dash, |m| {
            format!(
                "{:.1}/{:.1} GiB",
                m.used_bytes as f64 / GIB,
                m.total_bytes as f64 / GIB
            )
        });
        let temp = match (
            r.temperature_gpu_celsius,
            gpu.identity.temperature_slowdown_celsius,
        ) {
            (Some(t), Some(s)) => format!("{t:.0}/{s:.0}C"),
            (Some(t), None) => format!("{t:.0}C"),
            _ => dash(),
        };
        let power = match (r.power_watts, h.power_limit_watts) {
            (Some(p), Some(l)) => format!("{p:.0}/{l:.0} W"),
            (Some(p), None) => format!("{p:.0} W"),
            _ => dash(),
        };
        let clocks = match (r.sm_clock_hertz, r.memory_clock_hertz) {
            (Some(sm), Some(mem)) => format!("{:.0}/{:.0}", sm / 1e6, mem / 1e6),
            (Some(sm), None) => format!("{:.0}/-", sm / 1e6),
            _ => dash(),
        };
        let events = r.clock_event_reasons.map_or_else(dash, |mask| {
            let names: Vec<_> = active_reason_names(mask).collect();
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(",")
            }
        });
        let _ = writeln!(
            out,
            "{:>3}  {:<26} {:>5} {:>17} {:>9} {:>15} {:>14}  {}",
            gpu.index,
            truncate(name, 26),
            util,
            memory,
            temp,
            power,
            clocks,
            events
        );
        let ecc = match (
            h.ecc_enabled,
            h.ecc.corrected_volatile,
            h.ecc.uncorrected_volatile,
        ) {
            (Some(true), c, u) => format!(
                "ECC corrected {} uncorrected {}",
                c.map_or_else(dash, |v| v.to_string()),
                u.map_or_else(dash, |v| v.to_string())
            ),
            (Some(false), _, _) => "ECC off".to_string(),
            (None, _, _) => "ECC n/a".to_string(),
        };
        let xid: Vec<String> = gpu
            .xid_errors
            .iter()
            .map(|x| format!("{}x{}", x.code, x.count))
            .chain(gpu.xid_other.map(|o| format!("otherx{}", o.count)))
            .collect();
        let _ = writeln!(
            out,
            "     {}  pstate {}  {}{}",
            gpu.uuid,
            h.performance_state.map_or_else(dash, |p| format!("P{p}")),
            ecc,
            if xid.is_empty() {
                String::new()
            } else {
                format!("  Xid {}", xid.join(" "))
            }
        );
        let _ = writeln!(out, "     {}", sharing_line(gpu));
        let _ = writeln!(out, "     {}", gpm_line(&gpu.gpm));
        let _ = writeln!(
            out,
            "     health: {}",
            health_text(snapshot, gpu, escalated)
        );
        for allocation in gpu.pods.iter() {
            let instance = allocation
                .gpu_instance_id
                .map_or(String::new(), |gi| format!(" (gi {gi})"));
            let _ = writeln!(
                out,
                "     allocated{instance} to {}  {}",
                pod_text(&allocation.owner),
                allocation.resource
            );
        }
        for p in gpu.processes.iter() {
            let mut extra = Vec::new();
            if let Some(sm) = p.sm_utilization_ratio {
                extra.push(format!("sm {:.0}%", sm * 100.0));
            }
            if let Some(host) = p.host.as_deref() {
                if let Some(user) = &host.user {
                    extra.push(user.clone());
                }
                if let Some(c) = &host.container {
                    let runtime = c.runtime.map_or("container", |r| r.as_str());
                    extra.push(format!(
                        "{runtime}:{}",
                        c.id.chars().take(12).collect::<String>()
                    ));
                    match (&p.pod, &c.pod_uid) {
                        (Some(pod), _) => extra.push(pod_text(pod)),
                        (None, Some(uid)) => extra.push(format!("pod {uid}")),
                        (None, None) => {}
                    }
                }
            }
            if let Some(gi) = p.gpu_instance_id {
                extra.push(format!("gi {gi}"));
            }
            if p.mps_client {
                extra.push("mps client".into());
            }
            let _ = writeln!(
                out,
                "     pid {:>7}  {:<9} {:<24} {:>10}  {}",
                p.pid,
                p.kind.as_str(),
                truncate(p.name.as_deref().unwrap_or("?"), 24),
                p.used_memory_bytes
                    .map_or_else(dash, |b| format!("{:.0} MiB", b as f64 / MIB)),
                crate::escape::control_chars(&extra.join("  "))
            );
        }
    }
    let missing = snapshot.missing_from_driver();
    if let Some(on_bus) = &snapshot.collection.health.pci_gpus {
        let _ = writeln!(
            out,
            "PCI bus: {} NVIDIA GPU{}{}",
            on_bus.len(),
            if on_bus.len() == 1 { "" } else { "s" },
            if missing.is_empty() {
                String::new()
            } else {
                format!("; missing from the driver: {}", missing.join(", "))
            }
        );
    }
    out
}

/// "pod NAMESPACE/NAME container NAME" (the container left out when unknown).
fn pod_text(pod: &crate::gpu::PodContainer) -> String {
    let mut text = format!("pod {}/{}", pod.namespace, pod.pod);
    if !pod.container.is_empty() {
        text.push_str(" container ");
        text.push_str(&pod.container);
    }
    text
}

/// Compute mode, MIG instances, MPS and the process count of one GPU.
fn sharing_line(gpu: &crate::gpu::GpuSnapshot) -> String {
    let h = &gpu.health;
    let mut parts = vec![format!("mode {}", h.compute_mode.unwrap_or("?"))];
    match h.mig_enabled {
        Some(true) => {
            let instances: Vec<String> = gpu
                .mig_instances
                .iter()
                .map(|m| {
                    format!(
                        "gi {} {:.1}/{:.1} GiB",
                        m.gpu_instance_id,
                        m.memory_used_bytes as f64 / GIB,
                        m.memory_total_bytes as f64 / GIB
                    )
                })
                .collect();
            parts.push(format!("MIG on ({})", instances.join(", ")));
        }
        Some(false) => parts.push("MIG off".into()),
        None => {}
    }
    let server = gpu
        .processes
        .iter()
        .any(crate::gpu::GpuProcess::is_mps_server);
    let clients = gpu.processes.iter().filter(|p| p.mps_client).count();
    if server || clients > 0 {
        parts.push(format!(
            "MPS {}, {clients} client{}",
            if server {
                "server running"
            } else {
                "no server seen"
            },
            if clients == 1 { "" } else { "s" }
        ));
    }
    parts.push(format!(
        "{} process{}",
        gpu.processes.len(),
        if gpu.processes.len() == 1 { "" } else { "es" }
    ));
    parts.join("  ")
}

/// GPM figures of one GPU (and its MIG instances): "GPM SM active 60%
/// occupancy 30% tensor 40% DRAM 40%", or why there are none.
fn gpm_line(gpm: &crate::gpu::gpm::GpmReadings) -> String {
    let Some(m) = &gpm.gpu else {
        return match gpm.supported {
            Some(true) => "GPM on (no figures yet: they need two samples)".into(),
            Some(false) => "GPM not supported (SM activity needs Hopper or newer)".into(),
            None => "GPM unknown".into(),
        };
    };
    let mut line = format!("GPM {}", activity(m));
    for (label, tx, rx) in [
        (
            "PCIe",
            m.pcie_tx_bytes_per_second,
            m.pcie_rx_bytes_per_second,
        ),
        (
            "NVLink",
            m.nvlink_tx_bytes_per_second,
            m.nvlink_rx_bytes_per_second,
        ),
    ] {
        if let (Some(tx), Some(rx)) = (tx, rx) {
            let _ = write!(
                line,
                "  {label} tx/rx {:.0}/{:.0} MiB/s",
                tx / MIB,
                rx / MIB
            );
        }
    }
    for instance in &gpm.instances {
        let _ = write!(
            line,
            "\n     GPM gi {}: {}",
            instance.gpu_instance_id,
            activity(&instance.metrics)
        );
    }
    line
}

fn activity(m: &crate::gpu::gpm::GpmMetrics) -> String {
    let pct = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |r| format!("{:.0}%", r * 100.0));
    format!(
        "SM active {}  occupancy {}  tensor {}  DRAM {}",
        pct(m.sm_active_ratio),
        pct(m.sm_occupancy_ratio),
        pct(m.tensor_active_ratio),
        pct(m.dram_active_ratio)
    )
}

/// `text` cut to `width` characters, its control characters escaped first
/// (process and GPU names come from outside: a name must not carry
/// terminal escapes to the screen).
fn truncate(text: &str, width: usize) -> String {
    let text = crate::escape::control_chars(text);
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// The GPU's health verdict and its worst reason, for the status table.
fn health_text(
    snapshot: &Snapshot,
    gpu: &crate::gpu::GpuSnapshot,
    escalated: &Escalated,
) -> String {
    let v = crate::health::verdict::judge(snapshot, gpu, escalated);
    match v.reasons.first() {
        Some(reason) => format!("{} ({}; {})", v.state.as_str(), reason.text, reason.action),
        None => v.state.as_str().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::SystemTime;

    use crate::gpu::{testing, GpuProcess, GpuSnapshot};

    #[test]
    fn terminal_escapes_in_process_names_are_escaped() {
        let process = GpuProcess {
            pid: 4242,
            name: Some("\u{1b}]0;owned\u{7}\u{1b}[2J".into()),
            ..GpuProcess::default()
        };
        let gpu = GpuSnapshot {
            processes: Arc::new(vec![process]),
            ..testing::gpu(0)
        };
        let text = super::render(
            &testing::snapshot(SystemTime::UNIX_EPOCH, vec![gpu]),
            &Default::default(),
        );
        assert!(
            !text.contains(['\u{1b}', '\u{7}']),
            "raw control characters reach the terminal: {text:?}"
        );
        assert!(text.contains("\\u{1b}]0;owned"), "{text}");
    }
}
