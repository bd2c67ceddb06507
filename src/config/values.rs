//! Checking single values: durations, whole numbers and sizes against
//! their [`Limits`], text that ends up in a protocol line (no control
//! characters), listen addresses and sizes as written.

use std::net::SocketAddr;
use std::ops::Range;
use std::time::Duration;

use toml::Spanned;

use super::limits::{parse_size, show_duration, show_size, Limits};
use super::Validator;

impl Validator<'_> {
    /// A duration setting: `default` when it is not written; a value that
    /// is not a duration or lies outside `limits` is a problem (and
    /// `default` is returned, the caller fails anyway).
    pub(super) fn duration(
        &mut self,
        field: &str,
        value: Option<&Spanned<String>>,
        default: Duration,
        limits: &Limits<Duration>,
    ) -> Duration {
        let Some(value) = value else {
            return default;
        };
        let text = value.get_ref();
        match humantime::parse_duration(text.trim()) {
            Ok(d) if d < limits.min => {
                self.problem(
                    field,
                    value.span(),
                    &format!(
                        "\"{text}\" is too short; use at least {} (the range is {})",
                        show_duration(limits.min),
                        limits.describe()
                    ),
                );
                default
            }
            Ok(d) if d > limits.max => {
                self.problem(
                    field,
                    value.span(),
                    &format!(
                        "\"{text}\" is too long; use at most {} (the range is {})",
                        show_duration(limits.max),
                        limits.describe()
                    ),
                );
                default
            }
            Ok(d) => d,
            Err(error) => {
                self.problem(
                    field,
                    value.span(),
                    &format!(
                        "\"{text}\" is not a duration ({error}); write it like \"1s\", \"500ms\" or \"2m\" (the range is {})",
                        limits.describe()
                    ),
                );
                default
            }
        }
    }

    /// A whole-number setting: `default` when it is not written; a value
    /// outside `limits` is a problem.
    pub(super) fn count(
        &mut self,
        field: &str,
        value: Option<&Spanned<i64>>,
        default: u64,
        limits: &Limits<u64>,
    ) -> u64 {
        let Some(value) = value else {
            return default;
        };
        let n = *value.get_ref();
        match u64::try_from(n) {
            Ok(n) if (limits.min..=limits.max).contains(&n) => n,
            _ => {
                let side = if n < 0 || (n as u64) < limits.min {
                    format!("too small; use at least {}", limits.min)
                } else {
                    format!("too large; use at most {}", limits.max)
                };
                self.problem(
                    field,
                    value.span(),
                    &format!("{n} is {side} (the range is {})", limits.describe_count()),
                );
                default
            }
        }
    }

    /// A size setting such as "2GiB": `None` when it is not written or
    /// not valid (a problem then).
    pub(super) fn size(
        &mut self,
        field: &str,
        value: Option<&Spanned<String>>,
        limits: &Limits<u64>,
    ) -> Option<u64> {
        let value = value?;
        let text = value.get_ref();
        let message = match parse_size(text) {
            Ok(bytes) if (limits.min..=limits.max).contains(&bytes) => return Some(bytes),
            Ok(bytes) if bytes < limits.min => format!(
                "\"{text}\" is too small; use at least {} (the range is {})",
                show_size(limits.min),
                limits.describe_size()
            ),
            Ok(_) => format!(
                "\"{text}\" is too large; use at most {} (the range is {})",
                show_size(limits.max),
                limits.describe_size()
            ),
            Err(error) => error.to_string(),
        };
        self.problem(field, value.span(), &message);
        None
    }

    /// Whether `text` is free of control characters (CR, LF, NUL, tab,
    /// DEL...); if not, a problem that names the character and where it
    /// is, never the text (it may be a secret). Text that goes into a
    /// header, a URL or an SMTP line is checked so: a line break there
    /// makes every delivery fail, and it is retried forever.
    pub(super) fn no_control(
        &mut self,
        field: &str,
        span: Range<usize>,
        what: &str,
        text: &str,
    ) -> bool {
        match control_character(text) {
            None => true,
            Some((position, c)) => {
                self.problem(
                    field,
                    span,
                    &format!(
                        "the {what} contains a control character ({}) at character {}; remove it (a line break or tab there would break every request)",
                        name_control(c),
                        position + 1
                    ),
                );
                false
            }
        }
    }

    /// A listen address; the default when it is not written.
    pub(super) fn address(
        &mut self,
        field: &str,
        value: Option<&Spanned<String>>,
        default: &str,
    ) -> SocketAddr {
        let fallback = SocketAddr::from(([0, 0, 0, 0], 9842));
        let Some(value) = value else {
            return parse_listen(default).unwrap_or(fallback);
        };
        match parse_listen(value.get_ref()) {
            Ok(address) => address,
            Err(error) => {
                self.problem(field, value.span(), &error.to_string());
                fallback
            }
        }
    }
}

/// The first control character in `text` and its position (in
/// characters).
pub fn control_character(text: &str) -> Option<(usize, char)> {
    text.chars().enumerate().find(|(_, c)| c.is_control())
}

/// "U+000A, a line feed".
fn name_control(c: char) -> String {
    let name = match c {
        '\n' => ", a line feed",
        '\r' => ", a carriage return",
        '\t' => ", a tab",
        '\0' => ", a NUL",
        _ => "",
    };
    format!("U+{:04X}{name}", c as u32)
}

/// A listen address that does not read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{text}\" is not a listen address; write it like \"0.0.0.0:9842\", \"127.0.0.1:9842\", \"[::]:9842\" or \":9842\"")]
pub struct ListenError {
    /// The address as written.
    pub text: String,
    /// Why it does not parse.
    #[source]
    pub source: std::net::AddrParseError,
}

/// Parses a listen address: `HOST:PORT`, `[::1]:PORT`, or `:PORT` for all
/// interfaces.
pub fn parse_listen(text: &str) -> Result<SocketAddr, ListenError> {
    let full = if text.starts_with(':') {
        format!("0.0.0.0{text}")
    } else {
        text.to_string()
    };
    full.parse().map_err(|source| ListenError {
        text: text.to_string(),
        source,
    })
}
