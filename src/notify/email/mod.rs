//! The email receiver: each outbox message becomes one email (plain text +
//! HTML, see [`render`]) sent through an SMTP smarthost with `lettre`
//! ([`smtp`]). TLS is required by default (STARTTLS, or implicit TLS on
//! port 465); plain SMTP only when the configuration says `tls = "none"`.

pub mod render;
pub mod smtp;

use std::path::PathBuf;
use std::time::Duration;

use super::{Outcome, Secret};
use crate::outbox::OutboxMessage;

pub use smtp::send;

/// How the connection to the smarthost is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain connection upgraded with STARTTLS, which the server must offer
    /// (the default, except on port 465).
    StartTls,
    /// TLS from the first byte ("SMTPS", the default on port 465).
    Implicit,
    /// No TLS at all: only for a trusted link, and only when configured.
    None,
}

impl TlsMode {
    /// Parses the `tls` setting.
    pub fn parse(text: &str) -> Option<TlsMode> {
        match text {
            "starttls" => Some(TlsMode::StartTls),
            "implicit" => Some(TlsMode::Implicit),
            "none" => Some(TlsMode::None),
            _ => None,
        }
    }

    /// The default for a port: implicit TLS on 465, STARTTLS elsewhere.
    pub fn default_for(port: u16) -> TlsMode {
        if port == 465 {
            TlsMode::Implicit
        } else {
            TlsMode::StartTls
        }
    }

    /// The setting as written.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::StartTls => "starttls",
            TlsMode::Implicit => "implicit",
            TlsMode::None => "none",
        }
    }
}

/// An extra CA the server's certificate may chain to (private relays,
/// tests), read when the configuration is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaFile {
    /// Where it was read from, for messages.
    pub path: PathBuf,
    /// Its PEM text (one or more certificates).
    pub pem: Vec<u8>,
}

/// A `[[receivers]]` entry of type "email".
#[derive(Debug, Clone, PartialEq)]
pub struct EmailConfig {
    /// The smarthost's name or address.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// `From:` (and the envelope sender), e.g. `gpuwatch <gpu@example.com>`.
    pub from: String,
    /// The recipients.
    pub to: Vec<String>,
    /// Connection security.
    pub tls: TlsMode,
    /// SMTP AUTH user name (with `password`).
    pub username: Option<String>,
    /// SMTP AUTH password: from the config, a file or the environment;
    /// never logged.
    pub password: Option<Secret>,
    /// An extra trusted CA.
    pub ca: Option<CaFile>,
    /// The EHLO name (default: this machine's host name).
    pub hello_name: Option<String>,
    /// Time limit of the connection and of each SMTP reply.
    pub timeout: Duration,
}

impl EmailConfig {
    /// "host:port", for messages.
    pub fn smarthost(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Renders and sends one outbox message (blocking: run it on a blocking
/// thread). `payload` is the message's JSON.
pub fn deliver(config: &EmailConfig, payload: &str) -> Outcome {
    match OutboxMessage::parse(payload) {
        Ok(message) => send_message(config, &message),
        Err(e) => Outcome::Permanent(format!(
            "the outbox message is not an alert notification: {e}"
        )),
    }
}

/// Renders and sends `message` (blocking: run it on a blocking thread).
pub fn send_message(config: &EmailConfig, message: &OutboxMessage) -> Outcome {
    send(config, &render::render(message))
}
