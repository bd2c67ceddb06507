//! One thing wrong with a file the agent reads (the TOML configuration, the
//! rules in it, the web configuration): file, line, column, field and what
//! to do. A leaf, so that every parser can report the same way without
//! importing the configuration.

use std::fmt;

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
        // Values are quoted in messages as written: a line break in one
        // would split the problem over two lines, so control characters are
        // shown escaped.
        if self.field.is_empty() {
            write!(f, ": {}", escape_controls(&self.message))
        } else {
            write!(
                f,
                ": {}: {}",
                escape_controls(&self.field),
                escape_controls(&self.message)
            )
        }
    }
}

/// `text` with control characters escaped (`\n`, `\u{1b}`).
fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return text.into();
    }
    text.chars()
        .map(|c| match c {
            c if c.is_control() => c.escape_default().to_string(),
            c => c.to_string(),
        })
        .collect::<String>()
        .into()
}
