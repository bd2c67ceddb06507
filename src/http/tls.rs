//! The TLS acceptor: rustls with the `ring` provider, PEM files read with
//! `rustls-pki-types`, and the client-certificate policies of
//! exporter-toolkit.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::rustls::client::danger::HandshakeSignatureValid;
use tokio_rustls::rustls::crypto::{
    ring, verify_tls12_signature, verify_tls13_signature, CryptoProvider,
};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{
    version, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig,
    SignatureScheme, SupportedProtocolVersion,
};
use tokio_rustls::TlsAcceptor;

use super::tls_settings::{ClientAuth, TlsSettings, TlsVersion};

/// A problem with one field of `tls_server_config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    /// Dotted field, e.g. "tls_server_config.key_file".
    pub field: String,
    /// What is wrong and what to do.
    pub message: String,
}

fn error(field: &str, message: String) -> TlsError {
    TlsError {
        field: format!("tls_server_config.{field}"),
        message,
    }
}

/// What the files named in `tls_server_config` hold.
#[derive(Debug)]
pub struct Material {
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    roots: Option<Arc<RootCertStore>>,
}

impl Material {
    /// The served (leaf) certificate: the first one in `cert_file`.
    pub fn leaf(&self) -> Option<&CertificateDer<'static>> {
        self.certs.first()
    }
}

/// Reads the certificate, key and client CA files; every unreadable one is
/// reported.
pub fn load(settings: &TlsSettings) -> Result<Material, Vec<TlsError>> {
    let mut errors = Vec::new();
    let certs = read_certs("cert_file", &settings.cert_file)
        .map_err(|e| errors.push(e))
        .ok();
    let key = read_key(&settings.key_file)
        .map_err(|e| errors.push(e))
        .ok();
    let roots = settings
        .client_ca_file
        .as_deref()
        .map(|path| {
            read_certs("client_ca_file", path).and_then(|cas| {
                let mut roots = RootCertStore::empty();
                for ca in cas {
                    roots.add(ca).map_err(|e| {
                        error(
                            "client_ca_file",
                            format!("{}: a certificate is not a usable CA: {e}", path.display()),
                        )
                    })?;
                }
                Ok(Arc::new(roots))
            })
        })
        .transpose()
        .map_err(|e| errors.push(e))
        .ok()
        .flatten();
    let (Some(certs), Some(key)) = (certs, key) else {
        return Err(errors);
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Material { certs, key, roots })
}

/// Builds the acceptor from what [`load`] read.
pub fn build(settings: &TlsSettings, material: Material) -> Result<TlsAcceptor, Vec<TlsError>> {
    let Material { certs, key, roots } = material;
    let provider = Arc::new(ring::default_provider());
    let verifier = client_verifier(settings.client_auth, roots, &provider).map_err(|e| vec![e])?;
    let versions: Vec<&'static SupportedProtocolVersion> = [
        (TlsVersion::Tls12, &version::TLS12),
        (TlsVersion::Tls13, &version::TLS13),
    ]
    .into_iter()
    .filter(|(v, _)| (settings.min_version..=settings.max_version).contains(v))
    .map(|(_, v)| v)
    .collect();
    let builder = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| vec![error("min_version", format!("{e}"))])?;
    let builder = match verifier {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        vec![error(
            "key_file",
            format!(
                "{} and {} do not make a usable pair ({e}); check that the key belongs to the certificate",
                settings.key_file.display(),
                settings.cert_file.display()
            ),
        )]
    })?;
    // HTTP/1.1 only: say so, so that clients don't try h2.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Reads a PEM file named in the web configuration: a regular file of at
/// most [`crate::files::MAX_PEM_BYTES`] (so `/dev/zero` or a FIFO is an
/// error, not a hang).
fn read_pem(field: &str, path: &Path) -> Result<Vec<u8>, TlsError> {
    crate::files::read_bounded(path, crate::files::MAX_PEM_BYTES)
        .map_err(|e| error(field, e.to_string()))
}

fn read_certs(field: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read_pem(field, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            error(
                field,
                format!("{}: not a PEM certificate file: {e}", path.display()),
            )
        })?;
    if certs.is_empty() {
        return Err(error(
            field,
            format!(
                "{} holds no certificate (no \"-----BEGIN CERTIFICATE-----\" block)",
                path.display()
            ),
        ));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read_pem("key_file", path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        error(
            "key_file",
            format!(
                "{}: no usable PEM private key ({e}); give an unencrypted PKCS#8, PKCS#1 (RSA) or SEC1 (EC) key",
                path.display()
            ),
        )
    })
}

fn client_verifier(
    auth: ClientAuth,
    roots: Option<Arc<RootCertStore>>,
    provider: &Arc<CryptoProvider>,
) -> Result<Option<Arc<dyn ClientCertVerifier>>, TlsError> {
    let verified = |roots: Option<Arc<RootCertStore>>, optional: bool| {
        let Some(roots) = roots else {
            return Err(error(
                "client_ca_file",
                "is required to verify client certificates".to_string(),
            ));
        };
        let builder = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
        let builder = if optional {
            builder.allow_unauthenticated()
        } else {
            builder
        };
        builder
            .build()
            .map(Some)
            .map_err(|e| error("client_ca_file", format!("cannot use these CAs: {e}")))
    };
    match auth {
        ClientAuth::NoClientCert => Ok(None),
        ClientAuth::RequestClientCert => Ok(Some(Arc::new(AnyClientCert {
            mandatory: false,
            provider: provider.clone(),
        }))),
        ClientAuth::RequireAnyClientCert => Ok(Some(Arc::new(AnyClientCert {
            mandatory: true,
            provider: provider.clone(),
        }))),
        ClientAuth::VerifyClientCertIfGiven => verified(roots, true),
        ClientAuth::RequireAndVerifyClientCert => verified(roots, false),
    }
}

/// RequestClientCert and RequireAnyClientCert: a certificate is asked for
/// (or required) but not checked against a CA, as in Go. The handshake
/// signature is still verified: the client holds the certificate's key.
#[derive(Debug)]
struct AnyClientCert {
    mandatory: bool,
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for AnyClientCert {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, tokio_rustls::rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
