//! Certificate renewal without a restart: the TLS files of the web
//! configuration (`cert_file`, `key_file`, `client_ca_file`) are checked
//! once a second and a new acceptor is built when their content changed.
//! New connections get the newest good acceptor; connections in flight keep
//! the one they started with.
//!
//! Why a background check and not one on the handshake path: the handshake
//! never waits on a file system (the reads run on a blocking thread), a
//! broken renewal is reported within seconds even when nobody connects, and
//! there is a single writer, so two handshakes never race to reload.
//!
//! Why content hashes and not modification times: a renewal that rewrites a
//! file with the same length within one timestamp tick (a few milliseconds
//! on Linux), or that copies with the old time kept (`cp -p`, `tar`), has
//! the same (mtime, length); SHA-256 of a few kilobytes a second costs
//! nothing and misses none of these.
//!
//! A renewal caught halfway (certbot writes the certificate, then the key)
//! is given one more check to settle: files are loaded only once their
//! content is the same on two checks in a row. Files that still cannot be
//! used (unreadable, not PEM, a key that does not belong to the
//! certificate) leave the last good certificate in service, and are logged
//! with ONE warning per bad state (per content), never with key material.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use tokio::sync::watch;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use super::tls::{self, Material, TlsError};
use super::tls_settings::TlsSettings;
use crate::families::{unit, Family};
use crate::files::{read_bounded, MAX_PEM_BYTES};

/// How often the files are checked.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// What one file held when it was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FileState {
    /// SHA-256 of its content.
    Content([u8; 32]),
    /// It could not be read (missing, no permission…).
    Unreadable(std::io::ErrorKind),
}

/// The content of the files an acceptor is built from, compared to tell
/// whether they changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint(Vec<FileState>);

impl Fingerprint {
    /// Hashes the certificate, key and client CA files of `settings`.
    pub fn of(settings: &TlsSettings) -> Fingerprint {
        Fingerprint::of_files(&files(settings))
    }

    fn of_files(paths: &[&Path]) -> Fingerprint {
        Fingerprint(
            paths
                .iter()
                .map(|path| match read_bounded(path, MAX_PEM_BYTES) {
                    Ok(bytes) => {
                        let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
                        let mut sum = [0u8; 32];
                        sum.copy_from_slice(digest.as_ref());
                        FileState::Content(sum)
                    }
                    Err(error) => FileState::Unreadable(error.kind()),
                })
                .collect(),
        )
    }
}

fn files(settings: &TlsSettings) -> Vec<&Path> {
    let mut files = vec![settings.cert_file.as_path(), settings.key_file.as_path()];
    files.extend(settings.client_ca_file.as_deref());
    files
}

/// What the served certificate says about itself, for the log and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Served {
    /// Serial number, hex with colons.
    pub serial: String,
    /// Subject distinguished name.
    pub subject: String,
    /// notAfter, Unix seconds.
    pub not_after: Option<i64>,
}

impl Served {
    /// notAfter as RFC 3339, or "unknown".
    pub fn expires(&self) -> String {
        self.not_after
            .and_then(|s| u64::try_from(s).ok())
            .map(|s| {
                humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(s))
                    .to_string()
            })
            .unwrap_or_else(|| "unknown".to_string())
    }

    fn of(leaf: Option<&CertificateDer<'_>>) -> Served {
        let Some(leaf) = leaf else {
            return Served::default();
        };
        match x509_parser::parse_x509_certificate(leaf.as_ref()) {
            Ok((_, cert)) => Served {
                serial: cert.raw_serial_as_string(),
                subject: cert.subject().to_string(),
                not_after: Some(cert.validity().not_after.timestamp()),
            },
            Err(error) => {
                // rustls took it, so it is DER; only the details are lost.
                debug!(error = %error, "Cannot parse the served certificate's validity.");
                Served::default()
            }
        }
    }
}

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// The files are as last loaded (or last tried).
    Unchanged,
    /// They changed; they are loaded once they stay the same for one more
    /// check (a renewal may be half written).
    Settling,
    /// They were loaded: new connections use them.
    Reloaded,
    /// They cannot be used; the previous acceptor stays. The problems, each
    /// naming its file and what to do.
    Failed(Vec<String>),
}

/// Counters and gauges for /metrics.
#[derive(Debug, Clone, Default)]
struct Stats {
    successes: u64,
    failures: u64,
    last_ok: bool,
    served: Served,
}

/// Where the watcher stands.
#[derive(Debug)]
struct Watch {
    /// The content last loaded or tried: a failed one is not tried (nor
    /// reported) again until the files change.
    attempted: Fingerprint,
    /// A new content seen on the last check, waiting to settle.
    pending: Option<Fingerprint>,
}

/// The TLS acceptor in service and what reloads it.
pub struct TlsReloader {
    settings: TlsSettings,
    acceptor: RwLock<TlsAcceptor>,
    watch: Mutex<Watch>,
    stats: Mutex<Stats>,
}

impl std::fmt::Debug for TlsReloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsReloader")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl TlsReloader {
    /// Builds the first acceptor from `material`, which was read after
    /// `fingerprint` was taken (so a change in between is reloaded, not
    /// missed).
    pub fn new(
        settings: TlsSettings,
        fingerprint: Fingerprint,
        material: Material,
    ) -> Result<TlsReloader, Vec<TlsError>> {
        let served = Served::of(material.leaf());
        let acceptor = tls::build(&settings, material)?;
        Ok(TlsReloader {
            settings,
            acceptor: RwLock::new(acceptor),
            watch: Mutex::new(Watch {
                attempted: fingerprint,
                pending: None,
            }),
            stats: Mutex::new(Stats {
                last_ok: true,
                served,
                ..Stats::default()
            }),
        })
    }

    #[cfg(test)]
    /// Reads the files of `settings` and builds the first acceptor.
    pub fn load(settings: TlsSettings) -> Result<TlsReloader, Vec<TlsError>> {
        let fingerprint = Fingerprint::of(&settings);
        let material = tls::load(&settings)?;
        TlsReloader::new(settings, fingerprint, material)
    }

    /// The settings the files come from.
    pub fn settings(&self) -> &TlsSettings {
        &self.settings
    }

    /// The acceptor for a new connection.
    pub fn current(&self) -> TlsAcceptor {
        match self.acceptor.read() {
            Ok(acceptor) => acceptor.clone(),
            // A panic while swapping (none can happen: it is one
            // assignment) would leave the old acceptor, which is fine.
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// What the served certificate says (serial, subject, notAfter).
    pub fn served(&self) -> Served {
        self.stats().served
    }

    fn stats(&self) -> Stats {
        match self.stats.lock() {
            Ok(stats) => stats.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn update_stats(&self, update: impl FnOnce(&mut Stats)) {
        match self.stats.lock() {
            Ok(mut stats) => update(&mut stats),
            Err(poisoned) => update(&mut poisoned.into_inner()),
        }
    }

    /// Checks the files once; reloads, logs and counts as needed. Blocking
    /// (file reads): call it off the async workers.
    pub fn check(&self) -> Checked {
        let mut watch = match self.watch.lock() {
            Ok(watch) => watch,
            Err(poisoned) => poisoned.into_inner(),
        };
        let now = Fingerprint::of(&self.settings);
        if now == watch.attempted {
            watch.pending = None;
            return Checked::Unchanged;
        }
        if watch.pending.as_ref() != Some(&now) {
            debug!("TLS files changed; loading them once they stay unchanged for a second.");
            watch.pending = Some(now);
            return Checked::Settling;
        }
        watch.pending = None;
        watch.attempted = now;
        let loaded = tls::load(&self.settings).and_then(|material| {
            let served = Served::of(material.leaf());
            tls::build(&self.settings, material).map(|acceptor| (acceptor, served))
        });
        match loaded {
            Ok((acceptor, served)) => {
                match self.acceptor.write() {
                    Ok(mut current) => *current = acceptor,
                    Err(poisoned) => *poisoned.into_inner() = acceptor,
                }
                info!(
                    cert_file = %self.settings.cert_file.display(),
                    serial = %served.serial,
                    subject = %served.subject,
                    not_after = %served.expires(),
                    "New TLS certificate in use: the files changed and were reloaded; new connections use them."
                );
                self.update_stats(|stats| {
                    stats.successes += 1;
                    stats.last_ok = true;
                    stats.served = served;
                });
                Checked::Reloaded
            }
            Err(errors) => {
                let problems: Vec<String> = errors.iter().map(describe).collect();
                let files: Vec<String> = errors
                    .iter()
                    .filter_map(|e| self.file_of(&e.field))
                    .map(|p| p.display().to_string())
                    .collect();
                let served = self.served();
                warn!(
                    files = %files.join(", "),
                    problem = %problems.join("; "),
                    "The TLS files changed but cannot be used, so the previous certificate (serial {}, expires {}) is still served. \
                     Fix the files named here (a renewal must replace the certificate and its key together); \
                     they are checked every second and used as soon as they are valid. This is logged once per change.",
                    served.serial,
                    served.expires(),
                );
                self.update_stats(|stats| {
                    stats.failures += 1;
                    stats.last_ok = false;
                });
                Checked::Failed(problems)
            }
        }
    }

    /// The file a `tls_server_config.*` field names.
    fn file_of(&self, field: &str) -> Option<PathBuf> {
        match field.rsplit('.').next()? {
            "cert_file" => Some(self.settings.cert_file.clone()),
            "key_file" => Some(self.settings.key_file.clone()),
            "client_ca_file" => self.settings.client_ca_file.clone(),
            _ => None,
        }
    }

    /// Checks the files every [`CHECK_INTERVAL`] until `shutdown` turns true.
    pub async fn watch(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(CHECK_INTERVAL) => {}
                _ = shutdown.changed() => return,
            }
            let reloader = self.clone();
            if let Err(error) = tokio::task::spawn_blocking(move || reloader.check()).await {
                warn!(error = %error, "The TLS file check failed; it is tried again in a second.");
            }
        }
    }

    /// The `gpuwatch_tls_*` metrics, for [`crate::exporter::Exporter::with`].
    pub fn collector(self: &Arc<Self>) -> Box<dyn Collector> {
        Box::new(TlsCollector(self.clone()))
    }
}

/// A TlsError as one line: "field: message" (the message names the file).
fn describe(error: &TlsError) -> String {
    format!("{}: {}", error.field, error.message)
}

/// Encodes the reloader's state at scrape time.
#[derive(Debug)]
struct TlsCollector(Arc<TlsReloader>);

impl Collector for TlsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let stats = self.0.stats();
        let mut expiry = Family::gauge(
            "tls_certificate_expiry_timestamp",
            "When the served TLS certificate (the first in cert_file) expires (its notAfter).",
            unit("seconds"),
        );
        expiry.push_some(vec![], stats.served.not_after.map(|s| s as f64));
        expiry.encode(&mut encoder)?;
        let mut reloads = Family::counter(
            "tls_reloads",
            "Reloads of the TLS files after they changed on disk, by result (a failure keeps the previous certificate).",
            None,
        );
        reloads.push(vec![("result", "success".into())], stats.successes as f64);
        reloads.push(vec![("result", "failure".into())], stats.failures as f64);
        reloads.encode(&mut encoder)?;
        let mut ok = Family::gauge(
            "tls_last_reload_successful",
            "Whether the TLS files on disk are in use (1), or the last change could not be used and an older certificate is served (0).",
            None,
        );
        ok.push(vec![], if stats.last_ok { 1.0 } else { 0.0 });
        ok.encode(&mut encoder)
    }
}

#[cfg(test)]
mod tests;
