//! Configuration: a TOML file whose every field is optional.
//!
//! The file is parsed into raw types (`raw`: `deny_unknown_fields`,
//! values that need checking kept with their position), then validated
//! into [`Config`], one module per section. Every problem is reported at
//! once, each with file, line, column and field; every numeric setting has
//! a range ([`limits`]), so what `validate` accepts, `run` can use.

mod capacity;
mod email;
mod exporter;
mod health;
mod history;
mod kubernetes;
mod log;
mod raw;
mod raw_receiver;
mod receivers;
pub mod reference;
pub mod remediation;
mod route;
mod sampler;
pub mod schema;
mod server;
mod values;
mod workloads;

use std::ops::Range;
use std::path::Path;

pub use crate::limits;
pub use crate::problem::Problem;
pub use exporter::ExporterConfig;
pub use health::HealthConfig;
pub use history::HistoryConfig;
pub use log::{check_filter, FilterError, LogConfig, LogFormat};
pub use remediation::{Mode as RemediationMode, RemediationConfig, SlurmSettings};
pub use sampler::SamplerConfig;
pub use server::ServerConfig;
pub use values::{control_character, parse_listen};
pub use workloads::WorkloadsConfig;

/// The default listen address. Port 9842: not used by dcgm-exporter (9400),
/// nvidia_gpu_exporter (9835), Prometheus (9090) or node_exporter (9100).
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9842";

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
    /// `[health]`: the kernel log and the PCI device tree.
    pub health: HealthConfig,
    /// `[remediation]`: acting on the health verdict (dry-run by default).
    pub remediation: RemediationConfig,
    /// `[workloads]`: where Slurm jobs are learned besides the processes.
    pub workloads: WorkloadsConfig,
    /// `[exporter]`: the detail sets /metrics exports.
    pub exporter: ExporterConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config::from_raw(raw::RawConfig::default(), "<defaults>", "")
            .unwrap_or_else(|_| unreachable!("the defaults are valid"))
    }
}

/// A place in a configuration file: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, not a regular file, too large).
    #[error("cannot load the configuration file (--config): {0}")]
    Read(#[from] crate::files::FileError),
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
    /// Loads `path` (at most 1 MiB), or the
    /// defaults when there is no file.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let Some(path) = path else {
            return Ok(Config::default());
        };
        let source = crate::files::read_bounded_string(path, crate::files::MAX_CONFIG_BYTES)?;
        Config::parse(&source, &path.display().to_string())
    }

    /// Parses and validates `source`; `file` names it in errors.
    pub fn parse(source: &str, file: &str) -> Result<Config, ConfigError> {
        let raw: raw::RawConfig = toml::from_str(source).map_err(|error| {
            // A TOML error without a place (none is known) points at the
            // end of the file, where the parser gave up.
            let offset = error.span().map_or(source.len(), |s| s.start);
            let (line, column) = line_column(source, offset);
            ConfigError::Invalid(vec![Problem {
                file: file.to_string(),
                line: Some(line),
                column: Some(column),
                field: key_path(source, offset),
                message: error.message().trim().to_string(),
            }])
        })?;
        Config::from_raw(raw, file, source).map_err(ConfigError::Invalid)
    }

    /// Validates every section; only assembles, each section's checks are
    /// in its own module.
    fn from_raw(raw: raw::RawConfig, file: &str, source: &str) -> Result<Config, Vec<Problem>> {
        let mut v = Validator {
            file,
            source,
            problems: Vec::new(),
        };
        let server = v.server(raw.server.unwrap_or_default());
        let sampler = v.sampler(raw.sampler.unwrap_or_default());
        let log = v.log(raw.log.unwrap_or_default());
        let history = v.history(raw.history.unwrap_or_default());
        let mut rules =
            match crate::rules::rules_from_raw(raw.rules.unwrap_or_default(), file, source) {
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
        let health = v.health(raw.health.unwrap_or_default());
        let remediation = v.remediation(raw.remediation.unwrap_or_default());
        let workloads = v.workloads(raw.workloads.unwrap_or_default());
        let exporter = v.exporter(raw.exporter.unwrap_or_default());
        crate::rules::builtin::set_xid_escalation(&mut rules, health.xid_escalate_after);
        // One node-level rule per profile: it fits on no GPU of the node.
        match crate::rules::capacity::rules(&capacity, capacity.alert_for) {
            Ok(profile_rules) => rules.extend(profile_rules),
            Err(error) => v.problems.push(Problem {
                file: file.to_string(),
                line: None,
                column: None,
                field: "profiles".to_string(),
                message: error.to_string(),
            }),
        }
        if !v.problems.is_empty() {
            v.problems.sort_by_key(|p| (p.line, p.column));
            return Err(v.problems);
        }
        Ok(Config {
            server,
            sampler,
            log,
            history,
            rules,
            receivers,
            capacity,
            kubernetes,
            health,
            remediation,
            workloads,
            exporter,
        })
    }
}

/// Collects the problems of one file; each section adds its checks as
/// methods (see the section modules).
struct Validator<'a> {
    file: &'a str,
    source: &'a str,
    problems: Vec<Problem>,
}

impl Validator<'_> {
    /// Records a problem with `field` at `span` (a byte range of the file):
    /// the value, the key, or the table header of an entry that lacks a
    /// field.
    fn problem(&mut self, field: &str, span: Range<usize>, message: &str) {
        let Position { line, column } = self.position(span);
        self.problems.push(Problem {
            file: self.file.to_string(),
            line: Some(line),
            column: Some(column),
            field: field.to_string(),
            message: message.to_string(),
        });
    }

    /// Line and column of the start of `span`.
    fn position(&self, span: Range<usize>) -> Position {
        let (line, column) = line_column(self.source, span.start);
        Position { line, column }
    }
}

fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The dotted key written at `offset`, as well as the text tells: the
/// last table header before it (`[[receivers]]` counted into
/// `receivers[1]`) and the key on its line, e.g. "server.max_connections".
/// For a TOML error, which names no field itself.
fn key_path(source: &str, offset: usize) -> String {
    let mut offset = offset.min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line_end = source[offset..]
        .find('\n')
        .map_or(source.len(), |i| offset + i);
    let this_line = source[line_start..line_end].trim();
    let mut table = String::new();
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for line in before[..line_start].lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("[[").and_then(|l| l.split("]]").next()) {
            let name = name.trim().to_string();
            let n = counts.entry(name.clone()).or_insert(0);
            table = format!("{name}[{n}]");
            *n += 1;
        } else if let Some(name) = line.strip_prefix('[').and_then(|l| l.split(']').next()) {
            table = name.trim().to_string();
        }
    }
    let key = match this_line.split_once('=') {
        Some((key, _)) if !this_line.starts_with('[') => key.trim().trim_matches('"'),
        _ => "",
    };
    match (table.is_empty(), key.is_empty()) {
        (_, true) => table,
        (true, false) => key.to_string(),
        (false, false) => format!("{table}.{key}"),
    }
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod range_tests;
#[cfg(test)]
mod reference_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod text_tests;
