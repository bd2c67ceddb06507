//! Scenario errors that point at the offending file, line, column and field.

/// Why a scenario could not be loaded; `Display` reads like
/// `scenarios/x.toml:12:5: fault[2].gpu: GPU 9 does not exist (the scenario has 8 GPUs)`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{origin}:{line}:{column}: {}{message}", path_prefix(.path))]
pub struct ScenarioError {
    /// Where the scenario came from (a file path or `builtin:NAME`).
    pub origin: String,
    /// 1-based line of the offending text (1 when unknown).
    pub line: usize,
    /// 1-based column of the offending text (1 when unknown).
    pub column: usize,
    /// Dotted field path such as `gpu[0].metrics.power_w` (may be empty).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

fn path_prefix(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    }
}

/// Maps byte offsets in a scenario source to line/column positions.
pub(crate) struct Locator<'a> {
    source: &'a str,
    origin: &'a str,
}

impl<'a> Locator<'a> {
    /// A locator for `source`, which came from `origin`.
    pub(crate) fn new(source: &'a str, origin: &'a str) -> Self {
        Locator { source, origin }
    }

    /// Builds an error located at byte `offset` (None: line 1).
    pub(crate) fn error(
        &self,
        offset: Option<usize>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> ScenarioError {
        let (line, column) = offset.map_or((1, 1), |o| self.line_col(o));
        ScenarioError {
            origin: self.origin.to_string(),
            line,
            column,
            path: path.into(),
            message: message.into(),
        }
    }

    fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.source.len());
        let before = self.source.get(..offset).unwrap_or(self.source);
        let line = before.matches('\n').count() + 1;
        let column = before.rfind('\n').map_or(before.chars().count(), |nl| {
            before[nl + 1..].chars().count()
        }) + 1;
        (line, column)
    }
}
