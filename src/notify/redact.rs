//! Keeps a receiver's secrets out of what gpuwatch logs and stores.
//!
//! A receiver's answer can echo what it was sent: a webhook's 400 page that
//! lists the request headers (`authorization: Bearer …`), an SMTP server's
//! 535 reply that quotes the `AUTH PLAIN …` line. That answer becomes the
//! reason of an [`Outcome`], which is logged and stored in the outbox's
//! `last_error`. A [`Redactor`], built once per receiver from its config
//! ([`Redactor::for_receiver`]), cleans every reason at the one place they
//! all pass (the dispatcher) before anything is counted, logged or stored.
//!
//! What counts as a secret: the bearer token, the basic-auth and SMTP
//! passwords, the password in a URL's user info, and every configured header
//! value (a header is often an API key; redacting a harmless one costs
//! nothing). Each is looked for as written, URL-encoded, JSON-escaped and
//! base64-encoded — alone, and inside the encoded credentials that are
//! actually sent (`user:password` for basic auth, `\0user\0password` for
//! SMTP AUTH PLAIN, the password alone for AUTH LOGIN), at any position in
//! a longer base64 text.
//!
//! Secrets shorter than [`SHORT`] characters are still redacted, but only
//! where they stand alone (not inside a longer run of letters and digits):
//! a one-character header value such as `X-Scope-OrgID: 1` must not turn
//! "HTTP 401" into "HTTP 40[REDACTED]". A reason is redacted first and
//! shortened after, so that cutting it never leaves half a secret that no
//! longer matches.

use std::fmt;

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine;

use super::{Auth, Outcome, ReceiverKind};

/// What replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

/// Secrets (and encoded forms) shorter than this many bytes are redacted
/// only where they stand alone, not inside a longer word.
pub const SHORT: usize = 4;

/// The longest reason kept (characters), after redaction; longer ones are
/// cut with "…".
pub const MAX_REASON_CHARS: usize = 600;

/// A base64 run that covers only part of a secret (the secret inside a
/// longer encoded text) is looked for from this many characters on; shorter
/// runs would match by chance.
const MIN_FRAGMENT: usize = 6;

/// The secrets of one receiver, in every form looked for. `Debug` shows how
/// many, never which.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Longest first, so that a longer form wins over a shorter one inside.
    needles: Vec<Needle>,
}

#[derive(Clone, PartialEq, Eq)]
struct Needle {
    text: String,
    /// Matched only where it stands alone (short needles).
    whole_word: bool,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} forms)", self.needles.len())
    }
}

impl Redactor {
    /// The redactor for a receiver's configured secrets (see the module
    /// documentation for which and in which forms).
    pub fn for_receiver(kind: &ReceiverKind) -> Redactor {
        let mut r = Redactor::default();
        match kind {
            ReceiverKind::Webhook(c) => {
                r.url(&c.url);
                c.headers.values().for_each(|v| r.secret(v));
                if let Some(token) = &c.bearer_token {
                    r.secret(token.expose());
                }
            }
            ReceiverKind::Alertmanager(c) => {
                r.url(&c.url);
                c.headers.values().for_each(|v| r.secret(v));
                match &c.auth {
                    Some(Auth::Bearer(token)) => r.secret(token.expose()),
                    Some(Auth::Basic { username, password }) => {
                        r.secret(password.expose());
                        r.encoded(&format!("{username}:{}", password.expose()));
                    }
                    None => {}
                }
            }
            ReceiverKind::Email(c) => {
                if let Some(password) = &c.password {
                    r.secret(password.expose());
                    if let Some(user) = &c.username {
                        // AUTH PLAIN's initial response, as lettre sends it.
                        r.encoded(&format!("\0{user}\0{}", password.expose()));
                    }
                }
            }
        }
        r
    }

    /// Adds a secret: as written, URL-encoded, JSON-escaped and base64
    /// (alone or at any position inside a longer base64 text).
    pub fn secret(&mut self, secret: &str) {
        if secret.is_empty() {
            return;
        }
        self.add(secret.to_string());
        for encoded in url_encodings(secret) {
            self.add(encoded);
        }
        if let Ok(json) = serde_json::to_string(secret) {
            self.add(json.trim_matches('"').to_string());
        }
        self.encoded(secret);
        for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
            for fragment in base64_fragments(&engine, secret.as_bytes()) {
                self.add(fragment);
            }
        }
    }

    /// Adds the base64 encodings (with and without padding, standard and
    /// URL-safe alphabet) of credentials sent encoded as a whole, such as
    /// basic auth's `user:password`.
    pub fn encoded(&mut self, credentials: &str) {
        if credentials.is_empty() {
            return;
        }
        let bytes = credentials.as_bytes();
        self.add(STANDARD.encode(bytes));
        self.add(STANDARD_NO_PAD.encode(bytes));
        self.add(URL_SAFE_NO_PAD.encode(bytes));
    }

    /// Adds the password of a URL's user info (`https://user:pw@host/`).
    pub fn url(&mut self, url: &str) {
        let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if let Some((user_info, _)) = authority.rsplit_once('@') {
            if let Some((_, password)) = user_info.split_once(':') {
                self.secret(password);
            }
        }
    }

    fn add(&mut self, text: String) {
        let needle = Needle {
            whole_word: text.len() < SHORT,
            text,
        };
        if !self.needles.contains(&needle) {
            self.needles.push(needle);
            self.needles
                .sort_by(|a, b| b.text.len().cmp(&a.text.len()).then(a.text.cmp(&b.text)));
        }
    }

    /// `text` with every secret replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        let mut hits: Vec<(usize, usize)> = Vec::new();
        for needle in &self.needles {
            let mut from = 0;
            while let Some(found) = text[from..].find(&needle.text) {
                let start = from + found;
                let end = start + needle.text.len();
                if !needle.whole_word || stands_alone(text, start, end) {
                    hits.push((start, end));
                }
                // Overlapping occurrences too: go on from the next character.
                from = start + text[start..].chars().next().map_or(1, char::len_utf8);
            }
        }
        if hits.is_empty() {
            return text.to_string();
        }
        hits.sort_unstable();
        let mut out = String::with_capacity(text.len());
        let mut done = 0;
        for (start, end) in hits {
            if end <= done {
                continue;
            }
            if start >= done {
                out.push_str(&text[done..start]);
                out.push_str(REDACTED);
            }
            done = end;
        }
        out.push_str(&text[done..]);
        out
    }

    /// A reason fit to log and store: secrets redacted, control characters
    /// (a hostile receiver's line breaks) turned into spaces, then cut to
    /// [`MAX_REASON_CHARS`].
    pub fn clean(&self, reason: &str) -> String {
        let redacted = self.redact(reason);
        let mut out: String = redacted
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(MAX_REASON_CHARS)
            .collect();
        if redacted.chars().nth(MAX_REASON_CHARS).is_some() {
            out.push('…');
        }
        out
    }

    /// The outcome with its reason [cleaned](Redactor::clean).
    pub fn outcome(&self, outcome: Outcome) -> Outcome {
        match outcome {
            Outcome::Delivered => Outcome::Delivered,
            Outcome::Retry(why) => Outcome::Retry(self.clean(&why)),
            Outcome::Permanent(why) => Outcome::Permanent(self.clean(&why)),
        }
    }
}

/// Whether `text[start..end]` is not part of a longer run of letters and
/// digits.
fn stands_alone(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
}

/// The URL-encoded forms of `secret` that differ from it: RFC 3986 with
/// upper- and lower-case hex, and form encoding (space as `+`).
fn url_encodings(secret: &str) -> Vec<String> {
    let percent = |upper: bool| {
        let mut out = String::with_capacity(secret.len() * 3);
        for byte in secret.bytes() {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
                out.push(char::from(byte));
            } else if upper {
                out.push_str(&format!("%{byte:02X}"));
            } else {
                out.push_str(&format!("%{byte:02x}"));
            }
        }
        out
    };
    let form: String = form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    let mut forms: Vec<String> = Vec::new();
    for form in [percent(true), percent(false), form] {
        if form != secret && !forms.contains(&form) {
            forms.push(form);
        }
    }
    forms
}

/// The base64 characters that depend on `secret` alone when it sits at
/// each of the three byte offsets (mod 3) inside a longer encoded text, so
/// that `user:password` or `\0user\0password` encoded by someone else still
/// shows the password's part; runs shorter than [`MIN_FRAGMENT`] are left
/// out.
fn base64_fragments(engine: &impl Engine, secret: &[u8]) -> Vec<String> {
    let mut fragments = Vec::new();
    for offset in 0..3usize {
        let mut bytes = vec![0u8; offset];
        bytes.extend_from_slice(secret);
        let encoded = engine.encode(&bytes);
        // Characters wholly inside the secret's bits.
        let start = (offset * 8).div_ceil(6);
        let end = ((offset + secret.len()) * 8) / 6;
        if let Some(fragment) = encoded.get(start..end) {
            if fragment.len() >= MIN_FRAGMENT {
                fragments.push(fragment.to_string());
            }
        }
    }
    fragments
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::{Secret, WebhookConfig};
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn with(secrets: &[&str]) -> Redactor {
        let mut r = Redactor::default();
        secrets.iter().for_each(|s| r.secret(s));
        r
    }

    #[test]
    fn a_secret_is_redacted_as_written_and_encoded() {
        let secret = "t0ken/with+odd chars";
        let r = with(&[secret]);
        let forms = [
            secret.to_string(),
            "t0ken%2Fwith%2Bodd%20chars".to_string(),
            "t0ken%2fwith%2bodd%20chars".to_string(),
            "t0ken%2Fwith%2Bodd+chars".to_string(),
            STANDARD.encode(secret),
            URL_SAFE_NO_PAD.encode(secret),
        ];
        for form in forms {
            let text = format!("HTTP 400: echo: {form} (end)");
            let clean = r.redact(&text);
            assert_eq!(clean, format!("HTTP 400: echo: {REDACTED} (end)"), "{form}");
        }
    }

    #[test]
    fn a_secret_inside_longer_base64_is_found_at_every_offset() {
        let password = "correct-horse-battery";
        let r = with(&[password]);
        for prefix in ["", "a", "ab", "user:", "\0alerts\0"] {
            let blob = STANDARD.encode(format!("{prefix}{password}"));
            let clean = r.redact(&format!("535 5.7.8 AUTH PLAIN {blob} rejected"));
            assert!(clean.contains(REDACTED), "{prefix:?}: {clean}");
            // What is left of the blob is at most the characters shared with
            // the prefix and the last one or two straddling the end.
            let left: usize = clean
                .split_whitespace()
                .filter(|w| w.contains(REDACTED))
                .map(|w| w.len() - REDACTED.len())
                .sum();
            assert!(left <= prefix.len() * 4 / 3 + 4, "{prefix:?}: {clean}");
        }
    }

    #[test]
    fn smtp_plain_and_basic_credentials_are_redacted_even_with_short_passwords() {
        let mut r = Redactor::default();
        r.secret("pw");
        r.encoded("\0alerts\0pw");
        r.encoded("alerts:pw");
        let plain = STANDARD.encode("\0alerts\0pw");
        let basic = STANDARD.encode("alerts:pw");
        assert_eq!(
            r.redact(&format!("535 AUTH PLAIN {plain}")),
            format!("535 AUTH PLAIN {REDACTED}")
        );
        assert_eq!(
            r.redact(&format!("authorization: Basic {basic}")),
            format!("authorization: Basic {REDACTED}")
        );
    }

    #[test]
    fn short_secrets_are_redacted_only_where_they_stand_alone() {
        let r = with(&["1"]);
        assert_eq!(r.redact("HTTP 401"), "HTTP 401");
        assert_eq!(
            r.redact("x-scope-orgid: 1, tenant=1"),
            format!("x-scope-orgid: {REDACTED}, tenant={REDACTED}")
        );
        let r = with(&["abc"]);
        assert_eq!(
            r.redact("Bearer abc; cabcd"),
            format!("Bearer {REDACTED}; cabcd")
        );
    }

    #[test]
    fn overlapping_forms_collapse_into_one_marker() {
        let r = with(&["aaaa", "aaaab"]);
        assert_eq!(r.redact("xaaaaab y"), format!("x{REDACTED} y"));
        assert_eq!(r.redact("nothing here"), "nothing here");
    }

    #[test]
    fn clean_redacts_before_cutting_and_flattens_line_breaks() {
        let token = "z".repeat(40);
        let r = with(&[&token]);
        let long = format!("{}{token}", "x".repeat(MAX_REASON_CHARS - 5));
        let clean = r.clean(&long);
        assert!(!clean.contains("zzzz"), "{clean}");
        assert!(clean.ends_with('…'), "{clean}");
        assert_eq!(r.clean("a\r\nfake: log line"), "a  fake: log line");
        assert_eq!(
            r.outcome(Outcome::Retry(format!("got {token}"))),
            Outcome::Retry(format!("got {REDACTED}"))
        );
    }

    #[test]
    fn a_webhook_redactor_covers_token_headers_and_url_password() {
        let kind = ReceiverKind::Webhook(WebhookConfig {
            url: "https://hook:url-pass-9@hooks.example.com/x?y".into(),
            headers: BTreeMap::from([("X-Api-Key".to_string(), "key-123456".to_string())]),
            bearer_token: Some(Secret::new("bearer-abcdef".into())),
            timeout: Duration::from_secs(1),
        });
        let r = Redactor::for_receiver(&kind);
        let clean = r.redact("bearer-abcdef key-123456 url-pass-9");
        assert_eq!(clean, format!("{REDACTED} {REDACTED} {REDACTED}"));
        assert!(!format!("{r:?}").contains("abcdef"));
    }
}
