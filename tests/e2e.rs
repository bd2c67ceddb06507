//! End-to-end: the real binary on the NVML simulator, scraped over TCP.

mod common;

use std::io::Read;
use std::time::Duration;

use common::{fixture, run_cli, Agent};

const LONG: Duration = Duration::from_secs(20);

fn write_config(dir: &tempfile::TempDir, body: &str) -> String {
    let path = dir.path().join("gpuwatch.toml");
    std::fs::write(&path, body).expect("write config");
    path.display().to_string()
}

#[test]
fn the_demo_serves_every_gpu_with_plausible_values() {
    let agent = Agent::start("demo", &[], &[]);
    agent.wait_ready(200, LONG);
    let m = agent.wait_for("processes of every GPU", LONG, |m| {
        m.find("gpuwatch_gpu_processes", &[]).len() == 4
    });
    assert_eq!(m.value("gpuwatch_gpus", &[]), Some(4.0));
    assert_eq!(m.value("gpuwatch_up", &[]), Some(1.0));
    for gpu in ["0", "1", "2", "3"] {
        let l = [("gpu", gpu)];
        let info = m.find("gpuwatch_gpu_info", &l);
        assert_eq!(info.len(), 1, "one info series for GPU {gpu}");
        assert!(
            info[0].labels["name"].starts_with("NVIDIA"),
            "{:?}",
            info[0].labels
        );
        assert!(
            info[0].labels["uuid"].starts_with("GPU-"),
            "{:?}",
            info[0].labels
        );
        assert_eq!(info[0].labels["driver_version"], "550.54.15");
        assert_eq!(m.value("gpuwatch_gpu_up", &l), Some(1.0));
        let util = m
            .value("gpuwatch_gpu_utilization_ratio", &l)
            .expect("utilization");
        assert!((0.0..=1.0).contains(&util), "utilization {util}");
        let used = m.value("gpuwatch_memory_used_bytes", &l).expect("used");
        let total = m.value("gpuwatch_memory_total_bytes", &l).expect("total");
        assert!(used > 0.0 && used <= total, "memory {used} of {total}");
        let temp = m
            .value("gpuwatch_gpu_temperature_celsius", &l)
            .expect("temperature");
        let slowdown = m
            .value(
                "gpuwatch_temperature_threshold_celsius",
                &[("gpu", gpu), ("threshold", "slowdown")],
            )
            .expect("slowdown threshold");
        assert!(
            temp > 15.0 && temp < slowdown,
            "temperature {temp} vs slowdown {slowdown}"
        );
        assert!(m.value("gpuwatch_power_usage_watts", &l).expect("power") > 0.0);
        assert!(
            m.value("gpuwatch_clock_hertz", &[("gpu", gpu), ("clock", "sm")])
                .expect("sm clock")
                > 1e8
        );
        assert_eq!(
            m.find("gpuwatch_clock_event_active", &l).len(),
            9,
            "one series per reason"
        );
    }
    let (status, page) = agent.get("/");
    assert_eq!(status, 200);
    assert!(
        page.contains("id=\"gpus\"") && page.contains("/assets/app.js?v="),
        "the web view's page: {page}"
    );
    let (status, json) = agent.get("/api/v1/snapshot");
    assert_eq!(status, 200);
    let snapshot: serde_json::Value = serde_json::from_str(&json).expect("JSON snapshot");
    assert_eq!(snapshot["gpus"].as_array().map(Vec::len), Some(4));
    assert_eq!(agent.get("/-/healthy"), (200, "OK\n".to_string()));
    assert_eq!(agent.get("/nope").0, 404);
    let exit = agent.terminate();
    assert!(
        exit.success(),
        "SIGTERM must end gpuwatch cleanly, got {exit:?}"
    );
}

#[test]
fn metrics_are_gzipped_on_request_and_openmetrics_on_request() {
    // In-process: the address comes from the agent's handle.
    let agent = Agent::in_process(
        "golden",
        gpuwatch::app::RunOptions::default(),
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    agent.wait_ready(200, LONG);
    // The same families either way (the gzipped body is stitched from
    // pieces compressed apart: it must hold the whole text, in order). A
    // family can appear between two scrapes (e.g. the rules' counters after
    // the first evaluation): scrape the pair again until they agree.
    let families = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("# HELP "))
            .map(str::to_string)
            .collect()
    };
    let mut pair = (Vec::new(), vec![String::from("not scraped yet")]);
    for _ in 0..10 {
        let (head, body) = agent.raw_get("/metrics", &[("Accept-Encoding", "gzip")]);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            head.to_ascii_lowercase().contains("content-encoding: gzip"),
            "{head}"
        );
        let mut text = String::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_string(&mut text)
            .expect("a valid gzip body");
        assert!(text.contains("gpuwatch_gpu_info{"), "{text}");
        let (head, body) = agent.raw_get("/metrics", &[]);
        assert!(
            !head.to_ascii_lowercase().contains("content-encoding"),
            "{head}"
        );
        let plain = String::from_utf8_lossy(&body).to_string();
        assert!(plain.contains("gpuwatch_gpu_info{"));
        pair = (families(&text), families(&plain));
        if pair.0 == pair.1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    assert_eq!(pair.0, pair.1);
    let common::Response { headers, body, .. } = agent
        .get_with(
            "/metrics",
            &[("Accept", "application/openmetrics-text; version=1.0.0")],
        )
        .expect("scrape");
    assert!(headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("content-type")
            && v.starts_with("application/openmetrics-text")));
    assert!(
        body.trim_end().ends_with("# EOF"),
        "OpenMetrics ends with # EOF"
    );
}

#[test]
fn faults_are_reported_and_the_other_gpus_keep_working() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(&dir, "[sampler]\ninterval = \"200ms\"\nslow_interval = \"500ms\"\nprocess_interval = \"500ms\"\n");
    // Scenario time starts at 25 s and runs 10x: Xid 94 on GPU 2 at 30 s,
    // uncorrected ECC on GPU 3 at 45 s, GPU 1 lost with Xid 79 at 60 s.
    let agent = Agent::start(
        "faults",
        &["--config", &config],
        &[("GPUWATCH_SIM_START", "25"), ("GPUWATCH_SIM_SPEED", "10")],
    );
    let first = agent.wait_for("the first sample", LONG, |m| m.has("gpuwatch_gpu_up"));
    let ecc_before = first
        .value(
            "gpuwatch_ecc_errors_total",
            &[
                ("gpu", "3"),
                ("type", "uncorrected"),
                ("counter", "volatile"),
            ],
        )
        .expect("GPU 3 has ECC counters");
    let m = agent.wait_for("GPU 1 lost, Xids counted, ECC increased", LONG, |m| {
        m.value("gpuwatch_gpu_up", &[("gpu", "1")]) == Some(0.0)
            && m.value("gpuwatch_xid_errors_total", &[("gpu", "1"), ("xid", "79")]) == Some(1.0)
            && m.value("gpuwatch_xid_errors_total", &[("gpu", "2"), ("xid", "94")]) == Some(1.0)
            && m.value(
                "gpuwatch_ecc_errors_total",
                &[
                    ("gpu", "3"),
                    ("type", "uncorrected"),
                    ("counter", "volatile"),
                ],
            )
            .is_some_and(|v| v > ecc_before)
    });
    assert_eq!(
        m.value("gpuwatch_gpus", &[]),
        Some(4.0),
        "a lost GPU stays in the snapshot"
    );
    assert_eq!(
        m.value("gpuwatch_gpu_lost", &[("gpu", "1"), ("reason", "gpu_lost")]),
        Some(1.0)
    );
    assert!(
        m.find("gpuwatch_gpu_utilization_ratio", &[("gpu", "1")])
            .is_empty(),
        "a lost GPU has no readings"
    );
    for gpu in ["0", "2", "3"] {
        assert_eq!(
            m.value("gpuwatch_gpu_up", &[("gpu", gpu)]),
            Some(1.0),
            "GPU {gpu} keeps working"
        );
        assert!(m
            .value("gpuwatch_gpu_utilization_ratio", &[("gpu", gpu)])
            .is_some());
    }
    // GPU 0 has no power readings: absent, never 0.
    assert!(
        m.find("gpuwatch_power_usage_watts", &[("gpu", "0")])
            .is_empty(),
        "{}",
        m.text
    );
    assert!(m
        .find("gpuwatch_energy_consumption_joules_total", &[("gpu", "0")])
        .is_empty());
    assert!(m
        .value("gpuwatch_power_usage_watts", &[("gpu", "3")])
        .is_some());
    assert!(
        m.find("gpuwatch_nvml_errors_total", &[("error", "gpu_lost")])
            .iter()
            .any(|s| s.value > 0.0),
        "lost calls are counted"
    );
    let xid_at = m
        .value(
            "gpuwatch_xid_last_seen_timestamp_seconds",
            &[("gpu", "1"), ("xid", "79")],
        )
        .expect("last seen");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    assert!(
        (now - xid_at).abs() < 60.0,
        "last seen {xid_at} is a recent timestamp (now {now})"
    );
}

#[test]
fn a_hung_nvml_call_makes_the_snapshot_stale_but_metrics_still_answer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(&dir, "[sampler]\ninterval = \"500ms\"\ntimeout = \"1s\"\n");
    // GPU 2 hangs from 120 s to 150 s of scenario time; start at 112 s, 4x.
    let agent = Agent::start(
        "faults",
        &["--config", &config],
        &[("GPUWATCH_SIM_START", "112"), ("GPUWATCH_SIM_SPEED", "4")],
    );
    agent.wait_for("a first sample", LONG, |m| {
        m.has("gpuwatch_snapshot_age_seconds")
    });
    let reason = agent.wait_ready(503, LONG);
    assert!(reason.contains("old"), "{reason}");
    let m = agent.wait_for("a stale snapshot", LONG, |m| {
        m.value("gpuwatch_snapshot_age_seconds", &[])
            .is_some_and(|age| age > 1.5)
    });
    assert_eq!(m.value("gpuwatch_up", &[]), Some(0.0));
    assert!(
        m.has("gpuwatch_gpu_info"),
        "the last snapshot is still served"
    );
    // The hang ends at 150 s (about 10 s after start): sampling resumes.
    agent.wait_ready(200, Duration::from_secs(30));
    assert!(
        agent.log().contains("has not returned"),
        "the watchdog logged the stall:\n{}",
        agent.log()
    );
}

#[test]
fn nvml_init_failure_names_the_library_the_error_and_the_hint() {
    let scenario = fixture("scenarios/init-fails.toml");
    let (code, _, stderr) = run_cli(
        &[
            "run",
            "--simulate",
            scenario.to_str().expect("utf-8 path"),
            "--listen",
            "127.0.0.1:0",
        ],
        &[],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("cannot initialise NVML from"), "{stderr}");
    assert!(
        stderr.contains("libnvml_sim.so"),
        "names the library: {stderr}"
    );
    assert!(
        stderr.contains("driver_not_loaded"),
        "names the NVML error: {stderr}"
    );
    assert!(stderr.contains("--simulate"), "gives the hint: {stderr}");
}

#[test]
fn a_missing_nvml_library_is_a_clear_error() {
    let (code, _, stderr) = run_cli(
        &[
            "run",
            "--nvml-library",
            "/nonexistent/libnvidia-ml.so.1",
            "--listen",
            "127.0.0.1:0",
        ],
        &[],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("/nonexistent/libnvidia-ml.so.1"),
        "{stderr}"
    );
    assert!(stderr.contains("--simulate"), "{stderr}");
}

#[test]
fn a_busy_port_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = taken.local_addr().expect("address").to_string();
    let (code, _, stderr) = run_cli(&["run", "--simulate", "--listen", &address], &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {address}")),
        "{stderr}"
    );
}

#[test]
fn validate_reports_every_problem_with_file_line_and_field() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(
        &dir,
        "[server]\nlisten = \"localhost\"\n[sampler]\ninterval = \"soon\"\n",
    );
    let (code, stdout, _) = run_cli(&["validate", "--config", &config], &[]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(&format!("{config}:2:10: server.listen:")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{config}:4:12: sampler.interval:")),
        "{stdout}"
    );
    assert!(stdout.contains("2 problems"), "{stdout}");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/gpuwatch.example.toml");
    let (code, stdout, _) = run_cli(&["validate", "--config", example], &[]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("valid"));
    let (code, _, stderr) = run_cli(&["run", "--simulate", "--config", &config], &[]);
    assert_eq!(code, 1, "run refuses an invalid config: {stderr}");
    assert!(stderr.contains("server.listen"), "{stderr}");
}

#[test]
fn status_prints_a_table_and_json() {
    let env = [("GPUWATCH_SIM_TIME", "10")];
    let (code, table, stderr) = run_cli(&["status", "--simulate", "golden"], &env);
    assert_eq!(code, 0, "{stderr}");
    assert!(table.contains("NVIDIA A100-SXM4-40GB"), "{table}");
    assert!(table.contains("NVIDIA GeForce RTX 3090"), "{table}");
    assert!(table.contains("75%"), "utilization of GPU 0: {table}");
    assert!(table.contains("250/400 W"), "power/limit of GPU 0: {table}");
    assert!(
        table.contains("python3") && table.contains("blender"),
        "processes: {table}"
    );
    let (code, json, stderr) = run_cli(&["status", "--simulate", "golden", "--json"], &env);
    assert_eq!(code, 0, "{stderr}");
    let snapshot: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let gpus = snapshot["gpus"].as_array().expect("gpus");
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0]["readings"]["utilization_gpu_ratio"], 0.75);
    assert_eq!(
        gpus[1]["health"]["ecc_enabled"],
        serde_json::Value::Null,
        "ECC unsupported is null, not false"
    );
}

/// NVML error counts are keyed by (function, error): in JSON they are a
/// list, since a pair cannot be an object key (`status --json` and
/// /api/v1/snapshot failed with "key must be a string" once a call failed).
#[test]
fn status_json_holds_the_nvml_error_counts() {
    let scenario = fixture("scenarios/golden-full.toml");
    let (code, out, err) = run_cli(
        &[
            "status",
            "--simulate",
            scenario.to_str().expect("utf-8 path"),
            "--json",
        ],
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    assert_eq!(code, 0, "{err}");
    let snapshot: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let errors = snapshot["collection"]["nvml_errors"]
        .as_array()
        .expect("a list of NVML error counts");
    assert!(!errors.is_empty(), "golden-full loses a GPU: {out}");
    for error in errors {
        assert!(error["function"].is_string(), "{error}");
        assert!(error["error"].is_string(), "{error}");
        assert!(error["count"].as_u64().is_some_and(|n| n > 0), "{error}");
    }
}

#[test]
fn help_and_version() {
    let (code, help, _) = run_cli(&["--help"], &[]);
    assert_eq!(code, 0);
    assert!(
        help.contains("Examples:") && help.contains("--simulate"),
        "{help}"
    );
    let (code, version, _) = run_cli(&["--version"], &[]);
    assert_eq!(code, 0);
    assert!(version.contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn a_lost_gpu_and_an_unloaded_driver_are_picked_up_again_without_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(
        &dir,
        "[sampler]\ninterval = \"200ms\"\nslow_interval = \"1s\"\n",
    );
    let scenario = fixture("scenarios/recovery.toml");
    let agent = Agent::start(
        scenario.to_str().expect("utf-8 path"),
        &["--config", &config],
        &[],
    );
    let up = |m: &common::Metrics, gpu: &str| m.value("gpuwatch_gpu_up", &[("gpu", gpu)]);
    agent.wait_for("GPU 0 lost while GPU 1 works", LONG, |m| {
        up(m, "0") == Some(0.0) && up(m, "1") == Some(1.0)
    });
    agent.wait_for("GPU 0 back", LONG, |m| {
        up(m, "0") == Some(1.0) && m.has("gpuwatch_gpu_utilization_ratio")
    });
    let gone = agent.wait_for("the driver gone", LONG, |m| {
        m.find("gpuwatch_gpu_lost", &[("reason", "nvml_unavailable")])
            .len()
            == 2
    });
    assert_eq!(up(&gone, "1"), Some(0.0));
    agent.wait_for("both GPUs back after the driver returns", LONG, |m| {
        up(m, "0") == Some(1.0) && up(m, "1") == Some(1.0) && !m.has("gpuwatch_gpu_lost")
    });
    assert!(agent.log().contains("NVML is back"), "{}", agent.log());
    agent.wait_ready(200, LONG);
}

#[test]
fn the_server_bounds_connections_header_size_and_time() {
    use std::io::Write;
    use std::net::TcpStream;

    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(
        &dir,
        "[server]\nmax_connections = 1\nrequest_timeout = \"1s\"\nidle_timeout = \"1s\"\n",
    );
    let agent = Agent::start(
        "golden",
        &["--config", &config],
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    agent.wait_ready(200, LONG);
    let address = agent.url.trim_start_matches("http://").to_string();

    // A request head over 16 KiB is refused.
    let mut big = TcpStream::connect(&address).expect("connect");
    big.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let filler = "x".repeat(32 * 1024);
    let _ = big.write_all(
        format!("GET /metrics HTTP/1.1\r\nHost: a\r\nX-Filler: {filler}\r\n\r\n").as_bytes(),
    );
    let mut answer = String::new();
    let _ = big.read_to_string(&mut answer);
    assert!(
        answer.starts_with("HTTP/1.1 431"),
        "oversized head answered: {answer:.80}"
    );
    drop(big);

    // The server closes it, rather than the client's 5 s read timeout.
    let closed_by_server = |mut stream: TcpStream, what: &str| -> Vec<u8> {
        let mut rest = Vec::new();
        let closed = stream.read_to_end(&mut rest);
        assert!(
            closed.is_ok(),
            "{what}: the server did not close it: {closed:?}"
        );
        rest
    };
    let connect = || {
        let stream = TcpStream::connect(&address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        stream
    };

    // A client that sends nothing holds no slot: the next client is served
    // meanwhile, and the server closes it after server.idle_timeout.
    let silent = connect();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(agent.get("/-/healthy").0, 200);
    closed_by_server(silent, "a silent connection");

    // A client trickling a request head holds the only slot until a
    // newcomer needs it: then it gives way.
    let mut trickling = connect();
    trickling
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\n")
        .expect("send");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(agent.get("/-/healthy").0, 200);
    closed_by_server(trickling, "a trickling connection");

    // Keep-alive: hyper restarts its header timer after every response, so
    // a connection that sends nothing after its answer is closed too.
    let mut kept = connect();
    kept.write_all(b"GET /-/healthy HTTP/1.1\r\nHost: a\r\n\r\n")
        .expect("send");
    let answer = closed_by_server(kept, "an idle keep-alive connection");
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}
