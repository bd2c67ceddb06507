//! `gpuwatch validate` refuses what would crash or hang `gpuwatch run`, and
//! `run` (which runs the same checks) exits with the same message instead of
//! crashing: the real binary, with hostile configurations and files.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Long enough for any start-up; a command still running then hangs (or
/// kept running without its server, as `run` did with a huge
/// `max_connections`). Not a timing assertion: a guard against a hang.
const HANG: Duration = Duration::from_secs(60);

/// Runs gpuwatch with `args` and returns (exit code, stdout, stderr);
/// fails the test if it has not exited within [`HANG`].
fn run_bounded(args: &[&str]) -> (i32, String, String) {
    let state = tempfile::tempdir().expect("temp state dir");
    let mut command = Command::new(common::binary());
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("XDG_STATE_HOME", state.path());
    for var in ["GPUWATCH_CONFIG", "STATE_DIRECTORY", "GPUWATCH_SIM_TIME"] {
        command.env_remove(var);
    }
    let mut child = command.spawn().expect("start gpuwatch");
    let deadline = Instant::now() + HANG;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for gpuwatch") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gpuwatch {args:?} did not exit within {HANG:?}: it hangs or kept running");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout).expect("stdout");
    }
    if let Some(mut err) = child.stderr.take() {
        err.read_to_string(&mut stderr).expect("stderr");
    }
    (status.code().unwrap_or(-1), stdout, stderr)
}

fn write(dir: &tempfile::TempDir, name: &str, body: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, body).expect("write");
    path.display().to_string()
}

fn mkfifo(dir: &tempfile::TempDir, name: &str) -> String {
    let path = dir.path().join(name);
    let status = Command::new("mkfifo")
        .arg(&path)
        .status()
        .expect("mkfifo (coreutils) runs");
    assert!(status.success(), "mkfifo failed");
    path.display().to_string()
}

#[test]
fn run_exits_with_the_validation_error_instead_of_crashing() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Before: the HTTP task panicked (tokio's semaphore limit) and the agent
    // kept running without a server; a queue as large exited with 101.
    for (body, at) in [
        (
            "[server]\nlisten = \"127.0.0.1:0\"\nmax_connections = 2305843009213693952\n",
            ":3:19: server.max_connections: 2305843009213693952 is too large; use at most 1024",
        ),
        (
            "[server]\nlisten = \"127.0.0.1:0\"\n[history]\nqueue = 2305843009213693952\n",
            ":4:9: history.queue: 2305843009213693952 is too large; use at most 1000",
        ),
    ] {
        let config = write(&dir, "gpuwatch.toml", body);
        let expect = format!("{config}{at}");
        let (code, stdout, _) = run_bounded(&["validate", "--config", &config]);
        assert_eq!(code, 1, "{stdout}");
        assert!(stdout.contains(&expect), "{stdout}\n  lacks\n{expect}");
        let (code, _, stderr) = run_bounded(&["run", "--simulate", "--config", &config]);
        assert_eq!(code, 1, "run exits with the validation error: {stderr}");
        assert!(stderr.contains(&expect), "{stderr}\n  lacks\n{expect}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn validate_refuses_bad_text_and_log_levels_that_run_would_accept_silently() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write(
        &dir,
        "gpuwatch.toml",
        "[log]\nlevel = \"warnn\"\n\n[[receivers]]\nname = \"hook\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:1/\"\nbearer_token = \"abc\\r\\nX-Evil: 1\"\n",
    );
    let (code, stdout, _) = run_bounded(&["validate", "--config", &config]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "{config}:2:9: log.level: \"warnn\" is not a level"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "{config}:8:16: receivers[0].bearer_token: the bearer token contains a control character (U+000D, a carriage return)"
        )),
        "{stdout}"
    );
    assert!(
        !stdout.contains("X-Evil"),
        "the token is never shown: {stdout}"
    );
}

#[test]
fn devices_fifos_and_huge_files_are_refused_without_hanging() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = mkfifo(&dir, "config.fifo");
    let big = dir.path().join("big.toml");
    std::fs::write(&big, vec![b'#'; (1 << 20) + 1]).expect("write");
    let big = big.display().to_string();
    for (config, says) in [
        (
            "/dev/zero",
            "/dev/zero is a character device, not a regular file",
        ),
        (fifo.as_str(), "is a FIFO (named pipe), not a regular file"),
        (big.as_str(), "is larger than 1048576 bytes"),
    ] {
        for command in ["validate", "run"] {
            let (code, stdout, stderr) = run_bounded(&[command, "--config", config]);
            assert_ne!(code, 0, "{command} --config {config}: {stdout}{stderr}");
            assert!(
                stderr.contains("cannot load the configuration file (--config)")
                    && stderr.contains(says),
                "{command} --config {config}: {stderr}"
            );
        }
    }
    // The web configuration, by flag and by the configuration's key.
    let web_fifo = mkfifo(&dir, "web.fifo");
    let (code, stdout, _) = run_bounded(&["validate", "--web-config", &web_fifo]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("is a FIFO (named pipe)"), "{stdout}");
    let config = write(
        &dir,
        "gpuwatch.toml",
        "[server]\nlisten = \"127.0.0.1:0\"\nweb_config = \"web.fifo\"\n",
    );
    let (code, stdout, _) = run_bounded(&["validate", "--config", &config]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "{config}:3:14: server.web_config: cannot load the web configuration file"
        )),
        "{stdout}"
    );
    let (code, _, stderr) = run_bounded(&["run", "--simulate", "--config", &config]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("is a FIFO (named pipe)"), "{stderr}");
    // A secret file that is a FIFO.
    let token = mkfifo(&dir, "token.fifo");
    let config = write(
        &dir,
        "secret.toml",
        &format!("[[receivers]]\nname = \"hook\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:1/\"\nbearer_token_file = \"{token}\"\n"),
    );
    let (code, stdout, _) = run_bounded(&["validate", "--config", &config]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "{config}:5:21: receivers[0].bearer_token_file: {token} is a FIFO"
        )),
        "{stdout}"
    );
}

#[test]
fn a_scenario_that_is_a_device_is_refused() {
    let (code, _, stderr) = run_bounded(&["status", "--simulate", "/dev/zero"]);
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("cannot read the scenario file: /dev/zero is a character device"),
        "{stderr}"
    );
}
