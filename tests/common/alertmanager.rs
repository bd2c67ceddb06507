//! A real Alertmanager (Debian's `prometheus-alertmanager`) on a loopback
//! port, with its data in a temporary directory and no clustering; killed
//! when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Path of the Alertmanager binary; panics with the install hint when it is
/// missing.
pub fn binary() -> PathBuf {
    for candidate in [
        "/usr/bin/prometheus-alertmanager",
        "/usr/local/bin/alertmanager",
        "/usr/bin/alertmanager",
    ] {
        if Path::new(candidate).is_file() {
            return PathBuf::from(candidate);
        }
    }
    panic!("Alertmanager is missing: the Alertmanager receiver tests push alerts to a real one. Install it with `apt-get install prometheus-alertmanager` (scripts/test.sh does this)");
}

/// A running Alertmanager.
pub struct Alertmanager {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its base URL.
    pub url: String,
    dir: tempfile::TempDir,
    http: ureq::Agent,
}

/// A route to a receiver that sends nothing: the tests read the API.
const CONFIG: &str =
    "route:\n  receiver: blackhole\n  group_wait: 1s\nreceivers:\n  - name: blackhole\n";

impl Alertmanager {
    /// Starts one on a free port and waits until it answers.
    pub fn start() -> Alertmanager {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("alertmanager.yml"), CONFIG).expect("config");
        let port = super::free_port();
        let mut am = Alertmanager {
            child: None,
            port,
            url: format!("http://127.0.0.1:{port}"),
            dir,
            http: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(5)))
                .build()
                .new_agent(),
        };
        am.restart();
        am
    }

    /// Starts it (again) on the same port, with its alerts gone (they live
    /// in memory), and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("alertmanager.log"))
            .expect("log file");
        let binary = binary();
        let child = Command::new(&binary)
            .arg(format!(
                "--config.file={}",
                self.dir.path().join("alertmanager.yml").display()
            ))
            .arg(format!(
                "--storage.path={}",
                self.dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{}", self.port))
            .arg("--cluster.listen-address=")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(response) = self.http.get(format!("{}/-/ready", self.url)).call() {
                if response.status() == 200 {
                    return;
                }
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("Alertmanager exited ({status}); its log:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "Alertmanager not ready within 30 s; its log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills it (SIGKILL), if it runs.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The alerts it holds that are active (not resolved, not expired), from
    /// `GET /api/v2/alerts`.
    pub fn alerts(&self) -> Vec<serde_json::Value> {
        let mut response = self
            .http
            .get(format!("{}/api/v2/alerts", self.url))
            .call()
            .expect("GET /api/v2/alerts");
        assert_eq!(response.status(), 200);
        let text = response.body_mut().read_to_string().expect("body");
        serde_json::from_str::<Vec<serde_json::Value>>(&text).expect("a JSON list")
    }

    /// The active alerts named `alertname`.
    pub fn named(&self, alertname: &str) -> Vec<serde_json::Value> {
        self.alerts()
            .into_iter()
            .filter(|a| a["labels"]["alertname"] == alertname)
            .collect()
    }

    /// Waits until `done` holds for the active alerts named `alertname`;
    /// returns them.
    pub fn wait_for(
        &self,
        what: &str,
        alertname: &str,
        timeout: Duration,
        done: impl Fn(&[serde_json::Value]) -> bool,
    ) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let alerts = self.named(alertname);
            if done(&alerts) {
                return alerts;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within {timeout:?}; Alertmanager holds {:#?}\nits log:\n{}",
                self.alerts(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("alertmanager.log")).unwrap_or_default()
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        self.kill();
    }
}
