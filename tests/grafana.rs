//! The bundled Grafana dashboards (grafana/dashboards/*.json): their JSON is
//! linted, and every panel query and template variable is evaluated on a real
//! Prometheus server scraping real agents on the NVML simulator.
//!
//! Three agents are scraped: `h100x8` (a busy 8-GPU node), the golden
//! scenario (frozen time; every metric family, Xid errors, fans, a lost GPU,
//! a pod and a container workload) and the `workloads` scenario whose GPU 0
//! runs a real process of a Slurm job (its environment). Each query must
//! succeed everywhere, and return data whenever every `gpuwatch_*` series it
//! selects (through the recording rules it reads, too) exists for the
//! selected node, GPU and workload kind (under "All" that is always).

mod common;
#[path = "grafana/lint.rs"]
mod lint;
#[path = "grafana/queries.rs"]
mod queries;

use common::kubelet::FakeKubelet;
use common::promql::Prometheus;
use common::{fixture, Agent, Metrics};
use lint::{is_multi, lint, panels, variable, variable_query};
use queries::{format_values, raw_selectors, recording_rules, substitute, Selector};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A process killed when the test ends.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

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
        out.len() >= 4,
        "expected the fleet, GPU, capacity and efficiency dashboards, found {}",
        out.len()
    );
    out
}

/// One choice of the dashboard's variables.
struct Selection {
    label: String,
    /// Node (instance label) → GPUs chosen on it; None = every GPU.
    instances: Vec<String>,
    gpus: Option<Vec<String>>,
    /// Workload kinds chosen; None = every kind.
    kinds: Option<Vec<String>>,
    instance_value: String,
    gpu_value: String,
    kind_value: String,
}

impl Selection {
    fn new(
        dashboard: &Value,
        instances: &[&str],
        gpus: Option<&[&str]>,
        kinds: Option<&[&str]>,
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
        let kind_value = match kinds {
            None => format_values(&["$__all"], true),
            Some(k) => format_values(k, is_multi(dashboard, "kind")),
        };
        Selection {
            label: format!(
                "instance={} gpu={} kind={}",
                if instances.is_empty() {
                    "All".to_string()
                } else {
                    instances.join("|")
                },
                gpus.map_or("All".to_string(), |g| g.join("|")),
                kinds.map_or("All".to_string(), |k| k.join("|"))
            ),
            instances: if instances.is_empty() {
                all_instances.to_vec()
            } else {
                instances.iter().map(|s| s.to_string()).collect()
            },
            gpus: gpus.map(|g| g.iter().map(|s| s.to_string()).collect()),
            kinds: kinds.map(|k| k.iter().map(|s| s.to_string()).collect()),
            instance_value,
            gpu_value,
            kind_value,
        }
    }

    /// Whether the chosen nodes export a series of `selector` for the
    /// chosen GPUs and workload kinds (or without a gpu or kind label).
    fn exports(&self, scrapes: &BTreeMap<String, Metrics>, selector: &Selector) -> bool {
        let (metric, matchers) = selector;
        let chosen = |choice: &Option<Vec<String>>, value: Option<&String>| match (choice, value) {
            (None, _) | (_, None) => true,
            (Some(values), Some(value)) => values.contains(value),
        };
        self.instances.iter().any(|instance| {
            scrapes[instance].samples.iter().any(|s| {
                s.name == *metric
                    && matchers.iter().all(|(k, v)| s.labels.get(k) == Some(v))
                    && chosen(&self.gpus, s.labels.get("gpu"))
                    && chosen(&self.kinds, s.labels.get("kind"))
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
    // Host facts for the golden scenario's pids from the fixture /proc tree
    // (as tests/golden.rs): a pod and a container workload, for the
    // Efficiency dashboard's namespace panels.
    let proc_root = fixture("fixtures/proc-golden/proc");
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
            "[[profiles]]\nname = \"small\"\nmemory = \"2GiB\"\n[kubernetes]\npod_resources_socket = {:?}\n[health]\npci_devices = {:?}\n[sampler]\nproc_root = {:?}\n",
            socket.to_str().expect("utf-8 path"),
            pci.to_str().expect("utf-8 path"),
            proc_root.to_str().expect("utf-8 path")
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
                && !m
                    .find("gpuwatch_workload_gpu_seconds_total", &[("kind", "pod")])
                    .is_empty()
        });
    // A real process of a Slurm job (its environment names job 9100001 of
    // account physics, run by this test's user, as under
    // proctrack/linuxproc), reported by the simulator as GPU 0's process of
    // the `workloads` scenario: the Efficiency dashboard's Slurm panels.
    let uid =
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").expect("/proc/self"));
    let job = KillOnDrop(
        Command::new("sleep")
            .arg("900")
            .env("SLURM_JOB_ID", "9100001")
            .env("SLURM_STEP_ID", "0")
            .env("SLURM_JOB_UID", uid.to_string())
            .env("SLURM_JOB_USER", "alice")
            .env("SLURM_JOB_ACCOUNT", "physics")
            .env("SLURM_JOB_PARTITION", "gpu")
            .spawn()
            .expect("start sleep (coreutils)"),
    );
    let pid_map = config_dir.path().join("pid-map");
    std::fs::write(&pid_map, format!("5001 {}\n", job.0.id())).expect("pid map");
    // On the simulator the agent reads host facts only from a named /proc.
    let slurm_config = config_dir.path().join("slurm.toml");
    std::fs::write(&slurm_config, "[sampler]\nproc_root = \"/proc\"\n").expect("config");
    let slurm = Agent::start(
        "workloads",
        &["--config", slurm_config.to_str().expect("utf-8 path")],
        &[(
            "GPUWATCH_SIM_PID_MAP",
            pid_map.to_str().expect("utf-8 path"),
        )],
    );
    let slurm_metrics = slurm.wait_for("the Slurm job's workload", Duration::from_secs(30), |m| {
        !m.find(
            "gpuwatch_workload_gpu_seconds_total",
            &[
                ("kind", "slurm_job"),
                ("workload", "9100001"),
                ("account", "physics"),
            ],
        )
        .is_empty()
    });
    let h100_instance = h100.url.trim_start_matches("http://").to_string();
    let golden_instance = golden.url.trim_start_matches("http://").to_string();
    let slurm_instance = slurm.url.trim_start_matches("http://").to_string();
    let scrapes: BTreeMap<String, Metrics> = [
        (h100_instance.clone(), h100_metrics),
        (golden_instance.clone(), golden_metrics),
        (slurm_instance.clone(), slurm_metrics),
    ]
    .into_iter()
    .collect();
    let exported: BTreeSet<String> = scrapes
        .values()
        .flat_map(|m| m.samples.iter().map(|s| s.name.clone()))
        .collect();
    let all_instances: Vec<String> = scrapes.keys().cloned().collect();

    // Every metric a dashboard names must exist, and every recording rule
    // it reads be recorded by the bundled rules.
    let rules = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/prometheus/gpuwatch-rules.yml"
    );
    let records = recording_rules(&std::fs::read_to_string(rules).expect("rules file"));
    for (file, board) in &boards {
        for panel in panels(board) {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"].as_str().unwrap_or("");
                let selected = match raw_selectors(expr, &records) {
                    Ok(selected) => selected,
                    Err(e) => {
                        problems.push(format!("{file}: {e}: {expr}"));
                        continue;
                    }
                };
                for (name, _) in selected {
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

    // The bundled alert and recording rules, so the fleet dashboard's alert
    // panels have ALERTS to show and the rule-reading panels their series.
    let server = Prometheus::start(
        &[&h100_instance, &golden_instance, &slurm_instance],
        Some(rules),
    );
    // Enough scrapes of every node for rate() over $__rate_interval, and
    // the workload recording rules evaluated on them.
    server.poll(
        "every target up with 5 scrapes, the workload rules recorded",
        Duration::from_secs(45),
        || {
            let up = server.api(
                "/api/v1/query",
                &[(
                    "query",
                    "count_over_time(up{job=\"gpuwatch\"}[1m]) >= 5 and on(instance) up == 1",
                )],
            )?;
            let recorded = |rule: &str| -> Result<bool, String> { Ok(server.query(rule)? > 0) };
            Ok(up["result"].as_array().map_or(0, Vec::len) == 3
                && recorded("instance_account:gpuwatch_workload_gpu_seconds:rate5m")?
                && recorded("instance_namespace:gpuwatch_workload_gpu_seconds:rate5m")?)
        },
    );
    let ready_at = started.elapsed();

    // Template variables: label_values(selector, label) through the label API.
    for (file, board) in &boards {
        for name in ["instance", "gpu", "kind"] {
            let Some(var) = variable(board, name) else {
                continue;
            };
            let query = variable_query(var);
            let inner = query
                .strip_prefix("label_values(")
                .and_then(|q| q.strip_suffix(')'))
                .unwrap_or_else(|| panic!("{file}: {name}: not label_values(...): {query}"));
            let (selector, label) = inner
                .rsplit_once(',')
                .unwrap_or_else(|| panic!("{file}: {name}: label_values needs a label: {query}"));
            let selector = substitute(selector.trim(), ".*", ".*", ".*");
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
                        "kind" => vec!["pod", "container", "slurm_job"],
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
        let all = &all_instances;
        let mut selections = if variable(board, "kind").is_some() {
            // The Efficiency dashboard: nodes and workload kinds.
            vec![
                Selection::new(board, &[&h100_instance], None, None, all),
                Selection::new(board, &[&golden_instance], None, None, all),
                Selection::new(board, &[&slurm_instance], None, None, all),
                Selection::new(board, &[&golden_instance], None, Some(&["pod"]), all),
                Selection::new(board, &[&slurm_instance], None, Some(&["slurm_job"]), all),
                Selection::new(board, &[], None, Some(&["slurm_job", "container"]), all),
            ]
        } else {
            vec![
                Selection::new(board, &[&h100_instance], Some(&["0"]), None, all),
                Selection::new(board, &[&golden_instance], Some(&["0"]), None, all),
                Selection::new(board, &[&golden_instance], Some(&["1"]), None, all),
                Selection::new(board, &[&golden_instance], Some(&["2"]), None, all),
            ]
        };
        if multi {
            selections.push(Selection::new(board, &[], None, None, all));
            selections.push(Selection::new(
                board,
                &[&h100_instance, &golden_instance],
                Some(&["0", "1"]),
                None,
                all,
            ));
        }
        for panel in panels(board) {
            let title = panel["title"].as_str().unwrap_or("?");
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"].as_str().unwrap_or("");
                let selected = raw_selectors(expr, &records).unwrap_or_default();
                let mut answered_somewhere = false;
                for selection in &selections {
                    let query = substitute(
                        expr,
                        &selection.instance_value,
                        &selection.gpu_value,
                        &selection.kind_value,
                    );
                    let context = format!("{file}: panel {title:?} ({}): {query}", selection.label);
                    if query.contains('$') {
                        problems.push(format!("{context}: unknown variable left"));
                        continue;
                    }
                    evaluated += 1;
                    // ALERTS depends on alert state, not on what the node
                    // exports: it must answer under some selection only.
                    let applicable = !expr.contains("ALERTS")
                        && selected.iter().all(|n| selection.exports(&scrapes, n));
                    match server.query(&query) {
                        Err(e) => problems.push(format!("{context}: {e}")),
                        Ok(0) if applicable => problems.push(format!(
                            "{context}: no data, though the node exports {selected:?}"
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
