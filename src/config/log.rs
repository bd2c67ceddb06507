//! `[log]`: the level filter and the line format.

use std::str::FromStr;

use tracing_subscriber::filter::LevelFilter;

use super::raw::RawLog;
use super::Validator;

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

/// The levels a filter directive may name.
const LEVELS: &str = "off, error, warn, info, debug or trace";

/// Checks a log filter: what `tracing_subscriber`'s `EnvFilter` accepts,
/// and every directive's level a known level. `EnvFilter` reads a lone
/// word that is not a level as a target ("warnn" enables the target
/// `warnn` and nothing else, so the agent logs nothing): here a lone word
/// must be a level, and a target needs its level written (`gpuwatch=trace`).
pub fn check_filter(text: &str) -> Result<(), String> {
    let example =
        "use a level such as \"info\", or target=level directives such as \"gpuwatch=debug,info\"";
    if text.trim().is_empty() {
        return Err(format!("is empty; {example}"));
    }
    for directive in text.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        // After a span filter ("target[span{field=value}]=level") only the
        // part after the last ']' holds the level.
        let tail_start = directive.rfind(']').map_or(0, |i| i + 1);
        let tail = &directive[tail_start..];
        let level = match tail.rsplit_once('=') {
            Some((_, level)) => level.trim(),
            None if tail_start == 0 => directive,
            None => {
                return Err(format!(
                    "\"{directive}\" has no level; write it like \"{directive}=debug\" ({LEVELS})"
                ))
            }
        };
        if level.is_empty() || LevelFilter::from_str(level).is_err() {
            let what = if tail_start == 0 && !tail.contains('=') {
                format!("\"{directive}\" is not a level ({LEVELS})")
            } else {
                format!("\"{level}\" in \"{directive}\" is not a level ({LEVELS})")
            };
            return Err(format!("{what}; {example}"));
        }
    }
    tracing_subscriber::EnvFilter::builder()
        .parse(text)
        .map(|_| ())
        .map_err(|error| format!("\"{text}\" is not a log filter ({error}); {example}"))
}

impl Validator<'_> {
    /// Checks `[log]`.
    pub(super) fn log(&mut self, log: RawLog) -> LogConfig {
        let format = match log
            .format
            .as_ref()
            .map(|f| (f.get_ref().as_str(), f.span()))
        {
            None | Some(("text", _)) => LogFormat::Text,
            Some(("json", _)) => LogFormat::Json,
            Some((other, span)) => {
                self.problem(
                    "log.format",
                    span,
                    &format!("\"{other}\" is not a log format; use \"text\" or \"json\""),
                );
                LogFormat::Text
            }
        };
        let level = match &log.level {
            Some(level) => {
                if let Err(message) = check_filter(level.get_ref()) {
                    self.problem("log.level", level.span(), &message);
                }
                level.get_ref().clone()
            }
            None => "info".to_string(),
        };
        LogConfig { level, format }
    }
}

#[cfg(test)]
mod tests {
    use super::check_filter;

    #[test]
    fn levels_and_target_directives_pass() {
        for good in [
            "info",
            "WARN",
            "off",
            "gpuwatch=debug,info",
            "gpuwatch::http=trace",
            "info,",
            "gpuwatch[request]=debug",
            "3",
        ] {
            assert_eq!(check_filter(good), Ok(()), "{good}");
        }
    }

    #[test]
    fn unknown_levels_and_garbage_are_refused() {
        let error = check_filter("warnn").expect_err("a misspelt level");
        assert!(error.starts_with("\"warnn\" is not a level"), "{error}");
        let error = check_filter("gpuwatch=verbose,info").expect_err("an unknown level");
        assert!(
            error.starts_with("\"verbose\" in \"gpuwatch=verbose\" is not a level"),
            "{error}"
        );
        let error = check_filter("gpuwatch[span]").expect_err("a span without a level");
        assert!(error.contains("has no level"), "{error}");
        for bad in [
            "",
            " ",
            "gpuwatch=",
            "=info",
            "{{{{",
            "info,debug=x",
            "¯\\_(ツ)_/¯",
        ] {
            assert!(check_filter(bad).is_err(), "{bad:?} accepted");
        }
    }
}
