//! Lint of the bundled dashboards' JSON: schema, panel types, units, the
//! datasource variable everywhere, the template variables.

use serde_json::Value;
use std::collections::BTreeSet;

/// Panel types of the current schema the dashboards may use.
pub const PANEL_TYPES: &[&str] = &[
    "row",
    "text",
    "timeseries",
    "stat",
    "gauge",
    "bargauge",
    "table",
    "state-timeline",
];

/// Every panel, rows' nested panels included.
pub fn panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for panel in list.as_array().into_iter().flatten() {
            out.push(panel);
            walk(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

pub fn variable<'a>(dashboard: &'a Value, name: &str) -> Option<&'a Value> {
    dashboard["templating"]["list"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == name)
}

pub fn variable_query(var: &Value) -> String {
    match &var["query"] {
        Value::String(s) => s.clone(),
        other => other["query"].as_str().unwrap_or_default().to_string(),
    }
}

pub fn is_multi(dashboard: &Value, name: &str) -> bool {
    variable(dashboard, name).is_some_and(|v| v["multi"] == true || v["includeAll"] == true)
}

/// Checks every `datasource` object in the dashboard: only the variable (or
/// Grafana's built-in annotations source) is allowed.
fn check_datasources(value: &Value, at: &str, problems: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if key == "datasource" {
                    let uid = child
                        .get("uid")
                        .and_then(Value::as_str)
                        .or(child.as_str())
                        .unwrap_or("");
                    if uid != "${datasource}" && uid != "-- Grafana --" {
                        problems.push(format!("{at}: datasource {child} is not ${{datasource}}"));
                    }
                }
                check_datasources(child, &format!("{at}.{key}"), problems);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                check_datasources(child, &format!("{at}[{i}]"), problems);
            }
        }
        _ => {}
    }
}

/// Lints one dashboard; returns its problems.
pub fn lint(file: &str, dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let mut problem = |p: String| problems.push(format!("{file}: {p}"));
    let schema = dashboard["schemaVersion"].as_u64().unwrap_or(0);
    if schema < 39 {
        problem(format!("schemaVersion {schema} < 39"));
    }
    if dashboard.get("__inputs").is_some() || dashboard.get("__requires").is_some() {
        problem("has __inputs/__requires: export it for provisioning (no external sharing)".into());
    }
    let uid = dashboard["uid"].as_str().unwrap_or("");
    if uid.is_empty() || uid.len() > 40 {
        problem(format!("uid {uid:?}: Grafana needs 1 to 40 characters"));
    }
    if dashboard["title"].as_str().unwrap_or("").is_empty() {
        problem("no title".into());
    }
    match variable(dashboard, "datasource") {
        Some(v) if v["type"] == "datasource" && variable_query(v) == "prometheus" => {}
        other => problem(format!(
            "needs a `datasource` variable of type datasource, query prometheus; found {other:?}"
        )),
    }
    // Every dashboard picks nodes; the GPU dashboards GPUs, the efficiency
    // one workload kinds.
    for (name, source, required) in [
        ("instance", "gpuwatch_gpu_info", true),
        ("gpu", "gpuwatch_gpu_info", false),
        ("kind", "gpuwatch_workload_gpu_seconds_total", false),
    ] {
        match variable(dashboard, name) {
            Some(v)
                if v["type"] == "query"
                    && variable_query(v).starts_with("label_values(")
                    && variable_query(v).contains(source) => {}
            None if !required => {}
            other => problem(format!(
                "needs a `{name}` query variable (label_values on {source}); found {other:?}"
            )),
        }
    }
    if variable(dashboard, "gpu").is_none() && variable(dashboard, "kind").is_none() {
        problem("needs a `gpu` or a `kind` variable".into());
    }
    let mut ids = BTreeSet::new();
    for panel in panels(dashboard) {
        let title = panel["title"].as_str().unwrap_or("?");
        let kind = panel["type"].as_str().unwrap_or("");
        if !PANEL_TYPES.contains(&kind) {
            problem(format!("panel {title:?}: type {kind:?} is not one of {PANEL_TYPES:?} (deprecated or unknown)"));
        }
        if let Some(id) = panel["id"].as_u64() {
            if !ids.insert(id) {
                problem(format!("panel {title:?}: duplicate id {id}"));
            }
        } else {
            problem(format!("panel {title:?}: no id"));
        }
        if !panel["gridPos"].is_object() {
            problem(format!("panel {title:?}: no gridPos"));
        }
        if kind == "row" || kind == "text" {
            continue;
        }
        let unit = panel["fieldConfig"]["defaults"]["unit"]
            .as_str()
            .unwrap_or("");
        if unit.is_empty() {
            problem(format!("panel {title:?}: no fieldConfig.defaults.unit"));
        }
        if panel["datasource"]["uid"] != "${datasource}" {
            problem(format!(
                "panel {title:?}: datasource is not ${{datasource}}"
            ));
        }
        let targets = panel["targets"].as_array().cloned().unwrap_or_default();
        if targets.is_empty() {
            problem(format!("panel {title:?}: no targets"));
        }
        for target in &targets {
            if target["datasource"]["uid"] != "${datasource}" {
                problem(format!(
                    "panel {title:?}: a target's datasource is not ${{datasource}}"
                ));
            }
            if target["expr"].as_str().unwrap_or("").trim().is_empty() {
                problem(format!("panel {title:?}: a target has no expr"));
            }
        }
    }
    check_datasources(dashboard, file, &mut problems);
    problems
}
