//! The peers' dashboards, as they publish them today (copies in
//! tests/fixtures/peers/, see its README): nvidia_gpu_exporter's
//! `dashboard.json` and `dashboard-overview.json`, and dcgm-exporter's
//! `dcgm-exporter-dashboard.json`, against gpuwatch's `--metrics-compat`
//! families on a real Prometheus.
//!
//! Every template variable is resolved as Grafana does (`label_values(...)`
//! through the label-values API, `query_result(...)` as an instant query),
//! and every panel query is evaluated for each choice of node and GPU. Every
//! query must succeed; every panel must show data for some choice, except
//! those in [`EMPTY_PANELS`], which must show none (so the list cannot go
//! stale). docs/compat.md's drop-in section lists the same panels.

mod common;

use common::promql::{regex_escape, Prometheus};
use common::{fixture, Agent};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Grafana's built-in interval variables, as the test substitutes them.
const RATE_INTERVAL: &str = "15s";
const INTERVAL: &str = "1s";
const RANGE: &str = "1m";

const NGE: &str = "nvidia_gpu_exporter-dashboard.json";
const NGE_OVERVIEW: &str = "nvidia_gpu_exporter-dashboard-overview.json";
const DCGM: &str = "dcgm-exporter-dashboard.json";

/// Panels known to stay empty on gpuwatch: (dashboard, panel title, why).
#[rustfmt::skip]
const EMPTY_PANELS: &[(&str, &str, &str)] = &[];

fn load(file: &str) -> Value {
    let path = fixture(&format!("fixtures/peers/{file}"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: invalid JSON: {e}"))
}

/// Every panel with queries, rows' nested panels included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for panel in list.as_array().into_iter().flatten() {
            if panel["targets"].is_array() {
                out.push(panel);
            }
            walk(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

fn variable_query(dashboard: &Value, name: &str) -> String {
    let var = dashboard["templating"]["list"]
        .as_array()
        .and_then(|l| l.iter().find(|v| v["name"] == name))
        .unwrap_or_else(|| panic!("no variable {name}"));
    match &var["query"] {
        Value::String(s) => s.clone(),
        other => other["query"].as_str().unwrap_or_default().to_string(),
    }
}

/// Replaces `$name` and `${name}` for each (name, value), and Grafana's
/// interval variables.
fn substitute(expr: &str, vars: &[(&str, &str)]) -> String {
    let intervals = [
        ("__rate_interval", RATE_INTERVAL),
        ("__interval", INTERVAL),
        ("__range", RANGE),
    ];
    let mut out = expr.to_string();
    for (name, value) in vars.iter().chain(intervals.iter()) {
        out = out.replace(&format!("${{{name}}}"), value);
        out = out.replace(&format!("${name}"), value);
    }
    out
}

/// "All" of a multi-value variable without a custom all value.
fn all_of(values: &[String]) -> String {
    let escaped: Vec<String> = values.iter().map(|v| regex_escape(v)).collect();
    format!("({})", escaped.join("|"))
}

/// `label_values(SELECTOR, LABEL)` as Grafana resolves it.
fn label_values(prom: &Prometheus, query: &str) -> Vec<String> {
    let inner = query
        .trim()
        .strip_prefix("label_values(")
        .and_then(|q| q.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not label_values(...): {query}"));
    let (selector, label) = inner
        .rsplit_once(',')
        .expect("label_values(selector, label)");
    let data = prom
        .api(
            &format!("/api/v1/label/{}/values", label.trim()),
            &[("match[]", selector.trim())],
        )
        .unwrap_or_else(|e| panic!("{query}: {e}"));
    data.as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// `query_result(EXPR)` with nvidia_gpu_exporter's regex: the `uuid` label
/// of each result.
fn query_result_uuids(prom: &Prometheus, query: &str) -> Vec<String> {
    let expr = query
        .trim()
        .strip_prefix("query_result(")
        .and_then(|q| q.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not query_result(...): {query}"));
    let data = prom
        .api("/api/v1/query", &[("query", expr)])
        .unwrap_or_else(|e| panic!("{expr}: {e}"));
    data["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["metric"]["uuid"].as_str().map(str::to_string))
        .collect()
}

/// What the panels showed: (dashboard, title) → whether any query of any
/// panel of that title returned data for some choice; and query errors.
#[derive(Default)]
struct Outcome {
    data: BTreeMap<(String, String), bool>,
    errors: Vec<String>,
}

impl Outcome {
    /// Evaluates every panel query of `board` with the variables `vars`.
    fn evaluate(&mut self, prom: &Prometheus, file: &str, board: &Value, vars: &[(&str, &str)]) {
        for panel in panels(board) {
            let title = panel["title"].as_str().unwrap_or("?").to_string();
            let seen = self
                .data
                .entry((file.to_string(), title.clone()))
                .or_insert(false);
            for target in panel["targets"].as_array().into_iter().flatten() {
                let Some(expr) = target["expr"].as_str() else {
                    continue;
                };
                let query = substitute(expr, vars);
                match prom.query(&query) {
                    Ok(n) => *seen |= n > 0,
                    Err(e) => self
                        .errors
                        .push(format!("{file}: {title:?} {vars:?}: {query}: {e}")),
                }
            }
        }
    }
}

/// The two nvidia_gpu_exporter dashboards: $job and $node from
/// nvidia_smi_index, $gpu from nvidia_smi_gpu_info.
fn nvidia_gpu_exporter(prom: &Prometheus, file: &str, instances: &[String], out: &mut Outcome) {
    let board = load(file);
    let jobs = label_values(prom, &variable_query(&board, "job"));
    assert_eq!(jobs, ["gpuwatch"], "{file}: $job");
    let nodes = label_values(
        prom,
        &substitute(&variable_query(&board, "node"), &[("job", "gpuwatch")]),
    );
    assert_eq!(&nodes, instances, "{file}: $node");
    for node in &nodes {
        let base = [("job", "gpuwatch"), ("node", node.as_str())];
        let gpus = query_result_uuids(prom, &substitute(&variable_query(&board, "gpu"), &base));
        assert!(!gpus.is_empty(), "{file}: $gpu has no value on {node}");
        let mut choices: Vec<String> = gpus.clone();
        if file == NGE_OVERVIEW {
            choices.push(".*".into()); // its allValue
        }
        for gpu in &choices {
            let vars = [base[0], base[1], ("gpu", gpu.as_str())];
            out.evaluate(prom, file, &board, &vars);
        }
    }
}

/// dcgm-exporter's dashboard: $instance and $gpu from DCGM_FI_DEV_GPU_TEMP.
fn dcgm_exporter(prom: &Prometheus, instances: &[String], out: &mut Outcome) {
    let board = load(DCGM);
    let found = label_values(prom, &variable_query(&board, "instance"));
    assert_eq!(&found, instances, "{DCGM}: $instance");
    let gpus = label_values(prom, &variable_query(&board, "gpu"));
    assert!(!gpus.is_empty(), "{DCGM}: $gpu has no value");
    let all_gpus = all_of(&gpus);
    let mut choices = vec![all_of(instances)];
    choices.extend(instances.iter().map(|i| regex_escape(i)));
    for instance in &choices {
        out.evaluate(
            prom,
            DCGM,
            &board,
            &[("instance", instance), ("gpu", &all_gpus)],
        );
        out.evaluate(prom, DCGM, &board, &[("instance", instance), ("gpu", "0")]);
    }
}

#[test]
fn peer_dashboards_show_data_on_gpuwatch_through_a_real_prometheus() {
    let compat = ["--metrics-compat", "dcgm,nvidia_smi"];
    // The golden scenario has MIG instances, processes, Xid errors and a
    // lost GPU; h100x8 is a busy node.
    let golden_scenario = fixture("scenarios/golden-full.toml");
    let golden = Agent::start(
        golden_scenario.to_str().expect("utf-8 path"),
        &compat,
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    let h100 = Agent::start("h100x8", &compat, &[]);
    golden.wait_for("Xid errors and processes", Duration::from_secs(30), |m| {
        m.find("nvidia_smi_xid_errors_total", &[]).len() == 2
            && m.has("nvidia_smi_compute_app_used_memory_bytes")
            && m.has("nvidia_smi_mig_memory_used_bytes")
            && m.has("nvidia_smi_mig_sm_activity_ratio")
    });
    h100.wait_for(
        "processes and the slow tier",
        Duration::from_secs(30),
        |m| {
            m.has("nvidia_smi_compute_app_used_memory_bytes")
                && m.has("nvidia_smi_pstate")
                && m.has("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")
        },
    );
    let mut instances: Vec<String> = [&golden, &h100]
        .iter()
        .map(|a| a.url.trim_start_matches("http://").to_string())
        .collect();
    instances.sort();
    let targets: Vec<&str> = instances.iter().map(String::as_str).collect();
    let prom = Prometheus::start(&targets, None);
    // Enough scrapes of both nodes for rate() over $__rate_interval.
    prom.poll(
        "both targets up with 5 scrapes each",
        Duration::from_secs(45),
        || {
            let up = prom.api(
                "/api/v1/query",
                &[(
                    "query",
                    "count_over_time(up{job=\"gpuwatch\"}[1m]) >= 5 and on(instance) up == 1",
                )],
            )?;
            Ok(up["result"].as_array().map_or(0, Vec::len) == 2)
        },
    );

    let mut out = Outcome::default();
    nvidia_gpu_exporter(&prom, NGE, &instances, &mut out);
    nvidia_gpu_exporter(&prom, NGE_OVERVIEW, &instances, &mut out);
    dcgm_exporter(&prom, &instances, &mut out);

    let mut problems = out.errors;
    let expected_empty: BTreeMap<(String, String), &str> = EMPTY_PANELS
        .iter()
        .map(|(f, t, why)| ((f.to_string(), t.to_string()), *why))
        .collect();
    for (key, why) in &expected_empty {
        if !out.data.contains_key(key) {
            problems.push(format!(
                "{key:?} is listed as empty ({why}) but no such panel exists"
            ));
        }
    }
    for ((file, title), has_data) in &out.data {
        let key = (file.clone(), title.clone());
        match (expected_empty.get(&key), has_data) {
            (None, false) => problems.push(format!("{file}: panel {title:?} shows no data")),
            (Some(why), true) => problems.push(format!(
                "{file}: panel {title:?} shows data now; remove it from EMPTY_PANELS and docs/compat.md (was: {why})"
            )),
            _ => {}
        }
    }
    let covered = out.data.values().filter(|d| **d).count();
    assert!(
        problems.is_empty(),
        "{} problems ({covered} of {} panels show data):\n{}\nPrometheus log:\n{}",
        problems.len(),
        out.data.len(),
        problems.join("\n"),
        prom.log()
    );
    // Sanity: the lists agree with what the loops saw.
    let listed: BTreeSet<_> = expected_empty.keys().collect();
    assert_eq!(covered + listed.len(), out.data.len());
}
