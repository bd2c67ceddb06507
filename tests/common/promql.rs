//! A client for a real Prometheus server started by the tests: the
//! dashboards' queries (ours in tests/grafana.rs, the peers' in
//! tests/peers.rs) are evaluated through it.

use serde_json::Value;
use std::time::{Duration, Instant};

/// A Prometheus server in a temporary directory; killed when dropped.
pub struct Prometheus {
    server: super::PrometheusServer,
    /// The base URL, `http://127.0.0.1:PORT`.
    pub url: String,
    http: ureq::Agent,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (host:port) every second as job
    /// `gpuwatch`, with the rule file `rules` if any, and waits until it
    /// answers /-/ready.
    pub fn start(targets: &[&str], rules: Option<&str>) -> Prometheus {
        let target_list = targets
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let rule_files = rules
            .map(|r| format!("rule_files:\n  - '{r}'\n"))
            .unwrap_or_default();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             {rule_files}scrape_configs:\n  - job_name: gpuwatch\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    \
             static_configs:\n      - targets: [{target_list}]\n"
        );
        let server = super::PrometheusServer::start(&config);
        let http = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .new_agent();
        let server = Prometheus {
            url: server.url.clone(),
            server,
            http,
        };
        server.poll("Prometheus ready", Duration::from_secs(40), || {
            server.get("/-/ready", &[]).map(|(status, _)| status == 200)
        });
        server
    }

    /// GET `path` with query parameters: (status, body).
    pub fn get(&self, path: &str, params: &[(&str, &str)]) -> Result<(u16, String), String> {
        let mut request = self.http.get(&format!("{}{path}", self.url));
        for (key, value) in params {
            request = request.query(*key, *value);
        }
        let mut response = request.call().map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?;
        Ok((status, body))
    }

    /// An API call: the `data` of a successful answer, or why not.
    pub fn api(&self, path: &str, params: &[(&str, &str)]) -> Result<Value, String> {
        let (status, body) = self.get(path, params)?;
        let json: Value = serde_json::from_str(&body)
            .map_err(|e| format!("HTTP {status}, not JSON ({e}): {body}"))?;
        if json["status"] != "success" {
            return Err(format!("HTTP {status}: {body}"));
        }
        Ok(json["data"].clone())
    }

    /// An instant query: how many results it returned.
    pub fn query(&self, expr: &str) -> Result<usize, String> {
        let data = self.api("/api/v1/query", &[("query", expr)])?;
        match data["resultType"].as_str() {
            Some("vector") | Some("matrix") => Ok(data["result"].as_array().map_or(0, Vec::len)),
            Some("scalar") | Some("string") => Ok(1),
            other => Err(format!("unexpected resultType {other:?}: {data}")),
        }
    }

    /// Polls `check` until it returns Ok(true); panics with the log after `timeout`.
    pub fn poll(&self, what: &str, timeout: Duration, check: impl Fn() -> Result<bool, String>) {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match check() {
                Ok(true) => return,
                Ok(false) => "not yet".to_string(),
                Err(e) => e,
            };
            if Instant::now() > deadline {
                panic!(
                    "timed out after {timeout:?} waiting for {what} (last: {last})\nPrometheus log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    pub fn log(&self) -> String {
        self.server.log()
    }
}

/// Regex-escapes a value the way Grafana's Prometheus datasource does for a
/// multi-value variable (a backslash, doubled inside the PromQL string).
pub fn regex_escape(value: &str) -> String {
    let mut out = String::new();
    for c in value.chars() {
        if "$^*+?.()|\\{}[]".contains(c) {
            out.push_str("\\\\");
        }
        out.push(c);
    }
    out
}
