//! The range every numeric setting accepts: one constant per setting, so
//! that the validator, the ranges table of docs/configuration.md (a
//! test compares them) and the messages all say the same; and sizes and
//! durations as the settings write them ([`parse_size`], [`show_size`],
//! [`show_duration`]). A leaf: the configuration and the rules (whose
//! conditions and `for:` take sizes and durations) both use it.
//!
//! Why ranges at all: a value the file format accepts may still break the
//! agent. `server.max_connections = 2305843009213693952` panicked the HTTP
//! task (tokio's semaphore holds at most `usize::MAX >> 3` permits), a
//! `history.queue` as large exited the process, and a duration of a
//! billion years overflows the first `Instant` it is added to. The bounds
//! below are wide enough for every sane setup and narrow enough that
//! nothing downstream overflows or allocates without bound.

use std::time::Duration;

/// An inclusive range of values one setting accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits<T> {
    /// The key as docs/configuration.md's ranges table writes it, e.g.
    /// `sampler.interval` or `receivers[].timeout`.
    pub key: &'static str,
    /// The smallest value accepted.
    pub min: T,
    /// The largest value accepted.
    pub max: T,
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

const MINUTE: u64 = 60;
const HOUR: u64 = 3600;
const DAY: u64 = 86_400;
const MIB: u64 = 1 << 20;
const TIB: u64 = 1 << 40;

const fn durations(key: &'static str, min: Duration, max: Duration) -> Limits<Duration> {
    Limits { key, min, max }
}

const fn numbers(key: &'static str, min: u64, max: u64) -> Limits<u64> {
    Limits { key, min, max }
}

/// `server.max_connections`: requests served at once. Each holds a task
/// and its buffers; 1024 is far more than Prometheus and a few browsers need.
pub const MAX_CONNECTIONS: Limits<u64> = numbers("server.max_connections", 1, 1024);
/// `server.request_timeout`.
pub const REQUEST_TIMEOUT: Limits<Duration> =
    durations("server.request_timeout", ms(100), secs(10 * MINUTE));
/// `server.idle_timeout`: idle connections hold file descriptors.
pub const IDLE_TIMEOUT: Limits<Duration> = durations("server.idle_timeout", ms(100), secs(HOUR));
/// `sampler.interval`: the fast tier.
pub const SAMPLER_INTERVAL: Limits<Duration> =
    durations("sampler.interval", ms(100), secs(10 * MINUTE));
/// `sampler.slow_interval`; also at least `sampler.interval`.
pub const SLOW_INTERVAL: Limits<Duration> = durations("sampler.slow_interval", ms(100), secs(HOUR));
/// `sampler.process_interval`; also at least `sampler.interval`.
pub const PROCESS_INTERVAL: Limits<Duration> =
    durations("sampler.process_interval", ms(100), secs(HOUR));
/// `sampler.timeout`.
pub const SAMPLER_TIMEOUT: Limits<Duration> =
    durations("sampler.timeout", ms(100), secs(10 * MINUTE));
/// `sampler.process_top_n`: per-process series per GPU (0: all summed
/// into `pid="other"`); bounds the series count.
pub const PROCESS_TOP_N: Limits<u64> = numbers("sampler.process_top_n", 0, 1000);
/// `history.batch_interval`.
pub const BATCH_INTERVAL: Limits<Duration> =
    durations("history.batch_interval", secs(1), secs(10 * MINUTE));
/// `history.raw_retention`.
pub const RAW_RETENTION: Limits<Duration> =
    durations("history.raw_retention", secs(MINUTE), secs(3650 * DAY));
/// `history.minute_retention`.
pub const MINUTE_RETENTION: Limits<Duration> =
    durations("history.minute_retention", secs(HOUR), secs(3650 * DAY));
/// `history.hour_retention`.
pub const HOUR_RETENTION: Limits<Duration> =
    durations("history.hour_retention", secs(DAY), secs(3650 * DAY));
/// `history.max_size`, in bytes.
pub const HISTORY_MAX_SIZE: Limits<u64> = numbers("history.max_size", MIB, 64 * TIB);
/// `history.queue`: snapshots waiting for the writer, each held in memory.
pub const HISTORY_QUEUE: Limits<u64> = numbers("history.queue", 1, 1000);
/// `capacity.memory_margin`, in bytes.
pub const MEMORY_MARGIN: Limits<u64> = numbers("capacity.memory_margin", 0, TIB);
/// `capacity.alert_for`.
pub const CAPACITY_ALERT_FOR: Limits<Duration> =
    durations("capacity.alert_for", Duration::ZERO, secs(30 * DAY));
/// `profiles[].memory`, in bytes.
pub const PROFILE_MEMORY: Limits<u64> = numbers("profiles[].memory", 1, TIB);
/// `kubernetes.refresh_interval`.
pub const KUBELET_REFRESH: Limits<Duration> =
    durations("kubernetes.refresh_interval", ms(100), secs(HOUR));
/// `kubernetes.timeout`.
pub const KUBELET_TIMEOUT: Limits<Duration> = durations("kubernetes.timeout", ms(10), secs(MINUTE));
/// `receivers[].timeout` (every type).
pub const RECEIVER_TIMEOUT: Limits<Duration> =
    durations("receivers[].timeout", ms(100), secs(10 * MINUTE));
/// `receivers[].retry_min`.
pub const RETRY_MIN: Limits<Duration> = durations("receivers[].retry_min", ms(10), secs(HOUR));
/// `receivers[].retry_max`; also at least `retry_min`.
pub const RETRY_MAX: Limits<Duration> = durations("receivers[].retry_max", ms(10), secs(DAY));
/// `receivers[].resend_interval` (Alertmanager).
pub const RESEND_INTERVAL: Limits<Duration> =
    durations("receivers[].resend_interval", secs(1), secs(HOUR));
/// `receivers[].repeat_interval` ("0", "off" or "never" turn repeats off).
pub const REPEAT_INTERVAL: Limits<Duration> =
    durations("receivers[].repeat_interval", secs(1), secs(30 * DAY));
/// `receivers[].group_wait` ("0" or "off": no grouping): grouping is for
/// alerts that fire together, not a digest.
pub const GROUP_WAIT: Limits<Duration> =
    durations("receivers[].group_wait", ms(100), secs(10 * MINUTE));
/// `rules[].for`.
pub const RULE_FOR: Limits<Duration> = durations("rules[].for", Duration::ZERO, secs(30 * DAY));
/// `rules[].keep_firing_for`.
pub const RULE_KEEP_FIRING_FOR: Limits<Duration> =
    durations("rules[].keep_firing_for", Duration::ZERO, secs(30 * DAY));
/// `stale(...)` in a rule's condition.
pub const STALE_AGE: Limits<Duration> = durations("stale(...)", ms(1), secs(30 * DAY));
/// `remediation.act_after`: how long a reason holds before the node is drained.
pub const REMEDIATION_ACT_AFTER: Limits<Duration> =
    durations("remediation.act_after", Duration::ZERO, secs(DAY));
/// `remediation.resume_after`: healthy for this long before gpuwatch resumes the node.
pub const REMEDIATION_RESUME_AFTER: Limits<Duration> =
    durations("remediation.resume_after", secs(1), secs(30 * DAY));
/// `remediation.flap_window`: a node failing again this soon after a resume stays drained.
pub const REMEDIATION_FLAP_WINDOW: Limits<Duration> =
    durations("remediation.flap_window", Duration::ZERO, secs(30 * DAY));
/// `remediation.retry_min`: the first delay after a failed scheduler call.
pub const REMEDIATION_RETRY_MIN: Limits<Duration> =
    durations("remediation.retry_min", ms(100), secs(HOUR));
/// `remediation.retry_max`: the longest delay between two tries.
pub const REMEDIATION_RETRY_MAX: Limits<Duration> =
    durations("remediation.retry_max", ms(100), secs(DAY));
/// `remediation.slurm.timeout`: one `scontrol` or `sinfo` call.
pub const SLURM_TIMEOUT: Limits<Duration> =
    durations("remediation.slurm.timeout", ms(100), secs(10 * MINUTE));
/// `health.xid_escalate_after`: GPU resets or node reboots before a
/// returning Xid escalates.
pub const XID_ESCALATE_AFTER: Limits<u64> = numbers("health.xid_escalate_after", 1, 1000);
/// `remediation.slurm.max_drained_nodes`: the circuit breaker.
pub const MAX_DRAINED_NODES: Limits<u64> =
    numbers("remediation.slurm.max_drained_nodes", 1, 1_000_000);

/// Every duration setting, for the configuration reference and the docs check.
pub const DURATIONS: &[Limits<Duration>] = &[
    REQUEST_TIMEOUT,
    IDLE_TIMEOUT,
    SAMPLER_INTERVAL,
    SLOW_INTERVAL,
    PROCESS_INTERVAL,
    SAMPLER_TIMEOUT,
    BATCH_INTERVAL,
    RAW_RETENTION,
    MINUTE_RETENTION,
    HOUR_RETENTION,
    CAPACITY_ALERT_FOR,
    KUBELET_REFRESH,
    KUBELET_TIMEOUT,
    RECEIVER_TIMEOUT,
    RETRY_MIN,
    RETRY_MAX,
    RESEND_INTERVAL,
    REPEAT_INTERVAL,
    GROUP_WAIT,
    RULE_FOR,
    RULE_KEEP_FIRING_FOR,
    STALE_AGE,
    REMEDIATION_ACT_AFTER,
    REMEDIATION_RESUME_AFTER,
    REMEDIATION_FLAP_WINDOW,
    REMEDIATION_RETRY_MIN,
    REMEDIATION_RETRY_MAX,
    SLURM_TIMEOUT,
];

/// Every whole-number setting, for the configuration reference and the docs check.
pub const COUNTS: &[Limits<u64>] = &[
    MAX_CONNECTIONS,
    PROCESS_TOP_N,
    HISTORY_QUEUE,
    MAX_DRAINED_NODES,
    XID_ESCALATE_AFTER,
];

/// Every size setting (bytes), for the configuration reference and the docs check.
pub const SIZES: &[Limits<u64>] = &[HISTORY_MAX_SIZE, MEMORY_MARGIN, PROFILE_MEMORY];

impl Limits<Duration> {
    /// "100ms to 10m", as docs/configuration.md and the messages write it.
    pub fn describe(&self) -> String {
        format!("{} to {}", show_duration(self.min), show_duration(self.max))
    }
}

impl Limits<u64> {
    /// "1 to 1024".
    pub fn describe_count(&self) -> String {
        format!("{} to {}", self.min, self.max)
    }

    /// "1MiB to 64TiB".
    pub fn describe_size(&self) -> String {
        format!("{} to {}", show_size(self.min), show_size(self.max))
    }
}

/// A duration in its largest whole unit, as `humantime` reads it back:
/// "100ms", "10m", "3650d", "0s".
pub fn show_duration(d: Duration) -> String {
    let millis = d.as_millis();
    if millis == 0 {
        return "0s".to_string();
    }
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if millis.is_multiple_of(size) {
            return format!("{}{unit}", millis / size);
        }
    }
    format!("{millis}ms")
}

/// A size in its largest whole binary unit: "1MiB", "64TiB", "0B".
pub fn show_size(bytes: u64) -> String {
    if bytes == 0 {
        return "0B".to_string();
    }
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes.trailing_zeros() >= shift {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// A size that does not read as one; the message says how to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{0}\" is not a size: write it like 500MiB, 2GiB or 1GB")]
pub struct SizeError(pub String);

/// Parses a size such as "2GiB", "500MB" or "1048576" into bytes (sizes
/// past `u64::MAX` bytes come out as `u64::MAX`).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
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
        _ => return Err(SizeError(text.to_string())),
    };
    match number.parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Ok((n * multiplier) as u64),
        _ => Err(SizeError(text.to_string())),
    }
}

/// How a string setting is written, for the configuration's schema
/// (`config::schema`): marker types that have a schema and no values, named
/// in the raw types' `#[schemars(with = "…")]`. Here, not in `config`, so
/// that the rules' raw type uses them without importing the configuration.
pub mod written {
    use std::borrow::Cow;

    use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};

    /// The schema keyword naming a string's format ("duration", "size",
    /// "path"); validators ignore `x-` keywords.
    pub const KIND: &str = "x-gpuwatch-kind";

    /// A marker for a string of one format: only its schema is used.
    macro_rules! string_kind {
        ($(#[$doc:meta])* $name:ident, $kind:literal) => {
            $(#[$doc])*
            pub enum $name {}

            impl JsonSchema for $name {
                fn inline_schema() -> bool {
                    true
                }

                fn schema_name() -> Cow<'static, str> {
                    $kind.into()
                }

                fn json_schema(_: &mut SchemaGenerator) -> Schema {
                    json_schema!({ "type": "string", KIND: $kind })
                }
            }
        };
    }

    string_kind!(
        /// A duration such as "500ms", "30s", "5m", "48h" or "30d".
        Duration,
        "duration"
    );
    string_kind!(
        /// A size such as "512MiB", "2GiB" or "1.8GB" (a bare number: bytes).
        Size,
        "size"
    );
    string_kind!(
        /// A file or directory path.
        Path,
        "path"
    );
}
