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

/// What to write instead of a bad filter.
const FILTER_EXAMPLE: &str =
    "use a level such as \"info\", or target=level directives such as \"gpuwatch=debug,info\"";

/// Why a log filter is refused; each message says what to write instead.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// Nothing but blanks.
    #[error("is empty; {FILTER_EXAMPLE}")]
    Empty,
    /// A directive with a span filter but no `=level` after it.
    #[error("\"{directive}\" has no level; write it like \"{directive}=debug\" ({LEVELS})")]
    NoLevel {
        /// The directive as written.
        directive: String,
    },
    /// A lone word that is not a level (`EnvFilter` would read it as a target).
    #[error("\"{directive}\" is not a level ({LEVELS}); {FILTER_EXAMPLE}")]
    NotALevel {
        /// The word as written.
        directive: String,
    },
    /// A `target=level` directive whose level is unknown.
    #[error("\"{level}\" in \"{directive}\" is not a level ({LEVELS}); {FILTER_EXAMPLE}")]
    UnknownLevel {
        /// The level as written.
        level: String,
        /// The directive it is in.
        directive: String,
    },
    /// Levels known, but `EnvFilter` refuses the whole.
    #[error("\"{text}\" is not a log filter ({source}); {FILTER_EXAMPLE}")]
    Invalid {
        /// The filter as written.
        text: String,
        /// What `EnvFilter` said.
        source: tracing_subscriber::filter::ParseError,
    },
}

/// Checks a log filter: what `tracing_subscriber`'s `EnvFilter` accepts,
/// and every directive's level a known level. `EnvFilter` reads a lone
/// word that is not a level as a target ("warnn" enables the target
/// `warnn` and nothing else, so the agent logs nothing): here a lone word
/// must be a level, and a target needs its level written (`gpuwatch=trace`).
pub fn check_filter(text: &str) -> Result<(), FilterError> {
    if text.trim().is_empty() {
        return Err(FilterError::Empty);
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
                return Err(FilterError::NoLevel {
                    directive: directive.to_string(),
                })
            }
        };
        if level.is_empty() || LevelFilter::from_str(level).is_err() {
            return Err(if tail_start == 0 && !tail.contains('=') {
                FilterError::NotALevel {
                    directive: directive.to_string(),
                }
            } else {
                FilterError::UnknownLevel {
                    level: level.to_string(),
                    directive: directive.to_string(),
                }
            });
        }
    }
    tracing_subscriber::EnvFilter::builder()
        .parse(text)
        .map(|_| ())
        .map_err(|source| FilterError::Invalid {
            text: text.to_string(),
            source,
        })
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
                if let Err(error) = check_filter(level.get_ref()) {
                    self.problem("log.level", level.span(), &error.to_string());
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
            assert!(check_filter(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn unknown_levels_and_garbage_are_refused() {
        let error = check_filter("warnn")
            .expect_err("a misspelt level")
            .to_string();
        assert!(error.starts_with("\"warnn\" is not a level"), "{error}");
        let error = check_filter("gpuwatch=verbose,info")
            .expect_err("an unknown level")
            .to_string();
        assert!(
            error.starts_with("\"verbose\" in \"gpuwatch=verbose\" is not a level"),
            "{error}"
        );
        let error = check_filter("gpuwatch[span]")
            .expect_err("a span without a level")
            .to_string();
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
