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

pub use crate::limits::written::{Duration, Path, Size, KIND};

/// The schema of the whole configuration file, subschemas inlined (one
/// tree, as the file nests), `null` left out of optional keys' types (TOML
/// has no null: leaving a key out is what `Option` means).
pub fn json_schema() -> Schema {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<super::raw::RawConfig>();
    if let Some(object) = schema.as_object_mut() {
        object.values_mut().for_each(drop_null);
    }
    schema
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
