//! Checking a web configuration file field by field: the file's shape as
//! written (the raw serde types), and the checker that turns each section
//! into what the server uses, recording every problem at the line and column
//! of its key so that all are reported at once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::problem::Problem;
use hyper::header::{HeaderName, HeaderValue};
use serde::Deserialize;

use crate::http::auth::BasicAuth;
use crate::http::tls_settings::{ClientAuth, TlsSettings, TlsVersion};

/// The file as written; unknown keys are errors.
#[derive(Debug, Default, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with tls_server_config, basic_auth_users or http_server_config"
)]
pub(super) struct RawWebConfig {
    pub(super) tls_server_config: Option<RawTls>,
    pub(super) basic_auth_users: Option<BTreeMap<String, String>>,
    pub(super) http_server_config: Option<RawHttp>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with cert_file, key_file and optionally client_auth_type, client_ca_file, min_version, max_version"
)]
pub(super) struct RawTls {
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with headers")]
pub(super) struct RawHttp {
    pub(super) headers: Option<BTreeMap<String, String>>,
}

/// Headers exporter-toolkit allows in `http_server_config.headers`.
const ALLOWED_HEADERS: [&str; 5] = [
    "Content-Security-Policy",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "X-XSS-Protection",
    "Strict-Transport-Security",
];

/// Resolves a path written in a configuration file: relative paths are
/// relative to that file's directory.
pub fn resolve(base: &Path, written: &str) -> PathBuf {
    let path = Path::new(written);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

pub(super) struct Checker<'a> {
    pub(super) file: &'a str,
    pub(super) source: &'a str,
    pub(super) problems: Vec<Problem>,
}

impl Checker<'_> {
    /// Records a problem at the line where the field's last key is
    /// written; a field that is not written (a required one) is reported
    /// at its section, and failing all, at the start of the file.
    pub(super) fn problem(&mut self, field: &str, message: &str) {
        self.problem_near(field, &[], message);
    }

    /// [`Checker::problem`], at the first of `keys` that is written (the
    /// other field of a check between two), else where `problem` would.
    fn problem_near(&mut self, field: &str, keys: &[&str], message: &str) {
        let (line, column) = keys
            .iter()
            .copied()
            .chain(field.split('.').rev())
            .find_map(|key| locate(self.source, key))
            .unwrap_or((1, 1));
        self.problems.push(Problem {
            file: self.file.to_string(),
            line: Some(line),
            column: Some(column),
            field: field.to_string(),
            message: message.to_string(),
        });
    }

    /// The settings (when both files are named) and whether every field is
    /// valid: the files are read even when another field is wrong, so that
    /// all problems show at once.
    pub(super) fn tls(&mut self, raw: RawTls, base: &Path) -> Option<(TlsSettings, bool)> {
        let before = self.problems.len();
        let mut path = |field: &str, value: Option<String>, required: bool| match value
            .filter(|v| !v.trim().is_empty())
        {
            Some(written) => Some(resolve(base, &written)),
            None if required => {
                self.problem(
                    &format!("tls_server_config.{field}"),
                    &format!(
                        "is required with tls_server_config: give the path of the server's PEM {}",
                        if field == "cert_file" {
                            "certificate"
                        } else {
                            "private key"
                        }
                    ),
                );
                None
            }
            None => None,
        };
        let cert_file = path("cert_file", raw.cert_file, true);
        let key_file = path("key_file", raw.key_file, true);
        let client_ca_file = path("client_ca_file", raw.client_ca_file, false);
        let client_auth = match ClientAuth::parse(raw.client_auth_type.as_deref().unwrap_or("")) {
            Some(auth) => auth,
            None => {
                self.problem(
                    "tls_server_config.client_auth_type",
                    &format!(
                        "\"{}\" is not a client auth type; use {}",
                        raw.client_auth_type.as_deref().unwrap_or(""),
                        ClientAuth::NAMES
                    ),
                );
                ClientAuth::NoClientCert
            }
        };
        if client_auth.verifies() && client_ca_file.is_none() {
            self.problem_near(
                "tls_server_config.client_ca_file",
                &["client_auth_type"],
                &format!("is required with client_auth_type {client_auth:?}: give the PEM file of the CA that signs the client certificates"),
            );
        }
        if client_auth == ClientAuth::NoClientCert && client_ca_file.is_some() {
            self.problem(
                "tls_server_config.client_ca_file",
                "is set but client_auth_type asks for no client certificate; set client_auth_type to RequireAndVerifyClientCert (or VerifyClientCertIfGiven), or remove client_ca_file",
            );
        }
        let mut version = |field: &str, value: Option<String>, default: TlsVersion| {
            match value {
            None => default,
            Some(text) => TlsVersion::parse(&text).unwrap_or_else(|| {
                self.problem(
                    &format!("tls_server_config.{field}"),
                    &format!("\"{text}\" is not supported; use TLS12 or TLS13 (older versions are insecure and not offered)"),
                );
                default
            }),
        }
        };
        let min_version = version("min_version", raw.min_version, TlsVersion::Tls12);
        let max_version = version("max_version", raw.max_version, TlsVersion::Tls13);
        if min_version > max_version {
            self.problem(
                "tls_server_config.min_version",
                "is newer than max_version; no protocol version would be left",
            );
        }
        let valid = self.problems.len() == before;
        Some((
            TlsSettings {
                cert_file: cert_file?,
                key_file: key_file?,
                client_auth,
                client_ca_file,
                min_version,
                max_version,
            },
            valid,
        ))
    }

    pub(super) fn users(&mut self, users: BTreeMap<String, String>) -> Option<Arc<BasicAuth>> {
        if users.is_empty() {
            return None;
        }
        let before = self.problems.len();
        for (user, hash) in &users {
            if user.contains(':') {
                self.problem(
                    &format!("basic_auth_users.{user}"),
                    "a user name cannot contain ':' (HTTP basic auth separates user and password with it)",
                );
            }
            if let Err(why) = check_bcrypt(hash) {
                self.problem(
                    &format!("basic_auth_users.{user}"),
                    &format!("{why}; write the bcrypt hash of the password, e.g. from `htpasswd -nBC 10 \"\" | tr -d ':\\n'`, never the password itself"),
                );
            }
        }
        if self.problems.len() != before {
            return None;
        }
        Some(Arc::new(BasicAuth::new(users)))
    }

    pub(super) fn headers(
        &mut self,
        headers: BTreeMap<String, String>,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let mut out = Vec::new();
        for (name, value) in headers {
            let field = format!("http_server_config.headers.{name}");
            let Some(allowed) = ALLOWED_HEADERS
                .iter()
                .find(|a| a.eq_ignore_ascii_case(&name))
            else {
                self.problem(
                    &field,
                    &format!(
                        "is not a header that can be set; use one of {}",
                        ALLOWED_HEADERS.join(", ")
                    ),
                );
                continue;
            };
            let value_ok = match *allowed {
                "X-Frame-Options" => ["deny", "sameorigin"]
                    .iter()
                    .any(|v| v.eq_ignore_ascii_case(&value)),
                "X-Content-Type-Options" => value.eq_ignore_ascii_case("nosniff"),
                _ => true,
            };
            if !value_ok {
                self.problem(
                    &field,
                    &format!("\"{value}\" is not allowed; X-Frame-Options takes deny or sameorigin, X-Content-Type-Options takes nosniff"),
                );
                continue;
            }
            match (
                HeaderName::from_bytes(allowed.as_bytes()),
                HeaderValue::from_str(&value),
            ) {
                (Ok(name), Ok(value)) => out.push((name, value)),
                _ => self.problem(
                    &field,
                    "is not a valid header value (printable ASCII, no line breaks)",
                ),
            }
        }
        out
    }
}

/// Why a password hash is not one the server can check.
#[derive(Debug, thiserror::Error)]
pub enum BcryptHashError {
    /// Not a bcrypt hash at all.
    #[error("is not a bcrypt hash (60 characters starting with $2y$, $2b$ or $2a$)")]
    NotBcrypt(#[source] bcrypt::BcryptError),
    /// A bcrypt hash whose cost bcrypt cannot compute.
    #[error("the bcrypt cost {0} is out of range 4-31")]
    Cost(u32),
}

/// Checks that `hash` is a bcrypt hash (`$2a$`, `$2b$`, `$2x$`, `$2y$`, cost 4–31).
pub fn check_bcrypt(hash: &str) -> Result<(), BcryptHashError> {
    match hash.parse::<bcrypt::HashParts>() {
        Ok(parts) if (4..=31).contains(&parts.get_cost()) => Ok(()),
        Ok(parts) => Err(BcryptHashError::Cost(parts.get_cost())),
        Err(e) => Err(BcryptHashError::NotBcrypt(e)),
    }
}

/// Line and column (1-based) of the first `key:` in `source`.
fn locate(source: &str, key: &str) -> Option<(usize, usize)> {
    source.lines().enumerate().find_map(|(index, line)| {
        let trimmed = line.trim_start();
        let unquoted = trimmed.trim_start_matches(['"', '\'']);
        let rest = unquoted.strip_prefix(key)?;
        let rest = rest.trim_start_matches(['"', '\'']);
        rest.trim_start()
            .starts_with(':')
            .then(|| (index + 1, line.len() - trimmed.len() + 1))
    })
}
