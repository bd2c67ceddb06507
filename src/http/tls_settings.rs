//! The TLS settings of the web configuration (`tls_server_config`),
//! checked: a leaf that the file's parser ([`super::webconfig`]), the TLS
//! material loader ([`super::tls`]) and its reloader
//! ([`super::tls_reload`]) share.

use std::path::PathBuf;

/// Which client certificates the server asks for, as in exporter-toolkit
/// (Go's `tls.ClientAuthType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for (the default).
    NoClientCert,
    /// Asked for, not required, not verified.
    RequestClientCert,
    /// Required, not verified.
    RequireAnyClientCert,
    /// Not required; verified against `client_ca_file` when given.
    VerifyClientCertIfGiven,
    /// Required and verified against `client_ca_file`.
    RequireAndVerifyClientCert,
}

impl ClientAuth {
    /// The accepted names, for messages.
    pub const NAMES: &'static str = "NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert";

    /// The exporter-toolkit name, `None` for an unknown one.
    pub fn parse(text: &str) -> Option<ClientAuth> {
        Some(match text {
            "" | "NoClientCert" => ClientAuth::NoClientCert,
            "RequestClientCert" => ClientAuth::RequestClientCert,
            // "RequireClientCert": exporter-toolkit's older name.
            "RequireAnyClientCert" | "RequireClientCert" => ClientAuth::RequireAnyClientCert,
            "VerifyClientCertIfGiven" => ClientAuth::VerifyClientCertIfGiven,
            "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerifyClientCert,
            _ => return None,
        })
    }

    /// Whether certificates are checked against a CA.
    pub fn verifies(self) -> bool {
        matches!(
            self,
            ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert
        )
    }
}

/// A TLS protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// TLS 1.2.
    Tls12,
    /// TLS 1.3.
    Tls13,
}

impl TlsVersion {
    /// `TLS12` or `TLS13`, `None` for anything else.
    pub fn parse(text: &str) -> Option<TlsVersion> {
        match text {
            "TLS12" => Some(TlsVersion::Tls12),
            "TLS13" => Some(TlsVersion::Tls13),
            _ => None,
        }
    }
}

/// `tls_server_config`, checked, with paths resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// Server certificate chain (PEM).
    pub cert_file: PathBuf,
    /// Server private key (PEM).
    pub key_file: PathBuf,
    /// Client certificate policy.
    pub client_auth: ClientAuth,
    /// CAs that client certificates are verified against (PEM).
    pub client_ca_file: Option<PathBuf>,
    /// Oldest protocol accepted.
    pub min_version: TlsVersion,
    /// Newest protocol accepted.
    pub max_version: TlsVersion,
}
