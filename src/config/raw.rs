//! The configuration file as written: every field optional, unknown fields
//! rejected, values that need checking kept with their position.
//!
//! The doc comments of the fields are the configuration reference
//! (docs/config-reference.md, generated through [`super::schema`]): write
//! them for the people who write the file. `with` names each field's type
//! as written (`Spanned` has no schema); `default` gives the value an
//! absent key has, where it is one value (a test checks it).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use crate::limits::written as kind;

/// The gpuwatch configuration file (TOML). Every key is optional; unknown
/// keys are refused.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "gpuwatch configuration")]
pub struct RawConfig {
    /// The HTTP server: where /metrics, the API and the web view listen,
    /// its limits, TLS and basic auth.
    pub server: Option<RawServer>,
    /// What /metrics carries besides the default families.
    pub exporter: Option<RawExporter>,
    /// Reading the GPUs through NVML: how often each tier is read, the
    /// processes on each GPU.
    pub sampler: Option<RawSampler>,
    /// The agent's own log.
    pub log: Option<RawLog>,
    /// The local history in SQLite (no server to install): `gpuwatch
    /// history`, `gpuwatch events` and /api/v1/history read it.
    pub history: Option<RawHistory>,
    /// Alert rules. The built-in pack is on by default (see the alerts
    /// documentation); an entry named after a built-in rule changes only
    /// the keys it gives, `enabled = false` switches one off, and new names
    /// add rules.
    #[schemars(with = "Option<Vec<crate::rules::RawRule>>")]
    pub rules: Option<Vec<Spanned<crate::rules::RawRule>>>,
    /// Where alert notifications go: a webhook, Alertmanager or email.
    /// Needs `[history]` (the outbox lives in the history database). URLs,
    /// header names and values, tokens, passwords and user names hold no
    /// control characters (no line breaks); a `*_file` (a regular file, at
    /// most 64 KiB) may end with one newline, which is trimmed.
    #[schemars(with = "Option<Vec<RawReceiver>>")]
    pub receivers: Option<Vec<Spanned<RawReceiver>>>,
    /// Capacity: how many more instances of each workload profile fit on
    /// each GPU now (`gpuwatch_gpu_capacity_fits`, `gpuwatch capacity`).
    pub capacity: Option<RawCapacity>,
    /// Workload profiles for `[capacity]`: what one instance of a workload
    /// needs. Each profile also gets an alert that fires when it fits on no
    /// GPU of the node.
    #[schemars(with = "Option<Vec<RawProfile>>")]
    pub profiles: Option<Vec<Spanned<RawProfile>>>,
    /// Kubernetes: the pod, namespace and container holding each GPU and
    /// each process on it, from the kubelet's pod-resources socket (no
    /// cluster credentials needed; mount the host's
    /// /var/lib/kubelet/pod-resources).
    pub kubernetes: Option<RawKubernetes>,
    /// Hardware health: NVIDIA driver errors in the kernel log (Xid with
    /// their text, process and pid; NVSwitch SXid; those logged since boot,
    /// before the agent started), and GPUs on the PCI bus that NVML does
    /// not list.
    pub health: Option<RawHealth>,
    /// Acting on health: take a node whose GPUs fail out of scheduling
    /// (drain it in Slurm) and put it back when they are healthy. Dry-run
    /// by default: read the health documentation on acting on health
    /// before turning it on.
    pub remediation: Option<super::remediation::RawRemediation>,
    /// Where the agent learns which job a GPU process works for, beyond
    /// the process itself (its cgroup and environment).
    pub workloads: Option<RawWorkloads>,
}

/// `[workloads]`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWorkloads {
    /// dcgm-exporter's HPC job mapping directory, for sites whose Slurm
    /// prolog writes it: one file per GPU index ("3", or "3.1" for MIG GPU
    /// instance 1) holding job ids, one a line. An absolute path; unset or
    /// "": not read.
    #[schemars(with = "Option<kind::Path>")]
    pub hpc_job_mapping_dir: Option<Spanned<PathBuf>>,
}

/// `[exporter]`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawExporter {
    /// Detail sets exported besides the default families (about 690
    /// series on an 8-GPU NVSwitch node): "nvlink_links" (per link: state,
    /// errors, traffic), "media_engines", "gpm_pipes", "processes" (per
    /// process: memory, SM share, info), "collector_groups",
    /// "rule_values"; "full" for all of them. The API, history and web view
    /// have everything either way. `--metrics-detail` overrides it.
    #[schemars(with = "Option<Vec<String>>", extend("default" = []))]
    pub detail: Option<Vec<Spanned<String>>>,
    /// dcgm-exporter's `hpc_job` label on the `DCGM_FI_*` series of
    /// `server.metrics_compat = ["dcgm"]`: one copy of a GPU's series per
    /// Slurm job on it, so it multiplies them. Off by default, as in
    /// dcgm-exporter.
    #[schemars(with = "Option<bool>", extend("default" = false))]
    pub compat_hpc_job: Option<Spanned<bool>>,
}

/// `[health]`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHealth {
    /// The kernel log: /dev/kmsg (needs CAP_SYSLOG where
    /// kernel.dmesg_restrict is 1), or a regular file, followed like
    /// `tail -F`; "" to not read it. Unset: /dev/kmsg where it can be read,
    /// silently skipped where not; with `--simulate` the host's log is
    /// read only when set here.
    #[schemars(with = "Option<kind::Path>")]
    pub kernel_log: Option<PathBuf>,
    /// The sysfs PCI device tree, to count GPUs on the bus that NVML does
    /// not list; "" to not count them. Unset: /sys/bus/pci/devices where it
    /// exists.
    #[schemars(with = "Option<kind::Path>")]
    pub pci_devices: Option<PathBuf>,
    /// The file holding the kernel's boot id: a new one means the node
    /// rebooted (an agent restart keeps it). "" counts GPU resets only
    /// toward escalation.
    #[schemars(
        with = "Option<kind::Path>",
        extend("default" = "/proc/sys/kernel/random/boot_id")
    )]
    pub boot_id: Option<PathBuf>,
    /// The same reset-class Xid coming back on the same GPU after this
    /// many GPU resets or node reboots raises `GpuXidRecurring` (inspect
    /// the hardware).
    #[schemars(with = "Option<i64>", extend("default" = 2))]
    pub xid_escalate_after: Option<Spanned<i64>>,
}

/// `[kubernetes]`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawKubernetes {
    /// The kubelet's pod-resources socket. Unset: the default path
    /// /var/lib/kubelet/pod-resources/kubelet.sock is used when it exists
    /// and silently skipped when it does not (not a Kubernetes node); set
    /// it to be warned when it is missing, or to "" to never ask.
    #[schemars(with = "Option<kind::Path>")]
    pub pod_resources_socket: Option<Spanned<PathBuf>>,
    /// How often to ask the kubelet which pods hold the GPUs.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "5s"))]
    pub refresh_interval: Option<Spanned<String>>,
    /// Time limit of one call to the kubelet.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "2s"))]
    pub timeout: Option<Spanned<String>>,
}

/// `[capacity]`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCapacity {
    /// GPU memory kept free on each GPU (each MIG instance) when counting
    /// how many instances of a profile fit.
    #[schemars(with = "Option<kind::Size>", extend("default" = "1GiB"))]
    pub memory_margin: Option<Spanned<String>>,
    /// How long a profile must fit on no GPU of the node before its alert
    /// fires.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "2m"))]
    pub alert_for: Option<Spanned<String>>,
}

/// One `[[profiles]]` entry.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawProfile {
    /// The profile's name, e.g. "resnet50-inference" (required, unique).
    #[schemars(with = "Option<String>")]
    pub name: Option<Spanned<String>>,
    /// GPU memory one instance needs, e.g. "1.8GB" (required).
    #[schemars(with = "Option<kind::Size>")]
    pub memory: Option<Spanned<String>>,
    /// The share of the SMs one instance keeps busy: above 0, at most 1.
    /// Unset: only memory counts.
    #[schemars(with = "Option<f64>")]
    pub sm_share: Option<Spanned<f64>>,
    /// Only GPUs whose name contains this, e.g. "H100". Unset: every GPU.
    #[schemars(with = "Option<String>")]
    pub model: Option<Spanned<String>>,
}

pub use super::raw_receiver::RawReceiver;

/// `[server]`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// Address and port of /metrics, /-/healthy, /-/ready, the API and the
    /// web view. ":9842" means all interfaces. Port 9842 is not used by
    /// dcgm-exporter (9400), nvidia_gpu_exporter (9835), Prometheus (9090)
    /// or node_exporter (9100). `--listen` overrides it.
    #[schemars(with = "Option<String>", extend("default" = "0.0.0.0:9842"))]
    pub listen: Option<Spanned<String>>,
    /// Connections served at once. When all are taken, the longest-idle one
    /// is closed to make room for a new one, and busy keep-alive ones close
    /// after their current response; up to 4 × max_connections more wait,
    /// the rest get 503 at once.
    // An i64, as TOML has it: the range is checked with the field's name.
    #[schemars(with = "Option<i64>", extend("default" = 64))]
    pub max_connections: Option<Spanned<i64>>,
    /// Longest a request may take once its head is read (handler, basic
    /// auth, request body); also the longest wait for a connection slot and
    /// for a TLS handshake.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "10s"))]
    pub request_timeout: Option<Spanned<String>>,
    /// Longest a new connection may stay silent, and longest it may take to
    /// send a complete request head once served or after its previous
    /// response: bounds keep-alive idle time and slowly trickled headers
    /// alike.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "5s"))]
    pub idle_timeout: Option<Spanned<String>>,
    /// The URL people reach this agent at, for the links in notifications
    /// (the webhook's externalURL, each alert's generatorURL). Unset:
    /// `http(s)://HOSTNAME:PORT/` with the sampler's host name and the
    /// listen port.
    #[schemars(with = "Option<String>")]
    pub external_url: Option<Spanned<String>>,
    /// TLS and basic auth for every path: a web configuration file in the
    /// Prometheus exporter-toolkit format (see
    /// deploy/web-config.example.yml), relative to this file. Unset: plain
    /// HTTP, no auth. `--web-config` overrides it.
    #[schemars(with = "Option<kind::Path>")]
    pub web_config: Option<Spanned<PathBuf>>,
    /// Also export other exporters' metric names, besides `gpuwatch_*`,
    /// so that their dashboards and alerts work unchanged: "dcgm"
    /// (dcgm-exporter's `DCGM_FI_*`) and/or "nvidia_smi"
    /// (nvidia_gpu_exporter's `nvidia_smi_*`). `--metrics-compat`
    /// overrides it.
    #[schemars(with = "Option<Vec<String>>", extend("default" = []))]
    pub metrics_compat: Option<Vec<Spanned<String>>>,
}

/// `[sampler]`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSampler {
    /// The fast tier: utilization, memory, temperatures, power, energy,
    /// clocks and clock-event (throttle) reasons are read this often.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "1s"))]
    pub interval: Option<Spanned<String>>,
    /// The slow tier: identity, thresholds, limits, ECC, retired pages,
    /// remapped rows, PCIe, performance state, fans, encoder/decoder,
    /// compute and MIG mode. Not shorter than `interval`.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "30s"))]
    pub slow_interval: Option<Spanned<String>>,
    /// How often the processes on each GPU and their memory are read. Not
    /// shorter than `interval`.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "5s"))]
    pub process_interval: Option<Spanned<String>>,
    /// A sample that takes longer than this (a hung driver) makes /-/ready
    /// fail; /metrics keeps serving the last snapshot and
    /// `gpuwatch_snapshot_age_seconds` grows.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "10s"))]
    pub timeout: Option<Spanned<String>>,
    /// The NVML library to load. Unset: the system's libnvidia-ml.so.1.
    /// `--nvml-library` overrides it.
    #[schemars(with = "Option<kind::Path>")]
    pub nvml_library: Option<PathBuf>,
    /// Where /proc is, for process names, users, containers and command
    /// lines (mount the host's /proc in a container, e.g. at /host/proc;
    /// user names then come from /host/etc/passwd). Unset: /proc; with
    /// `--simulate`, /proc is read only when this is set.
    #[schemars(with = "Option<kind::Path>")]
    pub proc_root: Option<PathBuf>,
    /// Processes per GPU exported with their own series (the largest by
    /// memory); the rest are summed into one `pid="other"` series.
    #[schemars(with = "Option<i64>", extend("default" = 10))]
    pub process_top_n: Option<Spanned<i64>>,
    /// Also export each process's command line (/proc/PID/cmdline) in
    /// `gpuwatch_process_info{command}`, /api/v1/snapshot, the web view and
    /// `gpuwatch status`. Off: the process name (/proc/PID/comm) is shown,
    /// which is enough to tell jobs apart, and nothing a user typed on a
    /// command line reaches everyone who can read /metrics. When on, values
    /// that look secret (`--password=...`, `--token X`, `-pX`, `user:pass@`
    /// in URLs, `Authorization: Bearer X`, `*_KEY=...`) are shown as `***`,
    /// but no masking can recognise every secret.
    #[schemars(extend("default" = false))]
    pub process_command_line: Option<bool>,
    /// The host name to report. Unset: the machine's.
    #[schemars(with = "Option<String>")]
    pub hostname: Option<Spanned<String>>,
    /// Read GPM (GPU Performance Monitoring, Hopper and newer) on the GPUs
    /// that have it: SM activity and occupancy, tensor/FP/integer pipes,
    /// DRAM bandwidth, PCIe and NVLink traffic, media engines
    /// (`gpuwatch_gpm_*`), one sample every 2 s. `false`: no GPM call at
    /// all.
    #[schemars(extend("default" = true))]
    pub gpm: Option<bool>,
}

/// `[log]`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    /// A level (off, error, warn, info, debug, trace) or target=level
    /// directives such as "gpuwatch=debug,info"; a word that is not a
    /// level is refused.
    #[schemars(with = "Option<String>", extend("default" = "info"))]
    pub level: Option<Spanned<String>>,
    /// The line format: "text" or "json" (one object a line).
    #[schemars(with = "Option<String>", extend("default" = "text"))]
    pub format: Option<Spanned<String>>,
}

/// `[history]`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHistory {
    /// Keep the local history at all. `--no-history` turns it off for one
    /// run.
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
    /// The database file. Unset: $STATE_DIRECTORY/history.db under
    /// systemd, else $XDG_STATE_HOME/gpuwatch/history.db (the container
    /// image and the DaemonSet set XDG_STATE_HOME=/var/lib), else
    /// ~/.local/state/gpuwatch/history.db (history-simulated.db with
    /// `--simulate`). `--history-db` overrides it.
    #[schemars(with = "Option<kind::Path>")]
    pub path: Option<PathBuf>,
    /// "normal": a power cut may lose the last commits, never corrupts the
    /// file. "full": every commit is synced to disk.
    #[schemars(with = "Option<String>", extend("default" = "normal"))]
    pub synchronous: Option<Spanned<String>>,
    /// Samples are committed in batches this often; a crash (kill -9)
    /// loses at most this much.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "10s"))]
    pub batch_interval: Option<Spanned<String>>,
    /// How long raw samples are kept.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "48h"))]
    pub raw_retention: Option<Spanned<String>>,
    /// How long the 1-minute rollups (min, max, average, last) are kept.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "30d"))]
    pub minute_retention: Option<Spanned<String>>,
    /// How long the 1-hour rollups are kept; events are kept as long.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "365d"))]
    pub hour_retention: Option<Spanned<String>>,
    /// A cap on the database's size, e.g. "2GiB": over it, the oldest raw
    /// samples go first, then the oldest minutes, then the oldest hours.
    /// Unset: no cap.
    #[schemars(with = "Option<kind::Size>")]
    pub max_size: Option<Spanned<String>>,
    /// Snapshots the writer may fall behind by before it drops some
    /// (counted in `gpuwatch_history_dropped_snapshots_total`).
    #[schemars(with = "Option<i64>", extend("default" = 64))]
    pub queue: Option<Spanned<i64>>,
}
