//! `[[receivers]]` validation: the fields every receiver has (name, type,
//! retry delays), then one function per receiver kind for its own fields.
//! Adding a kind means its function here and its arm in
//! [`Validator::receivers`].

use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use crate::notify::{
    AlertmanagerConfig, Auth, Backoff, ReceiverConfig, ReceiverKind, Secret, WebhookConfig,
};

use super::limits;
use super::raw::RawReceiver;
use super::Validator;

/// The receiver types `type` accepts, for error messages.
const TYPES: &str = "\"webhook\", \"alertmanager\" or \"email\"";

impl Validator<'_> {
    /// Validates every `[[receivers]]` entry; only entries without problems
    /// are returned (the caller fails on any problem anyway).
    pub(super) fn receivers(&mut self, raw: Vec<Spanned<RawReceiver>>) -> Vec<ReceiverConfig> {
        let mut receivers: Vec<ReceiverConfig> = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for (i, entry) in raw.into_iter().enumerate() {
            let at = format!("receivers[{i}]");
            // Where the entry starts: fields it lacks are reported there.
            let table = entry.span();
            let r = entry.into_inner();
            let before = self.problems.len();
            let name = self.receiver_name(&at, &r, &mut names, &table);
            let kind = match r.kind.as_ref().map(|k| (k.get_ref().as_str(), k.span())) {
                Some(("webhook", _)) => {
                    self.unused_fields(&at, "webhook", &super::email::email_fields(&r));
                    self.webhook(&at, &r, &table).map(ReceiverKind::Webhook)
                }
                Some(("alertmanager", _)) => {
                    self.unused_fields(&at, "alertmanager", &super::email::email_fields(&r));
                    self.alertmanager(&at, &r, &table)
                        .map(ReceiverKind::Alertmanager)
                }
                Some(("email", _)) => self.email(&at, &r, &table).map(ReceiverKind::Email),
                Some((other, span)) => {
                    self.problem(
                        &format!("{at}.type"),
                        span,
                        &format!("\"{other}\" is not a receiver type; use {TYPES}"),
                    );
                    None
                }
                None => {
                    self.problem(
                        &format!("{at}.type"),
                        table.clone(),
                        &format!("is missing; use type = {TYPES}"),
                    );
                    None
                }
            };
            let backoff = self.backoff(&at, &r);
            let route = self.route(&|name| format!("{at}.{name}"), &r, &table);
            if let (Some(ReceiverKind::Email(_)), Some(wait)) = (&kind, &r.group_wait) {
                if !route.group_wait.is_zero() {
                    self.problem(
                        &format!("{at}.group_wait"),
                        wait.span(),
                        "grouping is not built for email receivers yet (an email shows one alert); leave group_wait out",
                    );
                }
            }
            if let (Some(kind), true) = (kind, self.problems.len() == before) {
                receivers.push(ReceiverConfig {
                    name,
                    kind,
                    backoff,
                    route,
                });
            }
        }
        receivers
    }

    fn receiver_name(
        &mut self,
        at: &str,
        r: &RawReceiver,
        names: &mut Vec<String>,
        table: &Range<usize>,
    ) -> String {
        let field = format!("{at}.name");
        match &r.name {
            Some(n) if n.get_ref().trim().is_empty() => {
                self.problem(&field, n.span(), "must not be empty");
                String::new()
            }
            Some(n) if names.contains(n.get_ref()) => {
                self.problem(
                    &field,
                    n.span(),
                    &format!("\"{}\" names another receiver already", n.get_ref()),
                );
                String::new()
            }
            Some(n) => {
                names.push(n.get_ref().clone());
                n.get_ref().clone()
            }
            None => {
                self.problem(
                    &field,
                    table.clone(),
                    "is missing: give each receiver a name",
                );
                String::new()
            }
        }
    }

    fn backoff(&mut self, at: &str, r: &RawReceiver) -> Backoff {
        let retry_min = self.duration(
            &format!("{at}.retry_min"),
            r.retry_min.as_ref(),
            Duration::from_secs(1),
            &limits::RETRY_MIN,
        );
        let retry_max = self.duration(
            &format!("{at}.retry_max"),
            r.retry_max.as_ref(),
            Duration::from_secs(300),
            &limits::RETRY_MAX,
        );
        match Backoff::new(retry_min, retry_max) {
            Ok(b) => b,
            Err(e) => {
                // One of them is written (the defaults fit): point at it.
                let (field, span) = match (&r.retry_max, &r.retry_min) {
                    (Some(max), _) => ("retry_max", max.span()),
                    (None, Some(min)) => ("retry_min", min.span()),
                    (None, None) => ("retry_max", 0..0),
                };
                self.problem(&format!("{at}.{field}"), span, &e.to_string());
                Backoff::default()
            }
        }
    }

    /// `type = "webhook"`.
    fn webhook(
        &mut self,
        at: &str,
        r: &RawReceiver,
        table: &Range<usize>,
    ) -> Option<WebhookConfig> {
        self.unused_fields(
            at,
            "webhook",
            &[
                ("username", r.username.as_ref().map(Spanned::span)),
                ("password", r.password.as_ref().map(Spanned::span)),
                ("password_file", r.password_file.as_ref().map(Spanned::span)),
                ("password_env", r.password_env.as_ref().map(Spanned::span)),
                (
                    "resend_interval",
                    r.resend_interval.as_ref().map(Spanned::span),
                ),
            ],
        );
        let url = self.http_url(&format!("{at}.url"), r.url.as_ref(), table);
        let headers = self.headers(at, r);
        let bearer_token = self.secret(
            at,
            "bearer_token",
            "bearer token",
            r.bearer_token.as_ref(),
            r.bearer_token_file.as_ref(),
            r.bearer_token_env.as_ref(),
        );
        let timeout = self.duration(
            &format!("{at}.timeout"),
            r.timeout.as_ref(),
            Duration::from_secs(10),
            &limits::RECEIVER_TIMEOUT,
        );
        Some(WebhookConfig {
            url: url?,
            headers,
            bearer_token,
            timeout,
        })
    }

    /// `type = "alertmanager"`. `external_url` is left empty: the agent
    /// fills it in at start, once it knows its address.
    fn alertmanager(
        &mut self,
        at: &str,
        r: &RawReceiver,
        table: &Range<usize>,
    ) -> Option<AlertmanagerConfig> {
        let field = format!("{at}.url");
        let url = self.http_url(&field, r.url.as_ref(), table);
        if let (Some(u), Some(raw)) = (&url, &r.url) {
            if u.trim_end_matches('/').ends_with("/api/v2/alerts") {
                self.problem(
                    &field,
                    raw.span(),
                    "give Alertmanager's base URL (like \"http://alertmanager:9093\"); the agent adds /api/v2/alerts",
                );
            }
        }
        let headers = self.headers(at, r);
        let auth = self.http_auth(at, r);
        let timeout = self.duration(
            &format!("{at}.timeout"),
            r.timeout.as_ref(),
            Duration::from_secs(10),
            &limits::RECEIVER_TIMEOUT,
        );
        let resend_interval = self.duration(
            &format!("{at}.resend_interval"),
            r.resend_interval.as_ref(),
            Duration::from_secs(60),
            &limits::RESEND_INTERVAL,
        );
        Some(AlertmanagerConfig {
            url: url?.trim_end_matches('/').to_string(),
            headers,
            auth,
            timeout,
            resend_interval,
            external_url: String::new(),
        })
    }

    /// Basic auth (`username` with `password`, `password_file` or
    /// `password_env`) or a bearer token (`bearer_token`, `_file`, `_env`),
    /// not both.
    fn http_auth(&mut self, at: &str, r: &RawReceiver) -> Option<Auth> {
        let bearer = self.secret(
            at,
            "bearer_token",
            "bearer token",
            r.bearer_token.as_ref(),
            r.bearer_token_file.as_ref(),
            r.bearer_token_env.as_ref(),
        );
        let password = self.secret(
            at,
            "password",
            "password",
            r.password.as_ref(),
            r.password_file.as_ref(),
            r.password_env.as_ref(),
        );
        let password_span = r
            .password
            .as_ref()
            .map(Spanned::span)
            .or_else(|| r.password_file.as_ref().map(Spanned::span))
            .or_else(|| r.password_env.as_ref().map(Spanned::span));
        let field = format!("{at}.username");
        match (&r.username, password_span, bearer) {
            (Some(user), Some(_), Some(_)) => {
                self.problem(
                    &field,
                    user.span(),
                    "give basic auth (username and password) or a bearer token, not both",
                );
                None
            }
            (Some(user), Some(_), None) => {
                let plain = self.no_control(&field, user.span(), "user name", user.get_ref());
                if plain && user.get_ref().contains(':') {
                    self.problem(
                        &field,
                        user.span(),
                        "a basic auth user name cannot contain ':' (it separates the user name from the password)",
                    );
                    return None;
                }
                password.filter(|_| plain).map(|password| Auth::Basic {
                    username: user.get_ref().clone(),
                    password,
                })
            }
            (Some(user), None, _) => {
                self.problem(
                    &field,
                    user.span(),
                    "basic auth needs a password too: add password, password_file or password_env",
                );
                None
            }
            (None, Some(span), _) => {
                self.problem(
                    &field,
                    span,
                    "a password needs a username (basic auth); add username",
                );
                None
            }
            (None, None, bearer) => bearer.map(Auth::Bearer),
        }
    }

    /// A required http:// or https:// URL; `table` is the receiver's
    /// entry, where a missing URL is reported.
    pub(super) fn http_url(
        &mut self,
        field: &str,
        value: Option<&Spanned<String>>,
        table: &Range<usize>,
    ) -> Option<String> {
        match value {
            Some(u) if !self.no_control(field, u.span(), "URL", u.get_ref()) => None,
            Some(u) if is_http_url(u.get_ref()) => Some(u.get_ref().clone()),
            Some(u) => {
                self.problem(
                    field,
                    u.span(),
                    &format!(
                        "\"{}\" is not an http:// or https:// URL; write it like \"https://host:port/path\"",
                        u.get_ref()
                    ),
                );
                None
            }
            None => {
                self.problem(
                    field,
                    table.clone(),
                    "is missing: where should notifications go?",
                );
                None
            }
        }
    }

    /// Extra request headers: names of letters, digits, '-' and '_',
    /// values without control characters.
    fn headers(&mut self, at: &str, r: &RawReceiver) -> std::collections::BTreeMap<String, String> {
        let Some(h) = &r.headers else {
            return Default::default();
        };
        for (key, value) in h.get_ref() {
            let field = format!("{at}.headers.{key}");
            if key.is_empty()
                || !key
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
            {
                self.problem(
                    &field,
                    h.span(),
                    &format!("\"{key}\" is not a header name; use letters, digits, '-' and '_'"),
                );
            } else {
                self.no_control(&field, h.span(), "header value", value);
            }
        }
        h.get_ref().clone()
    }

    /// A secret given one of three ways: `{base}` itself, `{base}_file` (a
    /// file holding it, at most [`crate::files::MAX_SECRET_BYTES`], trimmed:
    /// a trailing newline is normal) or `{base}_env` (an environment
    /// variable holding it). It must hold no control character (an
    /// embedded line break). `what` names it in errors; the secret never
    /// appears in one.
    pub(super) fn secret(
        &mut self,
        at: &str,
        base: &str,
        what: &str,
        value: Option<&Spanned<String>>,
        file: Option<&Spanned<PathBuf>>,
        env: Option<&Spanned<String>>,
    ) -> Option<Secret> {
        let given: Vec<(String, Range<usize>)> = [
            value.map(|t| (base.to_string(), t.span())),
            file.map(|t| (format!("{base}_file"), t.span())),
            env.map(|t| (format!("{base}_env"), t.span())),
        ]
        .into_iter()
        .flatten()
        .collect();
        if given.len() > 1 {
            self.problem(
                &format!("{at}.{}", given[1].0),
                given[1].1.clone(),
                &format!("give the {what} one way only: {base}, {base}_file or {base}_env"),
            );
        }
        let (field, span, text) = if let Some(t) = value {
            (base.to_string(), t.span(), t.get_ref().clone())
        } else if let Some(f) = file {
            let field = format!("{base}_file");
            let path = f.get_ref();
            match crate::files::read_bounded_string(path, crate::files::MAX_SECRET_BYTES) {
                Ok(text) => (field, f.span(), text.trim().to_string()),
                Err(error) => {
                    self.problem(&format!("{at}.{field}"), f.span(), &error.to_string());
                    return None;
                }
            }
        } else if let Some(var) = env {
            match std::env::var(var.get_ref()) {
                Ok(text) if !text.trim().is_empty() => {
                    (format!("{base}_env"), var.span(), text.trim().to_string())
                }
                _ => {
                    self.problem(
                        &format!("{at}.{base}_env"),
                        var.span(),
                        &format!(
                            "the environment variable {} is not set or empty; set it in the agent's environment",
                            var.get_ref()
                        ),
                    );
                    return None;
                }
            }
        } else {
            return None;
        };
        self.no_control(&format!("{at}.{field}"), span, what, &text)
            .then(|| Secret::new(text))
    }

    /// Reports each field given that the receiver's kind does not use, so a
    /// setting is never silently ignored.
    pub(super) fn unused_fields(
        &mut self,
        at: &str,
        kind: &str,
        fields: &[(&str, Option<Range<usize>>)],
    ) {
        for (name, span) in fields {
            if let Some(span) = span {
                self.problem(
                    &format!("{at}.{name}"),
                    span.clone(),
                    &format!("is not a setting of \"{kind}\" receivers; remove it"),
                );
            }
        }
    }
}

/// Whether `text` is an http:// or https:// URL with a host, without
/// whitespace or control characters.
pub(super) fn is_http_url(text: &str) -> bool {
    let rest = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"));
    matches!(rest, Some(rest) if !rest.is_empty()
        && !rest.starts_with('/')
        && !rest.contains(|c: char| c.is_whitespace() || c.is_control()))
}
