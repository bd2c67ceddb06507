//! The deploy artefacts run, not only linted: the image of
//! deploy/container/Dockerfile built with podman (from this test build's
//! binaries, on a distroless-like base made by mmdebstrap) and run read-only
//! as its user; the DaemonSet's pod template of deploy/kubernetes run with
//! `podman kube play` and the ConfigMap, deleted and started again.
//! tests/deploy/podman.rs says how podman is set up; `./scripts/test.sh`
//! installs the tools. Containers use the host's network and 127.0.0.1 only.

mod common;
#[path = "deploy/kube_pod.rs"]
mod kube_pod;
#[path = "deploy/podman.rs"]
mod podman;

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{binary, free_port, run_cli, Metrics};
use podman::{BaseRecipe, Container, Podman};
use serde_yaml_ng::Value;

/// A runtime base like gcr.io/distroless/cc-debian12:nonroot: glibc,
/// libgcc, CA certificates, time zones, /etc/services and a user 65532, no
/// shell and no package manager (`--variant=extract` unpacks the packages
/// without running their scripts, so the hooks write what those would).
const RUNTIME_BASE: BaseRecipe = BaseRecipe {
    name: "localhost/gpuwatch-test-runtime",
    variant: "extract",
    packages: &["libc6", "libgcc-s1", "ca-certificates", "tzdata", "netbase"],
    options: &[
        r#"--customize-hook=printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$1/etc/passwd""#,
        r#"--customize-hook=printf 'root:x:0:\nnogroup:x:65534:\nnonroot:x:65532:\n' > "$1/etc/group""#,
        r#"--customize-hook=install -d -m 0700 -o 65532 -g 65532 "$1/home/nonroot""#,
        r#"--customize-hook=cat "$1"/usr/share/ca-certificates/mozilla/*.crt > "$1/etc/ssl/certs/ca-certificates.crt""#,
        r#"--customize-hook=rm -rf "$1/var/cache/apt" "$1/var/lib/apt/lists" "$1/etc/apt""#,
    ],
    changes: &[
        "USER=65532:65532",
        "ENV=HOME=/home/nonroot",
        "ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV=SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
    ],
};

/// The tag of the image under test (rebuilt by every run; the previous one
/// is pruned).
const IMAGE: &str = "localhost/gpuwatch-test:latest";

/// The image under test.
struct Image {
    reference: String,
    /// Bytes of the two binaries put into it.
    binaries: u64,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Builds the image once per test binary: deploy/container/Dockerfile with
/// BINARIES=prebuilt (the test build's gpuwatch and libnvml_sim.so as the
/// "prebuilt" build context) and RUNTIME_IMAGE = the mmdebstrap'd base.
fn image() -> &'static Image {
    static IMAGE_BUILT: OnceLock<Image> = OnceLock::new();
    IMAGE_BUILT.get_or_init(|| {
        let podman = Podman::get();
        let base = podman.base_image(&RUNTIME_BASE);
        let context = podman
            .dir()
            .join(format!("prebuilt-{}", std::process::id()));
        std::fs::create_dir_all(&context).expect("create the build context");
        let gpuwatch = binary();
        let library = podman::simulator_library(&gpuwatch);
        podman::link_or_copy(&gpuwatch, &context.join("gpuwatch"));
        podman::link_or_copy(&library, &context.join("libnvml_sim.so"));
        let binaries = [&gpuwatch, &library]
            .iter()
            .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
            .sum();
        podman.ok([
            "build".to_string(),
            "--pull=never".into(),
            "--network=none".into(),
            "--quiet".into(),
            "--file".into(),
            root()
                .join("deploy/container/Dockerfile")
                .display()
                .to_string(),
            "--build-arg".into(),
            format!("RUNTIME_IMAGE={base}"),
            "--build-arg".into(),
            "BINARIES=prebuilt".into(),
            "--build-context".into(),
            format!("prebuilt={}", context.display()),
            "--tag".into(),
            IMAGE.into(),
            root().display().to_string(),
        ]);
        let _ = std::fs::remove_dir_all(&context);
        Image {
            reference: IMAGE.to_string(),
            binaries,
        }
    })
}

/// GET over HTTP: (status, body), or None when nothing answers.
fn get(url: &str) -> Option<(u16, String)> {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .new_agent();
    let mut response = agent.get(url).call().ok()?;
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().ok()?;
    Some((status, body))
}

/// Waits until `/-/ready` answers 200; panics with the container's log when
/// it exits or does not get ready within a minute.
fn wait_ready(base: &str, container: &str) {
    let podman = Podman::get();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((200, _)) = get(&format!("{base}/-/ready")) {
            return;
        }
        let state = podman.output(["inspect", "--format", "{{.State.Status}}", container]);
        let state = String::from_utf8_lossy(&state.stdout).trim().to_string();
        if state != "running" || Instant::now() > deadline {
            let logs = podman.output(["logs", container]);
            panic!(
                "{container} is {state:?}, not ready at {base}/-/ready; its log:\n{}{}",
                String::from_utf8_lossy(&logs.stdout),
                String::from_utf8_lossy(&logs.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The agent's /metrics: up, with at least one GPU.
fn check_metrics(base: &str) {
    let (status, text) = get(&format!("{base}/metrics")).expect("/metrics answers");
    assert_eq!(status, 200, "{text}");
    let metrics = Metrics::parse(&text);
    let value = |name: &str| {
        metrics
            .find(name, &[])
            .first()
            .map(|s| s.value)
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
    };
    assert_eq!(value("gpuwatch_up"), 1.0);
    assert!(value("gpuwatch_gpus") >= 1.0, "{text}");
}

fn logs(container: &str) -> String {
    let output = Podman::get().output(["logs", container]);
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn inspect(what: &str, format: &str) -> String {
    Podman::get()
        .ok(["inspect", "--format", format, what])
        .trim()
        .to_string()
}

/// Stops the container with SIGTERM (podman's default stop signal) and
/// checks that the agent shut down by itself: exit code 0, not the 143 of
/// a process killed by SIGTERM nor the 137 of the SIGKILL that follows the
/// timeout.
fn stop_cleanly(container: &str) {
    Podman::get().ok(["stop", "--time", "30", container]);
    let code = inspect(container, "{{.State.ExitCode}}");
    assert_eq!(
        code,
        "0",
        "exit code after SIGTERM; log:\n{}",
        logs(container)
    );
}

/// Waits (a few seconds at most) for a file the agent creates.
fn wait_for_file(path: &Path, container: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.is_file() {
        assert!(
            Instant::now() < deadline,
            "{} was not created; the log of {container}:\n{}",
            path.display(),
            logs(container)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Points of GPU 0's temperature in a history database, read with the CLI.
fn history_points(database: &Path) -> Vec<serde_json::Value> {
    let db = database.display().to_string();
    let (code, out, err) = run_cli(
        &[
            "history",
            "--db",
            &db,
            "--gpu",
            "0",
            "--metric",
            "temperature",
            "--since",
            "1h",
            "--step",
            "1s",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(code, 0, "gpuwatch history --db {db}: {out}{err}");
    let series: serde_json::Value = serde_json::from_str(&out).expect("history JSON");
    series["points"].as_array().cloned().unwrap_or_default()
}

#[test]
fn the_image_runs_read_only_as_its_user_with_the_history_on_the_state_volume() {
    let image = image();
    let podman = Podman::get();
    let state = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::chown(state.path(), Some(65532), Some(65532)).expect("chown state dir");
    let name = podman::name("run");
    let container = Container(name.clone());
    let port = free_port();
    podman.ok([
        "run".to_string(),
        "--detach".into(),
        "--name".into(),
        name.clone(),
        "--pull=never".into(),
        "--network=host".into(),
        "--read-only".into(),
        "--user".into(),
        "65532:65532".into(),
        "--volume".into(),
        format!("{}:/var/lib/gpuwatch", state.path().display()),
        image.reference.clone(),
        "--simulate".into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
    ]);
    let base = format!("http://127.0.0.1:{port}");
    wait_ready(&base, &name);
    check_metrics(&base);
    // The history is on the mounted directory, written by uid 65532.
    let database = state.path().join("history-simulated.db");
    wait_for_file(&database, &name);
    let owner = std::fs::metadata(&database).expect("database").uid();
    assert_eq!(owner, 65532);
    // Nothing can be written elsewhere: / is read-only.
    assert_eq!(inspect(&name, "{{.HostConfig.ReadonlyRootfs}}"), "true");
    stop_cleanly(&name);
    drop(container);
    // What the agent recorded is in the database it left on the host.
    assert!(
        !history_points(&database).is_empty(),
        "no temperature samples in {}",
        database.display()
    );
}

#[test]
fn the_image_run_read_only_without_a_mount_keeps_its_history_in_a_volume() {
    // What a new user tries first: `podman run --read-only IMAGE --simulate`.
    // Before the image had a state volume, the agent wanted
    // ~/.local/state/gpuwatch on the read-only root and exited ("Read-only
    // file system (os error 30)").
    let image = image();
    let podman = Podman::get();
    let name = podman::name("bare");
    let _container = Container(name.clone());
    let port = free_port();
    podman.ok([
        "run".to_string(),
        "--detach".into(),
        "--name".into(),
        name.clone(),
        "--pull=never".into(),
        "--network=host".into(),
        "--read-only".into(),
        image.reference.clone(),
        "--simulate".into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
    ]);
    let base = format!("http://127.0.0.1:{port}");
    wait_ready(&base, &name);
    check_metrics(&base);
    // The image's volume, created by podman, holds the history.
    let volume = inspect(
        &name,
        r#"{{range .Mounts}}{{if eq .Destination "/var/lib/gpuwatch"}}{{.Source}}{{end}}{{end}}"#,
    );
    assert!(!volume.is_empty(), "no volume at /var/lib/gpuwatch");
    wait_for_file(&Path::new(&volume).join("history-simulated.db"), &name);
    stop_cleanly(&name);
}

#[test]
fn the_image_is_small_non_root_and_set_up_for_the_nvidia_runtime() {
    let image = image();
    let config = |format: &str| inspect(&image.reference, format);
    assert_eq!(config("{{.Config.User}}"), "65532:65532");
    assert_eq!(
        config("{{json .Config.Entrypoint}}"),
        r#"["/usr/bin/gpuwatch","run"]"#
    );
    let env = config("{{json .Config.Env}}");
    for needed in [
        "NVIDIA_VISIBLE_DEVICES=all",
        "NVIDIA_DRIVER_CAPABILITIES=utility",
        "GPUWATCH_CONFIG=/etc/gpuwatch/gpuwatch.toml",
        "XDG_STATE_HOME=/var/lib",
    ] {
        assert!(env.contains(needed), "{needed} not in {env}");
    }
    assert!(config("{{json .Config.ExposedPorts}}").contains("9842/tcp"));
    assert!(config("{{json .Config.Volumes}}").contains("/var/lib/gpuwatch"));
    // Everything but the two binaries: the base (about 25 MB) and the
    // config. The release image's size is in docs/deploy.md.
    let size: u64 = config("{{.Size}}").parse().expect("image size");
    let rest = size.saturating_sub(image.binaries);
    eprintln!(
        "image {}: {} MB, of which {} MB binaries (debug build)",
        image.reference,
        size / 1_000_000,
        image.binaries / 1_000_000
    );
    assert!(
        rest < 40_000_000,
        "the image holds {rest} bytes besides gpuwatch and the simulator"
    );
}

// --- The DaemonSet's pod under podman kube play ------------------------------

/// Removes the pod when dropped.
struct Pod(String);

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = Podman::get().output(["pod", "rm", "--force", &self.0]);
    }
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

#[test]
fn the_daemonsets_pod_runs_under_kube_play_and_its_history_survives_a_new_pod() {
    let image = image();
    let podman = Podman::get();
    let dir = tempfile::tempdir().expect("tempdir");
    let name = podman::name("kube");
    let port = free_port();
    let (pod_yaml, manifest_image) = kube_pod::pod_from_daemonset(&name, port, dir.path());
    let pod_file = dir.path().join("pod.yaml");
    std::fs::write(&pod_file, pod_yaml).expect("write pod.yaml");
    // The manifest's image is this build's (imagePullPolicy IfNotPresent:
    // nothing is pulled).
    podman.ok(["tag", &image.reference, &manifest_image]);
    let configmap = root().join("deploy/kubernetes/configmap.yaml");
    let configmap_name = {
        let text = std::fs::read_to_string(&configmap).expect("read configmap.yaml");
        let doc: Value = serde_yaml_ng::from_str(&text).expect("configmap.yaml is YAML");
        doc["metadata"]["name"]
            .as_str()
            .expect("ConfigMap name")
            .to_string()
    };
    let play = || {
        // kube play keeps a ConfigMap in a volume of its name, and reuses
        // one that exists: start from the file every time.
        let _ = podman.output(["volume", "rm", "--force", &configmap_name]);
        podman.ok([
            OsStr::new("kube"),
            OsStr::new("play"),
            OsStr::new("--configmap"),
            configmap.as_os_str(),
            pod_file.as_os_str(),
        ]);
    };
    let _pod = Pod(name.clone());
    let container = format!("{name}-gpuwatch");
    let base = format!("http://127.0.0.1:{port}");

    play();
    wait_ready(&base, &container);
    check_metrics(&base);
    // The manifest's settings are the ones podman applied.
    assert_eq!(
        inspect(&container, "{{.HostConfig.ReadonlyRootfs}}"),
        "true"
    );
    assert_eq!(inspect(&container, "{{.Config.User}}"), "0:0");
    let dropped = inspect(&container, "{{json .HostConfig.CapDrop}}");
    assert!(
        dropped.contains("CAP_DAC_OVERRIDE") && dropped.contains("CAP_CHOWN"),
        "{dropped}"
    );
    assert_eq!(inspect(&container, "{{.HostConfig.Memory}}"), "67108864");
    let database = dir.path().join("var-lib-gpuwatch/history-simulated.db");
    wait_for_file(&database, &container);
    // A few samples (the ConfigMap samples every second).
    std::thread::sleep(Duration::from_secs(3));
    podman.ok(["pod", "stop", "--time", "30", &name]);
    assert_eq!(
        inspect(&container, "{{.State.ExitCode}}"),
        "0",
        "{}",
        logs(&container)
    );
    podman.ok([OsStr::new("kube"), OsStr::new("down"), pod_file.as_os_str()]);
    let first = history_points(&database);
    assert!(!first.is_empty(), "the first pod recorded nothing");

    // A new pod (as after a rollout or a node reboot) finds the history.
    let second_start = now_s();
    play();
    wait_ready(&base, &container);
    let (status, body) = get(&format!(
        "{base}/api/v1/history?gpu=0&metric=temperature&from=-1h&step=1s"
    ))
    .expect("/api/v1/history answers");
    assert_eq!(status, 200, "{body}");
    let series: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let before: Vec<f64> = series["points"]
        .as_array()
        .map(|points| {
            points
                .iter()
                .filter_map(|p| p["t"].as_f64())
                .filter(|t| *t < second_start - 1.0)
                .collect()
        })
        .unwrap_or_default();
    assert!(
        before.len() >= first.len().min(2),
        "the new pod serves {} points from before it started; the first pod left {}:\n{body}",
        before.len(),
        first.len()
    );
    podman.ok([OsStr::new("kube"), OsStr::new("down"), pod_file.as_os_str()]);
    let _ = podman.output(["volume", "rm", "--force", &configmap_name]);
}
