//! What a dashboard query selects, and the query as Grafana sends it: the
//! `gpuwatch_*` series (and recording rules) it names with their equality
//! matchers, and the template and interval variables substituted.

use serde_json::Value;
use std::collections::BTreeMap;

use crate::common::promql::regex_escape;

/// Grafana's built-in interval variables, as the test substitutes them.
const RATE_INTERVAL: &str = "15s";
const INTERVAL: &str = "1s";
const RANGE: &str = "1m";

/// A series an expression selects: its name and its `label="value"`
/// matchers (regex, negative and `$variable` matchers are left out: they
/// select more, not less, than the equality ones).
pub type Selector = (String, Vec<(String, String)>);

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Every `gpuwatch_*` metric and gpuwatch recording rule (`level:gpuwatch_…:ops`)
/// `expr` selects.
pub fn selectors(expr: &str) -> Vec<Selector> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut in_string = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            in_string = !in_string;
            i += 1;
            continue;
        }
        if in_string || !is_name_char(c) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_name_char(chars[i]) {
            i += 1;
        }
        let name: String = chars[start..i].iter().collect();
        if !name.starts_with("gpuwatch_") && !name.contains(":gpuwatch_") {
            continue;
        }
        let mut matchers = Vec::new();
        if chars.get(i) == Some(&'{') {
            let mut quoted = false;
            let mut end = i + 1;
            while end < chars.len() && (quoted || chars[end] != '}') {
                if chars[end] == '"' {
                    quoted = !quoted;
                }
                end += 1;
            }
            let body: String = chars[i + 1..end.min(chars.len())].iter().collect();
            matchers = equality_matchers(&body);
            i = end + 1;
        }
        out.push((name, matchers));
    }
    out
}

/// The `label="value"` matchers of a selector's body.
fn equality_matchers(body: &str) -> Vec<(String, String)> {
    body.split(',')
        .filter_map(|part| {
            let (label, value) = part.split_once('=')?;
            if label.ends_with('!') || value.starts_with('~') || value.contains('$') {
                return None;
            }
            let value = value.trim().strip_prefix('"')?.strip_suffix('"')?;
            Some((label.trim().to_string(), value.to_string()))
        })
        .collect()
}

/// The recording rules of `rules_yml`: name → expression.
pub fn recording_rules(rules_yml: &str) -> BTreeMap<String, String> {
    let rules: Value = serde_yaml_ng::from_str(rules_yml).expect("gpuwatch-rules.yml is YAML");
    let mut out = BTreeMap::new();
    for group in rules["groups"].as_array().into_iter().flatten() {
        for rule in group["rules"].as_array().into_iter().flatten() {
            if let (Some(name), Some(expr)) = (rule["record"].as_str(), rule["expr"].as_str()) {
                out.insert(name.to_string(), expr.to_string());
            }
        }
    }
    out
}

/// The raw series `expr` depends on: its selectors, a recording rule's
/// replaced by the selectors of the rule's expression (None: a rule that
/// gpuwatch-rules.yml does not record).
pub fn raw_selectors(
    expr: &str,
    rules: &BTreeMap<String, String>,
) -> Result<Vec<Selector>, String> {
    let mut out = Vec::new();
    for (name, matchers) in selectors(expr) {
        if name.contains(':') {
            let rule = rules.get(&name).ok_or_else(|| {
                format!("{name} is not recorded by deploy/prometheus/gpuwatch-rules.yml")
            })?;
            out.extend(selectors(rule));
        } else {
            out.push((name, matchers));
        }
    }
    Ok(out)
}

/// A variable's values as Grafana interpolates them into a query.
pub fn format_values(values: &[&str], multi: bool) -> String {
    if values == ["$__all"] {
        return ".*".into();
    }
    if !multi {
        return values.join(",");
    }
    let escaped: Vec<String> = values.iter().map(|v| regex_escape(v)).collect();
    if escaped.len() == 1 {
        escaped[0].clone()
    } else {
        format!("({})", escaped.join("|"))
    }
}

/// Substitutes the template and interval variables.
pub fn substitute(expr: &str, instance: &str, gpu: &str, kind: &str) -> String {
    let mut out = expr.to_string();
    for (names, value) in [
        (&["${datasource}", "$datasource"][..], "prometheus"),
        (
            &["${instance:regex}", "${instance}", "$instance"][..],
            instance,
        ),
        (&["${gpu:regex}", "${gpu}", "$gpu"][..], gpu),
        (&["${kind:regex}", "${kind}", "$kind"][..], kind),
        (
            &["${__rate_interval}", "$__rate_interval"][..],
            RATE_INTERVAL,
        ),
        (&["${__interval}", "$__interval"][..], INTERVAL),
        (&["${__range}", "$__range"][..], RANGE),
    ] {
        for name in names {
            out = out.replace(name, value);
        }
    }
    out
}

#[test]
fn selectors_keep_names_and_equality_matchers() {
    let got = selectors(
        r#"sum(a:gpuwatch_x:rate5m{instance=~"$i"}) / gpuwatch_y_total{kind="pod", gpu=~"0", reason!="z", user="$u"} * other"#,
    );
    assert_eq!(
        got,
        vec![
            ("a:gpuwatch_x:rate5m".to_string(), vec![]),
            (
                "gpuwatch_y_total".to_string(),
                vec![("kind".to_string(), "pod".to_string())]
            ),
        ]
    );
}
