//! `[[receivers]]` entries of `type = "email"`: the smarthost, addresses,
//! TLS mode (STARTTLS required by default, implicit TLS on port 465, plain
//! only when written), SMTP AUTH with a secret password, an extra CA.

use std::ops::Range;
use std::time::Duration;

use toml::Spanned;

use crate::notify::email::{CaFile, EmailConfig, TlsMode};

use super::limits;
use super::raw::RawReceiver;
use super::Validator;

/// The email-only fields of a receiver, with their spans, for reporting
/// them on receivers of other kinds (`username` and the password are
/// shared with Alertmanager's basic auth).
pub(super) fn email_fields(r: &RawReceiver) -> Vec<(&'static str, Option<Range<usize>>)> {
    vec![
        ("smarthost", r.smarthost.as_ref().map(Spanned::span)),
        ("from", r.from.as_ref().map(Spanned::span)),
        ("to", r.to.as_ref().map(Spanned::span)),
        ("tls", r.tls.as_ref().map(Spanned::span)),
        ("ca_file", r.ca_file.as_ref().map(Spanned::span)),
        ("hello_name", r.hello_name.as_ref().map(Spanned::span)),
    ]
}

/// How a smarthost should be written.
const SMARTHOST_EXAMPLE: &str = "write it like \"smtp.example.com:587\"";

/// Why a smarthost is refused; each message shows how to write one.
#[derive(Debug, thiserror::Error)]
pub enum SmarthostError {
    /// No `:port`.
    #[error("\"{0}\" has no port; {SMARTHOST_EXAMPLE}")]
    Portless(String),
    /// The host part is empty or not a host name.
    #[error("\"{0}\" is not host:port; {SMARTHOST_EXAMPLE}")]
    NotHostAndPort(String),
    /// The port is not a number in 1-65535.
    #[error("\"{port}\" is not a port (1-65535); {SMARTHOST_EXAMPLE}")]
    InvalidPort {
        /// The port as written.
        port: String,
        /// Why it is not a number (none for 0).
        #[source]
        source: Option<std::num::ParseIntError>,
    },
}

/// Splits "host:port" ("[v6]:port" for IPv6).
pub fn parse_smarthost(text: &str) -> Result<(String, u16), SmarthostError> {
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(SmarthostError::Portless(text.to_string()));
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty()
        || host.contains(|c: char| c.is_whitespace() || c.is_control())
        || host.contains(['/', '@'])
    {
        return Err(SmarthostError::NotHostAndPort(text.to_string()));
    }
    match port.parse::<u16>() {
        Ok(port) if port > 0 => Ok((host.to_string(), port)),
        Ok(_) => Err(SmarthostError::InvalidPort {
            port: port.to_string(),
            source: None,
        }),
        Err(source) => Err(SmarthostError::InvalidPort {
            port: port.to_string(),
            source: Some(source),
        }),
    }
}

impl Validator<'_> {
    /// `type = "email"`.
    pub(super) fn email(
        &mut self,
        at: &str,
        r: &RawReceiver,
        table: &Range<usize>,
    ) -> Option<EmailConfig> {
        self.unused_fields(
            at,
            "email",
            &[
                ("url", r.url.as_ref().map(Spanned::span)),
                ("headers", r.headers.as_ref().map(Spanned::span)),
                ("bearer_token", r.bearer_token.as_ref().map(Spanned::span)),
                (
                    "bearer_token_file",
                    r.bearer_token_file.as_ref().map(Spanned::span),
                ),
                (
                    "bearer_token_env",
                    r.bearer_token_env.as_ref().map(Spanned::span),
                ),
                (
                    "resend_interval",
                    r.resend_interval.as_ref().map(Spanned::span),
                ),
            ],
        );
        let field = |name: &str| format!("{at}.{name}");
        let smarthost = match &r.smarthost {
            Some(s) => match parse_smarthost(s.get_ref()) {
                Ok(hp) => Some(hp),
                Err(e) => {
                    self.problem(&field("smarthost"), s.span(), &e.to_string());
                    None
                }
            },
            None => {
                self.problem(
                    &field("smarthost"),
                    table.clone(),
                    "is missing: the SMTP server to send through, e.g. \"smtp.example.com:587\"",
                );
                None
            }
        };
        let from = match &r.from {
            Some(f) => self.mailbox(&field("from"), f),
            None => {
                self.problem(
                    &field("from"),
                    table.clone(),
                    "is missing: the sender address, e.g. \"gpuwatch <gpuwatch@example.com>\"",
                );
                None
            }
        };
        let to = match &r.to {
            Some(list) if list.get_ref().is_empty() => {
                self.problem(
                    &field("to"),
                    list.span(),
                    "is empty: give at least one recipient",
                );
                None
            }
            Some(list) => {
                let mut ok = true;
                for address in list.get_ref() {
                    if let Err(e) = address.parse::<lettre::message::Mailbox>() {
                        self.problem(
                            &field("to"),
                            list.span(),
                            &format!("\"{address}\" is not an email address ({e}); write it like \"ops@example.com\" or \"Ops <ops@example.com>\""),
                        );
                        ok = false;
                    }
                }
                ok.then(|| list.get_ref().clone())
            }
            None => {
                self.problem(
                    &field("to"),
                    table.clone(),
                    "is missing: the recipients, e.g. to = [\"ops@example.com\"]",
                );
                None
            }
        };
        let tls = match &r.tls {
            Some(t) => match TlsMode::parse(t.get_ref()) {
                Some(mode) => Some(mode),
                None => {
                    self.problem(
                        &field("tls"),
                        t.span(),
                        &format!(
                            "\"{}\" is not a TLS mode; use \"starttls\" (the default), \"implicit\" (port 465) or \"none\" (only on a trusted link)",
                            t.get_ref()
                        ),
                    );
                    None
                }
            },
            None => smarthost
                .as_ref()
                .map(|(_, port)| TlsMode::default_for(*port)),
        };
        let username = r.username.as_ref().and_then(|u| {
            self.no_control(&field("username"), u.span(), "user name", u.get_ref())
                .then(|| u.get_ref().clone())
        });
        let password = self.secret(
            at,
            "password",
            "SMTP password",
            r.password.as_ref(),
            r.password_file.as_ref(),
            r.password_env.as_ref(),
        );
        let secret_given =
            r.password.is_some() || r.password_file.is_some() || r.password_env.is_some();
        match (&r.username, secret_given) {
            (Some(u), false) => self.problem(
                &field("username"),
                u.span(),
                "has no password: give password, password_file or password_env too",
            ),
            (None, true) => {
                let span = r
                    .password
                    .as_ref()
                    .or(r.password_env.as_ref())
                    .map(Spanned::span)
                    .or(r.password_file.as_ref().map(Spanned::span))
                    .unwrap_or(table.clone());
                self.problem(
                    &field("username"),
                    span,
                    "is missing: a password needs the user name it belongs to",
                );
            }
            _ => {}
        }
        let ca = match &r.ca_file {
            Some(path) if tls == Some(TlsMode::None) => {
                self.problem(
                    &field("ca_file"),
                    path.span(),
                    "has no effect with tls = \"none\"; remove it or use TLS",
                );
                None
            }
            Some(path) => {
                match crate::files::read_bounded(path.get_ref(), crate::files::MAX_PEM_BYTES) {
                    Ok(pem)
                        if String::from_utf8_lossy(&pem)
                            .contains("-----BEGIN CERTIFICATE-----")
                            && lettre::transport::smtp::client::Certificate::from_pem(&pem)
                                .is_ok() =>
                    {
                        Some(CaFile {
                            path: path.get_ref().clone(),
                            pem,
                        })
                    }
                    Ok(_) => {
                        self.problem(
                        &field("ca_file"),
                        path.span(),
                        &format!(
                            "{} holds no PEM certificate; give the CA certificate (\"-----BEGIN CERTIFICATE-----\")",
                            path.get_ref().display()
                        ),
                    );
                        None
                    }
                    Err(e) => {
                        self.problem(&field("ca_file"), path.span(), &e.to_string());
                        None
                    }
                }
            }
            None => None,
        };
        let hello_name = match &r.hello_name {
            Some(h)
                if h.get_ref().is_empty()
                    || h.get_ref()
                        .contains(|c: char| c.is_whitespace() || c.is_control()) =>
            {
                self.problem(
                    &field("hello_name"),
                    h.span(),
                    "must be a host name without spaces, e.g. \"gpu-node-1.example.com\"",
                );
                None
            }
            Some(h) => Some(h.get_ref().clone()),
            None => None,
        };
        let timeout = self.duration(
            &field("timeout"),
            r.timeout.as_ref(),
            Duration::from_secs(30),
            &limits::RECEIVER_TIMEOUT,
        );
        let (host, port) = smarthost?;
        Some(EmailConfig {
            host,
            port,
            from: from?,
            to: to?,
            tls: tls?,
            username,
            password,
            ca,
            hello_name,
            timeout,
        })
    }

    fn mailbox(&mut self, field: &str, value: &Spanned<String>) -> Option<String> {
        match value.get_ref().parse::<lettre::message::Mailbox>() {
            Ok(_) => Some(value.get_ref().clone()),
            Err(e) => {
                self.problem(
                    field,
                    value.span(),
                    &format!(
                        "\"{}\" is not an email address ({e}); write it like \"gpuwatch <gpuwatch@example.com>\"",
                        value.get_ref()
                    ),
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_smarthost;

    #[test]
    fn smarthosts_need_a_host_and_a_port() {
        assert_eq!(
            parse_smarthost("smtp.example.com:587").unwrap(),
            ("smtp.example.com".to_string(), 587)
        );
        assert_eq!(
            parse_smarthost("[::1]:25").unwrap(),
            ("::1".to_string(), 25)
        );
        assert!(parse_smarthost("smtp.example.com")
            .unwrap_err()
            .to_string()
            .contains("no port"));
        assert!(parse_smarthost("smtp.example.com:0").is_err());
        assert!(parse_smarthost("smtp.example.com:smtp").is_err());
        assert!(parse_smarthost(":25").is_err());
    }
}
