//! The scenarios shipped with the simulator (`builtin:NAME`).

/// Names of the shipped scenarios.
pub const NAMES: &[&str] = &[
    "demo",
    "desktop-rtx3090",
    "h100x8",
    "thermal-incident",
    "memory-pressure",
    "faults",
    "golden",
    "h200",
    "workloads",
    "health",
];

/// The TOML text of shipped scenario `name`.
pub fn get(name: &str) -> Option<&'static str> {
    Some(match name {
        "demo" => include_str!("../scenarios/demo.toml"),
        "desktop-rtx3090" => include_str!("../scenarios/desktop-rtx3090.toml"),
        "h100x8" => include_str!("../scenarios/h100x8.toml"),
        "thermal-incident" => include_str!("../scenarios/thermal-incident.toml"),
        "memory-pressure" => include_str!("../scenarios/memory-pressure.toml"),
        "faults" => include_str!("../scenarios/faults.toml"),
        "golden" => include_str!("../scenarios/golden.toml"),
        "h200" => include_str!("../scenarios/h200.toml"),
        "workloads" => include_str!("../scenarios/workloads.toml"),
        "health" => include_str!("../scenarios/health.toml"),
        _ => return None,
    })
}
