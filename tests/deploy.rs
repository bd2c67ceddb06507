//! The deploy files under deploy/, checked with the real tools: promtool
//! (rules, config, rule unit tests), systemd-analyze (the unit) and hadolint
//! (the Dockerfile). The Kubernetes manifests: tests/deploy_kubernetes.rs;
//! the image and the Debian package run: tests/container.rs and
//! tests/debian_package.rs. `./scripts/test.sh` installs every tool; a
//! missing one fails the test with the command that installs it.

mod common;
#[path = "deploy/tools.rs"]
mod tools;

use std::path::{Path, PathBuf};

use common::{binary, promtool, run_cli};
use tools::{read, root, run, succeeds, text, venv_tool};

fn systemd_analyze() -> PathBuf {
    for candidate in ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"] {
        if Path::new(candidate).is_file() {
            return PathBuf::from(candidate);
        }
    }
    panic!("systemd-analyze is missing: install Debian's `systemd` package (scripts/test.sh does this)");
}

// --- Prometheus ---------------------------------------------------------------

#[test]
fn alert_rules_pass_promtool_check_rules() {
    let out = succeeds(
        &promtool(),
        &["check", "rules", "deploy/prometheus/gpuwatch-rules.yml"],
    );
    assert!(out.contains("SUCCESS: 45 rules found"), "{out}");
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
    assert!(out.contains("recording rules, each tested"), "{out}");
}

#[test]
fn alert_rules_use_only_metrics_gpuwatch_exports() {
    // Every gpuwatch_* name in the rules is in the metric table of
    // docs/metrics.md; a recording rule's name (level:metric:operations) is
    // defined in the file and named in the docs (docs/benchmarks.md "A fleet
    // on one Prometheus", docs/deploy.md "Grafana").
    let metrics_page = read("docs/metrics.md");
    let docs = ["docs/benchmarks.md", "docs/deploy.md"].map(read).concat();
    let rules = read("deploy/prometheus/gpuwatch-rules.yml");
    let mut checked = 0;
    for word in rules.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')) {
        if word.contains(":gpuwatch_") {
            assert!(
                rules.contains(&format!("record: {word}\n")),
                "{word} is used but not recorded by gpuwatch-rules.yml"
            );
            assert!(
                docs.contains(&format!("`{word}`")),
                "recording rule {word} is not named in docs/benchmarks.md or docs/deploy.md"
            );
        } else if word.starts_with("gpuwatch_") {
            assert!(
                metrics_page.contains(&format!("| `{word}` |")),
                "{word} is not a metric gpuwatch exports (docs/metrics.md table)"
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

#[test]
fn xid_alert_rules_carry_the_catalogs_codes_per_class() {
    use gpuwatch::health::catalog::{codes_of, Class, XID_DEFER_TO_REMAP};
    let rules = read("deploy/prometheus/gpuwatch-rules.yml");
    for class in Class::ALL {
        let Some(name) = class.rule() else { continue };
        let block = rules
            .split("- alert: ")
            .find(|b| b.starts_with(&format!("{name}\n")))
            .unwrap_or_else(|| panic!("{name} is not in gpuwatch-rules.yml"));
        let codes: Vec<String> = codes_of(class).iter().map(u64::to_string).collect();
        let want = format!("xid=~\"{}\"", codes.join("|"));
        let selectors: Vec<&str> = block
            .match_indices("xid=~\"")
            .map(|(i, _)| &block[i..])
            .collect();
        assert_eq!(selectors.len(), 3, "{name}: three selectors");
        for selector in selectors {
            assert!(selector.starts_with(&want), "{name}: want {want}");
        }
        // Xid 63/64 in this class defer to the row-remap readings.
        for code in XID_DEFER_TO_REMAP
            .iter()
            .filter(|c| codes_of(class).contains(c))
        {
            let defer =
                format!("label_replace(gpuwatch_remapped_rows_pending, \"xid\", \"{code}\"");
            assert!(
                block.contains(&defer),
                "{name}: Xid {code} defers to row remap"
            );
        }
    }
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
    assert!(
        from.contains(&"FROM binaries-${BINARIES} AS binaries"),
        "{from:?}"
    );
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
