//! Rules as written: conditions parsed and printed, rules.toml tuning,
//! disabling and adding rules, its errors, and annotation templates.

use super::*;

#[test]
fn templates_render_and_reject_unknown_placeholders() {
    let t = Template::parse(
        "{{ .name }} #{{.gpu}} ({{ .uuid }}) on {{ .host }}: {{ .value }} > {{ .threshold }} {{ .value }}",
    )
    .expect("valid");
    let context = Context {
        value: Some(87.456),
        gpu: Some(3),
        uuid: Some("GPU-abc"),
        name: Some("H100"),
        host: "n1",
        threshold: Some(85.0),
        hold: Duration::from_secs(90),
        missing_pci: None,
        workload: None,
        gpus: None,
    };
    assert_eq!(
        t.render(&context),
        "H100 #3 (GPU-abc) on n1: 87.46 > 85 87.46"
    );
    assert_eq!(
        t.render(&Context {
            host: "n1",
            ..Context::default()
        }),
        "n/a #n/a (n/a) on n1: n/a > n/a n/a"
    );
    assert!(Template::parse("no placeholders").is_ok());
    assert!(Template::parse("{{ .labels.team }}")
        .expect_err("unknown")
        .to_string()
        .contains("is not a placeholder"));
    assert!(Template::parse("{{ value }}").is_err(), "needs the dot");
    assert!(Template::parse("{{ .value").is_err());
    // Every built-in annotation parses (a bad one would be dropped silently).
    for rule in builtin_rules() {
        assert!(rule.annotations.len() >= 2, "{}", rule.name);
    }
    let hold = Template::parse("held {{ .for }}").expect("valid");
    for (d, text) in [
        (Duration::from_secs(2), "held 2 seconds"),
        (Duration::from_secs(60), "held 1 minute"),
        (Duration::from_secs(5400), "held 1 hour 30 minutes"),
        (Duration::from_millis(500), "held 500 ms"),
        (Duration::ZERO, "held 0 seconds"),
    ] {
        let context = Context {
            hold: d,
            ..Context::default()
        };
        assert_eq!(hold.render(&context), text);
    }
}

#[test]
fn conditions_parse_and_print() {
    for text in [
        "temperature > 85",
        "degrees_below_slowdown <= 5",
        "clock_event(sw_thermal_slowdown, hw_thermal_slowdown)",
        "xid(48, 79)",
        "increase(ecc_uncorrected)",
        "remap_failure",
        "gpu_lost",
        "absent(power)",
        "stale(30s)",
        "memory_used_ratio > 0.95 or memory_free_bytes < 1073741824",
    ] {
        let parsed = Condition::parse(text).expect(text);
        assert_eq!(parsed.to_string(), text);
    }
    assert_eq!(
        Condition::parse("memory_free_bytes < 1GiB").expect("size"),
        Condition::Compare {
            metric: Metric::MemoryFreeBytes,
            op: Op::Lt,
            threshold: GIB as f64
        }
    );
    for (bad, why) in [
        ("temprature > 85", "not a metric"),
        ("temperature >> 85", "not an operator"),
        ("temperature > hot", "not a number"),
        ("clock_event(too_hot)", "not a clock-event reason"),
        ("xid(0)", "not an Xid code"),
        ("increase(temperature)", "not a counter"),
        ("stale(soon)", "not a positive duration"),
        ("gpu_lost or stale(1m)", "node-level"),
        ("absent(power", "closing parenthesis"),
        ("", "empty"),
    ] {
        let error = Condition::parse(bad).expect_err(bad).to_string();
        assert!(error.contains(why), "{bad}: {error}");
    }
}

#[test]
fn rules_toml_tunes_disables_and_adds() {
    let rules = parse_rules(
        r#"
[[rules]]
name = "GpuMemoryPressure"
for = "15m"
labels = { team = "ml" }

[[rules]]
name = "GpuSwThermalSlowdown"
enabled = false

[[rules]]
name = "GpuTemperatureNearSlowdown"
clear = 8

[[rules]]
name = "GpuHot"
condition = "temperature > 85"
severity = "critical"
keep_firing_for = "2m"
annotations = { summary = "GPU {{ .gpu }} at {{ .value }}" }
"#,
        "rules.toml",
    )
    .expect("valid");
    let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    assert!(!names.contains(&"GpuSwThermalSlowdown"));
    assert_eq!(names.last(), Some(&"GpuHot"));
    assert_eq!(names.len(), builtin_rules().len());
    let pressure = rules
        .iter()
        .find(|r| r.name == "GpuMemoryPressure")
        .expect("kept");
    assert_eq!(pressure.for_, Duration::from_secs(900));
    assert_eq!(pressure.labels["team"], "ml");
    assert_eq!(pressure.annotations.len(), 2, "built-in annotations kept");
    let near = rules
        .iter()
        .find(|r| r.name == "GpuTemperatureNearSlowdown")
        .expect("kept");
    assert_eq!(near.clear, Some(8.0));
    let hot = rules.iter().find(|r| r.name == "GpuHot").expect("added");
    assert_eq!(hot.severity, Severity::Critical);
    assert_eq!(hot.keep_firing_for, Duration::from_secs(120));
    assert_eq!(hot.for_, Duration::ZERO);
    // An empty file is the built-in pack.
    assert_eq!(
        parse_rules("", "empty.toml").expect("valid"),
        builtin_rules()
    );
}

#[test]
fn rules_toml_errors_name_the_field_and_line() {
    let source = r#"[[rules]]
name = "A"
condition = "temperature > 85"
for = "5 minutes please"

[[rules]]
name = "B"
condition = "temprature > 85"
severity = "page"
clear = 90
labels = { alertname = "x" }
annotations = { summary = "{{ .colour }}" }

[[rules]]
name = "A"
condition = "gpu_lost"

[[rules]]
name = "NoCondition"

[[rules]]
name = "C"
condition = "temperature > 85"
clear = 90
"#;
    let problems = parse_rules(source, "rules.toml").expect_err("invalid");
    let got: Vec<String> = problems.iter().map(ToString::to_string).collect();
    let expect = [
        "rules.toml:4:7: rules[0].for: \"5 minutes please\" is not a duration",
        "rules.toml:8:13: rules[1].condition: \"temprature\" is not a metric",
        "rules.toml:9:12: rules[1].severity: \"page\" is not a severity",
        "rules.toml:11:10: rules[1].labels.alertname: \"alertname\" is set by gpuwatch itself",
        "rules.toml:12:27: rules[1].annotations.summary: \"{{ .colour }}\" is not a placeholder",
        "rules.toml:15:8: rules[2].name: \"A\" is defined twice",
        "rules.toml:19:8: rules[3].condition: \"NoCondition\" is not a built-in rule, so it needs a condition",
        "rules.toml:24:9: rules[4].clear: must be below the threshold 85",
    ];
    assert_eq!(got.len(), expect.len(), "{got:#?}");
    for (got, expect) in got.iter().zip(expect) {
        assert!(got.starts_with(expect), "{got}\n  expected {expect}");
    }
    // Unknown fields are rejected with the entry's path.
    let problems = parse_rules(
        "[[rules]]\nname = \"A\"\ncondition = \"gpu_lost\"\n\n[[rules]]\nname = \"B\"\nfour = \"1m\"\n",
        "rules.toml",
    )
    .expect_err("unknown field");
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].field, "rules[1]");
    assert_eq!(problems[0].line, Some(7));
    assert!(
        problems[0].message.contains("unknown field `four`"),
        "{}",
        problems[0].message
    );
    // A missing name.
    let problems =
        parse_rules("[[rules]]\ncondition = \"gpu_lost\"\n", "rules.toml").expect_err("no name");
    assert_eq!(problems[0].field, "rules[0]");
}

/// A refused number or duration keeps its parser's error as the source,
/// and the message stays the one the user reads.
#[test]
fn condition_errors_keep_their_source() {
    use std::error::Error;
    let error = Condition::parse("xid(abc)").expect_err("not a code");
    assert!(error.source().is_some(), "{error}");
    assert_eq!(
        error.to_string(),
        "\"abc\" is not an Xid code (a positive integer)"
    );
    let error = Condition::parse("xid(0)").expect_err("zero");
    assert!(error.source().is_none(), "{error}");
    let error = Condition::parse("stale(soon)").expect_err("no duration");
    assert!(error.source().is_some(), "{error}");
    let error = Condition::parse("temperature_anomaly(warm)").expect_err("no margin");
    assert!(error.source().is_some(), "{error}");
}
