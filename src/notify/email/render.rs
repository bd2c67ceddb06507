//! The email for one outbox message: subject, plain text and HTML bodies,
//! rendered from the neutral [`OutboxMessage`] (with its alert's details,
//! see [`crate::outbox::details`]). Pure: the same message always gives the
//! same email, so a retried message is identical.

use std::fmt::Write as _;

use std::collections::BTreeMap;

use crate::history::chart::sparkline;
use crate::outbox::details::{Details, HistorySummary, MetricDetails};
use crate::outbox::{OutboxAlert, OutboxMessage, Status};

/// One rendered email.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// `[FIRING] GpuHwThermalSlowdown on node-1 gpu 3 (NVIDIA H100)`.
    pub subject: String,
    /// The text/plain part.
    pub text: String,
    /// The text/html part (every value from the payload escaped).
    pub html: String,
    /// The alert's fingerprint (the dedup key), for `X-Gpuwatch-Fingerprint`.
    pub fingerprint: String,
    /// `Message-ID`: the same for every attempt to send this message, so a
    /// duplicate after a retry can be recognised.
    pub message_id: String,
}

/// The facts of the message's alert, read once (not [`crate::rules::Alert`]).
struct Facts<'a> {
    status: &'a str,
    name: &'a str,
    severity: &'a str,
    host: &'a str,
    gpu: Option<&'a str>,
    uuid: Option<&'a str>,
    /// A workload alert's workload: (kind, id) from its labels.
    workload: Option<(&'a str, &'a str)>,
    /// Its identity's lines (User, Account, Namespace, GPUs) from labels.
    identity: Vec<(&'static str, &'a str)>,
    /// Who ran on a GPU alert's GPU (annotation `workloads`).
    workloads: Option<&'a str>,
    summary: Option<&'a str>,
    description: Option<&'a str>,
    /// What to do first (annotation `action`: NVIDIA's Xid catalog for the
    /// Xid rules, INSPECT_HARDWARE for an escalation).
    action: Option<&'a str>,
    /// NVIDIA's description of the Xid (annotation `xid_description`).
    xid_description: Option<&'a str>,
    starts: &'a str,
    ends: Option<&'a str>,
    fingerprint: &'a str,
    external_url: &'a str,
    labels: Vec<(&'a str, &'a str)>,
    details: Details,
}

/// `key` of `map` when it has a value.
fn text<'a>(map: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    map.get(key).map(String::as_str).filter(|s| !s.is_empty())
}

impl<'a> Facts<'a> {
    /// The first alert of `message`: email messages are never grouped
    /// (the configuration refuses `group_wait` for email receivers), so it
    /// is the only one.
    fn read(message: &'a OutboxMessage) -> Facts<'a> {
        static NONE: OutboxAlert = OutboxAlert {
            status: Status::Firing,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            starts_at: String::new(),
            ends_at: String::new(),
            generator_url: String::new(),
            fingerprint: String::new(),
            details: None,
        };
        let alert = message.alerts.first().unwrap_or(&NONE);
        let label = |k| text(&alert.labels, k);
        Facts {
            status: match alert.status {
                Status::Firing => "firing",
                Status::Resolved => "resolved",
            },
            name: label("alertname").unwrap_or("alert"),
            severity: label("severity").unwrap_or("none"),
            host: label("host").or_else(|| label("instance")).unwrap_or(""),
            gpu: label("gpu"),
            uuid: label("uuid"),
            workload: label("kind").zip(label("workload")),
            identity: [
                ("User", "user"),
                ("Account", "account"),
                ("Namespace", "namespace"),
                ("GPUs", "gpus"),
            ]
            .into_iter()
            .filter(|_| label("kind").is_some() && label("workload").is_some())
            .filter_map(|(row, key)| Some((row, label(key)?)))
            .collect(),
            workloads: text(&alert.annotations, "workloads"),
            summary: text(&alert.annotations, "summary"),
            description: text(&alert.annotations, "description"),
            // "n/a": a code beyond the catalog, no advice to show.
            action: text(&alert.annotations, "action").filter(|a| *a != "n/a"),
            xid_description: text(&alert.annotations, "xid_description")
                .filter(|_| text(&alert.annotations, "action") != Some("n/a")),
            starts: &alert.starts_at,
            ends: alert.ended(),
            fingerprint: &alert.fingerprint,
            external_url: message.external_url.trim_end_matches('/'),
            labels: alert
                .labels
                .iter()
                .filter(|(k, _)| {
                    !matches!(
                        k.as_str(),
                        "alertname"
                            | "severity"
                            | "host"
                            | "gpu"
                            | "uuid"
                            | "kind"
                            | "workload"
                            | "user"
                            | "account"
                            | "namespace"
                            | "gpus"
                    )
                })
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
            details: alert.details.clone().unwrap_or_default(),
        }
    }

    /// "node-1 gpu 3 (NVIDIA H100)", "node-1 slurm_job 1234" for workload
    /// alerts, "node-1" for node alerts.
    fn target(&self) -> String {
        let mut out = self.host.to_string();
        if let Some((kind, id)) = self.workload {
            if !out.is_empty() {
                out.push(' ');
            }
            let _ = write!(out, "{kind} {id}");
        }
        if let Some(gpu) = self.gpu {
            if !out.is_empty() {
                out.push(' ');
            }
            let _ = write!(out, "gpu {gpu}");
            if let Some(name) = &self.details.gpu_name {
                let _ = write!(out, " ({name})");
            }
        }
        out
    }

    fn subject(&self) -> String {
        let target = self.target();
        let subject = if target.is_empty() {
            format!("[{}] {}", self.status.to_uppercase(), self.name)
        } else {
            format!("[{}] {} on {target}", self.status.to_uppercase(), self.name)
        };
        // A header is one line.
        subject.replace(['\r', '\n'], " ")
    }

    /// The rows of the facts table: (label, value).
    fn facts(&self) -> Vec<(&'static str, String)> {
        let d = &self.details;
        let mut rows = vec![
            ("Alert", self.name.to_string()),
            ("Status", self.status.to_string()),
            ("Severity", self.severity.to_string()),
        ];
        if let Some(action) = self.action {
            rows.push(("Action", action.to_string()));
        }
        if let Some(xid) = self.xid_description {
            rows.push(("Xid", xid.to_string()));
        }
        if !self.host.is_empty() {
            rows.push(("Host", self.host.to_string()));
        }
        if let Some(gpu) = self.gpu {
            let mut g = gpu.to_string();
            if let Some(name) = &d.gpu_name {
                let _ = write!(g, " {name}");
            }
            if let Some(uuid) = self.uuid {
                let _ = write!(g, " ({uuid})");
            }
            rows.push(("GPU", g));
        }
        if let Some((kind, id)) = self.workload {
            rows.push(("Workload", format!("{kind} {id}")));
            for (row, value) in &self.identity {
                rows.push((row, value.to_string()));
            }
        }
        if let Some(workloads) = self.workloads {
            rows.push(("Workloads", workloads.to_string()));
        }
        if let Some(condition) = &d.condition {
            rows.push(("Condition", condition.clone()));
        }
        if let Some(value) = d.value {
            rows.push(("Value", number(value)));
        }
        if let Some(threshold) = d.threshold {
            rows.push(("Threshold", number(threshold)));
        }
        if let Some(m) = &d.metric {
            if let Some(current) = m.current {
                let mut v = with_unit(current, &m.unit);
                if let (Some(limit), Some(name)) = (m.limit, &m.limit_name) {
                    let _ = write!(v, " ({name} {})", with_unit(limit, &m.unit));
                }
                rows.push(("Reading", format!("{}: {v}", m.label)));
            }
        }
        rows.push(("Started", self.starts.to_string()));
        if let Some(ends) = self.ends {
            rows.push(("Ended", ends.to_string()));
        }
        if !self.labels.is_empty() {
            let labels: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            rows.push(("Labels", labels.join(", ")));
        }
        rows.push(("Fingerprint", self.fingerprint.to_string()));
        rows
    }

    /// (name, URL) links; none without `server.external_url`.
    fn links(&self) -> Vec<(&'static str, String)> {
        if self.external_url.is_empty() {
            return Vec::new();
        }
        let base = self.external_url;
        let mut links = vec![
            ("Agent", format!("{base}/")),
            ("Active alerts", format!("{base}/api/v1/alerts")),
        ];
        if let (Some(uuid), Some(m)) = (self.uuid, &self.details.metric) {
            links.push((
                "History",
                format!(
                    "{base}/api/v1/history?gpu={}&metric={}&from=-1h",
                    encode(uuid),
                    encode(&m.name)
                ),
            ));
        }
        links
    }

    fn message_id(&self) -> String {
        let domain: String = self
            .host
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
            .collect();
        let domain = if domain.is_empty() {
            "gpuwatch.invalid".to_string()
        } else {
            domain
        };
        let local: String = format!("{}.{}.{}", self.fingerprint, self.status, self.starts)
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
            .collect();
        format!("<gpuwatch.{local}@{domain}>")
    }
}

/// Renders the email for `message`.
pub fn render(message: &OutboxMessage) -> Rendered {
    let alert = Facts::read(message);
    Rendered {
        subject: alert.subject(),
        text: plain(&alert),
        html: html(&alert),
        fingerprint: alert.fingerprint.to_string(),
        message_id: alert.message_id(),
    }
}

fn plain(a: &Facts) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}\n", a.subject());
    for note in [a.summary, a.description].into_iter().flatten() {
        let _ = writeln!(out, "{note}\n");
    }
    if let Some(action) = a.action {
        let _ = writeln!(out, "What to do first: {action}\n");
    }
    let facts = a.facts();
    let width = facts.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    for (k, v) in &facts {
        let _ = writeln!(out, "{:width$} {v}", format!("{k}:"));
    }
    if let Some((m, h)) = history(&a.details) {
        let _ = writeln!(
            out,
            "\n{}, last {} ({} – {}):",
            m.label,
            minutes(h),
            clock(h.from),
            clock(h.to)
        );
        let _ = writeln!(
            out,
            "  min {}  avg {}  max {}",
            with_unit(h.min, &m.unit),
            with_unit(h.avg, &m.unit),
            with_unit(h.max, &m.unit)
        );
        let _ = writeln!(out, "  {}", sparkline(&h.points, 60));
    }
    let links = a.links();
    if links.is_empty() {
        // Hook: links appear once the agent knows its external URL
        // (`server.external_url`), which the payload's externalURL carries.
        let _ = writeln!(
            out,
            "\n(No links: set server.external_url for links to the agent.)"
        );
    } else {
        let _ = writeln!(out, "\nLinks:");
        for (name, url) in &links {
            let _ = writeln!(out, "  {name}: {url}");
        }
    }
    let _ = writeln!(
        out,
        "\n-- \nSent by gpuwatch. The fingerprint with the status identifies this notification."
    );
    out
}

fn html(a: &Facts) -> String {
    let mut out = String::new();
    let colour = match (a.status, a.severity) {
        ("resolved", _) => "#2e7d32",
        (_, "critical") => "#c62828",
        (_, "warning") => "#ef6c00",
        _ => "#1565c0",
    };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{}</title></head>\
         <body style=\"font-family:sans-serif;font-size:14px;color:#222\">\n\
         <h2 style=\"color:{colour};margin:0 0 8px\">{}</h2>\n",
        escape(&a.subject()),
        escape(&a.subject())
    );
    for note in [a.summary, a.description].into_iter().flatten() {
        let _ = writeln!(out, "<p>{}</p>", escape(note));
    }
    if let Some(action) = a.action {
        let _ = writeln!(
            out,
            "<p><strong>What to do first: {}</strong></p>",
            escape(action)
        );
    }
    let _ = writeln!(
        out,
        "<table cellpadding=\"4\" style=\"border-collapse:collapse\">"
    );
    for (k, v) in a.facts() {
        let _ = writeln!(
            out,
            "<tr><th align=\"left\" style=\"border-bottom:1px solid #ddd\">{}</th>\
             <td style=\"border-bottom:1px solid #ddd\">{}</td></tr>",
            escape(k),
            escape(&v)
        );
    }
    let _ = writeln!(out, "</table>");
    if let Some((m, h)) = history(&a.details) {
        let _ = writeln!(
            out,
            "<h3>{}, last {} ({} – {})</h3>",
            escape(&m.label),
            escape(&minutes(h)),
            escape(&clock(h.from)),
            escape(&clock(h.to))
        );
        let _ = writeln!(
            out,
            "<table cellpadding=\"4\"><tr><th>min</th><th>avg</th><th>max</th></tr>\
             <tr><td>{}</td><td>{}</td><td>{}</td></tr></table>",
            escape(&with_unit(h.min, &m.unit)),
            escape(&with_unit(h.avg, &m.unit)),
            escape(&with_unit(h.max, &m.unit))
        );
        out.push_str(&svg(h, m.limit, colour));
        let _ = writeln!(
            out,
            "<p style=\"font-family:monospace\">{}</p>",
            escape(&sparkline(&h.points, 60))
        );
    }
    let links = a.links();
    if links.is_empty() {
        let _ = writeln!(
            out,
            "<p style=\"color:#777\">No links: set server.external_url for links to the agent.</p>"
        );
    } else {
        let _ = writeln!(out, "<p>");
        for (name, url) in &links {
            let _ = writeln!(out, "<a href=\"{}\">{}</a><br>", escape(url), escape(name));
        }
        let _ = writeln!(out, "</p>");
    }
    let _ = writeln!(
        out,
        "<p style=\"color:#777;font-size:12px\">Sent by gpuwatch. Fingerprint {} (with the status, the dedup key).</p>\n</body></html>",
        escape(a.fingerprint)
    );
    out
}

/// The metric's history, when the payload has one.
fn history(d: &Details) -> Option<(&MetricDetails, &HistorySummary)> {
    let m = d.metric.as_ref()?;
    Some((m, m.history.as_ref()?))
}

mod chart;
mod format;

use chart::svg;
pub use format::escape;
use format::{clock, encode, minutes, number, with_unit};

#[cfg(test)]
mod tests;
