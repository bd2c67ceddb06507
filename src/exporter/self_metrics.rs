//! Metrics about gpuwatch itself: build, freshness, sampling cost, NVML
//! errors, and the standard `process_*` families.

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, SystemTime};

use prometheus_client::encoding::DescriptorEncoder;

use crate::gpu::{unix_seconds_f64, Snapshot};

use crate::families::{unit, Family};

/// Encodes the `gpuwatch_*` self metrics. `snapshot` is `None` before the
/// first sample.
pub fn encode(
    snapshot: Option<&Snapshot>,
    stale_after: Duration,
    encoder: &mut DescriptorEncoder,
) -> fmt::Result {
    let mut build = Family::gauge("build_info", "Build of the running agent (value 1).", None);
    build.push(
        vec![("version", Cow::Borrowed(env!("CARGO_PKG_VERSION")))],
        1.0,
    );
    build.encode(encoder)?;

    let age = snapshot.map(|s| snapshot_age(s, SystemTime::now()));
    let mut up = Family::gauge(
        "up",
        "Whether the last sample is fresh (1) or missing or stale (0).",
        None,
    );
    up.push(
        vec![],
        if age.is_some_and(|a| a <= stale_after) {
            1.0
        } else {
            0.0
        },
    );
    up.encode(encoder)?;
    let Some(snapshot) = snapshot else {
        return Ok(());
    };

    let mut gauges = [
        (
            Family::gauge(
                "last_sample_timestamp",
                "When the last sample was taken.",
                unit("seconds"),
            ),
            unix_seconds_f64(snapshot.taken_at),
        ),
        (
            Family::gauge(
                "snapshot_age",
                "Age of the snapshot /metrics serves; grows while NVML hangs.",
                unit("seconds"),
            ),
            age.unwrap_or_default().as_secs_f64(),
        ),
        (
            Family::gauge(
                "sample_duration",
                "Wall time the last sample took.",
                unit("seconds"),
            ),
            snapshot.collection.sample_duration.as_secs_f64(),
        ),
        (
            Family::gauge("gpus", "GPUs NVML enumerated, lost ones included.", None),
            snapshot.gpus.len() as f64,
        ),
        (
            Family::counter("samples", "Samples taken since the agent started.", None),
            snapshot.collection.ticks as f64,
        ),
    ];
    for (family, value) in &mut gauges {
        family.push(vec![], *value);
        family.encode(encoder)?;
    }

    let mut errors = Family::counter(
        "nvml_errors",
        "NVML calls that failed since the agent started, by function and error (unsupported readings excluded).",
        None,
    );
    for ((function, error), count) in snapshot.collection.nvml_errors.iter() {
        errors.push(
            vec![
                ("function", Cow::Borrowed(function.as_str())),
                ("error", Cow::Borrowed(error.as_str())),
            ],
            *count as f64,
        );
    }
    errors.encode(encoder)?;

    if let Some(kubelet) = snapshot.kubelet {
        let mut up = Family::gauge(
            "kubelet_up",
            "Whether the last call to the kubelet's pod-resources socket succeeded (1) or not (0); absent where there is no socket.",
            None,
        );
        up.push(vec![], if kubelet.up { 1.0 } else { 0.0 });
        up.encode(encoder)?;
        let mut failed = Family::counter(
            "kubelet_errors",
            "Calls to the kubelet's pod-resources socket that failed since the agent started.",
            None,
        );
        failed.push(vec![], kubelet.errors as f64);
        failed.encode(encoder)?;
    }
    encode_health(snapshot, encoder)
}

/// The label value of the Xid and SXid "other" buckets (codes or switches
/// past their bounds, counted together).
pub const OTHER: &str = "other";

/// The hardware-health readers' families: Xids and SXids folded into
/// "other" buckets, GPUs on the PCI bus, whether the
/// kernel log can be read (absent when off) and the NVSwitch SXid counts.
fn encode_health(snapshot: &Snapshot, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let log = &snapshot.collection.health;
    let mut folded = Family::counter(
        "xid_folded",
        "Xid and SXid errors counted into an \"other\" bucket since the agent started (kind=\"xid\": unknown Xid codes past a GPU's bound, shown as xid=\"other\"; kind=\"sxid\": NVSwitches or SXid codes past their bounds, shown as switch=\"other\" or sxid=\"other\"). Above zero, something is making up codes or switches.",
        None,
    );
    folded.push(vec![("kind", Cow::Borrowed("xid"))], log.xid_folded as f64);
    folded.push(
        vec![("kind", Cow::Borrowed("sxid"))],
        log.sxid_folded as f64,
    );
    folded.encode(encoder)?;
    if let Some(on_bus) = &log.pci_gpus {
        let mut pci = Family::gauge(
            "pci_gpus",
            "NVIDIA GPUs on the PCI bus (sysfs), whether the driver enumerated them or not; compare with gpuwatch_gpus.",
            None,
        );
        pci.push(vec![], on_bus.len() as f64);
        pci.encode(encoder)?;
    }
    let Some(readable) = log.kernel_log_up else {
        return Ok(());
    };
    let mut up = Family::gauge(
        "kernel_log_up",
        "Whether the kernel log (Xid text, SXid, the backlog since boot) is being read (1) or cannot be (0: see the agent's log for what to grant); absent when [health] kernel_log is off.",
        None,
    );
    up.push(vec![], if readable { 1.0 } else { 0.0 });
    up.encode(encoder)?;
    let mut dropped = Family::counter(
        "kernel_log_dropped",
        "Kernel-log records the reader left out since the agent started, by reason: unresolved_overflow (Xid lines beyond the bound held before GPUs are known), kmsg_overwritten (records the kernel overwrote before they were read), unknown_device (Xid on a PCI device NVML does not list), not_from_kernel (a report not written by the kernel: a forgery).",
        None,
    );
    for reason in crate::gpu::node_health::KERNEL_LOG_DROP_REASONS {
        let count = log.kernel_log_dropped.iter().find(|(r, _)| *r == reason);
        let count = count.map_or(0, |(_, n)| *n);
        dropped.push(vec![("reason", Cow::Borrowed(reason))], count as f64);
    }
    dropped.encode(encoder)?;
    let mut skipped = Family::counter(
        "kernel_log_skipped",
        "Bytes of a kernel-log file skipped to catch up with a flood (the newest lines are read first).",
        unit("bytes"),
    );
    skipped.push(vec![], log.kernel_log_skipped_bytes as f64);
    skipped.encode(encoder)?;
    let mut sxid = Family::counter(
        "sxid_errors",
        "SXid errors the NVSwitch driver logged since the agent started, by switch (PCI address) and SXid code.",
        None,
    );
    for count in log.sxid.iter() {
        let code = count
            .code
            .map_or(Cow::Borrowed(OTHER), |code| Cow::Owned(code.to_string()));
        sxid.push(
            vec![
                (
                    "switch",
                    Cow::Borrowed(count.switch_pci.as_deref().unwrap_or(OTHER)),
                ),
                ("sxid", code),
            ],
            count.count as f64,
        );
    }
    sxid.encode(encoder)
}

/// How old `snapshot` is at `now`.
pub fn snapshot_age(snapshot: &Snapshot, now: SystemTime) -> Duration {
    now.duration_since(snapshot.taken_at).unwrap_or_default()
}

/// Encodes the conventional `process_*` families (no prefix), read from
/// /proc/self/stat at each scrape.
pub fn encode_process(encoder: &mut DescriptorEncoder) -> fmt::Result {
    let Some(stats) = ProcessStats::read() else {
        return Ok(());
    };
    let mut rss = Family::gauge(
        "process_resident_memory",
        "Resident memory of the agent.",
        unit("bytes"),
    );
    rss.push(vec![], stats.rss_bytes);
    rss.encode(encoder)?;
    let mut cpu = Family::counter(
        "process_cpu",
        "CPU time the agent used (user + system).",
        unit("seconds"),
    );
    cpu.push(vec![], stats.cpu_seconds);
    cpu.encode(encoder)?;
    let mut start = Family::gauge(
        "process_start_time",
        "When the agent started.",
        unit("seconds"),
    );
    start.push(vec![], stats.start_time_seconds);
    start.encode(encoder)
}

/// The agent's own resource use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    /// Resident set size.
    pub rss_bytes: f64,
    /// User + system CPU seconds.
    pub cpu_seconds: f64,
    /// Start time, seconds since the epoch.
    pub start_time_seconds: f64,
}

impl ProcessStats {
    /// Reads /proc/self/stat; `None` where /proc is unavailable.
    pub fn read() -> Option<ProcessStats> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the parenthesised command name, which may hold spaces.
        let rest = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // `rest` starts at field 3 (state): field N is fields[N - 3].
        let ticks = 100.0; // USER_HZ is 100 on every Linux architecture gpuwatch runs on.
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        let start_ticks: f64 = fields.get(19)?.parse().ok()?;
        let rss_pages: f64 = fields.get(21)?.parse().ok()?;
        let boot = boot_time()?;
        Some(ProcessStats {
            rss_bytes: rss_pages * 4096.0,
            cpu_seconds: (utime + stime) / ticks,
            start_time_seconds: boot + start_ticks / ticks,
        })
    }
}

/// When the machine booted (seconds since the epoch): the kernel log's
/// clock ([`crate::health::known_boot_time`]), read once so that the start
/// time Prometheus sees does not move from scrape to scrape.
fn boot_time() -> Option<f64> {
    static BOOT: std::sync::OnceLock<Option<f64>> = std::sync::OnceLock::new();
    *BOOT.get_or_init(|| crate::health::known_boot_time().map(crate::gpu::unix_seconds_f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process_stats() {
        let stats = ProcessStats::read().expect("/proc/self/stat is readable on Linux");
        assert!(
            stats.rss_bytes > 1_000_000.0,
            "a test binary holds more than 1 MB"
        );
        assert!(stats.start_time_seconds > 1_600_000_000.0);
        assert!(stats.cpu_seconds >= 0.0);
    }
}
