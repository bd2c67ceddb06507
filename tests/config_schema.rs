//! `gpuwatch config-schema` prints the configuration's JSON Schema, for
//! editors that check and complete TOML: the real binary's output describes
//! gpuwatch.example.toml (every table and key known, every value of its
//! type), and it finds the mistakes the parser refuses.

use std::process::Command;

use serde_json::Value;

/// The schema the binary prints.
fn schema() -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_gpuwatch"))
        .arg("config-schema")
        .env_remove("GPUWATCH_CONFIG")
        .output()
        .expect("run gpuwatch config-schema");
    assert!(
        output.status.success(),
        "gpuwatch config-schema failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the output is JSON")
}

/// What `schema` finds wrong with `value` at `path` (the keywords the
/// configuration's schema uses: type, properties, additionalProperties,
/// items).
fn problems(schema: &Value, value: &toml::Value, path: &str, out: &mut Vec<String>) {
    let type_ok = matches!(
        (schema.get("type").and_then(Value::as_str), value),
        (Some("string"), toml::Value::String(_))
            | (Some("integer"), toml::Value::Integer(_))
            | (
                Some("number"),
                toml::Value::Integer(_) | toml::Value::Float(_)
            )
            | (Some("boolean"), toml::Value::Boolean(_))
            | (Some("array"), toml::Value::Array(_))
            | (Some("object"), toml::Value::Table(_))
            | (None, _)
    );
    if !type_ok {
        out.push(format!("{path}: {value} is not of type {}", schema["type"]));
        return;
    }
    match value {
        toml::Value::Table(table) => {
            for (key, item) in table {
                let at = format!("{path}.{key}");
                match schema["properties"].get(key) {
                    Some(sub) => problems(sub, item, &at, out),
                    None => match &schema["additionalProperties"] {
                        Value::Bool(false) => out.push(format!("{at}: unknown key")),
                        sub @ Value::Object(_) => problems(sub, item, &at, out),
                        _ => {}
                    },
                }
            }
        }
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                problems(&schema["items"], item, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn check(schema: &Value, source: &str) -> Vec<String> {
    let value: toml::Value = toml::from_str(source).expect("valid TOML");
    let mut out = Vec::new();
    problems(schema, &value, "", &mut out);
    out.sort();
    out
}

#[test]
fn the_schema_describes_the_example_file_and_finds_mistakes() {
    let schema = schema();
    assert_eq!(schema["title"], "gpuwatch configuration");
    let listen = &schema["properties"]["server"]["properties"]["listen"];
    assert_eq!(listen["default"], "0.0.0.0:9842", "{listen}");
    assert!(
        listen["description"]
            .as_str()
            .is_some_and(|d| d.contains("Port 9842")),
        "{listen}"
    );
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/gpuwatch.example.toml"
    ))
    .expect("read gpuwatch.example.toml");
    assert_eq!(check(&schema, &example), Vec::<String>::new());
    let entries = "[[receivers]]\nname = \"ops\"\ntype = \"webhook\"\nurl = \"http://h/x\"\nheaders = { X-Team = \"ml\" }\nmatch = { team = \"ml\" }\n[[rules]]\nname = \"GpuHot\"\nfor = \"2m\"\nclear = 75\n[[profiles]]\nname = \"p\"\nmemory = \"1GB\"\nsm_share = 0.5\n";
    assert_eq!(check(&schema, entries), Vec::<String>::new());
    // The mistakes the parser refuses, the schema flags too.
    assert_eq!(
        check(
            &schema,
            "[server]\nmax_connections = \"many\"\nlisten_on = \":1\"\n[[receivers]]\nmatch = { team = 1 }\n"
        ),
        [
            ".receivers[0].match.team: 1 is not of type \"string\"",
            ".server.listen_on: unknown key",
            ".server.max_connections: \"many\" is not of type \"integer\"",
        ]
    );
}
