//! Label matchers, as silences and receiver routes use them: `name=value`,
//! `name!=value`, `name=~regex`, `name!~regex` (Alertmanager's four kinds;
//! regexes are anchored at both ends, as in Prometheus). A label the alert
//! does not have counts as the empty string.

use std::collections::BTreeMap;
use std::fmt;

use regex_automata::meta;
use serde::{Deserialize, Serialize};

use crate::timespec::quote;

/// The longest label name a matcher takes, in bytes.
pub const MAX_NAME_BYTES: usize = 128;
/// The longest value or regex a matcher takes, in bytes (1 KiB).
pub const MAX_VALUE_BYTES: usize = 1024;
/// The most memory one compiled regex may take (each of its automata), in
/// bytes (64 KiB): `\w{500}` would take 20 MB and is refused.
pub const MAX_REGEX_BYTES: usize = 64 * 1024;

/// What a compiled regex holds beyond its automata (which it reports): its
/// cache pool and a search cache, about (see `benches/silences.rs`).
const REGEX_OVERHEAD: usize = 4096;

/// Why a matcher is refused. The texts say what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatcherError {
    /// Not `name=value` (or one of the other three operators).
    #[error("\"{text}\" is not a matcher: write label=value, label!=value, label=~regex or label!~regex")]
    Syntax {
        /// The matcher as written (quoted, shortened).
        text: String,
    },
    /// Not a label name.
    #[error("\"{name}\" is not a label name (letters, digits and _, not starting with a digit)")]
    LabelName {
        /// The name (quoted, shortened).
        name: String,
    },
    /// A label name over [`MAX_NAME_BYTES`].
    #[error("the label name \"{name}\" is {len} bytes long; at most {MAX_NAME_BYTES} are allowed")]
    NameTooLong {
        /// The name (quoted, shortened).
        name: String,
        /// Its length in bytes.
        len: usize,
    },
    /// A value or regex over [`MAX_VALUE_BYTES`].
    #[error(
        "the value \"{value}\" is {len} bytes long; at most {MAX_VALUE_BYTES} (1 KiB) are allowed"
    )]
    ValueTooLong {
        /// The value (quoted, shortened).
        value: String,
        /// Its length in bytes.
        len: usize,
    },
    /// Not a regular expression.
    #[error("\"{value}\" is not a regular expression: {why}")]
    Regex {
        /// The regex (quoted, shortened).
        value: String,
        /// The regex parser's reason.
        why: String,
    },
    /// A regex that compiles to more than [`MAX_REGEX_BYTES`].
    #[error("\"{value}\" is too large a regular expression: compiled it would take more than {MAX_REGEX_BYTES} bytes (64 KiB), the limit; use a simpler one (e.g. fewer repetitions, ASCII classes such as [a-z0-9_] instead of \\w)")]
    RegexTooBig {
        /// The regex (quoted, shortened).
        value: String,
    },
}

impl MatcherError {
    /// Whether the label name (rather than the value) is at fault.
    pub fn is_about_name(&self) -> bool {
        matches!(
            self,
            MatcherError::LabelName { .. } | MatcherError::NameTooLong { .. }
        )
    }
}

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

/// One label matcher. Compiled once, within [`MAX_REGEX_BYTES`]; compared
/// by what was written.
#[derive(Debug, Clone)]
pub struct Matcher {
    /// The label's name.
    pub name: String,
    /// How the value is compared.
    pub op: MatchOp,
    /// The value or the regex, as written.
    pub value: String,
    regex: Option<meta::Regex>,
    /// [`Matcher::memory`], worked out once.
    memory: usize,
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
    /// A matcher; checks the label name and the value's length
    /// ([`MAX_NAME_BYTES`], [`MAX_VALUE_BYTES`]) and compiles a regex
    /// (anchored) within [`MAX_REGEX_BYTES`].
    pub fn new(name: &str, op: MatchOp, value: &str) -> Result<Matcher, MatcherError> {
        if name.len() > MAX_NAME_BYTES {
            return Err(MatcherError::NameTooLong {
                name: quote(name),
                len: name.len(),
            });
        }
        if !valid_label_name(name) {
            return Err(MatcherError::LabelName { name: quote(name) });
        }
        if value.len() > MAX_VALUE_BYTES {
            return Err(MatcherError::ValueTooLong {
                value: quote(value),
                len: value.len(),
            });
        }
        let regex = if op.is_regex() {
            Some(compile(value)?)
        } else {
            None
        };
        let memory = std::mem::size_of::<Matcher>()
            + name.len()
            + value.len()
            + regex
                .as_ref()
                .map_or(0, |re| REGEX_OVERHEAD + re.memory_usage());
        Ok(Matcher {
            name: name.to_string(),
            op,
            value: value.to_string(),
            regex,
            memory,
        })
    }

    /// About how many bytes of memory the matcher holds: its texts, its
    /// compiled regex and the regex's search cache (measured by
    /// `benches/silences.rs`).
    pub fn memory(&self) -> usize {
        self.memory
    }

    /// Parses `name=value`, `name!=value`, `name=~regex` or `name!~regex`
    /// (spaces around the operator allowed; the value may be in double
    /// quotes).
    pub fn parse(text: &str) -> Result<Matcher, MatcherError> {
        let syntax = || MatcherError::Syntax { text: quote(text) };
        let Some(at) = text.find(['=', '!']) else {
            return Err(syntax());
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
            return Err(syntax());
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

/// Compiles `^(?:value)$` with every automaton held to [`MAX_REGEX_BYTES`].
/// The lazy DFA is left out: label values are short, and its cache would
/// grow with use; the PikeVM, bounded backtracker and one-pass DFA need no
/// more than about the NFA's size per search cache.
fn compile(value: &str) -> Result<meta::Regex, MatcherError> {
    let config = meta::Regex::config()
        .nfa_size_limit(Some(MAX_REGEX_BYTES))
        .onepass_size_limit(Some(MAX_REGEX_BYTES))
        .hybrid(false)
        .dfa(false);
    meta::Regex::builder()
        .configure(config)
        .build(&format!("^(?:{value})$"))
        .map_err(|e| {
            if e.size_limit().is_some() {
                return MatcherError::RegexTooBig {
                    value: quote(value),
                };
            }
            // The syntax error's message spans lines (pattern, caret,
            // error): keep the reason.
            let text = match e.syntax_error() {
                Some(syntax) => syntax.to_string(),
                None => e.to_string(),
            };
            let why = text
                .lines()
                .last()
                .unwrap_or("")
                .trim_start_matches("error: ")
                .to_string();
            MatcherError::Regex {
                value: quote(value),
                why,
            }
        })
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
        let e = |text: &str| Matcher::parse(text).unwrap_err().to_string();
        assert!(e("gpu").contains("not a matcher"));
        assert!(e("1gpu=0").contains("not a label name"));
        assert!(
            e("gpu=~(").contains("not a regular expression"),
            "{}",
            e("gpu=~(")
        );
        assert!(e("gpu=~(").contains("unclosed group"), "{}", e("gpu=~("));
        assert!(e("gpu!0").contains("not a matcher"));
    }

    #[test]
    fn sizes_are_limited_and_the_limit_is_named() {
        // A 60 KB regex (the size of the old 64 KiB body) is refused for
        // its length before anything is compiled.
        let long = format!("gpu=~{}", "a|".repeat(30_000));
        let e = Matcher::parse(&long).unwrap_err();
        assert!(
            matches!(e, MatcherError::ValueTooLong { len: 60_000, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("at most 1024 (1 KiB)"), "{e}");
        assert!(
            e.to_string().len() < 300,
            "the value is not echoed whole: {e}"
        );
        // Short but huge once compiled (20 MB with the regex crate's default
        // limits).
        let e = Matcher::parse(r"gpu=~\w{500}").unwrap_err();
        assert!(matches!(e, MatcherError::RegexTooBig { .. }), "{e}");
        assert!(e.to_string().contains("65536 bytes (64 KiB)"), "{e}");
        let e = Matcher::parse(&format!("{}=x", "a".repeat(129))).unwrap_err();
        assert!(e.is_about_name(), "{e}");
        assert!(e.to_string().contains("at most 128"), "{e}");
        // The most allowed still works.
        let m = Matcher::parse(&format!("gpu={}", "0".repeat(MAX_VALUE_BYTES))).unwrap();
        assert!(m.matches(&labels(&[("gpu", &"0".repeat(MAX_VALUE_BYTES))])));
        // What people write is far under the limit.
        for text in [
            "alertname=~Gpu(Hot|Lost)",
            "gpu=~[0-7]",
            "host=~node-[0-9]+\\.example",
            "x=~.*",
        ] {
            let m = Matcher::parse(text).unwrap();
            assert!(m.memory() < 16 * 1024, "{text}: {} bytes", m.memory());
        }
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
