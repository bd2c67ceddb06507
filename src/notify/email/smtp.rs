//! Sending one rendered email through the smarthost with `lettre`, and
//! sorting what happened into delivered / retry / permanent:
//! 4xx replies, connection and TLS failures and timeouts retry; 5xx replies
//! fail for good with the server's reason; a server that does not offer
//! STARTTLS when it is required fails for good with what to do about it.
//! Errors name the smarthost, never the password.

use lettre::message::header::{HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::{Message, SmtpTransport, Transport};

use super::render::Rendered;
use super::{EmailConfig, TlsMode};
use crate::notify::Outcome;

/// The header that carries the alert's fingerprint (the dedup key).
pub const FINGERPRINT_HEADER: &str = "X-Gpuwatch-Fingerprint";

/// The reason given when STARTTLS is required and the server lacks it.
pub fn starttls_missing(smarthost: &str) -> String {
    format!(
        "the SMTP server {smarthost} does not offer STARTTLS, which this receiver requires \
         (tls = \"starttls\", the default), so nothing was sent. Enable STARTTLS on the server, \
         use its implicit-TLS port with tls = \"implicit\", or set tls = \"none\" only if the \
         network path to the server is trusted"
    )
}

/// Why an email cannot be built, or its connection set up: nothing a retry
/// would change, so each is a permanent failure.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// `from` does not parse.
    #[error("the sender address {address:?} is not valid: {reason}; fix `from`")]
    Sender {
        /// As configured.
        address: String,
        /// What is wrong with it.
        reason: lettre::address::AddressError,
    },
    /// An entry of `to` does not parse.
    #[error("the recipient address {address:?} is not valid: {reason}; fix `to`")]
    Recipient {
        /// As configured.
        address: String,
        /// What is wrong with it.
        reason: lettre::address::AddressError,
    },
    /// The MIME message cannot be put together.
    #[error("cannot build the email: {0}")]
    Build(#[from] lettre::error::Error),
    /// `ca_file` holds no usable certificate.
    #[error("the CA file {} does not parse: {reason}; fix `ca_file`", path.display())]
    CaFile {
        /// Where it was read from.
        path: std::path::PathBuf,
        /// What is wrong with it.
        reason: lettre::transport::smtp::Error,
    },
    /// The TLS settings cannot work (e.g. a host that is no valid TLS name).
    #[error("cannot set up TLS: {0}; check `smarthost` and `ca_file`")]
    Tls(lettre::transport::smtp::Error),
}

/// Builds the MIME message: multipart/alternative (text, HTML), with the
/// fingerprint header and a Message-ID stable across retries.
pub fn message(config: &EmailConfig, email: &Rendered) -> Result<Message, SetupError> {
    let from: Mailbox = config.from.parse().map_err(|reason| SetupError::Sender {
        address: config.from.clone(),
        reason,
    })?;
    let mut builder = Message::builder()
        .from(from)
        .subject(email.subject.clone())
        .message_id(Some(email.message_id.clone()))
        .user_agent(concat!("gpuwatch/", env!("CARGO_PKG_VERSION")).to_string())
        .raw_header(HeaderValue::new(
            HeaderName::new_from_ascii_str(FINGERPRINT_HEADER),
            email.fingerprint.clone(),
        ));
    for to in &config.to {
        let to: Mailbox = to.parse().map_err(|reason| SetupError::Recipient {
            address: to.clone(),
            reason,
        })?;
        builder = builder.to(to);
    }
    Ok(builder.multipart(MultiPart::alternative_plain_html(
        email.text.clone(),
        email.html.clone(),
    ))?)
}

fn transport(config: &EmailConfig) -> Result<SmtpTransport, SetupError> {
    let tls = match config.tls {
        TlsMode::None => Tls::None,
        mode => {
            let mut params = TlsParameters::builder(config.host.clone());
            if let Some(ca) = &config.ca {
                let cert = Certificate::from_pem(&ca.pem).map_err(|reason| SetupError::CaFile {
                    path: ca.path.clone(),
                    reason,
                })?;
                params = params.add_root_certificate(cert);
            }
            let params = params.build_rustls().map_err(SetupError::Tls)?;
            if mode == TlsMode::Implicit {
                Tls::Wrapper(params)
            } else {
                Tls::Required(params)
            }
        }
    };
    let mut builder = SmtpTransport::builder_dangerous(config.host.clone())
        .port(config.port)
        .tls(tls)
        .timeout(Some(config.timeout));
    if let Some(name) = &config.hello_name {
        builder = builder.hello_name(ClientId::Domain(name.clone()));
    }
    if let (Some(user), Some(password)) = (&config.username, &config.password) {
        builder = builder.credentials(Credentials::new(
            user.clone(),
            password.expose().to_string(),
        ));
    }
    Ok(builder.build())
}

/// Sends `email` (blocking).
pub fn send(config: &EmailConfig, email: &Rendered) -> Outcome {
    let message = match message(config, email) {
        Ok(m) => m,
        Err(why) => return Outcome::Permanent(why.to_string()),
    };
    let transport = match transport(config) {
        Ok(t) => t,
        Err(why) => return Outcome::Permanent(why.to_string()),
    };
    match transport.send(&message) {
        Ok(_) => Outcome::Delivered,
        Err(e) => classify(&e, config),
    }
}

/// Sorts a lettre error into retry or permanent, with a reason that names
/// the smarthost and says what to do.
pub fn classify(e: &lettre::transport::smtp::Error, config: &EmailConfig) -> Outcome {
    let host = config.smarthost();
    let detail = e.to_string();
    if e.is_permanent() {
        Outcome::Permanent(format!(
            "the SMTP server {host} refused the message: {detail}"
        ))
    } else if e.is_transient() {
        Outcome::Retry(format!("the SMTP server {host} answered {detail}"))
    } else if e.is_client() && detail.contains("STARTTLS") {
        Outcome::Permanent(starttls_missing(&host))
    } else if e.is_client() {
        Outcome::Permanent(format!("cannot send through {host}: {detail}"))
    } else if e.is_timeout() || timed_out(e) {
        Outcome::Retry(format!(
            "the SMTP server {host} did not answer within {}",
            humantime::format_duration(config.timeout)
        ))
    } else if e.is_tls() || tls_failed(e) {
        Outcome::Retry(format!(
            "TLS with the SMTP server {host} failed: {detail} (if its certificate comes from a \
             private CA, give that CA as ca_file)"
        ))
    } else {
        Outcome::Retry(format!("cannot talk to the SMTP server {host}: {detail}"))
    }
}

/// Whether the TLS handshake failed behind `e` (an untrusted certificate
/// surfaces as an I/O error wrapping the rustls error).
fn tls_failed(e: &lettre::transport::smtp::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.downcast_ref::<tokio_rustls::rustls::Error>().is_some() {
            return true;
        }
        if let Some(inner) = s
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            if inner
                .downcast_ref::<tokio_rustls::rustls::Error>()
                .is_some()
            {
                return true;
            }
        }
        source = s.source();
    }
    false
}

/// Whether an I/O error behind `e` is a read or write timeout (a socket
/// timeout reads as `WouldBlock` on Linux, which lettre does not count).
fn timed_out(e: &lettre::transport::smtp::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            );
        }
        source = s.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn config() -> EmailConfig {
        EmailConfig {
            host: "127.0.0.1".into(),
            port: 1,
            from: "gpuwatch <gpuwatch@example.com>".into(),
            to: vec![
                "ops@example.com".into(),
                "Oncall <oncall@example.com>".into(),
            ],
            tls: TlsMode::StartTls,
            username: None,
            password: None,
            ca: None,
            hello_name: None,
            timeout: Duration::from_secs(2),
        }
    }

    fn rendered() -> Rendered {
        Rendered {
            subject: "[FIRING] GpuLost on node-1 gpu 1 (NVIDIA A100 °C)".into(),
            text: "text part: 90 °C".into(),
            html: "<p>html part</p>".into(),
            fingerprint: "0123456789abcdef".into(),
            message_id: "<gpuwatch.0123456789abcdef.firing.x@node-1>".into(),
        }
    }

    #[test]
    fn the_message_is_multipart_alternative_with_the_fingerprint() {
        let m = message(&config(), &rendered()).unwrap();
        let text = String::from_utf8(m.formatted()).unwrap();
        assert!(text.is_ascii(), "encoded for 7-bit transport");
        assert!(text.contains("X-Gpuwatch-Fingerprint: 0123456789abcdef"));
        assert!(text.contains("Message-ID: <gpuwatch.0123456789abcdef.firing.x@node-1>"));
        assert!(text.contains("multipart/alternative"));
        assert!(text.contains("text/plain"));
        assert!(text.contains("text/html"));
        assert_eq!(m.envelope().to().len(), 2);
    }

    #[test]
    fn bad_addresses_fail_for_good() {
        let mut c = config();
        c.to = vec!["not an address".into()];
        assert!(matches!(send(&c, &rendered()), Outcome::Permanent(e) if e.contains("recipient")));
    }

    #[test]
    fn a_refused_connection_is_retried() {
        // Port 1 on loopback: nothing listens.
        match send(&config(), &rendered()) {
            Outcome::Retry(why) => assert!(why.contains("127.0.0.1:1"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
