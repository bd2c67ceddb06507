//! `[remediation]` and `[remediation.slurm]`: whether and how the agent acts
//! on the health verdict (drains the node in Slurm), dry-run by default.

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::limits;
use super::Validator;
use crate::limits::written as kind;

/// Whether the agent acts on the health verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No remediation task at all.
    Off,
    /// Decide and record what would be done; never change the scheduler
    /// (NVSentinel's store-only mode). The default.
    DryRun,
    /// Drain and resume the node in the scheduler.
    On,
}

impl Mode {
    /// The mode as the configuration and the metrics write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::DryRun => "dry-run",
            Mode::On => "on",
        }
    }

    /// The mode written as `text`, if it is one.
    pub fn parse(text: &str) -> Option<Mode> {
        [Mode::Off, Mode::DryRun, Mode::On]
            .into_iter()
            .find(|m| m.as_str() == text)
    }
}

/// The action classes a reason can have: the names of
/// `crate::health::action_class::ActionClass` (a test checks they match).
pub const ACTIONS: &[&str] = &[
    "RESET_GPU",
    "REBOOT_SYSTEM",
    "INSPECT_HARDWARE",
    "FABRIC_NOT_REGISTERED",
    "FABRIC_UNHEALTHY",
    "FABRIC_DEGRADED",
    "GPU_MISSING",
    "DRAIN_P2P",
    "WORKFLOW_NVLINK",
    "RESTART_APP",
    "OTHER",
];

/// The action classes that act by default.
pub const DEFAULT_ACTIONS: &[&str] = &[
    "RESET_GPU",
    "REBOOT_SYSTEM",
    "INSPECT_HARDWARE",
    "FABRIC_NOT_REGISTERED",
    "GPU_MISSING",
];

/// The verdict sources a reason can come from (`pci`: a GPU on the PCI
/// bus that the driver does not list).
pub const SOURCES: &[&str] = &[
    "nvml",
    "recovery_action",
    "xid",
    "ecc",
    "nvlink",
    "fabric",
    "pci",
];

/// The prefix of every drain reason gpuwatch writes: it marks the drain as
/// gpuwatch's, so a drain by a person or another tool is never touched.
pub const REASON_PREFIX: &str = "gpuwatch:";

/// `[remediation]`.
#[derive(Debug, Clone, PartialEq)]
pub struct RemediationConfig {
    /// Off, dry-run (the default) or on.
    pub mode: Mode,
    /// The action classes that act (default [`DEFAULT_ACTIONS`]).
    pub actions: Vec<String>,
    /// The verdict sources that may act (default: all of [`SOURCES`]).
    pub sources: Vec<String>,
    /// Whether degraded reasons act too (default false: only unhealthy).
    pub degraded: bool,
    /// How long a reason must hold before the node is drained.
    pub act_after: Duration,
    /// Whether gpuwatch resumes the nodes it drained.
    pub resume: bool,
    /// How long the node must be healthy before gpuwatch resumes it.
    pub resume_after: Duration,
    /// A node that fails again within this time of gpuwatch resuming it is
    /// flapping: it is drained, and left for a person to resume.
    pub flap_window: Duration,
    /// The first delay before a failed scheduler call is tried again.
    pub retry_min: Duration,
    /// The longest delay between two tries.
    pub retry_max: Duration,
    /// `[remediation.slurm]`.
    pub slurm: SlurmSettings,
}

/// `[remediation.slurm]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SlurmSettings {
    /// The node as Slurm names it; `None`: this host's short name.
    pub node: Option<String>,
    /// The `scontrol` program (a path, or a name looked up on `PATH`).
    pub scontrol: PathBuf,
    /// The `sinfo` program.
    pub sinfo: PathBuf,
    /// `SLURM_CONF` for both; `None`: inherited from the agent.
    pub slurm_conf: Option<PathBuf>,
    /// How long one call may take.
    pub timeout: Duration,
    /// At most this many nodes drained by gpuwatch at once (the circuit
    /// breaker); `None`: 10 % of the nodes `sinfo` lists, at least 1.
    pub max_drained_nodes: Option<u64>,
}

impl Default for RemediationConfig {
    fn default() -> Self {
        RemediationConfig {
            mode: Mode::DryRun,
            actions: DEFAULT_ACTIONS.iter().map(|a| a.to_string()).collect(),
            sources: SOURCES.iter().map(|s| s.to_string()).collect(),
            degraded: false,
            act_after: Duration::ZERO,
            resume: true,
            resume_after: Duration::from_secs(300),
            flap_window: Duration::from_secs(3600),
            retry_min: Duration::from_secs(10),
            retry_max: Duration::from_secs(300),
            slurm: SlurmSettings::default(),
        }
    }
}

impl Default for SlurmSettings {
    fn default() -> Self {
        SlurmSettings {
            node: None,
            scontrol: PathBuf::from("scontrol"),
            sinfo: PathBuf::from("sinfo"),
            slurm_conf: None,
            timeout: Duration::from_secs(10),
            max_drained_nodes: None,
        }
    }
}

/// `[remediation]` as written (see `raw` for the conventions).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRemediation {
    /// "dry-run" decides and records what it would do (`gpuwatch events
    /// --kind remediation`, `gpuwatch_remediation_*`, the log, a
    /// `GpuNodeDrained` notification) and changes nothing; "on" drains;
    /// "off" runs nothing.
    #[schemars(with = "Option<String>", extend("default" = "dry-run"))]
    pub mode: Option<Spanned<String>>,
    /// The action classes whose reasons drain the node (unhealthy reasons
    /// only, unless `degraded`): RESET_GPU, REBOOT_SYSTEM,
    /// INSPECT_HARDWARE, FABRIC_NOT_REGISTERED, FABRIC_UNHEALTHY,
    /// FABRIC_DEGRADED, GPU_MISSING, DRAIN_P2P, WORKFLOW_NVLINK,
    /// RESTART_APP, OTHER.
    #[schemars(
        with = "Option<Vec<String>>",
        extend("default" = ["RESET_GPU", "REBOOT_SYSTEM", "INSPECT_HARDWARE", "FABRIC_NOT_REGISTERED", "GPU_MISSING"])
    )]
    pub actions: Option<Vec<Spanned<String>>>,
    /// The verdict sources that may act: nvml, recovery_action, xid, ecc,
    /// nvlink, fabric, pci (a GPU on the PCI bus the driver does not list).
    #[schemars(
        with = "Option<Vec<String>>",
        extend("default" = ["nvml", "recovery_action", "xid", "ecc", "nvlink", "fabric", "pci"])
    )]
    pub sources: Option<Vec<Spanned<String>>>,
    /// Let degraded reasons of the listed action classes drain too.
    #[schemars(extend("default" = false))]
    pub degraded: Option<bool>,
    /// How long a reason must hold before the node is drained.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "0s"))]
    pub act_after: Option<Spanned<String>>,
    /// Resume the nodes gpuwatch drained (never anyone else's); `false`
    /// leaves resuming to people.
    #[schemars(extend("default" = true))]
    pub resume: Option<bool>,
    /// Healthy without a break for this long before the resume.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "5m"))]
    pub resume_after: Option<Spanned<String>>,
    /// A node failing again this soon after gpuwatch resumed it is drained
    /// and left for a person to resume (`[flapping: resume by hand]` in the
    /// reason).
    #[schemars(with = "Option<kind::Duration>", extend("default" = "1h"))]
    pub flap_window: Option<Spanned<String>>,
    /// The first delay before a failed or refused scheduler call is tried
    /// again (the decision is kept).
    #[schemars(with = "Option<kind::Duration>", extend("default" = "10s"))]
    pub retry_min: Option<Spanned<String>>,
    /// The longest delay between two tries of a scheduler call.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "5m"))]
    pub retry_max: Option<Spanned<String>>,
    /// How to reach Slurm.
    pub slurm: Option<RawSlurm>,
}

/// `[remediation.slurm]` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSlurm {
    /// The node as Slurm names it, e.g. "gpu-017". Unset: this host's name
    /// up to the first dot.
    #[schemars(with = "Option<String>")]
    pub node: Option<Spanned<String>>,
    /// The scontrol program, by path or looked up on PATH.
    #[schemars(with = "Option<kind::Path>", extend("default" = "scontrol"))]
    pub scontrol: Option<PathBuf>,
    /// The sinfo program, by path or looked up on PATH.
    #[schemars(with = "Option<kind::Path>", extend("default" = "sinfo"))]
    pub sinfo: Option<PathBuf>,
    /// SLURM_CONF for both programs. Unset: the agent's own environment.
    #[schemars(with = "Option<kind::Path>")]
    pub slurm_conf: Option<PathBuf>,
    /// Time limit of one scontrol or sinfo call.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "10s"))]
    pub timeout: Option<Spanned<String>>,
    /// The circuit breaker: at most this many nodes drained by gpuwatch at
    /// once. Unset: 10 % of the nodes sinfo lists, at least 1.
    #[schemars(with = "Option<i64>")]
    pub max_drained_nodes: Option<Spanned<i64>>,
}

impl Validator<'_> {
    /// Checks `[remediation]`: the mode, the action classes and sources
    /// (each from its known list), the durations and the breaker.
    pub(super) fn remediation(&mut self, raw: RawRemediation) -> RemediationConfig {
        let d = RemediationConfig::default();
        let mode = match &raw.mode {
            None => d.mode,
            Some(m) => Mode::parse(m.get_ref()).unwrap_or_else(|| {
                self.problem(
                    "remediation.mode",
                    m.span(),
                    &format!(
                        "\"{}\" is not a mode; use \"off\", \"dry-run\" (the default: record what would be done) or \"on\"",
                        m.get_ref()
                    ),
                );
                d.mode
            }),
        };
        let actions = self.names("remediation.actions", raw.actions, ACTIONS, &d.actions);
        let sources = self.names("remediation.sources", raw.sources, SOURCES, &d.sources);
        let act_after = self.duration(
            "remediation.act_after",
            raw.act_after.as_ref(),
            d.act_after,
            &limits::REMEDIATION_ACT_AFTER,
        );
        let resume_after = self.duration(
            "remediation.resume_after",
            raw.resume_after.as_ref(),
            d.resume_after,
            &limits::REMEDIATION_RESUME_AFTER,
        );
        let flap_window = self.duration(
            "remediation.flap_window",
            raw.flap_window.as_ref(),
            d.flap_window,
            &limits::REMEDIATION_FLAP_WINDOW,
        );
        let retry_min = self.duration(
            "remediation.retry_min",
            raw.retry_min.as_ref(),
            d.retry_min,
            &limits::REMEDIATION_RETRY_MIN,
        );
        let retry_max = self.duration(
            "remediation.retry_max",
            raw.retry_max.as_ref(),
            d.retry_max,
            &limits::REMEDIATION_RETRY_MAX,
        );
        if retry_max < retry_min {
            // Reported where it was written: the maximum, else the minimum
            // that outgrew the default maximum.
            let (field, at) = match (&raw.retry_max, &raw.retry_min) {
                (Some(max), _) => ("remediation.retry_max", max.span()),
                (None, Some(min)) => ("remediation.retry_min", min.span()),
                (None, None) => ("remediation.retry_max", 0..0),
            };
            self.problem(
                field,
                at,
                "remediation.retry_max is shorter than remediation.retry_min; make retry_max at least as long",
            );
        }
        let slurm = self.slurm(raw.slurm.unwrap_or_default());
        RemediationConfig {
            mode,
            actions,
            sources,
            degraded: raw.degraded.unwrap_or(d.degraded),
            act_after,
            resume: raw.resume.unwrap_or(d.resume),
            resume_after,
            flap_window,
            retry_min,
            retry_max,
            slurm,
        }
    }

    /// A list of names, each one of `known`; `default` when not written.
    fn names(
        &mut self,
        field: &str,
        raw: Option<Vec<Spanned<String>>>,
        known: &[&str],
        default: &[String],
    ) -> Vec<String> {
        let Some(raw) = raw else {
            return default.to_vec();
        };
        let mut names = Vec::new();
        for name in raw {
            if known.contains(&name.get_ref().as_str()) {
                names.push(name.into_inner());
            } else {
                self.problem(
                    field,
                    name.span(),
                    &format!("\"{}\" is not one of {}", name.get_ref(), known.join(", ")),
                );
            }
        }
        names
    }

    fn slurm(&mut self, raw: RawSlurm) -> SlurmSettings {
        let d = SlurmSettings::default();
        let node = match raw.node {
            None => None,
            Some(n) => {
                let name = n.get_ref().trim();
                let fine = !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.[]".contains(c));
                if !fine {
                    self.problem(
                        "remediation.slurm.node",
                        n.span(),
                        &format!("\"{}\" is not a Slurm node name; write the name `sinfo -N` shows (letters, digits, - _ .), or leave it out for this host's short name", n.get_ref()),
                    );
                }
                Some(name.to_string())
            }
        };
        let program = |p: Option<PathBuf>, default: PathBuf| {
            p.filter(|p| !p.as_os_str().is_empty()).unwrap_or(default)
        };
        SlurmSettings {
            node,
            scontrol: program(raw.scontrol, d.scontrol),
            sinfo: program(raw.sinfo, d.sinfo),
            slurm_conf: raw.slurm_conf.filter(|p| !p.as_os_str().is_empty()),
            timeout: self.duration(
                "remediation.slurm.timeout",
                raw.timeout.as_ref(),
                d.timeout,
                &limits::SLURM_TIMEOUT,
            ),
            max_drained_nodes: raw.max_drained_nodes.as_ref().map(|n| {
                self.count(
                    "remediation.slurm.max_drained_nodes",
                    Some(n),
                    1,
                    &limits::MAX_DRAINED_NODES,
                )
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::{Config, ConfigError};

    use super::*;

    fn problems(source: &str) -> Vec<String> {
        match Config::parse(source, "r.toml") {
            Err(ConfigError::Invalid(p)) => p.iter().map(|p| p.to_string()).collect(),
            other => panic!("expected problems, got {other:?}"),
        }
    }

    #[test]
    fn a_fresh_install_runs_dry() {
        let r = Config::default().remediation;
        assert_eq!(r.mode, Mode::DryRun);
        assert_eq!(
            r.actions,
            [
                "RESET_GPU",
                "REBOOT_SYSTEM",
                "INSPECT_HARDWARE",
                "FABRIC_NOT_REGISTERED",
                "GPU_MISSING"
            ]
        );
        assert!(!r.degraded && r.resume);
        assert_eq!(r.resume_after, Duration::from_secs(300));
        assert_eq!(r.act_after, Duration::ZERO);
        assert_eq!(r.slurm.node, None);
        assert_eq!(r.slurm.max_drained_nodes, None);
    }

    #[test]
    fn every_key_is_read() {
        let c = Config::parse(
            "[remediation]\nmode = \"on\"\nactions = [\"RESET_GPU\"]\nsources = [\"recovery_action\"]\ndegraded = true\nact_after = \"30s\"\nresume = false\nresume_after = \"10m\"\nflap_window = \"2h\"\nretry_min = \"1s\"\nretry_max = \"1m\"\n\n[remediation.slurm]\nnode = \"gpu-017\"\nscontrol = \"/opt/slurm/bin/scontrol\"\nsinfo = \"/opt/slurm/bin/sinfo\"\nslurm_conf = \"/etc/slurm/slurm.conf\"\ntimeout = \"5s\"\nmax_drained_nodes = 3\n",
            "r.toml",
        )
        .expect("valid")
        .remediation;
        assert_eq!(c.mode, Mode::On);
        assert_eq!((c.actions.len(), c.sources.len()), (1, 1));
        assert!(c.degraded && !c.resume);
        assert_eq!(c.act_after, Duration::from_secs(30));
        assert_eq!(c.flap_window, Duration::from_secs(7200));
        assert_eq!(c.slurm.node.as_deref(), Some("gpu-017"));
        assert_eq!(c.slurm.scontrol, PathBuf::from("/opt/slurm/bin/scontrol"));
        assert_eq!(
            c.slurm.slurm_conf,
            Some(PathBuf::from("/etc/slurm/slurm.conf"))
        );
        assert_eq!(c.slurm.max_drained_nodes, Some(3));
        let p = problems("[remediation]\nretry_min = \"1h\"\n");
        assert!(
            p.len() == 1 && p[0].starts_with("r.toml:2:") && p[0].contains("remediation.retry_min"),
            "a minimum past the default maximum: {p:?}"
        );
    }

    #[test]
    fn mistakes_name_file_line_and_field() {
        let p = problems("[remediation]\nmode = \"yes\"\nactions = [\"REBOOT\"]\n\n[remediation.slurm]\nnode = \"a b\"\nmax_drained_nodes = 0\ncommand = \"x\"\n");
        assert_eq!(p.len(), 1, "unknown keys stop parsing first: {p:?}");
        assert!(
            p[0].starts_with("r.toml:8:1:") && p[0].contains("command"),
            "{p:?}"
        );
        let p = problems("[remediation]\nmode = \"yes\"\nactions = [\"REBOOT\"]\nretry_min = \"1m\"\nretry_max = \"1s\"\n\n[remediation.slurm]\nnode = \"a b\"\nmax_drained_nodes = 0\n");
        let expect = [
            ("r.toml:2:", "remediation.mode", "dry-run"),
            ("r.toml:3:", "remediation.actions", "RESET_GPU"),
            ("r.toml:5:", "remediation.retry_max", "at least as long"),
            ("r.toml:8:", "remediation.slurm.node", "short name"),
            (
                "r.toml:9:",
                "remediation.slurm.max_drained_nodes",
                "at least 1",
            ),
        ];
        assert_eq!(p.len(), expect.len(), "{p:?}");
        for (got, (at, field, hint)) in p.iter().zip(expect) {
            assert!(
                got.starts_with(at) && got.contains(field) && got.contains(hint),
                "{got} should be at {at} about {field} ({hint})"
            );
        }
    }
}
