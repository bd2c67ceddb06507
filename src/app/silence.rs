//! `gpuwatch silence add|list|expire`: a client of the running agent's
//! HTTP API (`/api/v1/silences`), as amtool is of Alertmanager's. The agent
//! is the only writer of its silences: a silence takes effect at its next
//! evaluation, works against a remote agent, and needs no write access to
//! the agent's database, only its address (and basic-auth user when the
//! web configuration asks for one).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};

use crate::alerting::silence::MAX_MATCHERS;
use crate::config::Config;
use crate::files::{self, read_bounded_string};
use crate::http::webconfig;
use crate::routing::matcher::Matcher;
use crate::timespec::{parse_duration, Timestamp, SILENCE};

use super::history::time;
use super::history::ListFormat;

/// How to reach the agent.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// `--url`; default from the config's listen address.
    pub url: Option<String>,
    /// `--config`, for the default URL.
    pub config: Option<PathBuf>,
    /// `--user`: basic-auth user; the password comes from the environment
    /// variable `GPUWATCH_PASSWORD` or `--password-file`.
    pub user: Option<String>,
    /// `--password-file`.
    pub password_file: Option<PathBuf>,
    /// `--ca-file`: the CA (or self-signed certificate) the agent's TLS
    /// certificate is checked against.
    pub ca_file: Option<PathBuf>,
}

/// `gpuwatch silence add`.
#[derive(Debug, Clone)]
pub struct AddOptions {
    /// The agent.
    pub agent: AgentOptions,
    /// `--match` matchers as written.
    pub matchers: Vec<String>,
    /// `--duration`.
    pub duration: String,
    /// `--start`: RFC 3339; default now.
    pub start: Option<String>,
    /// `--comment`.
    pub comment: String,
    /// `--author`; default the user's name.
    pub author: Option<String>,
}

/// The agent's base URL: `--url`, else the config's `server.listen`
/// (a wildcard address becomes 127.0.0.1), https when its web configuration
/// has TLS.
fn base_url(options: &AgentOptions) -> anyhow::Result<String> {
    if let Some(url) = &options.url {
        if !url.starts_with("http://") && !url.starts_with("https://") {
            bail!("--url {url}: give an http:// or https:// URL, e.g. http://127.0.0.1:9842");
        }
        return Ok(url.trim_end_matches('/').to_string());
    }
    let config = Config::load(options.config.as_deref())?;
    let mut listen = config.server.listen;
    if listen.ip().is_unspecified() {
        listen.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let tls = webconfig::choose_file(
        None,
        options.config.as_deref(),
        config.server.web_config.as_deref(),
    )
    .and_then(|file| read_bounded_string(&file, files::MAX_CONFIG_BYTES).ok())
    .and_then(|text| serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&text).ok())
    .is_some_and(|yaml| yaml.get("tls_server_config").is_some());
    Ok(format!("{}://{listen}", if tls { "https" } else { "http" }))
}

/// A client of the running agent's HTTP API (also `gpuwatch health`'s).
pub(super) struct Client {
    /// The agent's base URL, for messages.
    pub(super) base: String,
    agent: ureq::Agent,
    authorization: Option<String>,
}

fn read_text(path: &Path, what: &str, limit: u64) -> anyhow::Result<String> {
    read_bounded_string(path, limit)
        .with_context(|| format!("cannot read {what} {}", path.display()))
}

impl Client {
    fn new(options: &AgentOptions) -> anyhow::Result<Client> {
        Client::with_timeout(options, Duration::from_secs(10))
    }

    /// A client whose every request ends after `timeout`, answered or not.
    pub(super) fn with_timeout(
        options: &AgentOptions,
        timeout: Duration,
    ) -> anyhow::Result<Client> {
        let base = base_url(options)?;
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .user_agent(concat!("gpuwatch/", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = &options.ca_file {
            let pem = read_text(ca, "the CA file", files::MAX_PEM_BYTES)?;
            let certs: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(pem.as_bytes())
                .filter_map(|item| match item {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect();
            if certs.is_empty() {
                bail!("--ca-file {}: no PEM certificate in it", ca.display());
            }
            config = config.tls_config(
                ureq::tls::TlsConfig::builder()
                    .root_certs(ureq::tls::RootCerts::new_with_certs(&certs))
                    .build(),
            );
        }
        let authorization = match &options.user {
            None => None,
            Some(user) => {
                let password = match &options.password_file {
                    Some(file) => read_text(file, "the password file", files::MAX_SECRET_BYTES)?.trim_end().to_string(),
                    None => std::env::var("GPUWATCH_PASSWORD").map_err(|_| {
                        anyhow!("--user {user}: give the password in the environment variable GPUWATCH_PASSWORD or with --password-file FILE")
                    })?,
                };
                use base64::Engine as _;
                Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
                ))
            }
        };
        Ok(Client {
            base,
            agent: config.build().new_agent(),
            authorization,
        })
    }

    /// Sends a request; returns the JSON answer of a 2xx, or an error that
    /// says what the agent said and what to do.
    pub(super) fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let result = match (method, body) {
            ("POST", Some(body)) => {
                let mut request = self
                    .agent
                    .post(&url)
                    .header("Content-Type", "application/json");
                if let Some(a) = &self.authorization {
                    request = request.header("Authorization", a);
                }
                request.send(body.to_string())
            }
            ("DELETE", _) => {
                let mut request = self.agent.delete(&url);
                if let Some(a) = &self.authorization {
                    request = request.header("Authorization", a);
                }
                request.call()
            }
            _ => {
                let mut request = self.agent.get(&url);
                if let Some(a) = &self.authorization {
                    request = request.header("Authorization", a);
                }
                request.call()
            }
        };
        let mut response = result.map_err(|e| {
            anyhow!(
                "cannot reach the agent at {}: {e}. Is `gpuwatch run` running there? Give its address with --url (or --config naming its listen address)",
                self.base
            )
        })?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
        match status {
            200..=299 => Ok(value),
            401 => bail!(
                "the agent at {} asks for basic auth: give --user NAME and the password in GPUWATCH_PASSWORD (or --password-file)",
                self.base
            ),
            _ => {
                let message = value["error"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| text.trim().to_string());
                bail!("the agent at {} answered {status}: {message}", self.base)
            }
        }
    }
}

fn author() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "gpuwatch".to_string());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    if host.is_empty() {
        user
    } else {
        format!("{user}@{host}")
    }
}

/// `gpuwatch silence add`: prints the new silence's id.
pub fn add(options: AddOptions) -> anyhow::Result<()> {
    if options.matchers.is_empty() {
        bail!("give at least one --match, e.g. --match alertname=GpuHot --match gpu=0");
    }
    if options.matchers.len() > MAX_MATCHERS {
        bail!(
            "--match: {} matchers; a silence has at most {MAX_MATCHERS}",
            options.matchers.len()
        );
    }
    for m in &options.matchers {
        Matcher::parse(m).map_err(|e| anyhow!("--match: {e}"))?;
    }
    // Checked here too, so a mistake is named without asking the agent.
    let duration =
        parse_duration(&options.duration, SILENCE).map_err(|e| anyhow!("--duration: {e}"))?;
    let start = match &options.start {
        Some(start) => Timestamp::parse_rfc3339(start).map_err(|e| anyhow!("--start: {e}"))?,
        None => Timestamp::now(),
    };
    if start.checked_add(duration).is_none() {
        bail!(
            "--duration: {start} plus {} is past {}, the latest time accepted",
            options.duration,
            Timestamp::LATEST
        );
    }
    let mut body = json!({
        "matchers": options.matchers,
        "duration": options.duration,
        "comment": options.comment,
        "createdBy": options.author.clone().unwrap_or_else(author),
    });
    if let Some(start) = &options.start {
        body["startsAt"] = json!(start);
    }
    let client = Client::new(&options.agent)?;
    let answer = client
        .call("POST", "/api/v1/silences", Some(&body))
        .map_err(|e| {
            // Name the flag rather than the JSON field.
            let text = e.to_string();
            let flagged = text
                .replace(": matchers", ": --match")
                .replace(": duration", ": --duration")
                .replace(": comment", ": --comment")
                .replace(": createdBy", ": --author")
                .replace(": startsAt", ": --start");
            anyhow!(flagged)
        })?;
    println!("{}", text_of(&answer["silenceID"]));
    Ok(())
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `gpuwatch silence list`: the silences not over (all with `all`).
pub fn list(agent: AgentOptions, all: bool, format: ListFormat) -> anyhow::Result<()> {
    let client = Client::new(&agent)?;
    let answer = client.call("GET", "/api/v1/silences", None)?;
    let silences: Vec<Value> = answer["silences"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|s| all || s["status"]["state"] != "expired")
        .collect();
    if format == ListFormat::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "silences": silences }))?
        );
        return Ok(());
    }
    if silences.is_empty() {
        println!("no {}silences", if all { "" } else { "active or pending " });
        return Ok(());
    }
    println!(
        "{:>4} {:<8} {:<21} {:<21} {:<16} {:<32} comment",
        "id", "state", "starts", "ends", "created by", "matchers"
    );
    let short = |v: &Value| {
        Timestamp::parse_rfc3339(&text_of(v))
            .map(|t| time(t.as_seconds_f64()))
            .unwrap_or_else(|_| text_of(v))
    };
    for s in &silences {
        let matchers: Vec<String> = s["matchers"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| serde_json::from_value::<Matcher>(m).ok())
            .map(|m| m.to_string())
            .collect();
        println!(
            "{:>4} {:<8} {:<21} {:<21} {:<16} {:<32} {}",
            text_of(&s["id"]),
            text_of(&s["status"]["state"]),
            short(&s["startsAt"]),
            short(&s["endsAt"]),
            text_of(&s["createdBy"]),
            matchers.join(", "),
            text_of(&s["comment"])
        );
    }
    Ok(())
}

/// `gpuwatch silence expire ID...`.
pub fn expire(agent: AgentOptions, ids: &[String]) -> anyhow::Result<()> {
    if ids.is_empty() {
        bail!("give the id of the silence to expire (see `gpuwatch silence list`)");
    }
    let client = Client::new(&agent)?;
    for id in ids {
        if id.parse::<i64>().is_err() {
            bail!("{id} is not a silence id (a number; see `gpuwatch silence list`)");
        }
        client.call("DELETE", &format!("/api/v1/silences/{id}"), None)?;
        println!("Silence {id} expired.");
    }
    Ok(())
}
