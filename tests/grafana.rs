//! The bundled Grafana dashboards (grafana/dashboards/*.json): their JSON is
//! linted, and every panel query and template variable is evaluated on a real
//! Prometheus server scraping real agents on the NVML simulator.
//!
//! Two agents are scraped: `h100x8` (a busy 8-GPU node) and the golden
//! scenario (frozen time; every metric family, Xid errors, fans, a lost GPU).
//! Each query must succeed everywhere, and return data whenever every
//! `gpuwatch_*` metric it names exists for the selected node and GPU (under
//! "All" that is always).

mod common;

use common::kubelet::FakeKubelet;
use common::promql::{regex_escape, Prometheus};
use common::{fixture, Agent, Metrics};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Grafana's built-in interval variables, as the test substitutes them.
const RATE_INTERVAL: &str = "15s";
const INTERVAL: &str = "1s";
const RANGE: &str = "1m";

/// Panel types of the current schema the dashboards may use.
const PANEL_TYPES: &[&str] = &[
    "row",
    "text",
    "timeseries",
    "stat",
    "gauge",
    "bargauge",
    "table",
    "state-timeline",
];

fn dashboards_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("grafana/dashboards")
}

/// Every dashboard: (file name, JSON).
fn dashboards() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dashboards_dir()).expect("grafana/dashboards") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read dashboard");
        let json: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: invalid JSON: {e}", path.display()));
        out.push((
            path.file_name().unwrap().to_string_lossy().into_owned(),
            json,
        ));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(
        out.len() >= 3,
        "expected the fleet, GPU and capacity dashboards, found {}",
        out.len()
    );
    out
}

/// Every panel, rows' nested panels included.
fn panels(dashboard: &Value) -> Vec<&Value> {
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

fn variable<'a>(dashboard: &'a Value, name: &str) -> Option<&'a Value> {
    dashboard["templating"]["list"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == name)
}

fn variable_query(var: &Value) -> String {
    match &var["query"] {
        Value::String(s) => s.clone(),
        other => other["query"].as_str().unwrap_or_default().to_string(),
    }
}

fn is_multi(dashboard: &Value, name: &str) -> bool {
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
fn lint(file: &str, dashboard: &Value) -> Vec<String> {
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
    for name in ["instance", "gpu"] {
        match variable(dashboard, name) {
            Some(v)
                if v["type"] == "query"
                    && variable_query(v).starts_with("label_values(")
                    && variable_query(v).contains("gpuwatch_gpu_info") => {}
            other => problem(format!(
                "needs a `{name}` query variable (label_values on gpuwatch_gpu_info); found {other:?}"
            )),
        }
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

/// The `gpuwatch_*` metric names an expression mentions.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut token = String::new();
    let mut in_string = false;
    for c in expr.chars().chain(std::iter::once(' ')) {
        if c == '"' {
            in_string = !in_string;
        }
        if !in_string && (c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            token.push(c);
            continue;
        }
        if token.starts_with("gpuwatch_") {
            names.insert(token.clone());
        }
        token.clear();
    }
    names
}

/// A variable's values as Grafana interpolates them into a query.
fn format_values(values: &[&str], multi: bool) -> String {
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
fn substitute(expr: &str, instance: &str, gpu: &str) -> String {
    let mut out = expr.to_string();
    for (names, value) in [
        (&["${datasource}", "$datasource"][..], "prometheus"),
        (
            &["${instance:regex}", "${instance}", "$instance"][..],
            instance,
        ),
        (&["${gpu:regex}", "${gpu}", "$gpu"][..], gpu),
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

/// One choice of the dashboard's variables.
struct Selection {
    label: String,
    /// Node (instance label) → GPUs chosen on it; None = every GPU.
    instances: Vec<String>,
    gpus: Option<Vec<String>>,
    instance_value: String,
    gpu_value: String,
}

impl Selection {
    fn new(
        dashboard: &Value,
        instances: &[&str],
        gpus: Option<&[&str]>,
        all_instances: &[String],
    ) -> Selection {
        let instance_value = if instances.is_empty() {
            format_values(&["$__all"], true)
        } else {
            format_values(instances, is_multi(dashboard, "instance"))
        };
        let gpu_value = match gpus {
            None => format_values(&["$__all"], true),
            Some(g) => format_values(g, is_multi(dashboard, "gpu")),
        };
        Selection {
            label: format!(
                "instance={} gpu={}",
                if instances.is_empty() {
                    "All".to_string()
                } else {
                    instances.join("|")
                },
                gpus.map_or("All".to_string(), |g| g.join("|"))
            ),
            instances: if instances.is_empty() {
                all_instances.to_vec()
            } else {
                instances.iter().map(|s| s.to_string()).collect()
            },
            gpus: gpus.map(|g| g.iter().map(|s| s.to_string()).collect()),
            instance_value,
            gpu_value,
        }
    }

    /// Whether the chosen nodes export `metric` for the chosen GPUs (or
    /// without a gpu label).
    fn exports(&self, scrapes: &BTreeMap<String, Metrics>, metric: &str) -> bool {
        self.instances.iter().any(|instance| {
            scrapes[instance].samples.iter().any(|s| {
                s.name == metric
                    && match (&self.gpus, s.labels.get("gpu")) {
                        (None, _) | (_, None) => true,
                        (Some(gpus), Some(gpu)) => gpus.contains(gpu),
                    }
            })
        })
    }
}

#[test]
fn dashboards_lint_and_every_query_answers_on_a_real_prometheus() {
    let started = Instant::now();
    let boards = dashboards();

    // Lint first: cheap, and no servers are needed to see these problems.
    let mut problems = Vec::new();
    let mut uids = BTreeSet::new();
    for (file, board) in &boards {
        problems.extend(lint(file, board));
        let uid = board["uid"].as_str().unwrap_or("").to_string();
        if !uids.insert(uid.clone()) {
            problems.push(format!("{file}: uid {uid:?} is used by another dashboard"));
        }
    }
    assert!(
        problems.is_empty(),
        "dashboard lint:\n{}",
        problems.join("\n")
    );

    // Two nodes: a busy H100 node at the default /metrics (what a fleet
    // scrapes), and the golden scenario with every family (detail=full),
    // which fills the panels of the detail sets.
    let h100 = Agent::start("h100x8", &[], &[]);
    let golden_scenario = fixture("scenarios/golden-full.toml");
    // Workload profiles, so that the capacity families are exported too.
    let config_dir = tempfile::tempdir().expect("temp dir");
    let config = config_dir.path().join("gpuwatch.toml");
    // A stand-in kubelet gives GPU 0's MIG instance 2 to a pod, so that the
    // Kubernetes panel has data.
    let socket = config_dir.path().join("kubelet.sock");
    let _kubelet = FakeKubelet::golden_triton(&socket);
    // A PCI bus with the golden GPUs and one the driver never saw, so that
    // the health rows' "missing from the driver" panels have data.
    let pci = config_dir.path().join("pci");
    for address in [
        "0000:07:00.0",
        "0000:65:00.0",
        "0000:0f:00.0",
        "0000:9a:00.0",
    ] {
        let dir = pci.join(address);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("vendor"), "0x10de\n").expect("vendor");
        std::fs::write(dir.join("class"), "0x030200\n").expect("class");
    }
    std::fs::write(
        &config,
        format!(
            "[[profiles]]\nname = \"small\"\nmemory = \"2GiB\"\n[kubernetes]\npod_resources_socket = {:?}\n[health]\npci_devices = {:?}\n",
            socket.to_str().expect("utf-8 path"),
            pci.to_str().expect("utf-8 path")
        ),
    )
    .expect("config");
    let golden = Agent::start(
        golden_scenario.to_str().expect("utf-8 path"),
        &[
            "--config",
            config.to_str().expect("utf-8 path"),
            "--metrics-detail",
            "full",
        ],
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    let h100_metrics = h100.wait_for(
        "the slow tier and processes",
        Duration::from_secs(30),
        |m| {
            m.has("gpuwatch_temperature_threshold_celsius")
                && m.has("gpuwatch_gpu_processes")
                && m.has("gpuwatch_pcie_link_width")
                && m.has("gpuwatch_nvlink_links_down")
                && m.has("gpuwatch_gpm_nvlink_bytes_per_second")
        },
    );
    let golden_metrics =
        golden.wait_for("Xid errors and processes", Duration::from_secs(30), |m| {
            m.find("gpuwatch_xid_errors_total", &[]).len() == 2
                && m.find("gpuwatch_gpu_processes", &[]).len() == 2
                && m.has("gpuwatch_gpu_pod_info")
                && m.has("gpuwatch_gpm_mig_sm_active_ratio")
                && m.has("gpuwatch_pci_gpus")
        });
    let h100_instance = h100.url.trim_start_matches("http://").to_string();
    let golden_instance = golden.url.trim_start_matches("http://").to_string();
    let scrapes: BTreeMap<String, Metrics> = [
        (h100_instance.clone(), h100_metrics),
        (golden_instance.clone(), golden_metrics),
    ]
    .into_iter()
    .collect();
    let exported: BTreeSet<String> = scrapes
        .values()
        .flat_map(|m| m.samples.iter().map(|s| s.name.clone()))
        .collect();
    let all_instances: Vec<String> = scrapes.keys().cloned().collect();

    // Every metric a dashboard names must exist.
    for (file, board) in &boards {
        for panel in panels(board) {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"].as_str().unwrap_or("");
                for name in metric_names(expr) {
                    if !exported.contains(&name) {
                        problems.push(format!(
                            "{file}: panel {:?} names {name}, which gpuwatch does not export: {expr}",
                            panel["title"].as_str().unwrap_or("?")
                        ));
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "unknown metrics:\n{}",
        problems.join("\n")
    );

    // The bundled alert rules, so the fleet dashboard's alert panels have
    // ALERTS to show.
    let rules = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/prometheus/gpuwatch-rules.yml"
    );
    let server = Prometheus::start(&[&h100_instance, &golden_instance], Some(rules));
    // Enough scrapes of both nodes for rate() over $__rate_interval.
    server.poll(
        "both targets up with 5 scrapes each",
        Duration::from_secs(45),
        || {
            let up = server.api(
                "/api/v1/query",
                &[(
                    "query",
                    "count_over_time(up{job=\"gpuwatch\"}[1m]) >= 5 and on(instance) up == 1",
                )],
            )?;
            Ok(up["result"].as_array().map_or(0, Vec::len) == 2)
        },
    );
    let ready_at = started.elapsed();

    // Template variables: label_values(selector, label) through the label API.
    for (file, board) in &boards {
        for name in ["instance", "gpu"] {
            let query = variable_query(variable(board, name).expect("linted"));
            let inner = query
                .strip_prefix("label_values(")
                .and_then(|q| q.strip_suffix(')'))
                .unwrap_or_else(|| panic!("{file}: {name}: not label_values(...): {query}"));
            let (selector, label) = inner
                .rsplit_once(',')
                .unwrap_or_else(|| panic!("{file}: {name}: label_values needs a label: {query}"));
            let selector = substitute(selector.trim(), ".*", ".*");
            let label = label.trim();
            match server.api(
                &format!("/api/v1/label/{label}/values"),
                &[("match[]", &selector)],
            ) {
                Ok(values) => {
                    let values: Vec<&str> = values
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    let wanted: Vec<&str> = match name {
                        "instance" => vec![&h100_instance, &golden_instance],
                        _ => vec!["0", "1", "2", "7"],
                    };
                    for want in wanted {
                        if !values.contains(&want) {
                            problems.push(format!(
                                "{file}: variable {name} ({query}) lacks {want:?}: {values:?}"
                            ));
                        }
                    }
                }
                Err(e) => problems.push(format!("{file}: variable {name} ({query}): {e}")),
            }
        }
    }

    // Every target of every panel, under several variable choices.
    let mut evaluated = 0;
    for (file, board) in &boards {
        let multi = is_multi(board, "instance");
        let mut selections = vec![
            Selection::new(board, &[&h100_instance], Some(&["0"]), &all_instances),
            Selection::new(board, &[&golden_instance], Some(&["0"]), &all_instances),
            Selection::new(board, &[&golden_instance], Some(&["1"]), &all_instances),
            Selection::new(board, &[&golden_instance], Some(&["2"]), &all_instances),
        ];
        if multi {
            selections.push(Selection::new(board, &[], None, &all_instances));
            selections.push(Selection::new(
                board,
                &[&h100_instance, &golden_instance],
                Some(&["0", "1"]),
                &all_instances,
            ));
        }
        for panel in panels(board) {
            let title = panel["title"].as_str().unwrap_or("?");
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"].as_str().unwrap_or("");
                let names = metric_names(expr);
                let mut answered_somewhere = false;
                for selection in &selections {
                    let query = substitute(expr, &selection.instance_value, &selection.gpu_value);
                    let context = format!("{file}: panel {title:?} ({}): {query}", selection.label);
                    if query.contains('$') {
                        problems.push(format!("{context}: unknown variable left"));
                        continue;
                    }
                    evaluated += 1;
                    // ALERTS depends on alert state, not on what the node
                    // exports: it must answer under some selection only.
                    let applicable = !expr.contains("ALERTS")
                        && names.iter().all(|n| selection.exports(&scrapes, n));
                    match server.query(&query) {
                        Err(e) => problems.push(format!("{context}: {e}")),
                        Ok(0) if applicable => problems.push(format!(
                            "{context}: no data, though the node exports {names:?}"
                        )),
                        Ok(0) => {}
                        Ok(_) => answered_somewhere = true,
                    }
                }
                if !answered_somewhere {
                    problems.push(format!(
                        "{file}: panel {title:?}: no data under any selection: {expr}"
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    eprintln!(
        "{} dashboards, {evaluated} queries evaluated; Prometheus had data after {:.1?}, all done in {:.1?}",
        boards.len(),
        ready_at,
        started.elapsed()
    );
}
