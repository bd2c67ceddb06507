//! The configuration file as written: every field optional, unknown fields
//! rejected, values that need checking kept with their position.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// `[server]`.
    pub server: Option<RawServer>,
    /// `[sampler]`.
    pub sampler: Option<RawSampler>,
    /// `[log]`.
    pub log: Option<RawLog>,
    /// `[history]`.
    pub history: Option<RawHistory>,
    /// `[[rules]]`: tune or disable built-in alert rules, add your own.
    pub rules: Option<Vec<Spanned<crate::rules::RawRule>>>,
    /// `[[receivers]]`: where alert notifications go.
    pub receivers: Option<Vec<Spanned<RawReceiver>>>,
    /// `[capacity]`.
    pub capacity: Option<RawCapacity>,
    /// `[[profiles]]`: workload profiles for capacity.
    pub profiles: Option<Vec<Spanned<RawProfile>>>,
    /// `[kubernetes]`.
    pub kubernetes: Option<RawKubernetes>,
    /// `[health]`.
    pub health: Option<RawHealth>,
    /// `[remediation]`.
    pub remediation: Option<super::remediation::RawRemediation>,
    /// `[workloads]`.
    pub workloads: Option<RawWorkloads>,
    /// `[exporter]`.
    pub exporter: Option<RawExporter>,
}

/// `[workloads]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorkloads {
    /// dcgm-exporter's HPC job mapping directory; "" for none.
    pub hpc_job_mapping_dir: Option<Spanned<PathBuf>>,
}

/// `[exporter]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExporter {
    /// Detail sets exported besides the default families; "full" for all.
    pub detail: Option<Vec<Spanned<String>>>,
    /// dcgm-exporter's `hpc_job` label on the `DCGM_FI_*` series.
    pub compat_hpc_job: Option<Spanned<bool>>,
}

/// `[health]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHealth {
    /// Kernel log to follow; "" turns it off.
    pub kernel_log: Option<PathBuf>,
    /// sysfs PCI device tree; "" turns the count off.
    pub pci_devices: Option<PathBuf>,
    /// File holding the kernel's boot id; "" turns reboot detection off.
    pub boot_id: Option<PathBuf>,
    /// After how many resets/reboots a returning Xid escalates (≥ 1).
    pub xid_escalate_after: Option<Spanned<i64>>,
}

/// `[kubernetes]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKubernetes {
    /// The kubelet's pod-resources socket; "" turns the lookup off.
    pub pod_resources_socket: Option<Spanned<PathBuf>>,
    /// How often to ask the kubelet.
    pub refresh_interval: Option<Spanned<String>>,
    /// Time limit of one call.
    pub timeout: Option<Spanned<String>>,
}

/// `[capacity]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCapacity {
    /// Memory kept free on each GPU, a size such as "1GiB".
    pub memory_margin: Option<Spanned<String>>,
    /// How long a profile must fit nowhere before its alert fires.
    pub alert_for: Option<Spanned<String>>,
}

/// One `[[profiles]]` entry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProfile {
    /// Its name.
    pub name: Option<Spanned<String>>,
    /// GPU memory per instance, a size such as "1.8GB".
    pub memory: Option<Spanned<String>>,
    /// Share of the SMs per instance, 0..1.
    pub sm_share: Option<Spanned<f64>>,
    /// GPU model filter (substring of the GPU name).
    pub model: Option<Spanned<String>>,
}

/// One `[[receivers]]` entry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReceiver {
    /// Its name.
    pub name: Option<Spanned<String>>,
    /// "webhook", "alertmanager" or "email".
    #[serde(rename = "type")]
    pub kind: Option<Spanned<String>>,
    /// Where to POST.
    pub url: Option<Spanned<String>>,
    /// Extra request headers.
    pub headers: Option<Spanned<std::collections::BTreeMap<String, String>>>,
    /// The bearer token itself.
    pub bearer_token: Option<Spanned<String>>,
    /// A file holding the bearer token.
    pub bearer_token_file: Option<Spanned<PathBuf>>,
    /// An environment variable holding the bearer token.
    pub bearer_token_env: Option<Spanned<String>>,
    /// User name for basic auth (or the mail server's login).
    pub username: Option<Spanned<String>>,
    /// The password itself.
    pub password: Option<Spanned<String>>,
    /// A file holding the password.
    pub password_file: Option<Spanned<PathBuf>>,
    /// An environment variable holding the password.
    pub password_env: Option<Spanned<String>>,
    /// Time limit of one request.
    pub timeout: Option<Spanned<String>>,
    /// Alertmanager: how often firing alerts are sent again.
    pub resend_interval: Option<Spanned<String>>,
    /// First retry delay.
    pub retry_min: Option<Spanned<String>>,
    /// Longest retry delay.
    pub retry_max: Option<Spanned<String>>,
    /// Routing: only alerts of these severities (default all).
    pub severities: Option<Vec<Spanned<String>>>,
    /// Routing: only alerts whose labels have these values.
    #[serde(rename = "match")]
    pub match_labels: Option<Spanned<std::collections::BTreeMap<String, Spanned<String>>>>,
    /// Routing: only alerts whose labels match these regexes (anchored).
    pub match_re: Option<Spanned<std::collections::BTreeMap<String, Spanned<String>>>>,
    /// How often an alert that stays firing is sent again ("0": never).
    pub repeat_interval: Option<Spanned<String>>,
    /// How long to hold a new alert to send it with others of the node.
    pub group_wait: Option<Spanned<String>>,
    /// Email: the SMTP server, "host:port".
    pub smarthost: Option<Spanned<String>>,
    /// Email: the sender address.
    pub from: Option<Spanned<String>>,
    /// Email: the recipients.
    pub to: Option<Spanned<Vec<String>>>,
    /// Email: "starttls", "implicit" or "none".
    pub tls: Option<Spanned<String>>,
    /// Email: an extra trusted CA (PEM).
    pub ca_file: Option<Spanned<PathBuf>>,
    /// Email: the EHLO name.
    pub hello_name: Option<Spanned<String>>,
}

/// `[server]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// Listen address.
    pub listen: Option<Spanned<String>>,
    /// Concurrent requests (an i64, as TOML has it: the range is checked
    /// with the field's name).
    pub max_connections: Option<Spanned<i64>>,
    /// Request time limit.
    pub request_timeout: Option<Spanned<String>>,
    /// Longest wait for a complete request head (keep-alive idle time included).
    pub idle_timeout: Option<Spanned<String>>,
    /// The URL users reach the agent at (links in notifications).
    pub external_url: Option<Spanned<String>>,
    /// Web configuration file (TLS, basic auth).
    pub web_config: Option<Spanned<PathBuf>>,
    /// Drop-in metric families of other exporters.
    pub metrics_compat: Option<Vec<Spanned<String>>>,
}

/// `[sampler]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSampler {
    /// Fast-tier period.
    pub interval: Option<Spanned<String>>,
    /// Slow-tier period.
    pub slow_interval: Option<Spanned<String>>,
    /// Process-list period.
    pub process_interval: Option<Spanned<String>>,
    /// Sample time limit.
    pub timeout: Option<Spanned<String>>,
    /// NVML library path.
    pub nvml_library: Option<PathBuf>,
    /// /proc mount point.
    pub proc_root: Option<PathBuf>,
    /// Per-process series per GPU.
    pub process_top_n: Option<Spanned<i64>>,
    /// Export command lines (masked) too.
    pub process_command_line: Option<bool>,
    /// Host name override.
    pub hostname: Option<Spanned<String>>,
    /// Read GPM (SM activity etc.) where the GPU has it.
    pub gpm: Option<bool>,
}

/// `[log]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    /// Filter.
    pub level: Option<Spanned<String>>,
    /// "text" or "json".
    pub format: Option<Spanned<String>>,
}

/// `[history]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHistory {
    /// Record history at all.
    pub enabled: Option<bool>,
    /// Database file.
    pub path: Option<PathBuf>,
    /// "normal" or "full".
    pub synchronous: Option<Spanned<String>>,
    /// Commit period.
    pub batch_interval: Option<Spanned<String>>,
    /// Raw tier retention.
    pub raw_retention: Option<Spanned<String>>,
    /// 1-minute tier retention.
    pub minute_retention: Option<Spanned<String>>,
    /// 1-hour tier retention.
    pub hour_retention: Option<Spanned<String>>,
    /// Size cap such as "2GiB".
    pub max_size: Option<Spanned<String>>,
    /// Snapshots the writer may fall behind by.
    pub queue: Option<Spanned<i64>>,
}
