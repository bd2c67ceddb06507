//! The built-in web view in a real browser: Debian's chromium, headless,
//! driven through Debian's chromium-driver by Selenium (PyPI, in the venv
//! scripts/test.sh fills) with `tests/webui/drive.py`, which reports what the
//! page shows as JSON. The agent runs on the simulator; what the page shows
//! is checked against the agent's own /api/v1/snapshot. Screenshots are
//! saved under target/test-artifacts/.

mod common;
#[path = "webui/workloads.rs"]
mod workloads;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::kubelet::FakeKubelet;
use common::Agent;
use serde_json::Value;

/// One chromium at a time: the test machine has few cores.
static BROWSER: Mutex<()> = Mutex::new(());

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's Python with Selenium, after checking chromium and its driver.
fn selenium_python() -> PathBuf {
    let fix = "Run ./scripts/test.sh: it installs Debian's chromium and chromium-driver \
               (apt-get, as root) and Selenium into target/test-tools/venv";
    for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        assert!(
            Path::new(tool).is_file(),
            "{tool} is missing: these tests drive a real headless browser. {fix}"
        );
    }
    let venv = std::env::var_os("GPUWATCH_TEST_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/test-tools/venv"));
    let python = venv.join("bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import selenium"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "Selenium is missing from {}: these tests drive chromium with it. {fix}",
        venv.display()
    );
    python
}

/// What the browser saw.
struct Page {
    json: Value,
    screenshot: PathBuf,
}

/// Opens `url` in headless chromium and waits as `waits` says (drive.py's
/// options); saves the screenshot as target/test-artifacts/NAME.png.
fn visit(url: &str, name: &str, waits: &[&str]) -> Page {
    let python = selenium_python();
    let artifacts = root().join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).expect("create target/test-artifacts");
    let screenshot = artifacts.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&screenshot);
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let output = Command::new(python)
        .arg(root().join("tests/webui/drive.py"))
        .arg(url)
        .arg("--screenshot")
        .arg(&screenshot)
        .args(waits)
        .env("SE_OFFLINE", "true")
        .output()
        .expect("run tests/webui/drive.py");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the browser script failed ({}):\n{}\n{stdout}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let json: Value = serde_json::from_str(&stdout).expect("drive.py prints JSON");
    let png = std::fs::read(&screenshot).expect("a screenshot was saved");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} is not a real screenshot",
        screenshot.display()
    );
    Page { json, screenshot }
}

impl Page {
    /// Fails with the page's JSON and the screenshot's path.
    fn fail(&self, what: &str) -> ! {
        panic!(
            "{what}\nscreenshot: {}\npage: {:#}",
            self.screenshot.display(),
            self.json
        )
    }

    fn check(&self, ok: bool, what: &str) {
        if !ok {
            self.fail(what);
        }
    }

    /// Everything waited for arrived.
    fn complete(&self) {
        let missing = &self.json["missing"];
        self.check(
            missing.as_array().is_some_and(Vec::is_empty),
            &format!("the page never showed: {missing}"),
        );
    }

    /// No console error or warning. With history off the agent keeps no
    /// silences and answers the page's probe of /api/v1/silences with 404,
    /// which chromium logs; that one entry is expected then (the page shows
    /// no silence links).
    fn no_console_errors(&self, agent: &Agent) {
        self.no_console_errors_with(agent, &[]);
    }

    /// [`Page::no_console_errors`], asking the agent with these headers.
    fn no_console_errors_with(&self, agent: &Agent, headers: &[(&str, &str)]) {
        let silences_absent = agent
            .get_with("/api/v1/silences", headers)
            .expect("ask for /api/v1/silences")
            .status
            == 404;
        let bad: Vec<&Value> = self.json["console"]
            .as_array()
            .expect("console entries")
            .iter()
            .filter(|e| matches!(e["level"].as_str(), Some("SEVERE" | "WARNING")))
            .filter(|e| {
                let message = e["message"].as_str().unwrap_or("");
                !(silences_absent
                    && message.contains("/api/v1/silences")
                    && message.contains("404"))
            })
            .collect();
        self.check(bad.is_empty(), &format!("console errors: {bad:?}"));
    }

    fn rows(&self) -> &Vec<Value> {
        self.json["rows"].as_array().expect("rows")
    }

    fn cell(&self, gpu: u64, field: &str) -> String {
        let wanted = gpu.to_string();
        let row = self
            .rows()
            .iter()
            .find(|r| r["gpu"] == wanted.as_str())
            .unwrap_or_else(|| self.fail(&format!("no row for GPU {gpu}")));
        row["cells"][field]["text"]
            .as_str()
            .unwrap_or_else(|| self.fail(&format!("GPU {gpu} has no {field} cell")))
            .to_string()
    }
}

/// The numbers in a cell's text: "60.1 / 79.6 GiB" → [60.1, 79.6].
fn numbers(text: &str) -> Vec<f64> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|n| n.parse().ok())
        .collect()
}

fn close(shown: f64, actual: f64, precision: f64) -> bool {
    (shown - actual).abs() <= precision / 2.0 + 1e-9
}

fn config(dir: &Path, text: &str) -> String {
    let path = dir.join("gpuwatch.toml");
    std::fs::write(&path, text).expect("write config");
    path.to_str().expect("UTF-8 path").to_string()
}

#[test]
fn page_shows_the_gpus_with_the_agents_values_and_their_history() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Scenario time frozen: the readings hold still, so the page and
    // /api/v1/snapshot can be compared exactly. History commits every second.
    let config = config(dir.path(), "[history]\nbatch_interval = \"1s\"\n");
    let agent = Agent::start(
        "demo",
        &["--config", &config],
        &[("GPUWATCH_SIM_TIME", "120")],
    );
    agent.wait_ready(200, Duration::from_secs(20));
    let page = visit(
        &format!("{}/#gpu=0&range=15m", agent.url),
        "webui-demo",
        &["--chart-points", "3", "--timeout", "120"],
    );
    page.complete();
    page.no_console_errors(&agent);
    page.check(page.json["title"] == "gpuwatch", "title");
    page.check(page.json["status"] == "ready", "status badge");

    let (status, body) = agent.get("/api/v1/snapshot");
    assert_eq!(status, 200, "{body}");
    let snapshot: Value = serde_json::from_str(&body).expect("snapshot JSON");
    let gpus = snapshot["gpus"].as_array().expect("gpus");
    let (status, body) = agent.get("/api/v1/health");
    assert_eq!(status, 200, "{body}");
    let health: Value = serde_json::from_str(&body).expect("health JSON");
    let verdicts = health["gpus"].as_array().expect("verdicts");
    page.check(
        page.rows().len() == gpus.len() && !gpus.is_empty(),
        &format!("{} rows for {} GPUs", page.rows().len(), gpus.len()),
    );
    let mut processes = 0;
    for g in gpus {
        let i = g["index"].as_u64().expect("index");
        let r = &g["readings"];
        let f = |v: &Value| v.as_f64().expect("a number");
        page.check(
            page.cell(i, "name") == g["identity"]["name"].as_str().expect("name"),
            &format!("GPU {i} name"),
        );
        let health = page.cell(i, "health");
        page.check(
            health.starts_with(verdicts[i as usize]["state"].as_str().expect("state"))
                && verdicts[i as usize]["reasons"][0]["text"]
                    .as_str()
                    .is_none_or(|first| health.contains(first)),
            &format!("GPU {i} health {health:?}: {}", verdicts[i as usize]),
        );
        let util = numbers(&page.cell(i, "utilization"));
        page.check(
            util.len() == 1 && close(util[0], f(&r["utilization_gpu_ratio"]) * 100.0, 1.0),
            &format!("GPU {i} utilization {util:?}"),
        );
        let memory = numbers(&page.cell(i, "memory"));
        page.check(
            memory.len() == 2
                && close(memory[0], f(&r["memory"]["used_bytes"]) / GIB, 0.1)
                && close(memory[1], f(&r["memory"]["total_bytes"]) / GIB, 0.1),
            &format!("GPU {i} memory {memory:?}"),
        );
        let temperature = numbers(&page.cell(i, "temperature"));
        page.check(
            temperature.len() == 2
                && close(temperature[0], f(&r["temperature_gpu_celsius"]), 1.0)
                && close(
                    temperature[1],
                    f(&g["identity"]["temperature_slowdown_celsius"]),
                    1.0,
                ),
            &format!("GPU {i} temperature and slowdown {temperature:?}"),
        );
        let power = numbers(&page.cell(i, "power"));
        page.check(
            power.len() == 2
                && close(power[0], f(&r["power_watts"]), 1.0)
                && close(power[1], f(&g["health"]["power_limit_watts"]), 1.0),
            &format!("GPU {i} power and limit {power:?}"),
        );
        // SM active (GPM) beside utilization; "–" on the GPUs without GPM.
        let sm = numbers(&page.cell(i, "sm_active"));
        match g["gpm"]["gpu"]["sm_active_ratio"].as_f64() {
            Some(ratio) => page.check(
                sm.len() == 1 && close(sm[0], ratio * 100.0, 1.0),
                &format!("GPU {i} SM active {sm:?}"),
            ),
            None => page.check(
                page.cell(i, "sm_active") == "–",
                &format!("GPU {i} without GPM shows no SM active"),
            ),
        }
        let count = g["processes"].as_array().expect("processes").len();
        processes += count;
        page.check(
            page.cell(i, "processes") == count.to_string(),
            &format!("GPU {i} process count"),
        );
    }
    page.check(
        page.json["processes"] == processes,
        "one process row per process",
    );
    let charts = page.json["charts"].as_object().expect("charts");
    page.check(
        charts.len() == 8 && charts.values().all(|n| n.as_u64() >= Some(3)),
        "eight charts with points (GPU 0 has GPM: SM active, occupancy, tensor, DRAM)",
    );
    page.check(
        page.json["history_note_visible"] == false,
        "no history-off note",
    );
}

#[test]
fn thermal_incident_alert_appears_in_the_list_and_on_the_time_axis() {
    let dir = tempfile::tempdir().expect("temp dir");
    // GPU 3 climbs to its slowdown threshold (88 °C) from scenario time 60 s,
    // at 5x; the near-slowdown rule fires after 2 s instead of 5 min.
    let config = config(
        dir.path(),
        "[history]\nbatch_interval = \"1s\"\n\n[[rules]]\nname = \"GpuTemperatureNearSlowdown\"\nfor = \"2s\"\n",
    );
    let agent = Agent::start(
        "thermal-incident",
        &["--config", &config],
        &[("GPUWATCH_SIM_START", "60"), ("GPUWATCH_SIM_SPEED", "5")],
    );
    agent.wait_ready(200, Duration::from_secs(20));
    let page = visit(
        &format!("{}/#gpu=3&range=15m", agent.url),
        "webui-thermal-incident",
        &[
            "--alert",
            "GpuTemperatureNearSlowdown",
            "--mark",
            "GpuTemperatureNearSlowdown firing",
            "--chart-points",
            "2",
            "--timeout",
            "120",
        ],
    );
    page.complete();
    page.no_console_errors(&agent);
    let alert = page.json["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .find(|a| a["alertname"] == "GpuTemperatureNearSlowdown" && a["state"] == "firing")
        .unwrap_or_else(|| page.fail("the alert is not listed"))
        .clone();
    page.check(
        alert["text"].as_str().is_some_and(|t| t.contains("GPU 3")),
        &format!("the alert names GPU 3: {alert}"),
    );
    // The agent agrees: the same alert is firing for GPU 3.
    let (_, body) = agent.get("/api/v1/alerts");
    let alerts: Value = serde_json::from_str(&body).expect("alerts JSON");
    assert!(
        alerts["alerts"]
            .as_array()
            .expect("alerts")
            .iter()
            .any(|a| {
                a["alertname"] == "GpuTemperatureNearSlowdown"
                    && a["state"] == "firing"
                    && a["labels"]["gpu"] == "3"
            }),
        "{alerts:#}"
    );
    // The alert history the page marks the time axis from.
    let (status, body) = agent.get("/api/v1/alerts/history?from=-1h");
    assert_eq!(status, 200, "{body}");
    let history: Value = serde_json::from_str(&body).expect("alert history JSON");
    let fired = history["transitions"]
        .as_array()
        .expect("transitions")
        .iter()
        .find(|t| t["alertname"] == "GpuTemperatureNearSlowdown" && t["to"] == "firing")
        .unwrap_or_else(|| panic!("no transition to firing stored: {history:#}"));
    assert_eq!(fired["labels"]["gpu"], "3", "{fired}");
    assert_eq!(fired["from"], "pending", "{fired}");
    let (status, body) = agent.get("/api/v1/alerts/history?limit=0");
    assert!(status == 400 && body.contains("limit"), "{status} {body}");
    let hot = page.json["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["gpu"] == "3")
        .map(|r| r["cells"]["temperature"]["class"].to_string())
        .unwrap_or_default();
    page.check(
        hot.contains("hot") || hot.contains("crit"),
        &format!("GPU 3's temperature is marked hot: {hot}"),
    );
    page.check(
        page.cell(3, "health").contains("alert") && !page.cell(0, "health").contains("alert"),
        "GPU 3's row counts its firing alert, GPU 0's none",
    );
}

#[test]
fn health_column_shows_each_gpus_verdict_and_first_reason() {
    // tests/scenarios/fabric.toml: GPU 0 in the NVLink fabric, GPU 1 stuck
    // registering, GPU 2's registration failed, GPU 3 at limited capacity.
    let scenario = common::fixture("scenarios/fabric.toml");
    let agent = Agent::start(scenario.to_str().expect("utf-8"), &["--no-history"], &[]);
    agent.wait_ready(200, Duration::from_secs(20));
    agent.wait_for("the fabric read", Duration::from_secs(60), |m| {
        m.has("gpuwatch_fabric_state")
    });
    let page = visit(
        &format!("{}/", agent.url),
        "webui-health",
        &["--timeout", "60"],
    );
    page.complete();
    page.no_console_errors(&agent);
    let health = |gpu| page.cell(gpu, "health");
    page.check(health(0) == "healthy", &format!("GPU 0: {:?}", health(0)));
    page.check(
        health(1).starts_with("degraded") && health(1).contains("registration is in progress"),
        &format!("GPU 1: {:?}", health(1)),
    );
    page.check(
        health(2).starts_with("unhealthy") && health(2).contains("insufficient_resources"),
        &format!("GPU 2: {:?}", health(2)),
    );
    page.check(
        health(3).starts_with("degraded") && health(3).contains("limited capacity"),
        &format!("GPU 3: {:?}", health(3)),
    );
}

#[test]
fn without_history_the_page_shows_the_live_table_and_a_note() {
    let agent = Agent::start("demo", &["--no-history"], &[("GPUWATCH_SIM_TIME", "120")]);
    agent.wait_ready(200, Duration::from_secs(20));
    let page = visit(
        &format!("{}/", agent.url),
        "webui-no-history",
        &["--timeout", "60"],
    );
    page.complete();
    page.no_console_errors(&agent);
    page.check(page.rows().len() == 4, "four GPU rows");
    page.check(
        page.json["history_note_visible"] == true
            && page.json["history_note"]
                .as_str()
                .is_some_and(|n| n.contains("--no-history")),
        "the history-off note is shown",
    );
    page.check(page.json["canvases"] == 0, "no charts");
}

#[test]
fn assets_are_embedded_gzipped_and_versioned() {
    let agent = Agent::start("demo", &["--no-history"], &[]);
    let (head, page) = agent.raw_get("/", &[]);
    let page = String::from_utf8(page).expect("HTML");
    assert!(head.contains("200 OK"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("cache-control: no-cache"),
        "{head}"
    );
    let mut total_gzipped = 0;
    let (head, gzipped) = agent.raw_get("/", &[("Accept-Encoding", "gzip")]);
    assert!(
        head.to_ascii_lowercase().contains("content-encoding: gzip"),
        "{head}"
    );
    total_gzipped += gzipped.len();
    let urls: Vec<&str> = page
        .split("\"/assets/")
        .skip(1)
        .map(|rest| rest.split('"').next().expect("closing quote"))
        .collect();
    assert_eq!(urls.len(), 5, "three scripts and two style sheets: {page}");
    for url in urls {
        let path = format!("/assets/{url}");
        let (head, body) = agent.raw_get(&path, &[("Accept-Encoding", "gzip")]);
        let lower = head.to_ascii_lowercase();
        assert!(
            lower.contains("200 ok") && lower.contains("content-encoding: gzip"),
            "{path}: {head}"
        );
        assert!(lower.contains("immutable"), "{path} is versioned: {head}");
        total_gzipped += body.len();
        let etag = head
            .lines()
            .find_map(|l| l.strip_prefix("etag: "))
            .expect("ETag");
        let (head, _) = agent.raw_get(&path, &[("If-None-Match", etag)]);
        assert!(head.contains("304"), "{path} revalidates: {head}");
    }
    assert!(total_gzipped < 250 * 1024, "{total_gzipped} bytes gzipped");
    assert_eq!(agent.get("/assets/nope.js").0, 404);
    let (status, body) = agent.get("/api/v1/alerts/history");
    assert!(
        status == 404 && body.contains("history is disabled"),
        "{status} {body}"
    );
    let (status, body) = agent.get("/api/v1/gpus");
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(doc["features"]["history"], false);
    assert_eq!(doc["gpus"].as_array().map(Vec::len), Some(4));
    assert!(
        agent.log().contains("Web view: open http://127.0.0.1:"),
        "{}",
        agent.log()
    );
}

#[test]
fn behind_basic_auth_the_page_and_its_requests_get_through() {
    let dir = tempfile::tempdir().expect("temp dir");
    let web = dir.path().join("web.yml");
    let hash = bcrypt::hash("s3cret", 4).expect("bcrypt");
    std::fs::write(&web, format!("basic_auth_users:\n  viewer: {hash}\n")).expect("web.yml");
    let agent = Agent::start(
        "demo",
        &["--web-config", web.to_str().expect("UTF-8 path")],
        &[("GPUWATCH_SIM_TIME", "120")],
    );
    assert_eq!(agent.get("/").0, 401, "the page asks for credentials");
    assert_eq!(agent.get("/assets/app.js").0, 401, "its files too");
    // Credentials in the URL: the browser sends them with the page, then
    // from its auth cache with every asset and API request.
    let url = agent.url.replace("http://", "http://viewer:s3cret@");
    let page = visit(
        &format!("{url}/#gpu=0&range=15m"),
        "webui-basic-auth",
        &["--chart-points", "1", "--timeout", "90"],
    );
    page.complete();
    let auth = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "viewer:s3cret")
    );
    page.no_console_errors_with(&agent, &[("Authorization", &auth)]);
    page.check(page.rows().len() == 4, "four GPU rows");
}

#[test]
fn processes_show_their_user_container_pod_and_sm_share() {
    let dir = tempfile::tempdir().expect("temp dir");
    // The golden scenario's pid 4242 runs as alice in a docker container
    // (tests/fixtures/proc-golden), with a 54 % SM share; pid 4343 runs in
    // a pod, on MIG instance 2, which a stand-in kubelet gives to a pod.
    let proc_root = common::fixture("fixtures/proc-golden/proc");
    let socket = dir.path().join("kubelet.sock");
    let _kubelet = FakeKubelet::golden_triton(&socket);
    let config = config(
        dir.path(),
        &format!(
            "[sampler]\nproc_root = {:?}\n[kubernetes]\npod_resources_socket = {:?}\n",
            proc_root.to_str().expect("utf-8 path"),
            socket.to_str().expect("utf-8 path"),
        ),
    );
    let scenario = common::fixture("scenarios/golden-full.toml");
    let agent = Agent::start(
        scenario.to_str().expect("utf-8 path"),
        &["--config", &config],
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    agent.wait_ready(200, Duration::from_secs(20));
    let page = visit(
        &format!("{}/", agent.url),
        "webui-processes",
        &["--timeout", "60"],
    );
    page.complete();
    let headers: Vec<&str> = page.json["process_headers"]
        .as_array()
        .expect("process headers")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for wanted in ["User", "Container", "Pod", "SM share"] {
        page.check(
            headers.contains(&wanted),
            &format!("a {wanted} column in {headers:?}"),
        );
    }
    let column = |name: &str| headers.iter().position(|h| *h == name).expect("column");
    let rows = page.json["process_rows"].as_array().expect("process rows");
    let row = rows
        .iter()
        .find(|r| r[column("PID")] == "4242")
        .unwrap_or_else(|| page.fail("no row for pid 4242"));
    page.check(
        row[column("User")] == "alice",
        &format!("user of 4242: {row}"),
    );
    page.check(
        row[column("Container")]
            .as_str()
            .is_some_and(|c| c.starts_with("docker ")),
        &format!("container of 4242: {row}"),
    );
    page.check(
        row[column("SM share")] == "54 %",
        &format!("SM share of 4242: {row}"),
    );
    page.check(
        row[column("Pod")] == "–",
        &format!("no pod for 4242: {row}"),
    );
    let triton = rows
        .iter()
        .find(|r| r[column("PID")] == "4343")
        .unwrap_or_else(|| page.fail("no row for pid 4343"));
    page.check(
        triton[column("Pod")] == "serving/triton-0 · server",
        &format!("pod of 4343: {triton}"),
    );
    let gpu0 = &page.json["gpu_pods"][0];
    page.check(
        gpu0 == "gi 2: serving/triton-0 · server",
        &format!("GPU 0's holders: {gpu0}"),
    );
}

#[test]
fn xid_codes_past_the_bound_show_as_other_in_the_xid_column() {
    // 40 made-up Xid codes on GPU 0 from the kernel log: the first 32 count
    // on their own, the other 8 together as "other" (issue 22 §2).
    let dir = tempfile::tempdir().expect("temp dir");
    let kmsg = dir.path().join("kmsg");
    std::fs::write(&kmsg, "").expect("kmsg");
    let config = dir.path().join("gpuwatch.toml");
    std::fs::write(
        &config,
        format!("[health]\nkernel_log = \"{}\"\n", kmsg.display()),
    )
    .expect("config");
    let args = ["--no-history", "--config", config.to_str().expect("utf-8")];
    let agent = Agent::start("health", &args, &[]);
    agent.wait_for("the kernel log read", Duration::from_secs(60), |m| {
        m.value("gpuwatch_kernel_log_up", &[]) == Some(1.0)
    });
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .expect("/proc/uptime")
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .expect("uptime seconds");
    let lines: String = (100_000..100_040u64)
        .map(|code| {
            format!("[{uptime:12.6}] NVRM: Xid (PCI:0000:18:00): {code}, pid=1, name=x, made up.\n")
        })
        .collect();
    std::fs::write(&kmsg, lines).expect("append");
    agent.wait_for("the folded Xids counted", Duration::from_secs(60), |m| {
        m.value(
            "gpuwatch_xid_errors_total",
            &[("gpu", "0"), ("xid", "other")],
        ) == Some(8.0)
    });
    let page = visit(
        &format!("{}/", agent.url),
        "webui-xid-other",
        &["--timeout", "60"],
    );
    page.complete();
    page.no_console_errors(&agent);
    let xid = page.cell(0, "xid");
    page.check(
        xid.contains("other×8") && xid.contains("100000×1") && !xid.contains("100039"),
        &format!("GPU 0's Xid column: {xid:?}"),
    );
}
