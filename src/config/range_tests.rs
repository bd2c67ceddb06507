//! Every numeric setting has a range: values that broke `run` are refused
//! with file, line, column and field; the ranges are documented.
#![allow(
    clippy::disallowed_types,
    reason = "times the parser for real (no async code)"
)]

use std::time::Duration;

use super::limits::{self, Limits};
use super::{Config, ConfigError};

/// The problems of `source`, as printed.
fn problems(source: &str) -> Vec<String> {
    match Config::parse(source, "c.toml") {
        Err(ConfigError::Invalid(problems)) => problems.iter().map(ToString::to_string).collect(),
        Err(other) => panic!("expected problems, got {other}"),
        Ok(_) => panic!("expected problems, {source:?} was accepted"),
    }
}

fn one_problem(source: &str) -> String {
    let problems = problems(source);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    problems.into_iter().next().unwrap_or_default()
}

#[test]
fn the_values_that_crashed_run_are_refused() {
    // tokio's Semaphore panics above usize::MAX >> 3 permits: the HTTP task
    // died and the agent stayed up without a server.
    let got = one_problem("[server]\nmax_connections = 2305843009213693952\n");
    assert!(
        got.starts_with("c.toml:2:19: server.max_connections: 2305843009213693952 is too large; use at most 1024"),
        "{got}"
    );
    // The same in the history queue's channel exited the process.
    let got = one_problem("[history]\nqueue = 2305843009213693952\n");
    assert!(
        got.starts_with(
            "c.toml:2:9: history.queue: 2305843009213693952 is too large; use at most 1000"
        ),
        "{got}"
    );
    let got = one_problem("[history]\nqueue = -1\n");
    assert!(
        got.starts_with("c.toml:2:9: history.queue: -1 is too small; use at least 1"),
        "{got}"
    );
    let got = one_problem("[server]\nmax_connections = 0\n");
    assert!(
        got.contains("server.max_connections: 0 is too small"),
        "{got}"
    );
}

#[test]
fn the_largest_accepted_values_are_usable() {
    let source = format!(
        "[server]\nmax_connections = {}\nrequest_timeout = \"10m\"\n[sampler]\ninterval = \"10m\"\nslow_interval = \"1h\"\nprocess_interval = \"1h\"\ntimeout = \"10m\"\nprocess_top_n = 1000\n[history]\nqueue = {}\nbatch_interval = \"10m\"\nraw_retention = \"3650d\"\nminute_retention = \"3650d\"\nhour_retention = \"3650d\"\nmax_size = \"64TiB\"\n[capacity]\nmemory_margin = \"1TiB\"\nalert_for = \"30d\"\n[kubernetes]\nrefresh_interval = \"1h\"\ntimeout = \"1m\"\n",
        limits::MAX_CONNECTIONS.max,
        limits::HISTORY_QUEUE.max
    );
    let config = Config::parse(&source, "max.toml").expect("the maxima are valid");
    // What run builds from them does not panic.
    let _slots = tokio::sync::Semaphore::new(config.server.max_connections);
    let _queue = tokio::sync::mpsc::channel::<()>(config.history.queue);
    let now = std::time::Instant::now();
    for d in [
        config.server.request_timeout,
        config.sampler.stale_after(),
        config.sampler.slow_interval,
        config.history.retention.hour,
        config.capacity.alert_for,
    ] {
        assert!(now.checked_add(d).is_some(), "{d:?}");
        assert!(i64::try_from(d.as_millis()).is_ok(), "{d:?}");
    }
}

#[test]
fn durations_sizes_and_counts_outside_their_range_name_the_field() {
    for (source, expect) in [
        (
            "[sampler]\ninterval = \"50ms\"\n",
            "c.toml:2:12: sampler.interval: \"50ms\" is too short; use at least 100ms (the range is 100ms to 10m)",
        ),
        (
            "[sampler]\ntimeout = \"1000000000y\"\n",
            "c.toml:2:11: sampler.timeout: \"1000000000y\" is too long; use at most 10m",
        ),
        (
            "[sampler]\ntimeout = \"99999999999999999999s\"\n",
            "c.toml:2:11: sampler.timeout: \"99999999999999999999s\" is not a duration",
        ),
        (
            "[sampler]\nprocess_top_n = 100000\n",
            "c.toml:2:17: sampler.process_top_n: 100000 is too large; use at most 1000",
        ),
        (
            "[history]\nhour_retention = \"100y\"\n",
            "c.toml:2:18: history.hour_retention: \"100y\" is too long; use at most 3650d",
        ),
        (
            "[history]\nmax_size = \"1PiB\"\n",
            "c.toml:2:12: history.max_size: \"1PiB\" is not a size",
        ),
        (
            "[history]\nmax_size = \"100000TB\"\n",
            "c.toml:2:12: history.max_size: \"100000TB\" is too large; use at most 64TiB",
        ),
        (
            "[capacity]\nmemory_margin = \"2TiB\"\n",
            "c.toml:2:17: capacity.memory_margin: \"2TiB\" is too large; use at most 1TiB",
        ),
        (
            "[[profiles]]\nname = \"huge\"\nmemory = \"99999999999999999999999TB\"\n",
            "c.toml:3:10: profiles[0].memory: \"99999999999999999999999TB\" is too large; use at most 1TiB",
        ),
        (
            "[kubernetes]\ntimeout = \"1h\"\n",
            "c.toml:2:11: kubernetes.timeout: \"1h\" is too long; use at most 1m",
        ),
        (
            "[[receivers]]\nname = \"h\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:1/\"\nretry_max = \"365d\"\n",
            "c.toml:5:13: receivers[0].retry_max: \"365d\" is too long; use at most 1d",
        ),
        (
            "[[receivers]]\nname = \"h\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:1/\"\nrepeat_interval = \"1000d\"\n",
            "c.toml:5:19: receivers[0].repeat_interval: \"1000d\" is too long; use at most 30d",
        ),
        (
            "[[receivers]]\nname = \"m\"\ntype = \"email\"\nsmarthost = \"smtp.example.com:587\"\nfrom = \"a@example.com\"\nto = [\"b@example.com\"]\ntimeout = \"1d\"\n",
            "c.toml:7:11: receivers[0].timeout: \"1d\" is too long; use at most 10m",
        ),
        (
            "[[rules]]\nname = \"GpuLost\"\nfor = \"100y\"\n",
            "c.toml:3:7: rules[0].for: \"100y\" is too long; use at most 30d",
        ),
        (
            "[[rules]]\nname = \"Hot\"\ncondition = \"temperature > 85\"\nclear = nan\n",
            "c.toml:4:9: rules[0].clear: NaN is not a number to compare with",
        ),
        (
            "[[rules]]\nname = \"Hot\"\ncondition = \"temperature > 85\"\nclear = -inf\n",
            "c.toml:4:9: rules[0].clear: -inf is not a number to compare with",
        ),
        (
            "[[rules]]\nname = \"Stale\"\ncondition = \"stale(400d)\"\n",
            "c.toml:3:13: rules[0].condition: \"400d\" is not a positive duration (the range is 1ms to 30d)",
        ),
    ] {
        let got = one_problem(source);
        assert!(got.starts_with(expect), "{got}\n  should start with\n{expect}");
    }
}

#[test]
fn the_docs_document_every_range() {
    let readme = include_str!("../../docs/configuration.md");
    let mut rows: Vec<(&str, String)> = Vec::new();
    rows.extend(limits::DURATIONS.iter().map(|l| (l.key, l.describe())));
    rows.extend(limits::COUNTS.iter().map(|l| (l.key, l.describe_count())));
    rows.extend(limits::SIZES.iter().map(|l| (l.key, l.describe_size())));
    for (key, range) in rows {
        let row = format!("| `{key}` | {range} |");
        assert!(
            readme.lines().any(|line| line.starts_with(&row)),
            "the ranges table of docs/configuration.md lacks the row\n{row}"
        );
    }
}

#[test]
fn ranges_are_shown_as_they_are_written() {
    let d = |key, min, max| Limits { key, min, max };
    assert_eq!(
        d("x", Duration::from_millis(100), Duration::from_secs(600)).describe(),
        "100ms to 10m"
    );
    assert_eq!(
        d("x", Duration::ZERO, Duration::from_secs(3650 * 86_400)).describe(),
        "0s to 3650d"
    );
    assert_eq!(limits::HISTORY_MAX_SIZE.describe_size(), "1MiB to 64TiB");
    assert_eq!(limits::PROFILE_MEMORY.describe_size(), "1B to 1TiB");
    // Every bound reads back as itself.
    for l in limits::DURATIONS {
        for bound in [l.min, l.max] {
            let shown = limits::show_duration(bound);
            assert_eq!(
                humantime::parse_duration(&shown).ok(),
                Some(bound),
                "{shown}"
            );
        }
    }
    for l in limits::SIZES {
        for bound in [l.min, l.max] {
            let shown = limits::show_size(bound);
            assert_eq!(crate::limits::parse_size(&shown), Ok(bound), "{shown}");
        }
    }
}
