//! Configuration: a TOML file whose every field is optional.
//!
//! The file is parsed into raw types (`deny_unknown_fields`, values that need
//! checking kept with their position), then validated into [`Config`]. Every
//! problem is reported at once, each with file, line and field.

mod email;
mod raw;
mod receivers;
mod route;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use crate::exporter::compat::MetricsCompat;
use crate::history::{Durability, Retention};

/// The default listen address. Port 9842: not used by dcgm-exporter (9400),
/// nvidia_gpu_exporter (9835), Prometheus (9090) or node_exporter (9100).
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9842";

/// The longest `server.idle_timeout` accepted.
pub const MAX_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);

/// A validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The HTTP server.
    pub server: ServerConfig,
    /// The sampler.
    pub sampler: SamplerConfig,
    /// Logging.
    pub log: LogConfig,
    /// Local history.
    pub history: HistoryConfig,
    /// The alert rules in effect: the built-in pack with the file's
    /// `[[rules]]` changes, then the file's own rules.
    pub rules: Vec<crate::rules::Rule>,
    /// `[[receivers]]`: where notifications go (needs history: the outbox
    /// lives in the history database).
    pub receivers: Vec<crate::notify::ReceiverConfig>,
    /// `[capacity]` and `[[profiles]]`: what "how many more fit" means.
    pub capacity: crate::capacity::CapacityConfig,
    /// `[kubernetes]`: where to ask the kubelet which pod holds which GPU;
    /// `None` when turned off.
    pub kubernetes: Option<crate::kubernetes::KubeletSettings>,
}

/// Local history settings.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryConfig {
    /// Record history at all.
    pub enabled: bool,
    /// Database file; `None` for the default (see [`crate::history::default_path`]).
    pub path: Option<PathBuf>,
    /// How hard commits are synced.
    pub durability: Durability,
    /// Commit period: at most this much is lost on a crash.
    pub batch_interval: Duration,
    /// Retention per tier.
    pub retention: Retention,
    /// Size cap in bytes, if any.
    pub max_size: Option<u64>,
    /// Snapshots the writer may fall behind by before they are dropped.
    pub queue: usize,
}

/// HTTP server settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Address and port /metrics listens on.
    pub listen: SocketAddr,
    /// Requests served at once; more wait for a slot.
    pub max_connections: usize,
    /// Longest a request may take once its head is read (also the longest
    /// wait for a connection slot and for a TLS handshake).
    pub request_timeout: Duration,
    /// Longest a connection may take to send a complete request head, from
    /// its opening or its previous response: keep-alive idle time and slow
    /// headers alike.
    pub idle_timeout: Duration,
    /// Web configuration file (exporter-toolkit format: TLS, basic auth),
    /// as written; `--web-config` overrides it.
    pub web_config: Option<PathBuf>,
    /// Other exporters' metric families exported as well (`--metrics-compat`).
    pub metrics_compat: Vec<MetricsCompat>,
    /// The URL people reach the agent at, ending in `/` (notifications
    /// link to it); `None` for `http(s)://HOSTNAME:PORT/`, see
    /// [`ServerConfig::external_url_or`].
    pub external_url: Option<String>,
}

impl ServerConfig {
    /// The external URL: the configured one, or `SCHEME://HOSTNAME:PORT/`
    /// for the port the agent listens on.
    pub fn external_url_or(&self, scheme: &str, hostname: &str, port: u16) -> String {
        self.external_url
            .clone()
            .unwrap_or_else(|| format!("{scheme}://{hostname}:{port}/"))
    }
}

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
    /// Host name to report; `None` for the machine's.
    pub hostname: Option<String>,
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

/// Log output.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// A `tracing` filter, e.g. "info" or "gpuwatch=debug".
    pub level: String,
    /// Plain text or JSON lines.
    pub format: LogFormat,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable text.
    Text,
    /// One JSON object per line.
    Json,
}

impl Default for Config {
    fn default() -> Self {
        Config::from_raw(raw::RawConfig::default(), "<defaults>", "")
            .unwrap_or_else(|_| unreachable!("the defaults are valid"))
    }
}

/// One thing wrong with a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub file: String,
    /// 1-based line, where known.
    pub line: Option<usize>,
    /// 1-based column, where known.
    pub column: Option<usize>,
    /// Dotted field path, e.g. "sampler.interval".
    pub field: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        if self.field.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": {}: {}", self.field, self.message)
        }
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the configuration file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file has problems; all of them are listed.
    #[error("{}", list(.0))]
    Invalid(Vec<Problem>),
}

fn list(problems: &[Problem]) -> String {
    let lines: Vec<String> = problems.iter().map(Problem::to_string).collect();
    format!(
        "the configuration has {} problem{}:\n  {}",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" },
        lines.join("\n  ")
    )
}

impl Config {
    /// Loads `path`, or the defaults when there is no file.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let Some(path) = path else {
            return Ok(Config::default());
        };
        let source = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::parse(&source, &path.display().to_string())
    }

    /// Parses and validates `source`; `file` names it in errors.
    pub fn parse(source: &str, file: &str) -> Result<Config, ConfigError> {
        let raw: raw::RawConfig = toml::from_str(source).map_err(|error| {
            let span = error.span();
            let (line, column) = span.as_ref().map(|s| line_column(source, s.start)).unzip();
            let field = span
                .and_then(|s| source.get(s))
                .filter(|t| !t.contains('\n') && t.len() < 64)
                .unwrap_or("")
                .trim()
                .to_string();
            ConfigError::Invalid(vec![Problem {
                file: file.to_string(),
                line,
                column,
                field,
                message: error.message().trim().to_string(),
            }])
        })?;
        Config::from_raw(raw, file, source).map_err(ConfigError::Invalid)
    }

    fn from_raw(raw: raw::RawConfig, file: &str, source: &str) -> Result<Config, Vec<Problem>> {
        let mut v = Validator {
            file,
            source,
            problems: Vec::new(),
        };
        let server = raw.server.unwrap_or_default();
        let sampler = raw.sampler.unwrap_or_default();
        let log = raw.log.unwrap_or_default();
        let history = v.history(raw.history.unwrap_or_default());
        let rules = match crate::rules::rules_from_raw(raw.rules.unwrap_or_default(), file, source)
        {
            Ok(rules) => rules,
            Err(problems) => {
                v.problems.extend(problems);
                Vec::new()
            }
        };
        let receivers = v.receivers(raw.receivers.unwrap_or_default());
        let capacity = v.capacity(
            raw.capacity.unwrap_or_default(),
            raw.profiles.unwrap_or_default(),
        );
        let kubernetes = v.kubernetes(raw.kubernetes.unwrap_or_default());
        // One node-level rule per profile: it fits on no GPU of the node.
        let mut rules = rules;
        rules.extend(crate::capacity::rule::rules(&capacity, capacity.alert_for));
        let listen = v.address("server.listen", server.listen.as_ref(), DEFAULT_LISTEN);
        let max_connections = match &server.max_connections {
            Some(n) if *n.get_ref() == 0 => {
                v.problem(
                    "server.max_connections",
                    Some(n.span()),
                    "must be at least 1",
                );
                1
            }
            Some(n) => *n.get_ref(),
            None => 64,
        };
        let request_timeout = v.duration(
            "server.request_timeout",
            server.request_timeout.as_ref(),
            "10s",
            Duration::from_millis(100),
        );
        let idle_timeout = v.duration(
            "server.idle_timeout",
            server.idle_timeout.as_ref(),
            "5s",
            Duration::from_millis(100),
        );
        if let Some(value) = server.idle_timeout.as_ref() {
            if idle_timeout > MAX_IDLE_TIMEOUT {
                v.problem(
                    "server.idle_timeout",
                    Some(value.span()),
                    &format!(
                        "\"{}\" is too long; use at most {} (idle connections hold file descriptors)",
                        value.get_ref(),
                        humantime::format_duration(MAX_IDLE_TIMEOUT)
                    ),
                );
            }
        }
        let external_url = server.external_url.as_ref().and_then(|u| {
            if receivers::is_http_url(u.get_ref()) {
                Some(format!("{}/", u.get_ref().trim_end_matches('/')))
            } else {
                v.problem(
                    "server.external_url",
                    Some(u.span()),
                    &format!(
                        "\"{}\" is not an http:// or https:// URL; write it like \"https://gpu-node-1.example.com:9842/\"",
                        u.get_ref()
                    ),
                );
                None
            }
        });
        let mut metrics_compat = Vec::new();
        for name in server.metrics_compat.iter().flatten() {
            match MetricsCompat::parse(name.get_ref()) {
                Ok(set) => metrics_compat.push(set),
                Err(_) => v.problem(
                    "server.metrics_compat",
                    Some(name.span()),
                    &format!(
                        "\"{}\" is not a metrics compatibility set; use \"dcgm\" and/or \"nvidia_smi\"",
                        name.get_ref()
                    ),
                ),
            }
        }
        metrics_compat.sort();
        metrics_compat.dedup();
        let interval = v.duration(
            "sampler.interval",
            sampler.interval.as_ref(),
            "1s",
            Duration::from_millis(100),
        );
        let slow_interval = v.duration(
            "sampler.slow_interval",
            sampler.slow_interval.as_ref(),
            "30s",
            Duration::from_millis(100),
        );
        let process_interval = v.duration(
            "sampler.process_interval",
            sampler.process_interval.as_ref(),
            "5s",
            Duration::from_millis(100),
        );
        let timeout = v.duration(
            "sampler.timeout",
            sampler.timeout.as_ref(),
            "10s",
            Duration::from_millis(100),
        );
        for (name, value, field) in [
            (
                "sampler.slow_interval",
                slow_interval,
                &sampler.slow_interval,
            ),
            (
                "sampler.process_interval",
                process_interval,
                &sampler.process_interval,
            ),
        ] {
            if value < interval {
                let span = field.as_ref().map(Spanned::span);
                v.problem(
                    name,
                    span,
                    &format!(
                        "must not be shorter than sampler.interval ({})",
                        humantime::format_duration(interval)
                    ),
                );
            }
        }
        let format = match log
            .format
            .as_ref()
            .map(|f| (f.get_ref().as_str(), f.span()))
        {
            None | Some(("text", _)) => LogFormat::Text,
            Some(("json", _)) => LogFormat::Json,
            Some((other, span)) => {
                v.problem(
                    "log.format",
                    Some(span),
                    &format!("\"{other}\" is not a log format; use \"text\" or \"json\""),
                );
                LogFormat::Text
            }
        };
        let level = match &log.level {
            Some(level) => {
                if tracing_subscriber::EnvFilter::try_new(level.get_ref()).is_err() {
                    v.problem("log.level", Some(level.span()), &format!(
                        "\"{}\" is not a log filter; use a level such as \"info\" or \"debug\", or a filter such as \"gpuwatch=debug\"",
                        level.get_ref()
                    ));
                }
                level.get_ref().clone()
            }
            None => "info".to_string(),
        };
        if !v.problems.is_empty() {
            v.problems.sort_by_key(|p| p.line);
            return Err(v.problems);
        }
        Ok(Config {
            server: ServerConfig {
                listen,
                max_connections,
                request_timeout,
                idle_timeout,
                web_config: server.web_config,
                metrics_compat,
                external_url,
            },
            sampler: SamplerConfig {
                interval,
                slow_interval,
                process_interval,
                timeout,
                nvml_library: sampler.nvml_library,
                proc_root_configured: sampler.proc_root,
                process_top_n: sampler.process_top_n.map_or(10, Spanned::into_inner),
                hostname: sampler.hostname.filter(|h| !h.trim().is_empty()),
            },
            log: LogConfig { level, format },
            history,
            rules,
            receivers,
            capacity,
            kubernetes,
        })
    }
}

struct Validator<'a> {
    file: &'a str,
    source: &'a str,
    problems: Vec<Problem>,
}

impl Validator<'_> {
    fn problem(&mut self, field: &str, span: Option<std::ops::Range<usize>>, message: &str) {
        let (line, column) = span.map(|s| line_column(self.source, s.start)).unzip();
        self.problems.push(Problem {
            file: self.file.to_string(),
            line,
            column,
            field: field.to_string(),
            message: message.to_string(),
        });
    }

    fn duration(
        &mut self,
        field: &str,
        value: Option<&Spanned<String>>,
        default: &str,
        min: Duration,
    ) -> Duration {
        let fallback = humantime::parse_duration(default).unwrap_or(min);
        let Some(value) = value else {
            return fallback;
        };
        match humantime::parse_duration(value.get_ref()) {
            Ok(d) if d >= min => d,
            Ok(_) => {
                self.problem(
                    field,
                    Some(value.span()),
                    &format!(
                        "\"{}\" is too short; use at least {}",
                        value.get_ref(),
                        humantime::format_duration(min)
                    ),
                );
                fallback
            }
            Err(error) => {
                self.problem(
                    field,
                    Some(value.span()),
                    &format!(
                    "\"{}\" is not a duration ({error}); write it like \"1s\", \"500ms\" or \"2m\"",
                    value.get_ref()
                ),
                );
                fallback
            }
        }
    }

    fn kubernetes(
        &mut self,
        raw: raw::RawKubernetes,
    ) -> Option<crate::kubernetes::KubeletSettings> {
        let refresh_interval = self.duration(
            "kubernetes.refresh_interval",
            raw.refresh_interval.as_ref(),
            "5s",
            Duration::from_millis(100),
        );
        let timeout = self.duration(
            "kubernetes.timeout",
            raw.timeout.as_ref(),
            "2s",
            Duration::from_millis(10),
        );
        let (socket, explicit) = match raw.pod_resources_socket {
            Some(path) => (path.into_inner(), true),
            None => (
                PathBuf::from(crate::kubernetes::DEFAULT_POD_RESOURCES_SOCKET),
                false,
            ),
        };
        if socket.as_os_str().is_empty() {
            return None;
        }
        Some(crate::kubernetes::KubeletSettings {
            socket,
            explicit,
            refresh_interval,
            timeout,
        })
    }

    fn capacity(
        &mut self,
        raw: raw::RawCapacity,
        profiles: Vec<raw::RawProfile>,
    ) -> crate::capacity::CapacityConfig {
        let memory_margin_bytes = match &raw.memory_margin {
            None => 1 << 30,
            Some(text) => match parse_size(text.get_ref()) {
                Ok(bytes) => bytes,
                Err(message) => {
                    self.problem("capacity.memory_margin", Some(text.span()), &message);
                    0
                }
            },
        };
        let mut out: Vec<crate::capacity::Profile> = Vec::new();
        for (i, p) in profiles.into_iter().enumerate() {
            let field = |name: &str| format!("profiles[{i}].{name}");
            let before = self.problems.len();
            let name = match &p.name {
                Some(n)
                    if n.get_ref().is_empty()
                        || !n
                            .get_ref()
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) =>
                {
                    self.problem(
                        &field("name"),
                        Some(n.span()),
                        &format!(
                            "\"{}\" is not a profile name; use letters, digits, '-', '_' and '.'",
                            n.get_ref()
                        ),
                    );
                    String::new()
                }
                Some(n) if out.iter().any(|o| &o.name == n.get_ref()) => {
                    self.problem(
                        &field("name"),
                        Some(n.span()),
                        &format!("\"{}\" names another profile already", n.get_ref()),
                    );
                    String::new()
                }
                Some(n) => n.get_ref().clone(),
                None => {
                    self.problem(&field("name"), None, "is missing: give each profile a name");
                    String::new()
                }
            };
            let memory_bytes = match &p.memory {
                Some(text) => match parse_size(text.get_ref()) {
                    Ok(0) => {
                        self.problem(&field("memory"), Some(text.span()), "must be more than 0");
                        0
                    }
                    Ok(bytes) => bytes,
                    Err(message) => {
                        self.problem(&field("memory"), Some(text.span()), &message);
                        0
                    }
                },
                None => {
                    self.problem(
                        &field("memory"),
                        p.name.as_ref().map(Spanned::span),
                        "is missing: how much GPU memory does one instance need? (e.g. \"1.8GB\")",
                    );
                    0
                }
            };
            let sm_share = match &p.sm_share {
                Some(s) if !(*s.get_ref() > 0.0 && *s.get_ref() <= 1.0) => {
                    self.problem(
                        &field("sm_share"),
                        Some(s.span()),
                        "must be a share of the SMs above 0 and at most 1, e.g. 0.25",
                    );
                    None
                }
                Some(s) => Some(*s.get_ref()),
                None => None,
            };
            let model = match &p.model {
                Some(m) if m.get_ref().trim().is_empty() => {
                    self.problem(
                        &field("model"),
                        Some(m.span()),
                        "must not be empty; leave it out to match every GPU",
                    );
                    None
                }
                Some(m) => Some(m.get_ref().trim().to_string()),
                None => None,
            };
            if self.problems.len() == before {
                out.push(crate::capacity::Profile {
                    name,
                    memory_bytes,
                    sm_share,
                    model,
                });
            }
        }
        let alert_for = self.duration(
            "capacity.alert_for",
            raw.alert_for.as_ref(),
            "2m",
            Duration::ZERO,
        );
        crate::capacity::CapacityConfig {
            profiles: out,
            memory_margin_bytes,
            alert_for,
        }
    }

    fn history(&mut self, raw: raw::RawHistory) -> HistoryConfig {
        let minute = Duration::from_secs(60);
        let durability = match raw
            .synchronous
            .as_ref()
            .map(|s| (s.get_ref().as_str(), s.span()))
        {
            None | Some(("normal", _)) => Durability::Normal,
            Some(("full", _)) => Durability::Full,
            Some((other, span)) => {
                self.problem(
                    "history.synchronous",
                    Some(span),
                    &format!("\"{other}\" is not a setting; use \"normal\" or \"full\""),
                );
                Durability::Normal
            }
        };
        let retention = Retention {
            raw: self.duration(
                "history.raw_retention",
                raw.raw_retention.as_ref(),
                "48h",
                minute,
            ),
            minute: self.duration(
                "history.minute_retention",
                raw.minute_retention.as_ref(),
                "30d",
                Duration::from_secs(3600),
            ),
            hour: self.duration(
                "history.hour_retention",
                raw.hour_retention.as_ref(),
                "365d",
                Duration::from_secs(86_400),
            ),
        };
        let max_size = raw
            .max_size
            .as_ref()
            .and_then(|text| match parse_size(text.get_ref()) {
                Ok(bytes) if bytes >= 1 << 20 => Some(bytes),
                Ok(_) => {
                    self.problem(
                        "history.max_size",
                        Some(text.span()),
                        "must be at least 1MiB",
                    );
                    None
                }
                Err(message) => {
                    self.problem("history.max_size", Some(text.span()), &message);
                    None
                }
            });
        let queue = match &raw.queue {
            Some(q) if *q.get_ref() == 0 => {
                self.problem("history.queue", Some(q.span()), "must be at least 1");
                1
            }
            Some(q) => *q.get_ref(),
            None => 64,
        };
        HistoryConfig {
            enabled: raw.enabled.unwrap_or(true),
            path: raw.path,
            durability,
            batch_interval: self.duration(
                "history.batch_interval",
                raw.batch_interval.as_ref(),
                "10s",
                Duration::from_secs(1),
            ),
            retention,
            max_size,
            queue,
        }
    }

    fn address(
        &mut self,
        field: &str,
        value: Option<&Spanned<String>>,
        default: &str,
    ) -> SocketAddr {
        let fallback = SocketAddr::from(([0, 0, 0, 0], 9842));
        let text = value.map(|v| v.get_ref().as_str()).unwrap_or(default);
        match parse_listen(text) {
            Ok(address) => address,
            Err(message) => {
                self.problem(field, value.map(Spanned::span), &message);
                fallback
            }
        }
    }
}

/// Parses a listen address: `HOST:PORT`, `[::1]:PORT`, or `:PORT` for all
/// interfaces.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let full = if text.starts_with(':') {
        format!("0.0.0.0{text}")
    } else {
        text.to_string()
    };
    full.parse().map_err(|_| {
        format!("\"{text}\" is not a listen address; write it like \"0.0.0.0:9842\", \"127.0.0.1:9842\", \"[::]:9842\" or \":9842\"")
    })
}

/// Parses a size such as "2GiB", "500MB" or "1048576" into bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let multiplier: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "kib" | "k" => 1024.0,
        "mib" | "m" => 1024.0 * 1024.0,
        "gib" | "g" => 1024.0 * 1024.0 * 1024.0,
        "tib" | "t" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "\"{text}\" is not a size: write it like 500MiB, 2GiB or 1GB"
            ))
        }
    };
    match number.parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Ok((n * multiplier) as u64),
        _ => Err(format!(
            "\"{text}\" is not a size: write it like 500MiB, 2GiB or 1GB"
        )),
    }
}

fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests;
