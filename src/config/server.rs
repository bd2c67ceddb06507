//! `[server]`: where and how /metrics and the API are served.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::exporter::compat::MetricsCompat;

use super::limits;
use super::raw::RawServer;
use super::{Position, Validator, DEFAULT_LISTEN};

/// HTTP server settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Address and port /metrics listens on.
    pub listen: SocketAddr,
    /// Connections served at once; more wait for a slot (the longest-idle
    /// one is closed to make room).
    pub max_connections: usize,
    /// Longest a request may take once its head is read (also the longest
    /// wait for a connection slot and for a TLS handshake).
    pub request_timeout: Duration,
    /// Longest a connection may take to send a complete request head, from
    /// its opening or its previous response: keep-alive idle time and slow
    /// headers alike.
    pub idle_timeout: Duration,
    /// Web configuration file (exporter-toolkit format: TLS, basic auth),
    /// as written; `--web-config` overrides it.
    pub web_config: Option<PathBuf>,
    /// Where `web_config` is written in the configuration file, so that a
    /// web configuration that cannot be read is reported there.
    pub web_config_at: Option<Position>,
    /// Other exporters' metric families exported as well (`--metrics-compat`).
    pub metrics_compat: Vec<MetricsCompat>,
    /// The URL people reach the agent at, ending in `/` (notifications
    /// link to it); `None` for `http(s)://HOSTNAME:PORT/`, see
    /// [`ServerConfig::external_url_or`].
    pub external_url: Option<String>,
}

impl ServerConfig {
    /// The external URL: the configured one, or `SCHEME://HOSTNAME:PORT/`
    /// for the port the agent listens on.
    pub fn external_url_or(&self, scheme: &str, hostname: &str, port: u16) -> String {
        self.external_url
            .clone()
            .unwrap_or_else(|| format!("{scheme}://{hostname}:{port}/"))
    }
}

impl Validator<'_> {
    /// Checks `[server]`.
    pub(super) fn server(&mut self, server: RawServer) -> ServerConfig {
        let listen = self.address("server.listen", server.listen.as_ref(), DEFAULT_LISTEN);
        let max_connections = self.count(
            "server.max_connections",
            server.max_connections.as_ref(),
            64,
            &limits::MAX_CONNECTIONS,
        );
        let request_timeout = self.duration(
            "server.request_timeout",
            server.request_timeout.as_ref(),
            Duration::from_secs(10),
            &limits::REQUEST_TIMEOUT,
        );
        let idle_timeout = self.duration(
            "server.idle_timeout",
            server.idle_timeout.as_ref(),
            Duration::from_secs(5),
            &limits::IDLE_TIMEOUT,
        );
        let external_url = server.external_url.as_ref().and_then(|u| {
            let field = "server.external_url";
            if !self.no_control(field, u.span(), "URL", u.get_ref()) {
                return None;
            }
            if super::receivers::is_http_url(u.get_ref()) {
                Some(format!("{}/", u.get_ref().trim_end_matches('/')))
            } else {
                self.problem(
                    field,
                    u.span(),
                    &format!(
                        "\"{}\" is not an http:// or https:// URL; write it like \"https://gpu-node-1.example.com:9842/\"",
                        u.get_ref()
                    ),
                );
                None
            }
        });
        let mut metrics_compat = Vec::new();
        for name in server.metrics_compat.iter().flatten() {
            match MetricsCompat::parse(name.get_ref()) {
                Ok(set) => metrics_compat.push(set),
                Err(_) => self.problem(
                    "server.metrics_compat",
                    name.span(),
                    &format!(
                        "\"{}\" is not a metrics compatibility set; use \"dcgm\" and/or \"nvidia_smi\"",
                        name.get_ref()
                    ),
                ),
            }
        }
        metrics_compat.sort();
        metrics_compat.dedup();
        let web_config_at = server
            .web_config
            .as_ref()
            .map(|path| self.position(path.span()));
        ServerConfig {
            listen,
            max_connections: usize::try_from(max_connections).unwrap_or(64),
            request_timeout,
            idle_timeout,
            web_config: server.web_config.map(|path| path.into_inner()),
            web_config_at,
            metrics_compat,
            external_url,
        }
    }
}
