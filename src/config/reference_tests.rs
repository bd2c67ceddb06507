//! The configuration reference is what the code generates, and the
//! reference, the parser, the defaults and gpuwatch.example.toml agree.

use std::collections::BTreeSet;

use super::raw::RawConfig;
use super::reference::{self, Key, Section};
use super::{limits, Config};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every key of the reference with its section.
fn keys() -> Vec<(Section, Key)> {
    reference::sections()
        .into_iter()
        .flat_map(|s| s.keys.clone().into_iter().map(move |k| (s.clone(), k)))
        .collect()
}

#[test]
fn the_checked_in_reference_is_what_the_code_generates() {
    let path = format!("{ROOT}/{}", reference::PATH);
    let generated = reference::markdown();
    if std::env::var_os("GPUWATCH_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &generated).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("cannot read {path} ({e}); GPUWATCH_UPDATE_DOCS=1 cargo test --lib config::reference writes it")
    });
    if checked_in == generated {
        return;
    }
    let mut theirs = checked_in.lines();
    let mut ours = generated.lines();
    for line in 1.. {
        match (theirs.next(), ours.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (a, b) => panic!(
                "{} differs from what the code generates at line {line}:\n  checked in: {}\n  generated:  {}\n\
                 Run GPUWATCH_UPDATE_DOCS=1 cargo test --lib config::reference and commit the file.",
                reference::PATH,
                a.unwrap_or("(end of file)"),
                b.unwrap_or("(end of file)"),
            ),
        }
    }
}

#[test]
fn the_reference_has_every_section_and_the_known_keys() {
    let sections = reference::sections();
    let headers: Vec<&str> = sections.iter().map(|s| s.header.as_str()).collect();
    for header in [
        "[server]",
        "[exporter]",
        "[sampler]",
        "[log]",
        "[history]",
        "[[rules]]",
        "[[receivers]]",
        "[capacity]",
        "[[profiles]]",
        "[kubernetes]",
        "[health]",
        "[remediation]",
        "[remediation.slurm]",
        "[workloads]",
    ] {
        assert!(
            headers.contains(&header),
            "{header} missing from {headers:?}"
        );
    }
    assert_eq!(headers.len(), 14, "{headers:?}");
    let find = |path: &str| {
        keys()
            .into_iter()
            .map(|(_, k)| k)
            .find(|k| k.path == path)
            .unwrap_or_else(|| panic!("{path} is not in the reference"))
    };
    // Renamed fields appear as written in the file.
    let for_ = find("rules[].for");
    assert_eq!(
        (for_.kind.as_str(), for_.range.as_deref()),
        ("duration", Some("0s to 30d"))
    );
    assert_eq!(find("receivers[].type").kind, "string");
    assert_eq!(find("receivers[].match").kind, "table of strings");
    let interval = find("sampler.interval");
    assert_eq!(interval.default.as_deref(), Some("\"1s\""));
    assert_eq!(interval.range.as_deref(), Some("100ms to 10m"));
    assert!(
        interval.description.starts_with("The fast tier"),
        "{interval:?}"
    );
    assert_eq!(find("history.max_size").kind, "size");
    assert_eq!(find("history.max_size").default, None);
    assert_eq!(find("history.queue").kind, "integer");
    assert_eq!(find("server.metrics_compat").kind, "list of strings");
    assert_eq!(find("server.metrics_compat").default.as_deref(), Some("[]"));
    assert_eq!(find("sampler.gpm").kind, "bool");
    assert_eq!(find("profiles[].sm_share").kind, "number");
    assert_eq!(find("health.boot_id").kind, "path");
    assert_eq!(
        find("health.xid_escalate_after").range.as_deref(),
        Some("1 to 1000")
    );
    // Every key says what it does.
    for (_, key) in keys() {
        assert!(
            key.description.len() > 12,
            "{} has no real description: {key:?}",
            key.path
        );
    }
    for section in reference::sections() {
        assert!(
            section.description.len() > 12,
            "{} has no description",
            section.header
        );
    }
}

#[test]
fn every_range_in_limits_belongs_to_a_key_of_the_reference() {
    let paths: BTreeSet<String> = keys().into_iter().map(|(_, k)| k.path).collect();
    fn kinds<T>(list: &[limits::Limits<T>], kind: &str) -> Vec<(String, String)> {
        list.iter()
            .map(|l| (l.key.to_string(), kind.to_string()))
            .collect()
    }
    let mut all = kinds(limits::DURATIONS, "duration");
    all.extend(kinds(limits::COUNTS, "integer"));
    all.extend(kinds(&[limits::XID_ESCALATE_AFTER], "integer"));
    all.extend(kinds(limits::SIZES, "size"));
    let mut checked = 0;
    for (key, kind) in all {
        if key.contains('(') {
            continue; // a rule condition's argument, e.g. stale(...), not a key
        }
        assert!(
            paths.contains(&key),
            "limits names {key}, which is not a key"
        );
        let found = keys()
            .into_iter()
            .find(|(_, k)| k.path == key)
            .map(|(_, k)| k.kind);
        assert_eq!(found.as_deref(), Some(kind.as_str()), "{key}");
        checked += 1;
    }
    assert!(checked > 30, "{checked}");
}

/// A TOML document that sets `key` of `section` to `value`, after `base`
/// (the other keys an array entry needs).
fn document(section: &Section, key: &Key, base: &str, value: &str) -> String {
    if section.header.starts_with("[[") {
        format!("{}\n{base}{} = {value}\n", section.header, key.name)
    } else {
        format!("{}\n{} = {value}\n", section.header, key.name)
    }
}

/// A value of `kind` the parser reads (its range aside).
fn sample(kind: &str) -> &'static str {
    match kind {
        "duration" => "\"1s\"",
        "size" => "\"1MiB\"",
        "integer" => "1",
        "number" => "0.5",
        "bool" => "true",
        "list of strings" => "[\"x\"]",
        "table of strings" => "{ x = \"y\" }",
        _ => "\"x\"",
    }
}

#[test]
fn every_key_of_the_reference_is_accepted_by_the_parser_with_its_type() {
    for (section, key) in keys() {
        let source = document(&section, &key, "", sample(&key.kind));
        if let Err(e) = toml::from_str::<RawConfig>(&source) {
            panic!(
                "{} is in the reference, but the parser refuses\n{source}\n{e}",
                key.path
            );
        }
        if key.kind != "string" && key.kind != "path" {
            // A value of another type is refused: the type is the parser's.
            let wrong = document(&section, &key, "", "\"not-a-value\"");
            let wrong = if key.kind.contains("duration") || key.kind == "size" {
                document(&section, &key, "", "[1]")
            } else {
                wrong
            };
            assert!(
                toml::from_str::<RawConfig>(&wrong).is_err(),
                "{} takes a {}, yet the parser accepts\n{wrong}",
                key.path,
                key.kind
            );
        }
    }
    // The check has teeth: a key the reference lacks is refused.
    assert!(toml::from_str::<RawConfig>("[server]\nlisten_on = \"x\"\n").is_err());
}

/// The other keys an entry of an array section needs, tried in turn.
fn bases(section: &str) -> &'static [&'static str] {
    match section {
        "[[receivers]]" => &[
            "name = \"r\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:9/hook\"\n",
            "name = \"r\"\ntype = \"alertmanager\"\nurl = \"http://127.0.0.1:9093\"\n",
        ],
        "[[rules]]" => &["name = \"GpuMemoryPressure\"\n"],
        _ => &[""],
    }
}

#[test]
fn every_documented_default_is_the_default() {
    let mut checked = 0;
    for (section, key) in keys() {
        let Some(default) = &key.default else {
            continue;
        };
        let mut outcome = None;
        for base in bases(&section.header) {
            let without = format!("{}\n{base}", section.header);
            let with = document(&section, &key, base, default);
            match (
                Config::parse(&without, "base.toml"),
                Config::parse(&with, "default.toml"),
            ) {
                (Ok(a), Ok(b)) => {
                    outcome = Some((a == b, with));
                    break;
                }
                (_, Err(e)) => outcome = Some((false, format!("{with}\nrefused: {e}"))),
                (Err(e), _) => panic!("the base entry is refused: {e}"),
            }
        }
        let (same, source) = outcome.unwrap_or_default();
        assert!(
            same,
            "{} documents the default {default}, but writing it changes the configuration:\n{source}",
            key.path
        );
        checked += 1;
    }
    assert!(checked > 40, "only {checked} defaults checked");
}

/// The keys gpuwatch.example.toml writes, commented out or not, each with
/// its table's path ("server", "receivers[]").
fn example_keys() -> Vec<String> {
    let text = std::fs::read_to_string(format!("{ROOT}/gpuwatch.example.toml"))
        .unwrap_or_else(|e| panic!("cannot read gpuwatch.example.toml: {e}"));
    let mut table = String::new();
    let mut found = Vec::new();
    for line in text.lines() {
        let line = line.trim_start_matches(['#', ' ']);
        let word = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c == '.')
        };
        if let Some(name) = line
            .strip_prefix("[[")
            .and_then(|l| l.trim_end().strip_suffix("]]"))
        {
            if word(name) {
                table = format!("{name}[]");
            }
        } else if let Some(name) = line
            .strip_prefix('[')
            .and_then(|l| l.trim_end().strip_suffix(']'))
        {
            if word(name) {
                table = name.to_string();
            }
        } else if let Some((key, _)) = line.split_once(" = ") {
            if word(key) && !table.is_empty() {
                found.push(format!("{table}.{key}"));
            }
        }
    }
    found
}

#[test]
fn every_key_in_the_example_file_is_in_the_reference() {
    let paths: BTreeSet<String> = keys().into_iter().map(|(_, k)| k.path).collect();
    let example = example_keys();
    assert!(example.len() > 60, "{example:?}");
    for key in &example {
        assert!(
            paths.contains(key),
            "gpuwatch.example.toml writes {key}, which the reference lacks"
        );
    }
}

#[test]
fn the_json_schema_carries_types_defaults_and_descriptions_for_editors() {
    let schema = super::schema::json_schema();
    let value = schema.as_value();
    assert_eq!(
        value["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "{value}"
    );
    let interval = &value["properties"]["sampler"]["properties"]["interval"];
    assert_eq!(interval["type"], "string", "{interval}");
    assert_eq!(interval[super::schema::KIND], "duration", "{interval}");
    assert_eq!(interval["default"], "1s", "{interval}");
    assert!(interval["description"]
        .as_str()
        .is_some_and(|d| d.contains("fast tier")));
    let queue = &value["properties"]["history"]["properties"]["queue"];
    assert_eq!(
        (&queue["minimum"], &queue["maximum"]),
        (&1.into(), &1000.into()),
        "{queue}"
    );
    let breaker = &value["properties"]["remediation"]["properties"]["slurm"]["properties"]
        ["max_drained_nodes"];
    assert_eq!(
        breaker["maximum"],
        limits::MAX_DRAINED_NODES.max,
        "{breaker}"
    );
    // Unknown keys are refused, as by the parser; TOML has no null.
    assert_eq!(value["properties"]["server"]["additionalProperties"], false);
    let text = value.to_string();
    assert!(!text.contains("\"null\""), "{text}");
    let receiver = &value["properties"]["receivers"]["items"]["properties"];
    assert!(
        receiver["type"].is_object() && receiver["match"].is_object(),
        "{receiver}"
    );
}
