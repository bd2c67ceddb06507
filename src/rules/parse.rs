//! User rules from TOML: `[[rules]]` entries, validated with every problem
//! reported at once, each with file, line and field path (`rules[2].for`).
//!
//! ```toml
//! [[rules]]                       # a new rule
//! name = "GpuHot"
//! condition = "temperature > 85"
//! for = "5m"
//! keep_firing_for = "1m"
//! clear = 80                      # hysteresis: resolves below 80 only
//! severity = "warning"            # info | warning | critical
//! labels = { team = "ml" }
//! annotations = { summary = "GPU {{ .gpu }} on {{ .host }} at {{ .value }} °C" }
//!
//! [[rules]]                       # tune a built-in rule: only what is given changes
//! name = "GpuMemoryPressure"
//! for = "15m"
//!
//! [[rules]]                       # switch a built-in rule off
//! name = "GpuSwThermalSlowdown"
//! enabled = false
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::builtin::builtin_rules;
use super::condition::{Condition, Direction};
use super::rule::{Rule, Severity};
use super::template::Template;
use crate::limits::{self, show_duration, Limits};
use crate::problem::Problem;

/// Labels the engine sets itself; a rule may not set them.
pub const RESERVED_LABELS: &[&str] = &["alertname", "severity", "host", "gpu", "uuid"];

/// A file holding only `[[rules]]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRules {
    /// The entries, each with where its table starts.
    #[serde(default)]
    pub rules: Vec<Spanned<RawRule>>,
}

/// One `[[rules]]` entry as written. Its doc comments are the
/// configuration reference's (docs/config-reference.md).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    /// The alert's name (required). A built-in rule's name changes that
    /// rule: only the keys given here change.
    #[schemars(with = "Option<String>")]
    pub name: Option<Spanned<String>>,
    /// `false` switches the rule off.
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
    /// When the rule fires, e.g. "temperature > 85",
    /// "clock_event(hw_thermal_slowdown)", "xid(48, 79)",
    /// "increase(ecc_uncorrected)", "absent(power)", "gpu_lost" or
    /// "stale(30s)" (required for a new rule; docs: alerts).
    #[schemars(with = "Option<String>")]
    pub condition: Option<Spanned<String>>,
    /// How long the condition must hold before the alert fires. A new
    /// rule: "0s".
    #[serde(rename = "for")]
    #[schemars(with = "Option<crate::limits::written::Duration>")]
    pub for_: Option<Spanned<String>>,
    /// Keep the alert firing this long after the condition turned false,
    /// so that a flapping value does not resolve and fire again. A new
    /// rule: "0s".
    #[schemars(with = "Option<crate::limits::written::Duration>")]
    pub keep_firing_for: Option<Spanned<String>>,
    /// Hysteresis for a comparison: once firing, the alert resolves only
    /// past this value (e.g. fires above 85, resolves below 80).
    #[schemars(with = "Option<f64>")]
    pub clear: Option<Spanned<f64>>,
    /// "info", "warning" or "critical". A new rule: "warning".
    #[schemars(with = "Option<String>")]
    pub severity: Option<Spanned<String>>,
    /// Extra labels on the alert, e.g. `{ team = "ml" }`.
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub labels: Option<Spanned<BTreeMap<String, String>>>,
    /// Annotation templates by name, e.g. `{ summary = "GPU {{ .gpu }} on
    /// {{ .host }} at {{ .value }} °C" }`.
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub annotations: Option<BTreeMap<String, Spanned<String>>>,
}

/// Parses a `[[rules]]`-only TOML document and returns the effective rule
/// set: the built-in pack with the file's changes, then the file's own rules.
pub fn parse_rules(source: &str, file: &str) -> Result<Vec<Rule>, Vec<Problem>> {
    let raw: RawRules = toml::from_str(source).map_err(|error| {
        // Without a place, the end of the file: where the parser gave up.
        let offset = error.span().map_or(source.len(), |s| s.start);
        let (line, column) = line_column(source, offset);
        vec![Problem {
            file: file.to_string(),
            line: Some(line),
            column: Some(column),
            field: entry_path(source, offset),
            message: error.message().trim().to_string(),
        }]
    })?;
    rules_from_raw(raw.rules, file, source)
}

/// Validates raw entries (e.g. the `rules` of a larger configuration file,
/// `source` being that file's text for line numbers) into the effective
/// rule set: built-ins with changes applied, then the user's rules.
pub fn rules_from_raw(
    raw: Vec<Spanned<RawRule>>,
    file: &str,
    source: &str,
) -> Result<Vec<Rule>, Vec<Problem>> {
    let mut v = Checker {
        file,
        source,
        problems: Vec::new(),
    };
    let mut rules = builtin_rules();
    let mut disabled = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (i, entry) in raw.into_iter().enumerate() {
        let at = |field: &str| format!("rules[{i}].{field}");
        let table = entry.span();
        let entry = entry.into_inner();
        let Some(name) = entry.name.as_ref() else {
            v.problem(&format!("rules[{i}]"), Some(table), "\"name\" is required");
            continue;
        };
        let name_text = name.get_ref().trim().to_string();
        if !is_identifier(&name_text) {
            v.problem(
                &at("name"),
                Some(name.span()),
                &format!("\"{name_text}\" is not a rule name; use letters, digits and _ (not first a digit), e.g. \"GpuHot\""),
            );
            continue;
        }
        if !seen.insert(name_text.clone()) {
            v.problem(
                &at("name"),
                Some(name.span()),
                &format!("\"{name_text}\" is defined twice; each rule name must be unique"),
            );
            continue;
        }
        let condition = entry.condition.as_ref().and_then(|text| {
            Condition::parse(text.get_ref())
                .map_err(|error| v.problem(&at("condition"), Some(text.span()), &error.to_string()))
                .ok()
        });
        if entry.enabled == Some(false) {
            disabled.insert(name_text);
            continue;
        }
        let base = rules.iter().position(|r| r.name == name_text);
        if entry.condition.is_none() && base.is_none() {
            v.problem(
                &at("condition"),
                Some(name.span()),
                &format!("\"{name_text}\" is not a built-in rule, so it needs a condition"),
            );
            continue;
        }
        let for_ = v.duration(&at("for"), entry.for_.as_ref(), &limits::RULE_FOR);
        let keep_firing_for = v.duration(
            &at("keep_firing_for"),
            entry.keep_firing_for.as_ref(),
            &limits::RULE_KEEP_FIRING_FOR,
        );
        let severity = entry.severity.as_ref().and_then(|s| {
            let parsed = Severity::parse(s.get_ref());
            if parsed.is_none() {
                v.problem(
                    &at("severity"),
                    Some(s.span()),
                    &format!(
                        "\"{}\" is not a severity; use \"info\", \"warning\" or \"critical\"",
                        s.get_ref()
                    ),
                );
            }
            parsed
        });
        let mut labels = BTreeMap::new();
        if let Some(raw_labels) = &entry.labels {
            for (key, value) in raw_labels.get_ref() {
                if !is_identifier(key) {
                    v.problem(
                        &format!("rules[{i}].labels.{key}"),
                        Some(raw_labels.span()),
                        &format!("\"{key}\" is not a label name; use letters, digits and _"),
                    );
                } else if RESERVED_LABELS.contains(&key.as_str()) {
                    v.problem(
                        &format!("rules[{i}].labels.{key}"),
                        Some(raw_labels.span()),
                        &format!("\"{key}\" is set by gpuwatch itself; choose another label name"),
                    );
                } else {
                    labels.insert(key.clone(), value.clone());
                }
            }
        }
        let mut annotations = BTreeMap::new();
        for (key, text) in entry.annotations.iter().flatten() {
            match Template::parse(text.get_ref()) {
                Ok(template) => {
                    annotations.insert(key.clone(), template);
                }
                Err(error) => v.problem(
                    &format!("rules[{i}].annotations.{key}"),
                    Some(text.span()),
                    &error.to_string(),
                ),
            }
        }
        if entry.condition.is_some() && condition.is_none() {
            continue; // already reported
        }
        let mut rule = match base {
            Some(index) => rules[index].clone(),
            None => Rule {
                name: name_text.clone(),
                condition: Condition::GpuLost, // replaced below: a condition is given
                for_: Duration::ZERO,
                keep_firing_for: Duration::ZERO,
                clear: None,
                severity: Severity::Warning,
                labels: BTreeMap::new(),
                annotations: BTreeMap::new(),
            },
        };
        if let Some(condition) = condition {
            if rule.condition != condition {
                rule.clear = None; // a built-in's clear belongs to its condition
            }
            rule.condition = condition;
        }
        if let Some(d) = for_ {
            rule.for_ = d;
        }
        if let Some(d) = keep_firing_for {
            rule.keep_firing_for = d;
        }
        if let Some(s) = severity {
            rule.severity = s;
        }
        rule.labels.extend(labels);
        rule.annotations.extend(annotations);
        if let Some(clear) = &entry.clear {
            let value = *clear.get_ref();
            match check_clear(&rule.condition, value) {
                Ok(()) => rule.clear = Some(value),
                Err(error) => v.problem(&at("clear"), Some(clear.span()), &error.to_string()),
            }
        }
        match base {
            Some(index) => rules[index] = rule,
            None => rules.push(rule),
        }
    }
    if !v.problems.is_empty() {
        v.problems.sort_by_key(|p| p.line);
        return Err(v.problems);
    }
    rules.retain(|r| !disabled.contains(&r.name));
    Ok(rules)
}

/// Why a `clear` threshold cannot be used with its rule's condition.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClearError {
    /// Not a finite number.
    #[error("{0} is not a number to compare with; write one such as 80")]
    NotANumber(f64),
    /// The condition is no comparison.
    #[error(
        "a clear threshold needs a comparison condition such as \"temperature > 85\", not \"{0}\""
    )]
    NotAComparison(Condition),
    /// An upward comparison with a clear value not below its threshold.
    #[error("must be below the threshold {threshold} for \"{condition}\" (the alert resolves once the value falls below it)")]
    NotBelow {
        /// The condition's threshold.
        threshold: f64,
        /// The condition.
        condition: Condition,
    },
    /// A downward comparison with a clear value not above its threshold.
    #[error("must be above the threshold {threshold} for \"{condition}\" (the alert resolves once the value rises above it)")]
    NotAbove {
        /// The condition's threshold.
        threshold: f64,
        /// The condition.
        condition: Condition,
    },
    /// `==` or `!=`: no direction to clear in.
    #[error("needs a >, >=, < or <= comparison, not \"{0}\"")]
    NoDirection(Condition),
}

/// A clear threshold must belong to a comparison with a direction and lie
/// on the far side of its threshold.
fn check_clear(condition: &Condition, clear: f64) -> Result<(), ClearError> {
    if !clear.is_finite() {
        return Err(ClearError::NotANumber(clear));
    }
    let Condition::Compare { op, threshold, .. } = condition else {
        return Err(ClearError::NotAComparison(condition.clone()));
    };
    let threshold = *threshold;
    match op.direction() {
        Direction::Up if clear < threshold => Ok(()),
        Direction::Down if clear > threshold => Ok(()),
        Direction::Up => Err(ClearError::NotBelow {
            threshold,
            condition: condition.clone(),
        }),
        Direction::Down => Err(ClearError::NotAbove {
            threshold,
            condition: condition.clone(),
        }),
        Direction::Neither => Err(ClearError::NoDirection(condition.clone())),
    }
}

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

struct Checker<'a> {
    file: &'a str,
    source: &'a str,
    problems: Vec<Problem>,
}

impl Checker<'_> {
    fn problem(&mut self, field: &str, span: Option<Range<usize>>, message: &str) {
        let (line, column) = span.map(|s| line_column(self.source, s.start)).unzip();
        self.problems.push(Problem {
            file: self.file.to_string(),
            line,
            column,
            field: field.to_string(),
            message: message.to_string(),
        });
    }

    /// A duration within `limits`.
    fn duration(
        &mut self,
        field: &str,
        value: Option<&Spanned<String>>,
        limits: &Limits<Duration>,
    ) -> Option<Duration> {
        let value = value?;
        let text = value.get_ref().trim();
        if text == "0" {
            return Some(Duration::ZERO);
        }
        match humantime::parse_duration(text) {
            Ok(d) if d > limits.max => {
                self.problem(
                    field,
                    Some(value.span()),
                    &format!(
                        "\"{text}\" is too long; use at most {} (the range is {})",
                        show_duration(limits.max),
                        limits.describe()
                    ),
                );
                None
            }
            Ok(d) => Some(d),
            Err(error) => {
                self.problem(
                    field,
                    Some(value.span()),
                    &format!(
                        "\"{text}\" is not a duration ({error}); write it like \"0s\", \"30s\" or \"5m\""
                    ),
                );
                None
            }
        }
    }
}

/// `rules[i]` for an offset inside the i-th `[[rules]]` table, as best as
/// the text tells.
fn entry_path(source: &str, offset: usize) -> String {
    let before = source.get(..offset).unwrap_or(source);
    let count = before
        .lines()
        .filter(|l| l.trim_start().starts_with("[[rules]]"))
        .count();
    match count {
        0 => String::new(),
        n => format!("rules[{}]", n - 1),
    }
}

fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}
