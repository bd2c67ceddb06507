//! The web configuration file (`--web-config`, `server.web_config`): TLS,
//! basic auth and response headers, in the Prometheus exporter-toolkit
//! format, so one `web.yml` serves node_exporter and gpuwatch alike.
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt        # relative paths: relative to this file
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert
//!   client_ca_file: clients-ca.crt
//!   min_version: TLS12
//! basic_auth_users:
//!   prometheus: $2y$10$...       # bcrypt
//! http_server_config:
//!   headers:
//!     X-Content-Type-Options: nosniff
//! ```
//!
//! [`WebSecurity::load`] parses, checks every field, reads the certificates
//! and keys and builds the TLS acceptor (reloaded when those files change:
//! [`super::tls_reload`]); every problem is reported at once,
//! each with file, line and field, like the TOML configuration's. The
//! field-by-field checks are in `webconfig/check.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::problem::Problem;
use hyper::header::{HeaderName, HeaderValue};

use super::auth::BasicAuth;
use super::tls;
use super::tls_reload::{Fingerprint, TlsReloader};
pub use super::tls_settings::{ClientAuth, TlsSettings, TlsVersion};

mod check;

pub use check::{check_bcrypt, resolve, BcryptHashError};
use check::{Checker, RawWebConfig};

/// Everything the server needs from a web configuration file, ready to use.
#[derive(Clone)]
pub struct WebSecurity {
    /// The file it came from.
    pub file: PathBuf,
    /// TLS, when configured: the acceptor in service, reloaded when the
    /// certificate files change.
    pub tls: Option<Arc<TlsReloader>>,
    /// Basic auth, when users are configured.
    pub auth: Option<Arc<BasicAuth>>,
    /// Headers added to every response.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl std::fmt::Debug for WebSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSecurity")
            .field("file", &self.file)
            .field("tls", &self.tls.is_some())
            .field("auth", &self.auth.is_some())
            .field("headers", &self.headers)
            .finish()
    }
}

impl WebSecurity {
    /// No TLS, no auth, no extra headers: the server as without a web config.
    pub fn none() -> WebSecurity {
        WebSecurity {
            file: PathBuf::new(),
            tls: None,
            auth: None,
            headers: Vec::new(),
        }
    }

    /// The URL scheme clients use.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Reads (at most 1 MiB), checks and
    /// prepares `path`. Every problem is returned, each naming the file,
    /// the line where it can be found, and the field. A file that cannot
    /// be read is a problem without a line: see [`load_chosen`] for one
    /// reported where the configuration names it.
    pub fn load(path: &Path) -> Result<WebSecurity, Vec<Problem>> {
        let shown = path.display().to_string();
        let source = crate::files::read_bounded_string(path, crate::files::MAX_CONFIG_BYTES)
            .map_err(|error| {
                vec![Problem {
                    file: shown.clone(),
                    line: None,
                    column: None,
                    field: String::new(),
                    message: format!(
                        "cannot load the web configuration file: {error} (check --web-config or server.web_config)"
                    ),
                }]
            })?;
        let base = path.parent().unwrap_or(Path::new(""));
        WebSecurity::parse(&source, &shown, base)
    }

    /// Parses `source`; `file` names it in problems and relative paths are
    /// taken from `base`.
    pub fn parse(source: &str, file: &str, base: &Path) -> Result<WebSecurity, Vec<Problem>> {
        let mut v = Checker {
            file,
            source,
            problems: Vec::new(),
        };
        // An empty file (or one of comments only) is valid: nothing is enabled.
        let raw: RawWebConfig = match serde_yaml_ng::from_str::<Option<RawWebConfig>>(source) {
            Ok(raw) => raw.unwrap_or_default(),
            Err(error) => {
                let location = error.location();
                let message = error.to_string();
                // serde_yaml_ng appends " at line L column C"; the location
                // is printed by Problem itself.
                let message = match message.split_once(" at line ") {
                    Some((head, _)) if location.is_some() => head.to_string(),
                    _ => message,
                };
                // Without a place (rare), the end of the file: where the
                // parser gave up.
                let (line, column) = location
                    .as_ref()
                    .map_or((source.lines().count().max(1), 1), |l| {
                        (l.line(), l.column())
                    });
                return Err(vec![Problem {
                    file: file.to_string(),
                    line: Some(line),
                    column: Some(column),
                    field: String::new(),
                    message: if message.contains("expected") {
                        message
                    } else {
                        format!("{message} (the web configuration knows tls_server_config, basic_auth_users and http_server_config)")
                    },
                }]);
            }
        };
        let tls =
            raw.tls_server_config
                .and_then(|t| v.tls(t, base))
                .and_then(|(settings, valid)| {
                    // Hashed before reading, so that a change in between
                    // is reloaded rather than missed.
                    let fingerprint = Fingerprint::of(&settings);
                    let built = tls::load(&settings).and_then(|material| match valid {
                        true => TlsReloader::new(settings, fingerprint, material)
                            .map(|reloader| Some(Arc::new(reloader))),
                        false => Ok(None),
                    });
                    match built {
                        Ok(acceptor) => acceptor,
                        Err(errors) => {
                            for error in errors {
                                v.problem(&error.field, &error.message);
                            }
                            None
                        }
                    }
                });
        let auth = v.users(raw.basic_auth_users.unwrap_or_default());
        let headers = v.headers(
            raw.http_server_config
                .and_then(|h| h.headers)
                .unwrap_or_default(),
        );
        if !v.problems.is_empty() {
            return Err(v.problems);
        }
        Ok(WebSecurity {
            file: PathBuf::from(file),
            tls,
            auth,
            headers,
        })
    }
}

/// The web configuration file to use: `--web-config` (as given) over
/// `server.web_config`, which is relative to the configuration file's
/// directory.
pub fn choose_file(
    flag: Option<&Path>,
    config_file: Option<&Path>,
    configured: Option<&Path>,
) -> Option<PathBuf> {
    if let Some(flag) = flag {
        return Some(flag.to_path_buf());
    }
    let configured = configured?;
    let base = config_file.and_then(Path::parent).unwrap_or(Path::new(""));
    Some(resolve(base, &configured.to_string_lossy()))
}

/// The web configuration in effect, loaded: `--web-config` (`flag`) or
/// `server.web_config` of the configuration file `config_file`; `None`
/// when neither names one. A file named by `server.web_config` that cannot
/// be read is reported at that key's line and column in the configuration
/// file, so that `validate` points at what to fix.
pub fn load_chosen(
    flag: Option<&Path>,
    config_file: Option<&Path>,
    server: &crate::config::ServerConfig,
) -> Option<(PathBuf, Result<WebSecurity, Vec<Problem>>)> {
    let file = choose_file(flag, config_file, server.web_config.as_deref())?;
    let loaded = WebSecurity::load(&file).map_err(|mut problems| {
        if let (None, Some(config), Some(at), [only]) = (
            flag,
            config_file,
            server.web_config_at,
            problems.as_mut_slice(),
        ) {
            if only.line.is_none() {
                *only = Problem {
                    file: config.display().to_string(),
                    line: Some(at.line),
                    column: Some(at.column),
                    field: "server.web_config".to_string(),
                    message: only.message.clone(),
                };
            }
        }
        problems
    });
    Some((file, loaded))
}

#[cfg(test)]
mod tests;
