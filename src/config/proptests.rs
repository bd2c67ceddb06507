//! Property tests: whatever the file holds, parsing and validation never
//! panic, every problem has a line and column and prints on one line, and
//! a configuration that is accepted can be used (what `run` builds from
//! it does not panic or overflow); a range-checked field is either accepted
//! within its range or refused with its name.
#![allow(
    clippy::disallowed_types,
    reason = "times the parser for real (no async code)"
)]

use proptest::prelude::*;
use proptest::test_runner::Config as Cases;

mod fields;
mod strategies;

use super::{Config, ConfigError};

/// Fails unless what `run` builds from `config` can be built: the HTTP
/// server's semaphore, the history queue, deadlines from every duration,
/// and milliseconds as the stores keep them.
pub(super) fn assert_usable(config: &Config) {
    let _slots = tokio::sync::Semaphore::new(config.server.max_connections);
    let _queue = tokio::sync::mpsc::channel::<()>(config.history.queue);
    let mut durations = vec![
        config.server.request_timeout,
        config.sampler.interval,
        config.sampler.slow_interval,
        config.sampler.process_interval,
        config.sampler.stale_after(),
        config.history.batch_interval,
        config.history.retention.raw,
        config.history.retention.minute,
        config.history.retention.hour,
        config.capacity.alert_for,
    ];
    if let Some(k) = &config.kubernetes {
        durations.extend([k.refresh_interval, k.timeout]);
    }
    for rule in &config.rules {
        durations.extend([rule.for_, rule.keep_firing_for]);
    }
    for receiver in &config.receivers {
        durations.extend(receiver.route.repeat_interval);
        durations.push(receiver.route.group_wait);
        durations.push(receiver.backoff.delay(u32::MAX, 1.0));
    }
    let now = std::time::Instant::now();
    for d in durations {
        assert!(now.checked_add(d).is_some(), "{d:?} overflows a deadline");
        assert!(i64::try_from(d.as_millis()).is_ok(), "{d:?} in ms");
    }
}

/// Checks the outcome of parsing `source`: no panic (the caller got
/// here), every problem placed and on one line; an accepted config usable.
fn check(source: &str) -> Result<(), TestCaseError> {
    match Config::parse(source, "p.toml") {
        Ok(config) => assert_usable(&config),
        Err(ConfigError::Invalid(problems)) => {
            prop_assert!(!problems.is_empty());
            let lines = source.split('\n').count();
            for p in &problems {
                let (Some(line), Some(_)) = (p.line, p.column) else {
                    return Err(TestCaseError::fail(format!("no line:column: {p:?}")));
                };
                prop_assert!(line <= lines, "line {} of {}: {:?}", line, lines, p);
                let shown = p.to_string();
                prop_assert!(shown.starts_with(&format!("p.toml:{line}:")), "{}", shown);
                prop_assert!(!shown.contains(['\n', '\r']), "{:?}", shown);
            }
        }
        Err(other) => return Err(TestCaseError::fail(format!("not a parse error: {other}"))),
    }
    Ok(())
}

proptest! {
    #![proptest_config(Cases { cases: 1000, ..Cases::default() })]

    #[test]
    fn toml_ish_files_never_panic_and_every_problem_is_placed(source in strategies::document()) {
        check(&source)?;
    }

    #[test]
    fn well_formed_files_never_panic_and_every_problem_is_placed(
        source in strategies::structured(),
    ) {
        check(&source)?;
    }

    #[test]
    fn any_text_never_panics(source in any::<String>()) {
        check(&source)?;
    }
}
