//! The configuration file's JSON Schema, derived from the raw types
//! (`schemars`): one description of every section and key, from which the
//! configuration reference (docs/config-reference.md) is written.
//!
//! The raw types keep their values in `toml::Spanned` (for positions in
//! error messages), which has no schema of its own: each field names the
//! type as written with `#[schemars(with = "…")]`, using the marker types
//! of [`crate::limits::written`] where a string has a format of its own (a
//! duration, a size, a path). A key's default, where it has one value, is the standard
//! `default` keyword (`#[schemars(extend("default" = …))]`); a test checks
//! that writing it gives the same configuration as leaving the key out.

use schemars::Schema;

pub use crate::limits::written::KIND;

/// The schema of the whole configuration file, subschemas inlined (one
/// tree, as the file nests), `null` left out of optional keys' types (TOML
/// has no null: leaving a key out is what `Option` means), whole numbers
/// with their range.
pub fn json_schema() -> Schema {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<super::raw::RawConfig>();
    if let Some(object) = schema.as_object_mut() {
        object.values_mut().for_each(drop_null);
        add_count_ranges(object, "");
    }
    schema
}

/// Adds `minimum` and `maximum` (from [`crate::limits`]) to the whole-number
/// keys under the table `object` at `path` ("", "server", "receivers[]").
fn add_count_ranges(object: &mut serde_json::Map<String, serde_json::Value>, path: &str) {
    let Some(serde_json::Value::Object(properties)) = object.get_mut("properties") else {
        return;
    };
    for (name, value) in properties.iter_mut() {
        let key = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        let Some(map) = value.as_object_mut() else {
            continue;
        };
        if map.contains_key("properties") {
            add_count_ranges(map, &key);
        } else if let Some(serde_json::Value::Object(items)) = map.get_mut("items") {
            add_count_ranges(items, &format!("{key}[]"));
        } else if let Some(limits) = crate::limits::COUNTS
            .iter()
            .chain([&crate::limits::XID_ESCALATE_AFTER])
            .find(|l| l.key == key)
        {
            map.insert("minimum".to_string(), limits.min.into());
            map.insert("maximum".to_string(), limits.max.into());
        }
    }
}

/// Removes `"null"` from every `type` list (`Option<T>` adds it).
fn drop_null(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if let [only] = types.as_slice() {
                    let only = only.clone();
                    map.insert("type".to_string(), only);
                }
            }
            map.values_mut().for_each(drop_null);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(drop_null),
        _ => {}
    }
}
