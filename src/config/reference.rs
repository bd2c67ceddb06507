//! The configuration reference (docs/config-reference.md), written from
//! the configuration's schema ([`super::schema`]): every section and key,
//! its type as written in TOML, its range ([`crate::limits`]), its default
//! and its description (the field's doc comment). A test compares the
//! checked-in file with [`markdown`], so the reference cannot drift from
//! the parser.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::limits;
use super::schema::{self, KIND};

/// The file the reference is checked in as, relative to the repository.
pub const PATH: &str = "docs/config-reference.md";

/// One table of the file: `[server]`, `[[receivers]]`, `[remediation.slurm]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// The table header as written, e.g. `[[receivers]]`.
    pub header: String,
    /// The prefix of its keys' paths: "server", "receivers[]",
    /// "remediation.slurm" (as `crate::limits` names keys).
    pub path: String,
    /// What the section is for (the doc comment of its field).
    pub description: String,
    /// Its keys, in alphabetical order.
    pub keys: Vec<Key>,
}

/// One key of a section.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    /// The key as written in its table, e.g. "listen".
    pub name: String,
    /// Its full path, e.g. "server.listen" or "receivers[].timeout".
    pub path: String,
    /// Its type as written: "string", "duration", "size", "path",
    /// "integer", "number", "bool", "list of strings", "table of strings".
    pub kind: String,
    /// The accepted range, where `crate::limits` has one ("100ms to 10m").
    pub range: Option<String>,
    /// The default as a TOML value (`"1s"`, `64`, `[]`), where an absent
    /// key means one value.
    pub default: Option<String>,
    /// What it does (the field's doc comment, lines joined).
    pub description: String,
}

/// Every section of the configuration, in the order `RawConfig` declares
/// them (a section before the sections nested in it).
pub fn sections() -> Vec<Section> {
    let schema = schema::json_schema();
    let mut out = Vec::new();
    let root = Section {
        header: String::new(),
        path: String::new(),
        description: String::new(),
        keys: Vec::new(),
    };
    let order = declared_fields::<super::raw::RawConfig>();
    walk(schema.as_value(), root, &order, &mut out);
    out
}

/// The names of `T`'s fields in the order they are declared (the schema's
/// are alphabetical): serde's derived `Deserialize` hands them to
/// `deserialize_struct`, where this deserializer notes them and stops.
fn declared_fields<T: serde::de::DeserializeOwned>() -> Vec<&'static str> {
    use serde::de::{self, Visitor};

    struct Fields(Vec<&'static str>);

    impl<'de> de::Deserializer<'de> for &mut Fields {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("only the field names are read"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            visitor: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = fields.to_vec();
            self.deserialize_any(visitor)
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }

    let mut fields = Fields(Vec::new());
    // Always an error: the deserializer stops once it has the names.
    let _ = T::deserialize(&mut fields);
    fields.0
}

/// Adds `section` (with the keys of `object`) and the sections nested in
/// it, those named in `order` first, in that order.
fn walk(object: &Value, mut section: Section, order: &[&str], out: &mut Vec<Section>) {
    let empty = Map::new();
    let properties = object
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut nested = Vec::new();
    for (name, value) in properties {
        let dotted = |sep: &str| {
            if section.path.is_empty() {
                name.clone()
            } else {
                format!("{}{sep}{name}", section.path)
            }
        };
        let description = description(value);
        if value.get("properties").is_some() {
            let path = dotted(".");
            let header = format!("[{path}]");
            nested.push((name, value, header, path, description));
        } else if let Some(items) = value.get("items").filter(|i| i.get("properties").is_some()) {
            let path = dotted(".");
            let header = format!("[[{path}]]");
            nested.push((name, items, header, format!("{path}[]"), description));
        } else {
            let path = dotted(".");
            section.keys.push(Key {
                name: name.clone(),
                range: range(&path),
                kind: kind(value),
                default: value.get("default").map(toml_value),
                description,
                path,
            });
        }
    }
    if !section.keys.is_empty() || !section.header.is_empty() {
        out.push(section);
    }
    let rank = |name: &str| order.iter().position(|o| *o == name).unwrap_or(order.len());
    nested.sort_by_key(|(name, ..)| rank(name));
    for (_, object, header, path, description) in nested {
        let child = Section {
            header,
            path,
            description,
            keys: Vec::new(),
        };
        walk(object, child, &[], out);
    }
}

/// The doc comment of a schema, its lines joined into paragraphs.
fn description(value: &Value) -> String {
    let text = value
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let paragraphs: Vec<String> = text
        .split("\n\n")
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect();
    paragraphs.join("\n\n")
}

/// The type of a key's value as written in TOML.
fn kind(value: &Value) -> String {
    if let Some(kind) = value.get(KIND).and_then(Value::as_str) {
        return kind.to_string();
    }
    let plural = |v: &Value| format!("{}s", kind(v));
    match value.get("type").and_then(Value::as_str) {
        Some("array") => match value.get("items") {
            Some(items) => format!("list of {}", plural(items)),
            None => "list".to_string(),
        },
        Some("object") => match value.get("additionalProperties") {
            Some(values) if values.is_object() => format!("table of {}", plural(values)),
            _ => "table".to_string(),
        },
        Some("boolean") => "bool".to_string(),
        Some(other) => other.to_string(),
        None => "value".to_string(),
    }
}

/// A JSON default as TOML writes it: `"1s"`, `64`, `["a", "b"]`.
fn toml_value(value: &Value) -> String {
    match toml::Value::try_from(value) {
        Ok(toml) => toml.to_string(),
        Err(_) => value.to_string(),
    }
}

/// The range `crate::limits` gives the key at `path`, as the validator's
/// messages write it.
pub fn range(path: &str) -> Option<String> {
    let durations = limits::DURATIONS.iter().find(|l| l.key == path);
    let counts = limits::COUNTS
        .iter()
        .chain([&limits::XID_ESCALATE_AFTER])
        .find(|l| l.key == path);
    let sizes = limits::SIZES.iter().find(|l| l.key == path);
    durations
        .map(|l| l.describe())
        .or_else(|| counts.map(|l| l.describe_count()))
        .or_else(|| sizes.map(|l| l.describe_size()))
}

/// The heading's anchor as GitHub makes it: lower case, punctuation but
/// `-` and `_` dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

const INTRO: &str = "\
gpuwatch reads one TOML file: `gpuwatch run --config FILE`; check one with \
`gpuwatch validate --config FILE`. Every key is optional: a key left out \
takes its default, and a key gpuwatch does not know is refused with its \
file, line and column. Every number has a range; a value outside it is \
refused the same way. Command-line flags (`--listen`, `--web-config`, \
`--metrics-compat`, `--metrics-detail`, `--nvml-library`, `--history-db`) \
override the file. gpuwatch.example.toml has the common keys with their \
defaults.

Durations are written like \"500ms\", \"30s\", \"5m\", \"48h\" or \"30d\"; \
sizes like \"512MiB\", \"2GiB\" or \"1.8GB\" (KiB, MiB, GiB, TiB: powers of \
1024; KB, MB, GB, TB: powers of 1000; a bare number: bytes). A path is a \
string.";

/// The whole reference, as checked in at [`PATH`].
pub fn markdown() -> String {
    let sections = sections();
    let mut out = String::new();
    out.push_str("# Configuration reference\n\n");
    out.push_str(
        "<!-- Generated from the configuration types (src/config/raw.rs and the types it \
         names): edit their doc comments, then run\n     \
         GPUWATCH_UPDATE_DOCS=1 cargo test --lib config::reference\n     \
         to rewrite this file. A test fails when it differs. -->\n\n",
    );
    out.push_str(INTRO);
    out.push_str("\n\nSections:\n\n");
    for s in &sections {
        let heading = format!("`{}`", s.header);
        let _ = writeln!(out, "- [{heading}](#{})", anchor(&heading));
    }
    for s in &sections {
        let _ = write!(out, "\n## `{}`\n\n", s.header);
        if !s.description.is_empty() {
            let _ = writeln!(out, "{}\n", s.description);
        }
        if s.keys.is_empty() {
            out.push_str("This table has no keys of its own.\n");
        }
        for (i, key) in s.keys.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let _ = write!(out, "### `{}`\n\n{}\n", key.path, summary(key));
            if !key.description.is_empty() {
                let _ = write!(out, "\n{}\n", key.description);
            }
        }
    }
    out
}

/// "**Type:** duration (100ms to 10m) · **Default:** `"1s"`".
fn summary(key: &Key) -> String {
    let kind = match &key.range {
        Some(range) => format!("{}, {range}", key.kind),
        None => key.kind.clone(),
    };
    let default = match &key.default {
        Some(value) => format!("`{value}`"),
        None => "unset".to_string(),
    };
    format!("**Type:** {kind} · **Default:** {default}")
}
