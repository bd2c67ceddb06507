//! Label matchers, as silences and receiver routes use them: `name=value`,
//! `name!=value`, `name=~regex`, `name!~regex` (Alertmanager's four kinds;
//! regexes are anchored at both ends, as in Prometheus). A label the alert
//! does not have counts as the empty string.

use std::collections::BTreeMap;
use std::fmt;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// How a matcher compares a label's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MatchOp {
    /// `=`: equal.
    Equal,
    /// `!=`: not equal.
    NotEqual,
    /// `=~`: the whole value matches the regex.
    Regex,
    /// `!~`: the whole value does not match the regex.
    NotRegex,
}

impl MatchOp {
    /// The operator as written: `=`, `!=`, `=~` or `!~`.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchOp::Equal => "=",
            MatchOp::NotEqual => "!=",
            MatchOp::Regex => "=~",
            MatchOp::NotRegex => "!~",
        }
    }

    /// Whether the operator is a regex one.
    pub fn is_regex(self) -> bool {
        matches!(self, MatchOp::Regex | MatchOp::NotRegex)
    }

    /// Whether the operator is a positive one (`=`, `=~`).
    pub fn is_equal(self) -> bool {
        matches!(self, MatchOp::Equal | MatchOp::Regex)
    }
}

/// One label matcher. Compiled once; compared by what was written.
#[derive(Debug, Clone)]
pub struct Matcher {
    /// The label's name.
    pub name: String,
    /// How the value is compared.
    pub op: MatchOp,
    /// The value or the regex, as written.
    pub value: String,
    regex: Option<Regex>,
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.op == other.op && self.value == other.value
    }
}

/// Whether `name` is a valid label name (`[a-zA-Z_][a-zA-Z0-9_]*`).
pub fn valid_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl Matcher {
    /// A matcher; checks the label name and compiles a regex (anchored).
    pub fn new(name: &str, op: MatchOp, value: &str) -> Result<Matcher, String> {
        if !valid_label_name(name) {
            return Err(format!(
                "\"{name}\" is not a label name (letters, digits and _, not starting with a digit)"
            ));
        }
        let regex = if op.is_regex() {
            Some(Regex::new(&format!("^(?:{value})$")).map_err(|e| {
                // regex's message spans lines (pattern, caret, error).
                let text = e.to_string();
                let why = text
                    .lines()
                    .last()
                    .unwrap_or("")
                    .trim_start_matches("error: ");
                format!("\"{value}\" is not a regular expression: {why}")
            })?)
        } else {
            None
        };
        Ok(Matcher {
            name: name.to_string(),
            op,
            value: value.to_string(),
            regex,
        })
    }

    /// Parses `name=value`, `name!=value`, `name=~regex` or `name!~regex`
    /// (spaces around the operator allowed; the value may be in double
    /// quotes).
    pub fn parse(text: &str) -> Result<Matcher, String> {
        let Some(at) = text.find(['=', '!']) else {
            return Err(format!(
                "\"{text}\" is not a matcher: write label=value, label!=value, label=~regex or label!~regex"
            ));
        };
        let (name, rest) = text.split_at(at);
        let (op, value) = if let Some(v) = rest.strip_prefix("=~") {
            (MatchOp::Regex, v)
        } else if let Some(v) = rest.strip_prefix("!~") {
            (MatchOp::NotRegex, v)
        } else if let Some(v) = rest.strip_prefix("!=") {
            (MatchOp::NotEqual, v)
        } else if let Some(v) = rest.strip_prefix('=') {
            (MatchOp::Equal, v)
        } else {
            return Err(format!(
                "\"{text}\" is not a matcher: write label=value, label!=value, label=~regex or label!~regex"
            ));
        };
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        Matcher::new(name.trim(), op, value)
    }

    /// Whether the labels satisfy this matcher (a missing label is "").
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.name).map_or("", String::as_str);
        match (&self.regex, self.op) {
            (_, MatchOp::Equal) => value == self.value,
            (_, MatchOp::NotEqual) => value != self.value,
            (Some(re), MatchOp::Regex) => re.is_match(value),
            (Some(re), MatchOp::NotRegex) => !re.is_match(value),
            (None, _) => false,
        }
    }

    /// Whether this matcher matches an alert without the label (the empty
    /// string): such a matcher alone would match almost everything.
    pub fn matches_empty(&self) -> bool {
        self.matches(&BTreeMap::new())
    }
}

/// Whether every matcher matches.
pub fn all_match(matchers: &[Matcher], labels: &BTreeMap<String, String>) -> bool {
    matchers.iter().all(|m| m.matches(labels))
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{}", self.name, self.op.as_str(), self.value)
    }
}

/// The JSON form, as Alertmanager's API writes matchers.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    name: String,
    value: String,
    #[serde(default)]
    is_regex: bool,
    #[serde(default = "yes")]
    is_equal: bool,
}

fn yes() -> bool {
    true
}

impl Serialize for Matcher {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Wire {
            name: self.name.clone(),
            value: self.value.clone(),
            is_regex: self.op.is_regex(),
            is_equal: self.op.is_equal(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Matcher {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(deserializer)?;
        let op = match (wire.is_regex, wire.is_equal) {
            (false, true) => MatchOp::Equal,
            (false, false) => MatchOp::NotEqual,
            (true, true) => MatchOp::Regex,
            (true, false) => MatchOp::NotRegex,
        };
        Matcher::new(&wire.name, op, &wire.value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A label set from pairs (shared with the route tests).
    pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_four_operators() {
        let l = labels(&[("alertname", "GpuHot"), ("gpu", "3")]);
        let check = |text: &str| Matcher::parse(text).unwrap().matches(&l);
        assert!(check("alertname=GpuHot"));
        assert!(!check("alertname=GpuLost"));
        assert!(check("gpu!=2"));
        assert!(!check("gpu!=3"));
        assert!(check("gpu=~[0-3]"));
        assert!(!check("gpu=~[0-2]"));
        assert!(check("gpu!~[0-2]"));
        assert!(check("alertname = \"GpuHot\""));
        // Anchored: a partial match is no match.
        assert!(!check("alertname=~Gpu"));
        assert!(check("alertname=~Gpu.*"));
        // A missing label is the empty string.
        assert!(check("team="));
        assert!(!check("team=ml"));
        assert!(check("team!=ml"));
    }

    #[test]
    fn bad_matchers_say_why() {
        assert!(Matcher::parse("gpu").unwrap_err().contains("not a matcher"));
        assert!(Matcher::parse("1gpu=0")
            .unwrap_err()
            .contains("not a label name"));
        assert!(Matcher::parse("gpu=~(")
            .unwrap_err()
            .contains("not a regular expression"));
        assert!(Matcher::parse("gpu!0")
            .unwrap_err()
            .contains("not a matcher"));
    }

    #[test]
    fn json_round_trip_in_alertmanager_shape() {
        let m = Matcher::parse("gpu!~[01]").unwrap();
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "gpu", "value": "[01]", "isRegex": true, "isEqual": false})
        );
        let back: Matcher = serde_json::from_value(json).unwrap();
        assert_eq!(back, m);
        let plain: Matcher =
            serde_json::from_value(serde_json::json!({"name": "gpu", "value": "0"})).unwrap();
        assert_eq!(plain.op, MatchOp::Equal);
        assert!(serde_json::from_value::<Matcher>(
            serde_json::json!({"name": "gpu", "value": "(", "isRegex": true})
        )
        .is_err());
        assert!(Matcher::parse("gpu=~.*").unwrap().matches_empty());
        assert!(!Matcher::parse("gpu=0").unwrap().matches_empty());
    }
}
