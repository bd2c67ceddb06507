//! Every command that prints, with its standard output a pipe whose reader
//! is already gone (`gpuwatch events | head -1` once head has exited): it
//! ends quietly, killed by SIGPIPE like `cat` (status 141 in a shell), and
//! never panics with status 101. The agent (`run`) ignores SIGPIPE and keeps
//! serving when its output goes away.

mod common;

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::Agent;

/// The environment variables that would point a command elsewhere.
const OUTSIDE: [&str; 5] = [
    "GPUWATCH_SIM_TIME",
    "GPUWATCH_SIM_SPEED",
    "GPUWATCH_SIM_START",
    "GPUWATCH_CONFIG",
    "STATE_DIRECTORY",
];

/// A gpuwatch command whose stdout is a pipe with no reader, stderr piped.
fn with_closed_stdout(args: &[&str], state: &Path) -> Command {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let mut command = Command::new(common::binary());
    command
        .args(args)
        .env("XDG_STATE_HOME", state)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped());
    for var in OUTSIDE {
        command.env_remove(var);
    }
    command
}

/// Runs `args` with a closed stdout: (exit status, stderr).
fn run_closed(args: &[&str], state: &Path) -> (ExitStatus, String) {
    let output = with_closed_stdout(args, state)
        .output()
        .expect("run gpuwatch");
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn every_printing_command_ends_quietly_on_a_closed_pipe() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("gpuwatch.toml");
    std::fs::write(
        &config,
        "[history]\nbatch_interval = \"1s\"\n\
         [[profiles]]\nname = \"small\"\nmemory = \"2GiB\"\n",
    )
    .expect("config");
    let config = config.to_str().expect("utf-8 path");
    let agent = Agent::start("thermal-incident", &["--config", config], &[]);
    agent.wait_for("a history commit", Duration::from_secs(30), |m| {
        m.value("gpuwatch_history_rows_written_total", &[])
            .is_some_and(|rows| rows > 0.0)
    });
    let db = agent.history.to_str().expect("utf-8 path").to_string();
    let url = agent.url.clone();
    let commands: Vec<Vec<&str>> = vec![
        vec!["status", "--simulate", "h100x8"],
        vec!["status", "--simulate", "h100x8", "--json"],
        vec!["capacity", "--simulate", "h100x8", "--config", config],
        vec![
            "history",
            "--db",
            &db,
            "--gpu",
            "0",
            "--metric",
            "temperature",
        ],
        vec![
            "history",
            "--db",
            &db,
            "--gpu",
            "0",
            "--metric",
            "temperature",
            "--format",
            "csv",
        ],
        vec!["events", "--db", &db],
        vec!["events", "--db", &db, "--format", "json"],
        vec!["alerts", "--db", &db],
        vec!["alerts", "--db", &db, "--format", "json"],
        vec!["silence", "list", "--url", &url],
        vec![
            "silence",
            "add",
            "--url",
            &url,
            "--match",
            "gpu=0",
            "--duration",
            "1h",
            "--comment",
            "pipe test",
        ],
        vec!["validate", "--config", config],
        vec!["validate"],
    ];
    for args in &commands {
        let (status, stderr) = run_closed(args, dir.path());
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
        assert_eq!(
            status.signal(),
            Some(libc::SIGPIPE),
            "{args:?} should end by SIGPIPE once it prints, not {status}: {stderr}"
        );
    }
    // clap prints help itself and ignores the closed pipe: status 0.
    for args in [&["--help"][..], &["silence", "--help"], &["--version"]] {
        let (status, stderr) = run_closed(args, dir.path());
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
        assert_eq!(status.code(), Some(0), "{args:?}: {stderr}");
    }
    // The agent was not disturbed by the silence added through it.
    assert_eq!(agent.get("/-/healthy").0, 200);
}

/// Kills the child when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_agent_keeps_running_when_its_output_goes_away() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = common::free_port();
    let listen = format!("127.0.0.1:{port}");
    // Both stdout and stderr (where its log goes) closed from the start.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let child = with_closed_stdout(
        &["run", "--simulate", "--listen", &listen, "--no-history"],
        dir.path(),
    )
    .env("RUST_LOG", "debug")
    .stderr(writer)
    .spawn()
    .expect("start gpuwatch");
    let mut agent = Killed(child);
    let http = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .new_agent();
    let metrics = format!("http://{listen}/metrics");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut served = 0;
    while served < 3 {
        if let Some(status) = agent.0.try_wait().expect("wait") {
            panic!("the agent exited ({status}) when its output was closed");
        }
        assert!(
            Instant::now() < deadline,
            "the agent did not serve /metrics on {listen}"
        );
        if let Ok(mut response) = http.get(&metrics).call() {
            let mut body = String::new();
            let _ = response.body_mut().as_reader().read_to_string(&mut body);
            if response.status() == 200 && body.contains("gpuwatch_up") {
                served += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        agent.0.try_wait().expect("wait").is_none(),
        "the agent is still running"
    );
}
