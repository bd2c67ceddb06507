//! Shared helpers for the end-to-end tests: start the real `gpuwatch` binary
//! on the NVML simulator (or the same agent in-process, [`Agent::in_process`]),
//! scrape it over TCP, and read Prometheus text.

#![allow(dead_code)] // Each test binary uses its own subset.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub mod alertmanager;
pub mod golden;
pub mod kubelet;
pub mod promql;
pub mod slurm;
pub mod webhook;

/// The gpuwatch binary cargo built for these tests.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gpuwatch"))
}

/// A file under tests/.
pub fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(relative)
}

/// An HTTP response, decoded.
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers as (name, value).
    pub headers: Vec<(String, String)>,
    /// Body as text.
    pub body: String,
}

/// How an agent runs.
enum Process {
    /// The spawned binary.
    Child(Child),
    /// In this test process ([`Agent::in_process`]), holding the simulator
    /// until it has stopped and the variables set for it are removed.
    InProcess {
        running: Option<gpuwatch::app::agent::Running>,
        env: Vec<String>,
        _simulator: std::sync::MutexGuard<'static, ()>,
    },
}

/// The NVML simulator is one per process (its scenario is an environment
/// variable, its clock starts once): in-process agents take turns.
static SIMULATOR: Mutex<()> = Mutex::new(());

/// A running agent; killed when dropped.
pub struct Agent {
    process: Process,
    /// Base URL, e.g. http://127.0.0.1:40123
    pub url: String,
    log: Arc<Mutex<String>>,
    http: ureq::Agent,
    /// The history database this agent writes (unless the test chose another).
    pub history: PathBuf,
    _data: tempfile::TempDir,
}

/// Opens the simulator in this process on the fixture `scenario` with its
/// clock frozen at 10 s, for tests that drive a `NodeReader` themselves:
/// the library's path and the driver.
pub fn frozen_simulator(scenario: &str) -> (PathBuf, gpuwatch::gpu::nvml::Driver) {
    std::env::set_var("GPUWATCH_SIM_TIME", "10");
    std::env::set_var(gpuwatch::sim::ENV_SCENARIO, fixture(scenario));
    let library = gpuwatch::sim::locate_library().expect("the simulator library is built");
    let driver = gpuwatch::gpu::nvml::Driver::open(Some(&library)).expect("open the simulator");
    (library, driver)
}

/// How often the in-process simulator at `library` answered `function`
/// (its `nvmlSimCallCount`).
pub fn sim_calls(library: &Path, function: &std::ffi::CStr) -> u64 {
    // SAFETY: the simulator exports nvmlSimCallCount with this signature;
    // loading the library again returns the loaded instance; the name is
    // NUL-terminated.
    unsafe {
        let lib = libloading::Library::new(library).expect("load the simulator library");
        let calls = *lib
            .get::<unsafe extern "C" fn(*const std::ffi::c_char) -> u64>(b"nvmlSimCallCount\0")
            .expect("nvmlSimCallCount is exported");
        calls(function.as_ptr())
    }
}

impl Agent {
    /// Starts `gpuwatch run --simulate SCENARIO --listen 127.0.0.1:0` with
    /// extra arguments and environment, and waits until it listens.
    pub fn start(scenario: &str, args: &[&str], env: &[(&str, &str)]) -> Agent {
        Agent::start_on("127.0.0.1:0", scenario, args, env)
    }

    /// [`Agent::start`] on another loopback address, e.g. `[::1]:0`.
    pub fn start_on(listen: &str, scenario: &str, args: &[&str], env: &[(&str, &str)]) -> Agent {
        // Every agent records its history into its own temporary file.
        let data = tempfile::tempdir().expect("temp dir");
        let history = data.path().join("history.db");
        let mut command = Command::new(binary());
        command
            .args(["run", "--simulate", scenario, "--listen", listen])
            .args(args);
        if !args
            .iter()
            .any(|a| *a == "--history-db" || *a == "--no-history")
        {
            command.arg("--history-db").arg(&history);
        }
        command
            .env("RUST_LOG", "info")
            .env_remove("GPUWATCH_SIM_TIME")
            .env_remove("GPUWATCH_SIM_SPEED")
            .env_remove("GPUWATCH_SIM_START")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("start gpuwatch");
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(String::new()));
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent {
                    // "Serving http://ADDR/metrics", or https:// with TLS.
                    let found = [("http", "Serving http://"), ("https", "Serving https://")]
                        .into_iter()
                        .find_map(|(scheme, marker)| {
                            line.split(marker).nth(1).map(|rest| (scheme, rest))
                        });
                    if let Some((scheme, rest)) = found {
                        let address: String = rest.split('/').next().unwrap_or("").to_string();
                        let _ = port_tx.send((scheme, address));
                        sent = true;
                    }
                }
                let mut log = sink.lock().expect("log lock");
                log.push_str(&line);
                log.push('\n');
            }
        });
        let (scheme, address) = match port_rx.recv_timeout(Duration::from_secs(20)) {
            Ok(found) => found,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                std::thread::sleep(Duration::from_millis(200));
                panic!(
                    "gpuwatch did not start listening; its log:\n{}",
                    log.lock().expect("log")
                );
            }
        };
        let address = address.replace("localhost", "127.0.0.1");
        let http = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .new_agent();
        Agent {
            process: Process::Child(child),
            url: format!("{scheme}://{address}"),
            log,
            http,
            history,
            _data: data,
        }
    }

    /// Starts the agent in this process, as `gpuwatch run --simulate
    /// SCENARIO --listen 127.0.0.1:0` with `options` would (history in a
    /// temporary file unless `options` say otherwise), and reads the bound
    /// address from its handle. No log is captured and there is no exit
    /// status: tests of those spawn the binary ([`Agent::start`]). The
    /// simulator is shared by the whole process, so in-process agents of one
    /// test binary run one at a time, and a scenario's clock starts with
    /// the first of them: for scenarios that do not change over time.
    /// `env` is set for the simulator (e.g. `GPUWATCH_SIM_TIME`), the
    /// simulator's other variables are removed, as [`Agent::start`] does.
    pub fn in_process(
        scenario: &str,
        mut options: gpuwatch::app::RunOptions,
        env: &[(&str, &str)],
    ) -> Agent {
        let guard = SIMULATOR.lock().unwrap_or_else(|e| e.into_inner());
        for key in [
            "GPUWATCH_SIM_TIME",
            "GPUWATCH_SIM_SPEED",
            "GPUWATCH_SIM_START",
        ] {
            std::env::remove_var(key);
        }
        for (key, value) in env {
            std::env::set_var(key, value);
        }
        let data = tempfile::tempdir().expect("temp dir");
        let history = data.path().join("history.db");
        options.source.simulate = Some(Some(scenario.to_string()));
        options.listen = Some("127.0.0.1:0".into());
        if options.history_db.is_none() && !options.no_history {
            options.history_db = Some(history.clone());
        }
        let prepared = gpuwatch::app::prepare(&options).expect("a valid configuration");
        let driver = gpuwatch::gpu::nvml::Driver::open(prepared.plan.library.as_deref())
            .expect("open the simulator");
        let listen = prepared.plan.config.server.listen;
        let running = gpuwatch::app::agent::Running::start(prepared.plan, listen, driver)
            .expect("start the agent in-process");
        let http = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .new_agent();
        Agent {
            url: format!("http://{}", running.address()),
            process: Process::InProcess {
                running: Some(running),
                env: env.iter().map(|(key, _)| key.to_string()).collect(),
                _simulator: guard,
            },
            log: Arc::new(Mutex::new(String::new())),
            http,
            history,
            _data: data,
        }
    }

    /// [`Agent::in_process`] with the `gpuwatch run` flags tests pass to
    /// [`Agent::start`] (`--config FILE`, `--metrics-compat SET`, `--metrics-detail SET`,
    /// `--web-config FILE`, `--no-history`); any other flag is a test bug.
    pub fn in_process_with_args(scenario: &str, args: &[&str], env: &[(&str, &str)]) -> Agent {
        let mut options = gpuwatch::app::RunOptions::default();
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            if *flag == "--no-history" {
                options.no_history = true;
                continue;
            }
            let value = args
                .next()
                .unwrap_or_else(|| panic!("{flag} needs a value"));
            match *flag {
                "--config" => options.source.config = Some(PathBuf::from(value)),
                "--metrics-compat" => options.metrics_compat.push(value.to_string()),
                "--metrics-detail" => options.metrics_detail.push(value.to_string()),
                "--web-config" => options.web_config = Some(PathBuf::from(value)),
                other => panic!("Agent::in_process_with_args does not know {other}"),
            }
        }
        Agent::in_process(scenario, options, env)
    }

    /// GET `path`: (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        let response = self.get_with(path, &[]).expect("request");
        (response.status, response.body)
    }

    /// GET `path` with headers.
    pub fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Result<Response, String> {
        let mut request = self.http.get(&format!("{}{path}", self.url));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let mut response = request.call().map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let mut body = Vec::new();
        response
            .body_mut()
            .as_reader()
            .read_to_end(&mut body)
            .map_err(|e| e.to_string())?;
        Ok(Response {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }

    /// GET over a plain TCP connection, bytes as sent: (status line and
    /// headers, body). For checking encodings no client may undo.
    pub fn raw_get(&self, path: &str, headers: &[(&str, &str)]) -> (String, Vec<u8>) {
        use std::io::Write;
        let address = self.url.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut request =
            format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n");
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).expect("send");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read");
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("end of head");
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let mut body = raw[split + 4..].to_vec();
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            body = dechunk(&body);
        }
        (head, body)
    }

    /// The current /metrics, parsed.
    pub fn metrics(&self) -> Metrics {
        let (status, body) = self.get("/metrics");
        assert_eq!(status, 200, "/metrics answered {status}: {body}");
        Metrics::parse(&body)
    }

    /// Polls /metrics until `check` holds, or panics with the last scrape
    /// and the log after `timeout`.
    pub fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Metrics) -> bool,
    ) -> Metrics {
        let deadline = Instant::now() + timeout;
        loop {
            let metrics = self.metrics();
            if check(&metrics) {
                return metrics;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what}\nlast scrape:\n{}\nlog:\n{}",
                    metrics.text,
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits for /-/ready to answer `status`.
    pub fn wait_ready(&self, status: u16, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let (got, body) = self.get("/-/ready");
            if got == status {
                return body;
            }
            if Instant::now() > deadline {
                panic!(
                    "/-/ready stayed {got} ({body}), wanted {status}\nlog:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Everything the agent logged so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("log lock").clone()
    }

    /// Waits until the agent has logged `needle` (a line can reach the log
    /// a moment after what it reports happened); panics with the log after
    /// `timeout`.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> String {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let log = self.log();
            if log.contains(needle) {
                return log;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the agent did not log {needle:?} within {timeout:?}:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let Process::Child(child) = &mut self.process else {
            panic!("an in-process agent has no exit status: start the binary (Agent::start)");
        };
        let pid = child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "gpuwatch did not exit within 10 s of SIGTERM\nlog:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        match &mut self.process {
            Process::Child(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Process::InProcess { running, env, .. } => {
                // Stopped first, then its variables go (the binaries other
                // tests spawn inherit this process's environment).
                drop(running.take());
                for key in env.iter() {
                    std::env::remove_var(key);
                }
            }
        }
    }
}

/// One sample of Prometheus text.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name, suffixes included.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Value.
    pub value: f64,
}

/// A parsed Prometheus text exposition (enough of the format for our own output).
#[derive(Debug, Clone)]
pub struct Metrics {
    /// The raw text.
    pub text: String,
    /// Every sample.
    pub samples: Vec<Sample>,
    /// `# TYPE` lines: family name → type.
    pub types: BTreeMap<String, String>,
}

impl Metrics {
    /// Parses exposition text.
    pub fn parse(text: &str) -> Metrics {
        let mut samples = Vec::new();
        let mut types = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut parts = rest.split_whitespace();
                if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                    types.insert(name.to_string(), kind.to_string());
                }
                continue;
            }
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            samples.push(parse_sample(line));
        }
        Metrics {
            text: text.to_string(),
            samples,
            types,
        }
    }

    /// Samples named `name` whose labels include every pair in `labels`.
    pub fn find(&self, name: &str, labels: &[(&str, &str)]) -> Vec<&Sample> {
        self.samples
            .iter()
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }

    /// The value of the one sample matching, if exactly one does.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        match self.find(name, labels).as_slice() {
            [one] => Some(one.value),
            [] => None,
            many => panic!("{} samples match {name} {labels:?}: {many:?}", many.len()),
        }
    }

    /// Whether any sample has this name.
    pub fn has(&self, name: &str) -> bool {
        self.samples.iter().any(|s| s.name == name)
    }
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = body.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&body[..end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[end + 2..end + 2 + size]);
        body = &body[end + 2 + size + 2..];
    }
}

fn parse_sample(line: &str) -> Sample {
    let (head, value) = line
        .rsplit_once(' ')
        .unwrap_or_else(|| panic!("bad sample line: {line}"));
    let value: f64 = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other
            .parse()
            .unwrap_or_else(|_| panic!("bad value in: {line}")),
    };
    let (name, labels) = match head.split_once('{') {
        None => (head.to_string(), BTreeMap::new()),
        Some((name, rest)) => {
            let body = rest
                .strip_suffix('}')
                .unwrap_or_else(|| panic!("bad labels in: {line}"));
            (name.to_string(), parse_labels(body))
        }
    };
    Sample {
        name,
        labels,
        value,
    }
}

fn parse_labels(body: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut chars = body.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        assert_eq!(
            chars.next(),
            Some('"'),
            "label value must be quoted in {body}"
        );
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => break,
                },
                '"' => break,
                other => value.push(other),
            }
        }
        labels.insert(key.trim_start_matches(',').trim().to_string(), value);
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    labels
}

/// Runs the gpuwatch binary to completion: (exit code, stdout, stderr).
pub fn run_cli(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = Command::new(binary());
    command.args(args).stdin(Stdio::null());
    for var in [
        "GPUWATCH_SIM_TIME",
        "GPUWATCH_SIM_SPEED",
        "GPUWATCH_SIM_START",
        "GPUWATCH_CONFIG",
        "STATE_DIRECTORY",
    ] {
        command.env_remove(var);
    }
    // A command that falls back to the default history database finds it in
    // this test binary's own state directory, never the user's.
    command.env("XDG_STATE_HOME", isolated_state_home());
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("run gpuwatch");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A state directory (XDG_STATE_HOME) for this test binary alone, removed
/// when it exits.
fn isolated_state_home() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("temp state dir"))
        .path()
}

/// Path of `promtool`; panics with the install hint when it is missing.
pub fn promtool() -> PathBuf {
    let candidates = ["/usr/bin/promtool", "/usr/local/bin/promtool"];
    for candidate in candidates {
        if Path::new(candidate).is_file() {
            return PathBuf::from(candidate);
        }
    }
    panic!("promtool is missing: these tests lint /metrics with the real promtool. Install it with `apt-get install prometheus` (scripts/test.sh does this)");
}

/// Path of the Prometheus server; panics with the install hint when it is
/// missing.
pub fn prometheus() -> PathBuf {
    let candidates = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"];
    for candidate in candidates {
        if Path::new(candidate).is_file() {
            return PathBuf::from(candidate);
        }
    }
    panic!("prometheus is missing: the Grafana dashboard test evaluates every panel query on a real Prometheus server. Install it with `apt-get install prometheus` (scripts/test.sh does this)");
}

/// Metric families as a docs table documents them: name → (type, label names).
pub type Documented = BTreeMap<String, (String, BTreeSet<String>)>;

/// One HTTP/1.1 request as the tests' small servers read it.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    /// The request target, e.g. "/hook".
    pub path: String,
    /// Headers by lower-case name.
    pub headers: BTreeMap<String, String>,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
}

/// Reads one request from `reader`: request line, headers, and a body of
/// `Content-Length` bytes; `None` when the connection ends before that.
pub fn read_request(reader: &mut impl BufRead) -> Option<HttpRequest> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).ok()? == 0 {
        return None;
    }
    let path = request_line.split_whitespace().nth(1)?.to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
        }
    }
    let length = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(HttpRequest {
        path,
        headers,
        body,
    })
}

/// The text of a page under the repository's `docs/` (e.g. `"metrics.md"`).
pub fn docs_page(page: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(page);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of `page` between `<!-- MARKER:start -->` and `<!-- MARKER:end -->`.
pub fn docs_marked<'a>(text: &'a str, page: &str, marker: &str) -> &'a str {
    text.split(&format!("<!-- {marker}:start -->"))
        .nth(1)
        .and_then(|rest| rest.split(&format!("<!-- {marker}:end -->")).next())
        .unwrap_or_else(|| panic!("docs/{page} has no {marker} markers"))
}

/// A metric table of the docs page `page` (`| name | type | unit | labels | … |`)
/// between `<!-- MARKER:start -->` and `<!-- MARKER:end -->`, as
/// [`Documented`]; "–" in the labels cell means none.
pub fn docs_metric_table(page: &str, marker: &str) -> Documented {
    let text = docs_page(page);
    let table = docs_marked(&text, page, marker);
    let mut documented = Documented::new();
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let name = cells[0].trim_matches('`').to_string();
        let labels: BTreeSet<String> = cells[3]
            .split(',')
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty() && l != "–")
            .collect();
        documented.insert(name, (cells[1].to_string(), labels));
    }
    documented
}

/// Asserts that the families in `metrics` whose names pass `filter` are
/// exactly those `documented` (`what` names the table in messages), with the
/// documented type and label names.
pub fn assert_documented(
    metrics: &Metrics,
    documented: &Documented,
    filter: impl Fn(&str) -> bool,
    what: &str,
) {
    let mut exported: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for sample in metrics.samples.iter().filter(|s| filter(&s.name)) {
        exported
            .entry(sample.name.clone())
            .or_default()
            .extend(sample.labels.keys().cloned());
    }
    let undocumented: Vec<_> = exported
        .keys()
        .filter(|n| !documented.contains_key(*n))
        .collect();
    assert!(
        undocumented.is_empty(),
        "exported but not in {what}: {undocumented:?}"
    );
    let missing: Vec<_> = documented
        .keys()
        .filter(|n| !exported.contains_key(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "in {what} but not exported: {missing:?}"
    );
    for (name, (kind, labels)) in documented {
        assert_eq!(metrics.types.get(name), Some(kind), "type of {name}");
        assert_eq!(&exported[name], labels, "labels of {name}");
    }
}

/// A port nothing listens on right now (another process may take it before
/// it is used: a small race tests accept).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A real Prometheus server (Debian's) with its data in a temporary
/// directory; killed when dropped.
pub struct PrometheusServer {
    child: Child,
    /// Its base URL.
    pub url: String,
    /// Its directory: prometheus.yml, prometheus.log, data/.
    pub dir: tempfile::TempDir,
}

impl PrometheusServer {
    /// Starts Prometheus with `config` (prometheus.yml text) on a free
    /// loopback port; does not wait for it to be ready.
    pub fn start(config: &str) -> PrometheusServer {
        let binary = prometheus();
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("write prometheus.yml");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        let child = Command::new(&binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        PrometheusServer {
            child,
            url: format!("http://127.0.0.1:{port}"),
            dir,
        }
    }

    /// What Prometheus logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }
}

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `promtool check metrics` on `text`: (exit status success, what it
/// printed on stdout and stderr).
pub fn promtool_check_metrics(text: &str) -> (bool, String) {
    use std::io::Write;
    let mut child = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("feed promtool");
    let output = child.wait_with_output().expect("promtool ran");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), said)
}

/// Starts an agent on `scenario` following a kernel log `dir/kmsg`, created
/// empty (nothing in it is backlog), and waits until it reads it.
pub fn agent_following_kmsg(
    dir: &std::path::Path,
    scenario: &str,
    wait: std::time::Duration,
) -> (Agent, std::path::PathBuf) {
    let kmsg = dir.join("kmsg");
    std::fs::write(&kmsg, "").expect("kmsg");
    let config = dir.join("gpuwatch.toml");
    std::fs::write(
        &config,
        format!("[health]\nkernel_log = \"{}\"\n", kmsg.display()),
    )
    .expect("config");
    let agent = Agent::start(
        scenario,
        &["--config", config.to_str().expect("utf-8")],
        &[],
    );
    agent.wait_for("the kernel log read", wait, |m| {
        m.value("gpuwatch_kernel_log_up", &[]) == Some(1.0)
    });
    (agent, kmsg)
}

/// "namespace/pod/container" of a process's `process_info`, or why not.
pub fn owner(metrics: &Metrics, gpu: &str, pid: &str) -> String {
    match metrics
        .find("gpuwatch_process_info", &[("gpu", gpu), ("pid", pid)])
        .as_slice()
    {
        [one] => format!(
            "{}/{}/{}",
            one.labels["namespace"], one.labels["pod"], one.labels["container"]
        ),
        other => format!("{} process_info samples", other.len()),
    }
}

/// Each pod allocation of GPU `gpu` (`gpuwatch_gpu_pod_info`) as
/// "namespace/pod/container resource gpu_instance", sorted.
pub fn allocations(metrics: &Metrics, gpu: &str) -> Vec<String> {
    let mut out: Vec<String> = metrics
        .find("gpuwatch_gpu_pod_info", &[("gpu", gpu)])
        .iter()
        .map(|s| {
            format!(
                "{}/{}/{} {} {}",
                s.labels["namespace"],
                s.labels["pod"],
                s.labels["container"],
                s.labels["resource"],
                s.labels["gpu_instance"]
            )
        })
        .collect();
    out.sort();
    out
}
