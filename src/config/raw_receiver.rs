//! One `[[receivers]]` entry as written (see `raw` for the conventions):
//! the keys of every type, the routing keys, then the email keys.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use crate::limits::written as kind;

/// One `[[receivers]]` entry.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawReceiver {
    /// The receiver's name (required, unique).
    #[schemars(with = "Option<String>")]
    pub name: Option<Spanned<String>>,
    /// "webhook" (a JSON POST in Alertmanager's webhook format),
    /// "alertmanager" (alerts pushed to Alertmanager's API) or "email"
    /// (required).
    #[serde(rename = "type")]
    #[schemars(with = "Option<String>")]
    pub kind: Option<Spanned<String>>,
    /// Webhook: the URL to POST to. Alertmanager: its base URL, such as
    /// `"http://alertmanager:9093"` (alerts go to /api/v2/alerts). Required
    /// for both.
    #[schemars(with = "Option<String>")]
    pub url: Option<Spanned<String>>,
    /// Extra request headers (webhook, Alertmanager), e.g.
    /// `{ X-Team = "ml-infra" }`.
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub headers: Option<Spanned<BTreeMap<String, String>>>,
    /// The bearer token sent in `Authorization` (webhook, Alertmanager).
    /// Prefer `bearer_token_file` or `bearer_token_env`: the configuration
    /// file is often readable by more people than a secret should be.
    #[schemars(with = "Option<String>")]
    pub bearer_token: Option<Spanned<String>>,
    /// A file holding the bearer token.
    #[schemars(with = "Option<kind::Path>")]
    pub bearer_token_file: Option<Spanned<PathBuf>>,
    /// An environment variable of the agent holding the bearer token.
    #[schemars(with = "Option<String>")]
    pub bearer_token_env: Option<Spanned<String>>,
    /// The user name for basic auth (Alertmanager) or the mail server's
    /// login (email).
    #[schemars(with = "Option<String>")]
    pub username: Option<Spanned<String>>,
    /// The password for `username`. Prefer `password_file` or
    /// `password_env`.
    #[schemars(with = "Option<String>")]
    pub password: Option<Spanned<String>>,
    /// A file holding the password.
    #[schemars(with = "Option<kind::Path>")]
    pub password_file: Option<Spanned<PathBuf>>,
    /// An environment variable of the agent holding the password.
    #[schemars(with = "Option<String>")]
    pub password_env: Option<Spanned<String>>,
    /// Time limit of one delivery (request or mail transaction); 30s for
    /// email.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "10s"))]
    pub timeout: Option<Spanned<String>>,
    /// Alertmanager: how often firing alerts are sent again; each is valid
    /// for 4 × this, so Alertmanager resolves them by itself if the agent
    /// stops.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "1m"))]
    pub resend_interval: Option<Spanned<String>>,
    /// The first delay before a failed delivery is tried again; it doubles
    /// up to `retry_max`.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "1s"))]
    pub retry_min: Option<Spanned<String>>,
    /// The longest delay between two tries; not shorter than `retry_min`.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "5m"))]
    pub retry_max: Option<Spanned<String>>,
    /// Routing: only alerts of these severities ("info", "warning",
    /// "critical"). Unset: all.
    #[schemars(with = "Option<Vec<String>>")]
    pub severities: Option<Vec<Spanned<String>>>,
    /// Routing: only alerts whose labels have these values, e.g.
    /// `{ team = "ml-infra" }`.
    #[serde(rename = "match")]
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub match_labels: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    /// Routing: only alerts whose labels match these regular expressions
    /// (anchored at both ends), e.g. `{ gpu = "[0-3]" }`.
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub match_re: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    /// How often an alert that stays firing is sent again; "0", "off" or
    /// "never": never.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "4h"))]
    pub repeat_interval: Option<Spanned<String>>,
    /// How long to hold a new alert to send it in one message with the
    /// others of the node that fire meanwhile; "0" or "off": no grouping.
    #[schemars(with = "Option<kind::Duration>", extend("default" = "0"))]
    pub group_wait: Option<Spanned<String>>,
    /// Email: the SMTP server, "host:port" (required). STARTTLS is
    /// required unless `tls` says otherwise; port 465 means implicit TLS.
    #[schemars(with = "Option<String>")]
    pub smarthost: Option<Spanned<String>>,
    /// Email: the sender address, e.g. `"gpuwatch <gpuwatch@example.com>"`
    /// (required).
    #[schemars(with = "Option<String>")]
    pub from: Option<Spanned<String>>,
    /// Email: the recipient addresses (required, at least one).
    #[schemars(with = "Option<Vec<String>>")]
    pub to: Option<Spanned<Vec<String>>>,
    /// Email: "starttls", "implicit" or "none" (only on a trusted link).
    /// Unset: "implicit" on port 465, else "starttls".
    #[schemars(with = "Option<String>")]
    pub tls: Option<Spanned<String>>,
    /// Email: an extra trusted CA certificate (PEM), for a private relay.
    #[schemars(with = "Option<kind::Path>")]
    pub ca_file: Option<Spanned<PathBuf>>,
    /// Email: the name sent in EHLO. Unset: the machine's host name.
    #[schemars(with = "Option<String>")]
    pub hello_name: Option<Spanned<String>>,
}
