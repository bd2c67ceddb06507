//! `[sampler]`: how often each tier is read, and what names the processes.

use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::limits::{self, show_duration};
use super::raw::RawSampler;
use super::Validator;

/// Sampling settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerConfig {
    /// Fast-tier period.
    pub interval: Duration,
    /// Slow-tier period (identity, ECC, PCIe, limits).
    pub slow_interval: Duration,
    /// Process-list period.
    pub process_interval: Duration,
    /// A sample running longer than this makes the agent not ready.
    pub timeout: Duration,
    /// NVML library to load; `None` for the system's `libnvidia-ml.so.1`.
    pub nvml_library: Option<PathBuf>,
    /// Where /proc is mounted (a host's /proc inside a container), as
    /// written; `None` for the default `/proc` (see [`SamplerConfig::proc_root`]).
    /// With `--simulate`, /proc is read only when this is set.
    pub proc_root_configured: Option<PathBuf>,
    /// Processes per GPU exported with their own series (the largest by
    /// memory); the rest are summed into one `pid="other"` series.
    pub process_top_n: usize,
    /// Whether process command lines are read from /proc and exported
    /// (masked); off by default, since command lines carry secrets that
    /// masking cannot all recognise, and the name is enough for most.
    pub process_command_line: bool,
    /// Host name to report; `None` for the machine's.
    pub hostname: Option<String>,
    /// Whether GPM (SM activity, pipes, DRAM, PCIe, NVLink; Hopper and
    /// newer) is sampled on the fast tier: on by default; off saves its 4
    /// NVML calls per GPU per tick.
    pub gpm: bool,
}

impl SamplerConfig {
    /// Where /proc is mounted: the configured path or `/proc`.
    pub fn proc_root(&self) -> PathBuf {
        self.proc_root_configured
            .clone()
            .unwrap_or_else(|| PathBuf::from("/proc"))
    }

    /// How old the served snapshot may get before the agent is not ready.
    pub fn stale_after(&self) -> Duration {
        self.interval + self.timeout
    }
}

impl Validator<'_> {
    /// Checks `[sampler]`: each period in its range, and the slow and
    /// process tiers no faster than the fast one.
    pub(super) fn sampler(&mut self, sampler: RawSampler) -> SamplerConfig {
        let interval = self.duration(
            "sampler.interval",
            sampler.interval.as_ref(),
            Duration::from_secs(1),
            &limits::SAMPLER_INTERVAL,
        );
        let slow_interval = self.duration(
            "sampler.slow_interval",
            sampler.slow_interval.as_ref(),
            Duration::from_secs(30),
            &limits::SLOW_INTERVAL,
        );
        let process_interval = self.duration(
            "sampler.process_interval",
            sampler.process_interval.as_ref(),
            Duration::from_secs(5),
            &limits::PROCESS_INTERVAL,
        );
        let timeout = self.duration(
            "sampler.timeout",
            sampler.timeout.as_ref(),
            Duration::from_secs(10),
            &limits::SAMPLER_TIMEOUT,
        );
        for (name, value, written) in [
            ("slow_interval", slow_interval, &sampler.slow_interval),
            (
                "process_interval",
                process_interval,
                &sampler.process_interval,
            ),
        ] {
            if value >= interval {
                continue;
            }
            // Point at the setting that is written: the slower tier, or
            // else sampler.interval, made longer than the tier's default.
            let (field, span) = match (written, &sampler.interval) {
                (Some(w), _) => (format!("sampler.{name}"), w.span()),
                (None, Some(i)) => ("sampler.interval".to_string(), i.span()),
                (None, None) => (format!("sampler.{name}"), 0..0),
            };
            self.problem(
                &field,
                span,
                &format!(
                    "sampler.{name} ({}) must not be shorter than sampler.interval ({})",
                    show_duration(value),
                    show_duration(interval)
                ),
            );
        }
        let process_top_n = self.count(
            "sampler.process_top_n",
            sampler.process_top_n.as_ref(),
            10,
            &limits::PROCESS_TOP_N,
        );
        SamplerConfig {
            interval,
            slow_interval,
            process_interval,
            timeout,
            nvml_library: sampler.nvml_library,
            proc_root_configured: sampler.proc_root,
            process_top_n: usize::try_from(process_top_n).unwrap_or(10),
            process_command_line: sampler.process_command_line.unwrap_or(false),
            hostname: sampler
                .hostname
                .filter(|h| self.no_control("sampler.hostname", h.span(), "host name", h.get_ref()))
                .map(Spanned::into_inner)
                .filter(|h| !h.trim().is_empty()),
            gpm: sampler.gpm.unwrap_or(true),
        }
    }
}
