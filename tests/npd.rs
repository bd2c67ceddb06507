//! `gpuwatch health --npd`, node-problem-detector's custom plugin, against
//! a running agent on the simulator for every verdict (healthy, degraded,
//! unhealthy for each action, a GPU lost), an agent that is down, one that
//! answers badly or not at all, and one behind basic auth; and the NPD
//! deployment under deploy/kubernetes/node-problem-detector/: built with
//! kustomize, validated with kubernetes-validate, its monitor config
//! checked against NPD's documented schema (tests/deploy/
//! npd-custom-plugin-monitor.schema.json, with jsonschema) and NPD's own
//! startup checks, and every rule run as NPD runs it, from the binary the
//! initContainer copies.

mod common;
#[path = "deploy/tools.rs"]
mod tools;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{run_cli, Agent};
use serde_json::Value;
use tools::{read, root, run, succeeds, venv_tool};

const LONG: Duration = Duration::from_secs(60);
const MONITOR: &str = "deploy/kubernetes/node-problem-detector/gpuwatch-monitor.json";

/// A scenario file in `dir`: `gpus` H100s (each `[[gpu]]` block's extra
/// lines given), then `tail` (faults).
fn scenario(dir: &Path, name: &str, gpus: &[&str], tail: &str) -> String {
    let mut text = format!(
        "name = \"{name}\"\ndescription = \"tests/npd.rs\"\ndriver_version = \"580.159.04\"\n"
    );
    for extra in gpus {
        text.push_str(&format!(
            "\n[[gpu]]\nname = \"NVIDIA H100 80GB HBM3\"\npci_device_id = 0x233010DE\nunsupported = [\"retired_pages\"]\nmig = false\n{extra}\n[gpu.metrics]\nutilization_gpu = 50\n"
        ));
    }
    text.push_str(tail);
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).expect("write scenario");
    path.display().to_string()
}

/// The agent's /api/v1/health once `ready` says it shows what the test is
/// about (the first sample, an Xid event that arrives a tick later).
fn wait_health(agent: &Agent, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + LONG;
    loop {
        let (status, body) = agent.get("/api/v1/health");
        if status == 200 {
            let doc: Value = serde_json::from_str(&body).expect("JSON");
            if ready(&doc) {
                return doc;
            }
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {body}\nlog:\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `gpuwatch health --npd --url URL ARGS`: (exit code, the stdout line,
/// stderr). Checks what NPD needs of every answer: one line of printable
/// ASCII within 80 bytes.
fn plugin(url: &str, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["health", "--npd", "--url", url];
    all.extend(args);
    let (code, out, err) = run_cli(&all, &[]);
    let line = one_line(&out, &all);
    (code, line, err)
}

fn one_line(out: &str, args: &[&str]) -> String {
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: one line: {out:?}");
    let line = lines[0];
    assert!(
        !line.is_empty() && line.len() <= 80,
        "{args:?}: {} bytes: {line:?}",
        line.len()
    );
    assert!(
        line.chars().all(|c| c.is_ascii_graphic() || c == ' '),
        "{args:?}: {line:?}"
    );
    line.to_string()
}

/// `GPU-` and 8 hex digits: the UUID's prefix the message carries.
fn short(doc: &Value, gpu: usize) -> String {
    let uuid = doc["gpus"][gpu]["uuid"].as_str().expect("uuid");
    uuid.chars().take(12).collect()
}

#[test]
fn healthy_gpus_exit_0() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = scenario(dir.path(), "npd-healthy", &["", ""], "");
    let agent = Agent::start(&file, &[], &[]);
    wait_health(&agent, "the first sample", |d| d["state"] == "healthy");
    let (code, line, err) = plugin(&agent.url, &[]);
    assert_eq!(
        (code, line.as_str()),
        (0, "no GPU unhealthy (2 GPUs checked)"),
        "{err}"
    );
    assert!(err.is_empty(), "{err}");
    let (code, line, _) = plugin(&agent.url, &["--degraded"]);
    assert_eq!(
        (code, line.as_str()),
        (0, "no GPU degraded (2 GPUs checked)")
    );
    let (code, line, _) = plugin(&agent.url, &["--action", "RESET_GPU"]);
    assert_eq!(
        (code, line.as_str()),
        (0, "no unhealthy GPU needs RESET_GPU (2 GPUs checked)")
    );
    // Without --npd: the same verdict for a person, the same exit status.
    let (code, out, _) = run_cli(&["health", "--url", &agent.url], &[]);
    assert_eq!(
        (code, out.as_str()),
        (0, "no GPU unhealthy (2 GPUs checked)\n")
    );
}

#[test]
fn a_degraded_gpu_is_no_condition_but_an_event() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Xid 13 (RESTART_APP): the GPU keeps working, degraded for 30 minutes.
    let file = scenario(
        dir.path(),
        "npd-degraded",
        &["", ""],
        "\n[[fault]]\nat = \"0s\"\ngpu = 1\nkind = \"xid\"\ncode = 13\n",
    );
    let agent = Agent::start(&file, &[], &[]);
    let doc = wait_health(&agent, "GPU 1's Xid 13", |d| {
        d["gpus"][1]["state"] == "degraded"
    });
    let (code, line, _) = plugin(&agent.url, &[]);
    assert_eq!(
        (code, line.as_str()),
        (0, "no GPU unhealthy (2 GPUs checked, 1 degraded)")
    );
    let (code, line, err) = plugin(&agent.url, &["--degraded"]);
    assert_eq!(code, 1, "{line} {err}");
    let head = format!("GPU 1 ({}): RESTART_APP: Xid 13 (", short(&doc, 1));
    assert!(line.starts_with(&head), "{line}");
    // The full UUID and text go to NPD's log.
    let uuid = doc["gpus"][1]["uuid"].as_str().expect("uuid");
    assert!(
        err.contains(uuid) && err.contains("within 30 minutes"),
        "{err}"
    );
}

#[test]
fn unhealthy_gpus_exit_1_with_the_worst_action_first_and_one_rule_per_action() {
    let dir = tempfile::tempdir().expect("tempdir");
    // GPU 0: the driver asks for a reset; GPU 1: for a reboot; GPU 2: a row
    // remap failed (replace it); GPU 3: its fabric registration failed;
    // GPU 4: lost (reset it).
    let file = scenario(
        dir.path(),
        "npd-unhealthy",
        &[
            "recovery_action = \"gpu_reset\"",
            "recovery_action = \"node_reboot\"",
            "",
            "[gpu.fabric]\nstate = \"completed\"\nstatus = \"INSUFFICIENT_RESOURCES\"\nclique_id = 0\ncluster_uuid = \"8e2f4c1a-3b5d-4e6f-9a0b-1c2d3e4f5a6b\"\nhealth_summary = \"healthy\"\n",
            "",
        ],
        "\n[[fault]]\nat = \"0s\"\ngpu = 2\nkind = \"remap_failure\"\n\n[[fault]]\nat = \"2s\"\ngpu = 4\nkind = \"lost\"\n",
    );
    let agent = Agent::start(&file, &[], &[]);
    let doc = wait_health(&agent, "five unhealthy GPUs", |d| {
        (0..5).all(|g| d["gpus"][g]["state"] == "unhealthy")
    });
    let (code, line, err) = plugin(&agent.url, &[]);
    assert_eq!(code, 1, "{line} {err}");
    assert!(
        line.starts_with(&format!(
            "GPU 2 ({}): INSPECT_HARDWARE: a row remap",
            short(&doc, 2)
        )),
        "{line}"
    );
    assert!(line.ends_with("... (+4 more, GPU 0,1,3,4)"), "{line}");
    assert_eq!(err.lines().count(), 5, "{err}");

    for (action, gpus, text) in [
        ("INSPECT_HARDWARE", vec![2], "a row remap failed"),
        (
            "REBOOT_SYSTEM",
            vec![1],
            "the driver asks for a recovery action",
        ),
        ("RESET_GPU", vec![0, 4], "the driver asks for a recov"),
        (
            "RESET_FABRIC",
            vec![3],
            "NVLink fabric registration completed with",
        ),
    ] {
        let (code, line, err) = plugin(&agent.url, &["--action", action]);
        assert_eq!(code, 1, "{action}: {line} {err}");
        let head = format!(
            "GPU {} ({}): {action}: {text}",
            gpus[0],
            short(&doc, gpus[0])
        );
        assert!(line.starts_with(&head), "{action}: {line}\nexpected {head}");
        assert_eq!(err.lines().count(), gpus.len(), "{action}: {err}");
        for gpu in &gpus {
            assert!(err.contains(&format!("GPU {gpu} (GPU-")), "{action}: {err}");
        }
    }
    let (code, line, _) = plugin(&agent.url, &["--action", "RESTART_APP"]);
    assert_eq!(
        (code, line.as_str()),
        (0, "no unhealthy GPU needs RESTART_APP (5 GPUs checked)")
    );
    // Several actions: either.
    let (code, line, _) = plugin(
        &agent.url,
        &["--action", "RESET_FABRIC", "--action", "REBOOT_SYSTEM"],
    );
    assert_eq!(code, 1);
    assert!(
        line.starts_with("GPU 1 (") && line.ends_with(" (+1 more, GPU 3)"),
        "{line}"
    );

    // Every rule of the shipped NPD config, as NPD runs it: the binary the
    // initContainer copies, the rule's own arguments, the agent's address
    // from GPUWATCH_URL (as the DaemonSet patch sets it), the message cut
    // at the config's max_output_length.
    let copy = dir.path().join("bin/gpuwatch");
    std::fs::create_dir_all(copy.parent().expect("dir")).expect("mkdir");
    let (code, out, err) = run_cli(&["copy-binary", copy.to_str().expect("utf-8")], &[]);
    assert_eq!(code, 0, "{out}{err}");
    // Into a directory that is not there: an error that says what to check,
    // and no stray temporary file.
    let nowhere = dir.path().join("not-mounted/gpuwatch");
    let (code, _, err) = run_cli(&["copy-binary", nowhere.to_str().expect("utf-8")], &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains("is its directory mounted and writable?"),
        "{err}"
    );
    assert!(!dir.path().join("not-mounted").exists());
    let monitor: Value = serde_json::from_str(&read(MONITOR)).expect("JSON");
    let max = monitor["pluginConfig"]["max_output_length"]
        .as_u64()
        .expect("max_output_length") as usize;
    for rule in monitor["rules"].as_array().expect("rules") {
        let args: Vec<&str> = rule["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("string"))
            .collect();
        let started = Instant::now();
        let output = std::process::Command::new(&copy)
            .args(&args)
            .env("GPUWATCH_URL", &agent.url)
            .output()
            .expect("run the copied gpuwatch");
        let out = String::from_utf8_lossy(&output.stdout);
        let line = one_line(&out, &args);
        assert!(line.len() <= max, "{args:?}: {line}");
        assert!(started.elapsed() < Duration::from_secs(4), "{args:?}");
        let expected = if rule["type"] == "permanent" { 1 } else { 0 };
        assert_eq!(output.status.code(), Some(expected), "{rule}: {line}");
    }
}

#[test]
fn an_agent_that_cannot_be_asked_is_unknown_exit_2() {
    // Nothing listens.
    let port = common::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let (code, line, err) = plugin(&url, &[]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with("gpuwatch health unknown: cannot reach the agent"),
        "{line}"
    );
    assert!(err.contains(&url) && err.contains("--url"), "{err}");

    // Bad answers, and one that never comes.
    for (answer, why) in [
        (Some(("200 OK", "hello")), "not a JSON object"),
        (
            Some(("200 OK", r#"{"state":"healthy"}"#)),
            "has no list of GPUs",
        ),
        (
            Some((
                "200 OK",
                r#"{"taken_at":null,"state":null,"gpus":[],"node":null}"#,
            )),
            "no sample yet",
        ),
        (Some(("500 Internal Server Error", "oops")), "answered 500"),
        (None, "timeout"),
    ] {
        let url = serve_once(answer);
        let started = Instant::now();
        let (code, line, err) = plugin(&url, &["--timeout", "1s"]);
        assert_eq!(code, 2, "{why}: {line} {err}");
        assert!(
            line.starts_with("gpuwatch health unknown: "),
            "{why}: {line}"
        );
        assert!(
            err.to_lowercase().contains(&why.to_lowercase()),
            "{why}: {err}"
        );
        assert!(started.elapsed() < Duration::from_secs(3), "{why}");
    }
    // The default timeout (3 s) ends well within NPD's default (5 s).
    let url = serve_once(None);
    let started = Instant::now();
    let (code, _, _) = plugin(&url, &[]);
    let took = started.elapsed();
    assert_eq!(code, 2);
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_millis(4500),
        "{took:?}"
    );

    // A bad flag is Unknown too (clap exits 2).
    let (code, _, err) = run_cli(&["health", "--npd", "--url", &url, "--bogus"], &[]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run_cli(
        &["health", "--npd", "--url", &url, "--max-length", "5"],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    let (code, line, _) = plugin(&url, &["--action", "reset"]);
    assert_eq!(code, 2);
    assert!(line.contains("--action reset"), "{line}");
}

/// A server that reads one request and answers it with `answer` (status
/// and body; `None`: no answer, the connection kept open); its URL.
fn serve_once(answer: Option<(&'static str, &'static str)>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer);
            match answer {
                None => std::thread::sleep(Duration::from_secs(10)),
                Some((status, body)) => {
                    let _ = stream.write_all(
                        format!(
                            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        )
                        .as_bytes(),
                    );
                }
            }
        }
    });
    url
}

#[test]
fn the_plugin_logs_in_where_the_agent_asks_for_basic_auth() {
    let dir = tempfile::tempdir().expect("tempdir");
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        format!(
            "basic_auth_users:\n  npd: {}\n",
            bcrypt::hash("s3cret", 4).expect("bcrypt")
        ),
    )
    .expect("web config");
    let file = scenario(dir.path(), "npd-auth", &[""], "");
    let agent = Agent::start(&file, &["--web-config", web.to_str().expect("utf-8")], &[]);
    let (code, line, err) = plugin(&agent.url, &[]);
    assert_eq!(code, 2, "{line}");
    assert!(err.contains("asks for basic auth"), "{err}");
    let password = dir.path().join("password");
    std::fs::write(&password, "s3cret\n").expect("password");
    let deadline = Instant::now() + LONG;
    loop {
        let (code, line, err) = plugin(
            &agent.url,
            &[
                "--user",
                "npd",
                "--password-file",
                password.to_str().expect("utf-8"),
            ],
        );
        if code == 0 {
            assert_eq!(line, "no GPU unhealthy (1 GPU checked)");
            break;
        }
        // 2 until the first sample.
        assert!(
            code == 2 && Instant::now() < deadline,
            "{code} {line} {err}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

// --- the deployment -------------------------------------------------------------

/// `kubectl kustomize DIR`, warning-free.
fn kustomize(dir: &str) -> Vec<serde_yaml_ng::Value> {
    let output = run(&venv_tool("kubectl"), &["kustomize", dir]);
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "kubectl kustomize {dir}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("YAML document"))
        .filter(|v: &serde_yaml_ng::Value| !v.is_null())
        .collect()
}

fn find<'a>(docs: &'a [serde_yaml_ng::Value], kind: &str, name: &str) -> &'a serde_yaml_ng::Value {
    docs.iter()
        .find(|d| {
            d["kind"] == kind
                && d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(name))
        })
        .unwrap_or_else(|| panic!("no {kind} {name} in {docs:?}"))
}

fn list(value: &serde_yaml_ng::Value) -> Vec<serde_yaml_ng::Value> {
    value.as_sequence().cloned().unwrap_or_default()
}

fn named<'a>(items: &'a [serde_yaml_ng::Value], name: &str) -> &'a serde_yaml_ng::Value {
    items
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {items:?}"))
}

#[test]
fn the_npd_manifests_pass_kubernetes_validate_and_fit_together() {
    let dir = "deploy/kubernetes/node-problem-detector";
    let docs = kustomize(dir);
    let kinds: Vec<String> = docs
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "ClusterRoleBinding",
            "ConfigMap",
            "Service",
            "DaemonSet"
        ]
    );
    let file = tempfile::NamedTempFile::new().expect("temp file");
    let text: Vec<String> = docs
        .iter()
        .map(|d| serde_yaml_ng::to_string(d).expect("YAML"))
        .collect();
    std::fs::write(file.path(), text.join("---\n")).expect("write");
    let out = succeeds(
        &venv_tool("kubernetes-validate"),
        &["--strict", file.path().to_str().expect("utf-8")],
    );
    let passed = out
        .lines()
        .filter(|l| l.starts_with("INFO") && l.contains(" passed "))
        .count();
    assert_eq!(passed, docs.len(), "{out}");
    assert!(!out.contains("WARN") && !out.contains("ERROR"), "{out}");

    // The ConfigMap carries the monitor config as it is in the repository.
    let configmap = find(&docs, "ConfigMap", "node-problem-detector-gpuwatch");
    assert_eq!(
        configmap["data"]["gpuwatch-monitor.json"].as_str(),
        Some(read(MONITOR).as_str())
    );
    let monitor: Value = serde_json::from_str(&read(MONITOR)).expect("JSON");

    let daemonset = find(&docs, "DaemonSet", "node-problem-detector");
    let spec = &daemonset["spec"]["template"]["spec"];
    let volumes = list(&spec["volumes"]);
    let npd = &list(&spec["containers"])[0];
    let mounts = list(&npd["volumeMounts"]);
    // --config.custom-plugin-monitor names the ConfigMap's key where the
    // ConfigMap (by its generated name) is mounted.
    let command: Vec<String> = list(&npd["command"])
        .iter()
        .map(|a| a.as_str().expect("string").to_string())
        .collect();
    assert_eq!(command[0], "/node-problem-detector");
    let flag = command
        .iter()
        .find_map(|a| a.strip_prefix("--config.custom-plugin-monitor="))
        .expect("the custom plugin monitor flag");
    let monitor_volume = volumes
        .iter()
        .find(|v| v["configMap"]["name"] == configmap["metadata"]["name"])
        .expect("the ConfigMap is a volume");
    let mount = named(&mounts, monitor_volume["name"].as_str().expect("name"));
    assert_eq!(
        flag,
        format!(
            "{}/gpuwatch-monitor.json",
            mount["mountPath"].as_str().expect("path")
        )
    );
    // Every rule's plugin is the binary the initContainer copies into the
    // emptyDir that NPD's container mounts there.
    let init = &list(&spec["initContainers"])[0];
    let copy: Vec<String> = list(&init["command"])
        .iter()
        .map(|a| a.as_str().expect("string").to_string())
        .collect();
    assert_eq!(copy[..2], ["/usr/bin/gpuwatch", "copy-binary"]);
    let target = Path::new(&copy[2]);
    let init_mount = named(&list(&init["volumeMounts"]), "gpuwatch-bin").clone();
    assert_eq!(
        Path::new(init_mount["mountPath"].as_str().expect("path")),
        target.parent().expect("dir")
    );
    assert!(named(&volumes, "gpuwatch-bin")["emptyDir"].is_mapping());
    let npd_mount = named(&mounts, "gpuwatch-bin");
    assert_eq!(npd_mount["mountPath"], init_mount["mountPath"]);
    for rule in monitor["rules"].as_array().expect("rules") {
        assert_eq!(rule["path"].as_str().map(Path::new), Some(target), "{rule}");
    }
    // The same image and version as gpuwatch's own DaemonSet.
    let base = read("deploy/kubernetes/daemonset.yaml");
    assert!(
        base.contains(&format!(
            "image: {}",
            init["image"].as_str().expect("image")
        )),
        "{:?}",
        init["image"]
    );
    // GPUWATCH_URL reaches the node-local Service, which selects the
    // gpuwatch pods and their port.
    let env = list(&npd["env"]);
    let url = named(&env, "GPUWATCH_URL")["value"]
        .as_str()
        .expect("value")
        .to_string();
    let service = find(&docs, "Service", "gpuwatch-node-local");
    assert_eq!(
        url,
        format!(
            "http://{}.{}.svc:{}",
            service["metadata"]["name"].as_str().expect("name"),
            service["metadata"]["namespace"]
                .as_str()
                .expect("namespace"),
            service["spec"]["ports"][0]["port"].as_u64().expect("port")
        )
    );
    assert_eq!(service["spec"]["internalTrafficPolicy"], "Local");
    assert_eq!(service["metadata"]["namespace"], "gpuwatch");
    assert_eq!(
        service["spec"]["selector"]["app.kubernetes.io/name"],
        "gpuwatch"
    );
    assert!(
        base.contains("app.kubernetes.io/name: gpuwatch")
            && base.contains("- name: metrics\n              containerPort: 9842")
    );
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");
}

/// Runs jsonschema (from the test venv) on `config` against NPD's schema;
/// the error messages.
fn schema_errors(config: &Value) -> Vec<String> {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), config.to_string()).expect("write");
    let script = "import json, sys, jsonschema\n\
        schema = json.load(open(sys.argv[1]))\n\
        jsonschema.Draft202012Validator.check_schema(schema)\n\
        config = json.load(open(sys.argv[2]))\n\
        for e in jsonschema.Draft202012Validator(schema).iter_errors(config):\n    print(e.json_path, e.message)\n";
    let schema = root().join("tests/deploy/npd-custom-plugin-monitor.schema.json");
    let out = succeeds(
        &venv_tool("python"),
        &[
            "-c",
            script,
            schema.to_str().expect("utf-8"),
            file.path().to_str().expect("utf-8"),
        ],
    );
    out.lines().map(str::to_string).collect()
}

/// Go's time.ParseDuration for the forms the config uses (s, ms, m).
fn go_duration(text: &str) -> Duration {
    humantime::parse_duration(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn the_monitor_config_follows_npds_schema_and_startup_checks() {
    let monitor: Value = serde_json::from_str(&read(MONITOR)).expect("JSON");
    assert_eq!(schema_errors(&monitor), Vec::<String>::new());
    // The schema has teeth: each of these breaks it.
    for (pointer, bad) in [
        ("/plugin", Value::from("shell")),
        ("/pluginConfig/max_output_length", Value::from("80")),
        ("/pluginConfig/timeout", Value::from("5 seconds")),
        ("/rules/0/type", Value::from("sometimes")),
        ("/rules/0/reason", Value::from("gpu is not healthy")),
        ("/conditions/0/typo", Value::from(1)),
    ] {
        let mut broken = monitor.clone();
        let (parent, key) = pointer.rsplit_once('/').expect("pointer");
        broken
            .pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .expect("parent")
            .insert(key.to_string(), bad.clone());
        assert!(
            !schema_errors(&broken).is_empty(),
            "{pointer} = {bad} passed"
        );
    }
    let mut no_condition = monitor.clone();
    no_condition["rules"][0]
        .as_object_mut()
        .expect("rule")
        .remove("condition");
    assert!(!schema_errors(&no_condition).is_empty());

    // NPD's Validate() (pkg/custompluginmonitor/types/config.go): no rule
    // timeout above the global one; every permanent rule's condition has a
    // default. And one that NPD does not check but needs: one permanent
    // rule per condition, because a rule that answers OK resets its
    // condition whatever rule set it (custom_plugin_monitor.go,
    // generateStatus), so two would flap.
    let global = go_duration(
        monitor["pluginConfig"]["timeout"]
            .as_str()
            .expect("timeout"),
    );
    let defaults: Vec<&str> = monitor["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .map(|c| c["type"].as_str().expect("type"))
        .collect();
    let mut used = Vec::new();
    for rule in monitor["rules"].as_array().expect("rules") {
        let timeout = go_duration(rule["timeout"].as_str().expect("rule timeout"));
        assert!(timeout <= global, "{rule}");
        // The plugin's own timeout ends before NPD kills it.
        let args: Vec<&str> = rule["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("string"))
            .collect();
        let own = args
            .iter()
            .position(|a| *a == "--timeout")
            .map(|i| go_duration(args[i + 1]))
            .unwrap_or(Duration::from_secs(3));
        assert!(own < timeout, "{rule}");
        assert_eq!(args[..2], ["health", "--npd"], "{rule}");
        if rule["type"] == "permanent" {
            let condition = rule["condition"].as_str().expect("condition");
            assert!(defaults.contains(&condition), "{rule}");
            assert!(
                !used.contains(&condition),
                "two permanent rules set {condition}"
            );
            used.push(condition);
        } else {
            assert!(args.contains(&"--degraded"), "{rule}");
        }
    }
    assert_eq!(used.len(), defaults.len(), "a condition without a rule");
    // The plugin's default message limit is the config's.
    assert_eq!(monitor["pluginConfig"]["max_output_length"], 80);
    let (_, help, _) = run_cli(&["health", "--help"], &[]);
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains("max_output_length) [default: 80]"), "{help}");
}
