//! `gpuwatch capacity`: the fits of one snapshot as a table.

use std::fmt::Write;

use crate::gpu::Snapshot;

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
