//! What the running agent derives before it starts its parts: the values
//! computed from the configuration and the bound address, alerting's
//! snapshot queue, and the start-up announcement.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tracing::info;

use crate::config::Config;
use crate::exporter::process_metrics::ProcessExport;
use crate::http::webconfig::WebSecurity;
use crate::http::ServerLimits;
use crate::sampler::SnapshotSink;

/// Values derived from the configuration and the bound address, computed before any
/// part gets its configuration.
pub(super) struct Derived {
    pub(super) bound: SocketAddr,
    /// `scheme://host:port` as the logs show it.
    pub(super) shown: String,
    /// The agent's URL in notifications (Alertmanager's generatorURL).
    pub(super) external_url: String,
    pub(super) stale_after: Duration,
    pub(super) limits: ServerLimits,
    pub(super) processes: ProcessExport,
    pub(super) retention: crate::history::Retention,
    /// The host name (the `host` label of remediation's notifications).
    pub(super) hostname: String,
}

impl Derived {
    pub(super) fn of(
        config: &Config,
        security: &WebSecurity,
        hostname: &str,
        listener: &TcpListener,
    ) -> anyhow::Result<Derived> {
        let bound = listener
            .local_addr()
            .context("cannot read the address the listener is bound to")?;
        let scheme = security.scheme();
        let shown = if bound.ip().is_unspecified() {
            format!("{scheme}://localhost:{}", bound.port())
        } else {
            format!("{scheme}://{bound}")
        };
        Ok(Derived {
            bound,
            shown,
            external_url: config
                .server
                .external_url_or(scheme, hostname, bound.port()),
            stale_after: config.sampler.stale_after(),
            limits: ServerLimits {
                max_connections: config.server.max_connections,
                request_timeout: config.server.request_timeout,
                idle_timeout: config.server.idle_timeout,
            },
            processes: ProcessExport {
                process_top_n: config.sampler.process_top_n,
                capacity: Arc::new(config.capacity.clone()),
            },
            retention: config.history.retention,
            hostname: hostname.to_string(),
        })
    }
}

/// Alerting as the running agent uses it.
pub(super) struct AlertsRun {
    pub(super) rules: Vec<crate::rules::Rule>,
    pub(super) queue: crate::alerting::AlertQueue,
}

/// Alerting's queue of snapshots, when there are rules.
pub(super) fn alerts_sink(config: &Config, sinks: &mut Vec<SnapshotSink>) -> Option<AlertsRun> {
    if config.rules.is_empty() {
        return None;
    }
    let (sink, queue) = crate::alerting::queue();
    sinks.push(sink);
    Some(AlertsRun {
        rules: config.rules.clone(),
        queue,
    })
}

/// Logs where the agent serves and with what security.
pub(super) fn announce(security: &WebSecurity, derived: &Derived) {
    info!(address = %derived.bound, "Serving {}/metrics", derived.shown);
    info!(
        "Web view: open {}/ in a browser (live GPUs, history charts, alerts).",
        derived.shown
    );
    if security.tls.is_some() || security.auth.is_some() {
        info!(
            web_config = %security.file.display(),
            tls = security.tls.is_some(),
            basic_auth = security.auth.is_some(),
            "Web security on: every path, /-/healthy and /-/ready included."
        );
    }
    if let Some(reloader) = &security.tls {
        let served = reloader.served();
        info!(
            cert_file = %reloader.settings().cert_file.display(),
            serial = %served.serial,
            subject = %served.subject,
            not_after = %served.expires(),
            "TLS certificate in use; its files are checked every second and reloaded when they change."
        );
    }
}
