//! `gpuwatch capacity`: the fits of one snapshot as a table.

use std::fmt::Write;

use crate::gpu::Snapshot;

use super::running::{holders, running_fits};
use super::{gpu_fit, node_total, CapacityConfig};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Renders the capacity of `snapshot` for every profile of `config` (or only
/// `only`), one row per GPU and profile, then the node totals.
pub fn render(snapshot: &Snapshot, config: &CapacityConfig, only: Option<&str>) -> String {
    let mut out = String::new();
    let margin = config.memory_margin_bytes;
    let _ = writeln!(
        out,
        "{}  memory margin {:.1} GiB per GPU",
        snapshot.hostname,
        margin as f64 / GIB
    );
    let _ = writeln!(
        out,
        "{:<20} {:>3}  {:<26} {:>10} {:>6}  {:<16} SM in use from",
        "Profile", "GPU", "Name", "Free GiB", "Fits", "Limited by"
    );
    let profiles = config
        .profiles
        .iter()
        .filter(|p| only.is_none_or(|name| p.name == name));
    for profile in profiles {
        for gpu in &snapshot.gpus {
            let Some(fit) = gpu_fit(gpu, profile, margin) else {
                continue;
            };
            let free = gpu.readings.memory.map_or_else(
                || "-".to_string(),
                |m| format!("{:.1}", m.free_bytes as f64 / GIB),
            );
            let _ = writeln!(
                out,
                "{:<20} {:>3}  {:<26} {:>10} {:>6}  {:<16} {}",
                profile.name,
                gpu.index,
                gpu.identity.name.as_deref().unwrap_or("?"),
                free,
                fit.fits,
                fit.limit.as_str(),
                fit.sm_source.map_or("-", |s| s.as_str())
            );
        }
        let _ = writeln!(
            out,
            "{:<20} {:>3}  {:<26} {:>10} {:>6}",
            profile.name,
            "all",
            "node total",
            "",
            node_total(snapshot, profile, margin)
        );
    }
    out
}

/// Renders the capacity of `snapshot` for its running workloads, when no
/// profile is configured: per workload, how many more of it fit on each GPU
/// and on the node; then, per GPU, whose workloads fill it.
pub fn render_running(snapshot: &Snapshot, margin: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}  no [[profiles]] configured: how many more of each running workload fit \
         (its measured peak memory and SM share); memory margin {:.1} GiB per GPU",
        snapshot.hostname,
        margin as f64 / GIB
    );
    let fits = running_fits(snapshot, margin);
    if fits.is_empty() {
        let _ = writeln!(
            out,
            "No workload is running on a GPU. Add [[profiles]] to the configuration \
             (see docs/workloads.md, section Capacity) to ask about a workload before it runs."
        );
    }
    let _ = writeln!(
        out,
        "{:<28} {:<16} {:>9} {:>8}  {:>3}  {:<26} {:>8} {:>6}  Limited by",
        "Workload", "Owner", "Needs GiB", "SM share", "GPU", "Name", "Free GiB", "Fits"
    );
    for fit in &fits {
        let name = shown(&format!("{}:{}", fit.key.kind.as_str(), fit.key.id));
        let owner = shown(fit.owner.as_deref().unwrap_or("-"));
        let Some(profile) = &fit.profile else {
            let _ = writeln!(
                out,
                "{name:<28} {owner:<16} {:>9} {:>8}  (memory unknown: the driver gives no per-process memory)",
                "-", "-"
            );
            continue;
        };
        let needs = format!("{:.1}", profile.memory_bytes as f64 / GIB);
        let share = profile
            .sm_share
            .map_or_else(|| "-".to_string(), |s| format!("{:.0} %", s * 100.0));
        for gpu_fit in &fit.gpus {
            let gpu = snapshot.gpus.iter().find(|g| g.index == gpu_fit.gpu);
            let free = gpu.and_then(|g| g.readings.memory).map_or_else(
                || "-".to_string(),
                |m| format!("{:.1}", m.free_bytes as f64 / GIB),
            );
            let _ = writeln!(
                out,
                "{name:<28} {owner:<16} {needs:>9} {share:>8}  {:>3}  {:<26} {free:>8} {:>6}  {}",
                gpu_fit.gpu,
                gpu.and_then(|g| g.identity.name.as_deref()).unwrap_or("?"),
                gpu_fit.fits,
                gpu_fit.limit.as_str()
            );
        }
        let _ = writeln!(
            out,
            "{name:<28} {owner:<16} {needs:>9} {share:>8}  {:>3}  {:<26} {:>8} {:>6}",
            "all", "node total", "", fit.node
        );
    }
    let _ = writeln!(out, "\nWho fills each GPU");
    let _ = writeln!(
        out,
        "{:>3}  {:<26} {:>16}  Workloads (peak GiB)",
        "GPU", "Name", "Used / total GiB"
    );
    for gpu in &snapshot.gpus {
        let used = gpu.readings.memory.map_or_else(
            || "-".to_string(),
            |m| {
                format!(
                    "{:.1} / {:.1}",
                    m.used_bytes as f64 / GIB,
                    m.total_bytes as f64 / GIB
                )
            },
        );
        let held: Vec<String> = holders(snapshot, gpu.index)
            .iter()
            .map(|h| {
                let instance = h
                    .gpu_instance_id
                    .map_or_else(String::new, |gi| format!("gi {gi}: "));
                let owner = h
                    .owner
                    .as_deref()
                    .map_or_else(String::new, |o| format!(" ({})", shown(o)));
                format!(
                    "{instance}{}{owner} {:.1}",
                    shown(&format!("{}:{}", h.key.kind.as_str(), h.key.id)),
                    h.peak_memory_bytes as f64 / GIB
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "{:>3}  {:<26} {used:>16}  {}",
            gpu.index,
            gpu.identity.name.as_deref().unwrap_or("?"),
            if held.is_empty() {
                "free".to_string()
            } else {
                held.join(", ")
            }
        );
    }
    out
}

/// Text from outside (job ids, users, namespaces) with control characters
/// escaped, so it cannot move the terminal's cursor.
fn shown(text: &str) -> String {
    crate::escape::control_chars(text).into_owned()
}
