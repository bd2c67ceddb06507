//! A range-checked field is either accepted within its range (and the
//! configuration is usable) or refused with its name, whatever number is
//! written.

use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config as Cases;

use super::assert_usable;
use crate::config::limits::{self, Limits};
use crate::config::{Config, ConfigError};

const SERVER: &str = "[server]\n";
const SAMPLER: &str = "[sampler]\n";
const HISTORY: &str = "[history]\n";
const CAPACITY: &str = "[capacity]\n";
const KUBERNETES: &str = "[kubernetes]\n";
const HOOK: &str =
    "[[receivers]]\nname = \"h\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:1/\"\n";
const RULE: &str = "[[rules]]\nname = \"GpuLost\"\n";
const PROFILE: &str = "[[profiles]]\nname = \"p\"\n";

/// A range-checked field: the text before it (its section or entry), its
/// key, and what the validated configuration made of it (in the unit of
/// its limits: milliseconds, bytes or a count).
struct Field {
    prefix: &'static str,
    key: &'static str,
    get: fn(&Config) -> u128,
}

impl Field {
    /// The field's name in problems: "server.queue", "receivers[0].timeout".
    fn path(&self) -> String {
        let header = self.prefix.lines().next().unwrap_or_default();
        match header.strip_prefix("[[").and_then(|h| h.strip_suffix("]]")) {
            Some(entry) => format!("{entry}[0].{}", self.key),
            None => format!("{}.{}", header.trim_matches(['[', ']']), self.key),
        }
    }
}

fn f(prefix: &'static str, key: &'static str, get: fn(&Config) -> u128) -> Field {
    Field { prefix, key, get }
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

fn hook(config: &Config) -> &crate::notify::WebhookConfig {
    match &config.receivers[0].kind {
        crate::notify::ReceiverKind::Webhook(h) => h,
        other => panic!("a webhook: {other:?}"),
    }
}

fn duration_fields() -> Vec<(Field, Limits<Duration>)> {
    use limits::*;
    vec![
        (
            f(SERVER, "request_timeout", |c| ms(c.server.request_timeout)),
            REQUEST_TIMEOUT,
        ),
        (
            f(SAMPLER, "interval", |c| ms(c.sampler.interval)),
            SAMPLER_INTERVAL,
        ),
        (
            f(SAMPLER, "slow_interval", |c| ms(c.sampler.slow_interval)),
            SLOW_INTERVAL,
        ),
        (
            f(SAMPLER, "timeout", |c| ms(c.sampler.timeout)),
            SAMPLER_TIMEOUT,
        ),
        (
            f(HISTORY, "batch_interval", |c| ms(c.history.batch_interval)),
            BATCH_INTERVAL,
        ),
        (
            f(HISTORY, "hour_retention", |c| ms(c.history.retention.hour)),
            HOUR_RETENTION,
        ),
        (
            f(CAPACITY, "alert_for", |c| ms(c.capacity.alert_for)),
            CAPACITY_ALERT_FOR,
        ),
        (
            f(KUBERNETES, "timeout", |c| {
                c.kubernetes.as_ref().map_or(0, |k| ms(k.timeout))
            }),
            KUBELET_TIMEOUT,
        ),
        (
            f(HOOK, "timeout", |c| ms(hook(c).timeout)),
            RECEIVER_TIMEOUT,
        ),
        // The longest delay is retry_max itself.
        (
            f(HOOK, "retry_max", |c| {
                ms(c.receivers[0].backoff.delay(40, 0.5))
            }),
            RETRY_MAX,
        ),
        (
            f(HOOK, "repeat_interval", |c| {
                c.receivers[0].route.repeat_interval.map_or(0, ms)
            }),
            REPEAT_INTERVAL,
        ),
        (
            f(RULE, "for", |c| {
                c.rules
                    .iter()
                    .find(|r| r.name == "GpuLost")
                    .map_or(0, |r| ms(r.for_))
            }),
            RULE_FOR,
        ),
    ]
}

fn count_fields() -> Vec<(Field, Limits<u64>)> {
    vec![
        (
            f(SERVER, "max_connections", |c| {
                c.server.max_connections as u128
            }),
            limits::MAX_CONNECTIONS,
        ),
        (
            f(SAMPLER, "process_top_n", |c| {
                c.sampler.process_top_n as u128
            }),
            limits::PROCESS_TOP_N,
        ),
        (
            f(HISTORY, "queue", |c| c.history.queue as u128),
            limits::HISTORY_QUEUE,
        ),
    ]
}

fn size_fields() -> Vec<(Field, Limits<u64>)> {
    vec![
        (
            f(HISTORY, "max_size", |c| {
                u128::from(c.history.max_size.unwrap_or(0))
            }),
            limits::HISTORY_MAX_SIZE,
        ),
        (
            f(CAPACITY, "memory_margin", |c| {
                u128::from(c.capacity.memory_margin_bytes)
            }),
            limits::MEMORY_MARGIN,
        ),
        (
            f(PROFILE, "memory", |c| {
                u128::from(c.capacity.profiles[0].memory_bytes)
            }),
            limits::PROFILE_MEMORY,
        ),
    ]
}

/// Accepted within `min..=max` (and usable), or refused naming the field.
fn in_range_or_refused(
    field: &Field,
    written: &str,
    min: u128,
    max: u128,
) -> Result<(), TestCaseError> {
    let source = format!("{}{} = {written}\n", field.prefix, field.key);
    let path = field.path();
    match Config::parse(&source, "n.toml") {
        Ok(config) => {
            let got = (field.get)(&config);
            prop_assert!(
                (min..=max).contains(&got),
                "{} = {} accepted as {} outside {}..={}",
                path,
                written,
                got,
                min,
                max
            );
            assert_usable(&config);
        }
        Err(ConfigError::Invalid(problems)) => {
            for p in &problems {
                prop_assert_eq!(&p.field, &path, "{}", p);
                prop_assert!(p.line.is_some() && p.column.is_some(), "{}", p);
            }
        }
        Err(other) => return Err(TestCaseError::fail(other.to_string())),
    }
    Ok(())
}

/// Numbers that land near the bounds and the extremes as often as anywhere.
fn magnitude() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        0u64..2000,
        (0u32..64).prop_map(|shift| 1u64 << shift),
        (0u32..64).prop_map(|shift| (1u64 << shift) - 1),
    ]
}

const DURATION_UNITS: &[&str] = &["ns", "us", "ms", "s", "m", "h", "d", "w", "M", "y", ""];
const SIZE_UNITS: &[&str] = &[
    "", "B", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB", "k", "PiB",
];

proptest! {
    #![proptest_config(Cases { cases: 256, ..Cases::default() })]

    #[test]
    fn durations_are_in_range_or_refused_by_name(
        which in any::<Index>(),
        n in magnitude(),
        unit in proptest::sample::select(DURATION_UNITS),
    ) {
        let fields = duration_fields();
        let (field, limits) = &fields[which.index(fields.len())];
        let (min, max) = (limits.min.as_millis(), limits.max.as_millis());
        in_range_or_refused(field, &format!("\"{n}{unit}\""), min, max)?;
    }

    #[test]
    fn counts_are_in_range_or_refused_by_name(
        which in any::<Index>(),
        n in prop_oneof![any::<i64>(), -2i64..2000, magnitude().prop_map(|m| m as i64)],
    ) {
        let fields = count_fields();
        let (field, limits) = &fields[which.index(fields.len())];
        in_range_or_refused(field, &n.to_string(), limits.min.into(), limits.max.into())?;
    }

    #[test]
    fn sizes_are_in_range_or_refused_by_name(
        which in any::<Index>(),
        n in magnitude(),
        fraction in proptest::option::of(0u32..1000),
        unit in proptest::sample::select(SIZE_UNITS),
    ) {
        let fields = size_fields();
        let (field, limits) = &fields[which.index(fields.len())];
        let number = match fraction {
            Some(f) => format!("{n}.{f}"),
            None => n.to_string(),
        };
        let (min, max) = (limits.min.into(), limits.max.into());
        in_range_or_refused(field, &format!("\"{number}{unit}\""), min, max)?;
    }
}
