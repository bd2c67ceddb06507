//! One JSON POST for the HTTP receivers (webhook, Alertmanager), sorted into
//! an [`Outcome`]: 2xx delivered; 408, 429, 5xx, network errors and timeouts
//! retry; anything else (other 4xx, redirects, which are not followed)
//! fails for good, with the start of the receiver's answer as the reason.
//! A request that cannot succeed however often it is tried (an invalid URL
//! or header value, a TLS setting that cannot work) fails for good too,
//! instead of being retried forever.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::Duration;

use base64::Engine;

use super::{Outcome, Secret};

/// How much of a refusing answer's body is read into the reason. Generous:
/// the dispatcher redacts secrets the answer echoes and only then shortens
/// the reason (see [`super::redact`]), so a secret must not be cut here.
const ANSWER_BYTES: u64 = 16 * 1024;

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

/// Sorts an HTTP status into delivered, retry or failed.
pub fn classify(status: u16) -> Outcome {
    match status {
        200..=299 => Outcome::Delivered,
        408 | 429 | 500.. => Outcome::Retry(format!("HTTP {status}")),
        _ => Outcome::Permanent(format!("HTTP {status}")),
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
            match classify(status) {
                Outcome::Permanent(why) => {
                    let mut answer = Vec::new();
                    let _ = response
                        .body_mut()
                        .as_reader()
                        .take(ANSWER_BYTES)
                        .read_to_end(&mut answer);
                    let answer = String::from_utf8_lossy(&answer);
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
        Err(e) => error_outcome(&e, timeout),
    }
}

/// Sorts an error that kept an answer from coming: the request itself
/// cannot be made (invalid URL, header value or TLS setting; a body the
/// client refuses) fails for good and says what to fix; the network, the
/// server and TLS handshakes may do better next time.
fn error_outcome(error: &ureq::Error, timeout: Duration) -> Outcome {
    use ureq::Error as E;
    let fix = "fix the receiver's configuration";
    match error {
        E::Timeout(_) => Outcome::Retry(format!(
            "no answer within {}",
            humantime::format_duration(timeout)
        )),
        E::Io(e) => Outcome::Retry(format!("network error: {e}")),
        E::ConnectionFailed => Outcome::Retry("connection failed".to_string()),
        E::HostNotFound => Outcome::Retry("host not found".to_string()),
        E::Http(e) => Outcome::Permanent(format!(
            "the request cannot be built: {e} (an invalid URL, header name or header value \
             such as a token with a line break); {fix}"
        )),
        E::BadUri(e) => Outcome::Permanent(format!("the URL is not usable: {e}; {fix}")),
        E::RequireHttpsOnly(_) | E::InvalidProxyUrl | E::TlsRequired => {
            Outcome::Permanent(format!("{error}; {fix}"))
        }
        E::Tls(e) => Outcome::Permanent(format!("TLS cannot be set up: {e}; {fix}")),
        E::Pem(e) => Outcome::Permanent(format!("TLS cannot be set up: {e}; {fix}")),
        E::RedirectFailed | E::TooManyRedirects => Outcome::Permanent(format!(
            "the receiver redirects, which is not followed: {error}; use the final URL"
        )),
        E::BodyExceedsLimit(_) => Outcome::Permanent(error.to_string()),
        other => Outcome::Retry(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_the_http_status() {
        assert_eq!(classify(200), Outcome::Delivered);
        assert_eq!(classify(204), Outcome::Delivered);
        for status in [408, 429, 500, 503] {
            assert!(matches!(classify(status), Outcome::Retry(_)), "{status}");
        }
        for status in [400, 401, 404, 301] {
            assert!(
                matches!(classify(status), Outcome::Permanent(_)),
                "{status}"
            );
        }
    }

    /// Requests that can never be made fail for good at the first attempt
    /// (they used to be retried forever). None of them reaches the network.
    #[test]
    fn requests_that_cannot_be_made_fail_for_good() {
        let post = |url: &str, headers: &[(&str, &str)], auth: Option<Auth>| {
            let headers: BTreeMap<String, String> = headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            post_json(url, &headers, auth.as_ref(), Duration::from_secs(1), "{}")
        };
        let local = "http://127.0.0.1:1/hook";
        let cases = [
            (
                "a header value with CR/LF",
                post(local, &[("X-Team", "ml\r\nX-Evil: 1")], None),
            ),
            (
                "an invalid header name",
                post(local, &[("Bad Header", "1")], None),
            ),
            (
                "a bearer token with a line break",
                post(
                    local,
                    &[],
                    Some(Auth::Bearer(Secret::new("tok\nen".into()))),
                ),
            ),
            (
                "an invalid URL",
                post("http://127.0.0.1:1/a b\n", &[], None),
            ),
            (
                "an unknown scheme",
                post("ftp://127.0.0.1:1/hook", &[], None),
            ),
            ("no host", post("http:///hook", &[], None)),
        ];
        for (what, outcome) in cases {
            match outcome {
                Outcome::Permanent(why) => assert!(why.contains("fix"), "{what}: {why}"),
                other => panic!("{what}: {other:?}"),
            }
        }
        // Nothing listens on port 1: that may change, so it is retried.
        assert!(matches!(post(local, &[], None), Outcome::Retry(_)));
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
