//! One JSON POST for the HTTP receivers (webhook, Alertmanager), sorted into
//! an [`Outcome`]: 2xx delivered; 408, 429, 5xx, network errors and timeouts
//! retry; anything else (other 4xx, redirects, which are not followed)
//! fails for good, with the start of the receiver's answer as the reason.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::Duration;

use base64::Engine;

use super::{Outcome, Secret};

/// How much of a refusing answer's body goes into the reason.
const REASON_BYTES: u64 = 300;

/// How a request proves who sends it.
#[derive(Debug, Clone, PartialEq)]
pub enum Auth {
    /// `Authorization: Bearer TOKEN`.
    Bearer(Secret),
    /// `Authorization: Basic base64(USER:PASSWORD)`.
    Basic {
        /// The user name (not secret).
        username: String,
        /// The password.
        password: Secret,
    },
}

impl Auth {
    fn header(&self) -> String {
        match self {
            Auth::Bearer(token) => format!("Bearer {}", token.expose()),
            Auth::Basic { username, password } => format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD
                    .encode(format!("{username}:{}", password.expose()))
            ),
        }
    }
}

/// Sorts an HTTP status (or the error that kept one from coming) into
/// delivered, retry or failed.
pub fn classify(result: Result<u16, String>) -> Outcome {
    match result {
        Ok(status) if (200..300).contains(&status) => Outcome::Delivered,
        Ok(status) if status == 408 || status == 429 || status >= 500 => {
            Outcome::Retry(format!("HTTP {status}"))
        }
        Ok(status) => Outcome::Permanent(format!("HTTP {status}")),
        Err(error) => Outcome::Retry(error),
    }
}

/// POSTs the JSON `body` to `url` (blocking: run it on a blocking thread).
/// Errors name the URL, never the credentials or headers.
pub fn post_json(
    url: &str,
    headers: &BTreeMap<String, String>,
    auth: Option<&Auth>,
    timeout: Duration,
    body: &str,
) -> Outcome {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(timeout))
        .user_agent(concat!("gpuwatch/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let mut request = agent.post(url).header("Content-Type", "application/json");
    for (name, value) in headers {
        request = request.header(name, value);
    }
    if let Some(auth) = auth {
        request = request.header("Authorization", &auth.header());
    }
    match request.send(body) {
        Ok(mut response) => {
            let status = response.status().as_u16();
            match classify(Ok(status)) {
                Outcome::Permanent(why) => {
                    let mut answer = String::new();
                    let _ = response
                        .body_mut()
                        .as_reader()
                        .take(REASON_BYTES)
                        .read_to_string(&mut answer);
                    let answer = answer.trim();
                    if answer.is_empty() {
                        Outcome::Permanent(why)
                    } else {
                        Outcome::Permanent(format!("{why}: {answer}"))
                    }
                }
                other => other,
            }
        }
        Err(e) => Outcome::Retry(describe(&e, timeout)),
    }
}

fn describe(error: &ureq::Error, timeout: Duration) -> String {
    match error {
        ureq::Error::Timeout(_) => {
            format!("no answer within {}", humantime::format_duration(timeout))
        }
        ureq::Error::Io(e) => format!("network error: {e}"),
        ureq::Error::ConnectionFailed => "connection failed".to_string(),
        ureq::Error::HostNotFound => "host not found".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_the_http_status() {
        assert_eq!(classify(Ok(200)), Outcome::Delivered);
        assert_eq!(classify(Ok(204)), Outcome::Delivered);
        for status in [408, 429, 500, 503] {
            assert!(
                matches!(classify(Ok(status)), Outcome::Retry(_)),
                "{status}"
            );
        }
        for status in [400, 401, 404, 301] {
            assert!(
                matches!(classify(Ok(status)), Outcome::Permanent(_)),
                "{status}"
            );
        }
        assert!(matches!(classify(Err("refused".into())), Outcome::Retry(_)));
    }

    #[test]
    fn basic_auth_is_base64_of_user_colon_password() {
        let auth = Auth::Basic {
            username: "Aladdin".into(),
            password: Secret::new("open sesame".into()),
        };
        // RFC 7617's example.
        assert_eq!(auth.header(), "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        assert!(!format!("{auth:?}").contains("sesame"));
    }
}
