//! Notifications: the outbox and its dispatchers.
//!
//! Each alert transition to firing or resolved is written with one outbox
//! row per receiver, in the transaction that stores the transition
//! ([`crate::alerting`]). A dispatcher per receiver sends its rows oldest
//! first and deletes a row only once the receiver took it (2xx); a
//! transient failure (408, 429, 5xx, network error, timeout) pushes the row
//! back by a jittered exponential [`Backoff`]; any other answer marks it
//! failed, kept with the reason. Delivery is at least once, each message
//! carrying the alert's stable fingerprint as its dedup key.
//!
//! Receivers built: the generic webhook (Alertmanager webhook v4 body) and
//! Alertmanager push (its v2 API, with periodic re-sends while firing) and
//! email ([`email`]). Every outbox row holds the same neutral message, an
//! [`OutboxMessage`] ([`crate::outbox`]: the v4 JSON with extra `details`:
//! value, threshold, GPU name, the reading's recent history) that each
//! receiver renders from.

pub mod alertmanager;
mod backoff;
pub mod cleanup;
mod dispatcher;
pub mod email;
mod firing;
pub mod http;
pub mod redact;
pub mod webhook;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::families::{unit, Family};
use crate::gpu::now_ms;
use crate::outbox::OutboxMessage;

pub use crate::outbox::store as outbox;
pub use alertmanager::AlertmanagerConfig;
pub use backoff::{random_unit, Backoff};
pub use dispatcher::run;
pub use firing::{FiringAlerts, FiringError};
pub use http::Auth;
pub use redact::Redactor;

/// What one attempt to send came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The receiver took it: the row goes.
    Delivered,
    /// A transient failure (why): try again later.
    Retry(String),
    /// A permanent failure (why): never sent again.
    Permanent(String),
}

/// A secret (bearer token): never shown by `Debug`, logs or errors.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(text: String) -> Secret {
        Secret(text)
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A `[[receivers]]` entry of type "webhook".
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookConfig {
    /// Where to POST.
    pub url: String,
    /// Extra request headers.
    pub headers: BTreeMap<String, String>,
    /// `Authorization: Bearer ...`, from the config, a file or the
    /// environment.
    pub bearer_token: Option<Secret>,
    /// Time limit of one request.
    pub timeout: Duration,
}

/// One receiver.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiverConfig {
    /// Its name (outbox rows and metrics carry it).
    pub name: String,
    /// What kind of receiver it is, with that kind's settings.
    pub kind: ReceiverKind,
    /// Retry delays.
    pub backoff: Backoff,
    /// Which alerts it gets, how often they repeat, how long it groups.
    pub route: crate::routing::Route,
}

/// The kinds of receiver, each with its settings.
///
/// Every outbox row holds the same neutral message (the Alertmanager
/// webhook v4 shape, an [`OutboxMessage`]); each kind renders what it sends
/// from it. Adding a kind means a module with a blocking
/// `send(&Config, &OutboxMessage) -> Outcome`, a variant here and its arm in
/// [`ReceiverKind::send`] (plus its `[[receivers]]` validation in
/// `crate::config`).
#[derive(Debug, Clone, PartialEq)]
pub enum ReceiverKind {
    /// `type = "webhook"`: POSTs the v4 JSON as it is.
    Webhook(WebhookConfig),
    /// `type = "alertmanager"`: pushes postable alerts to Alertmanager's
    /// API, and re-sends the firing ones periodically.
    Alertmanager(AlertmanagerConfig),
    /// `type = "email"`: one email per message through an SMTP smarthost.
    Email(email::EmailConfig),
}

impl ReceiverKind {
    /// Sends one outbox message and says what
    /// became of it. Blocking: the dispatcher runs it on a blocking thread.
    pub fn send(&self, message: &OutboxMessage) -> Outcome {
        match self {
            ReceiverKind::Webhook(config) => webhook::send(config, message),
            ReceiverKind::Alertmanager(config) => alertmanager::send(config, message),
            ReceiverKind::Email(config) => email::send_message(config, message),
        }
    }
}

/// One receiver's counts, for the metrics.
#[derive(Debug, Default)]
pub struct ReceiverStats {
    /// The receiver.
    pub name: String,
    delivered: AtomicU64,
    retried: AtomicU64,
    failed: AtomicU64,
    depth: AtomicI64,
    /// `created_ms` of the oldest pending row; 0 when none.
    oldest_ms: AtomicI64,
}

impl ReceiverStats {
    /// Zeroed counts for `name`.
    pub fn new(name: &str) -> ReceiverStats {
        ReceiverStats {
            name: name.to_string(),
            ..ReceiverStats::default()
        }
    }

    fn count(&self, outcome: &Outcome) {
        let counter = match outcome {
            Outcome::Delivered => &self.delivered,
            Outcome::Retry(_) => &self.retried,
            Outcome::Permanent(_) => &self.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn set_depth(&self, depth: i64, oldest_ms: Option<i64>) {
        self.depth.store(depth, Ordering::Relaxed);
        self.oldest_ms
            .store(oldest_ms.unwrap_or(0), Ordering::Relaxed);
    }
}

/// `gpuwatch_notifications_total`, `gpuwatch_outbox_depth` and
/// `gpuwatch_outbox_oldest_age_seconds`, per receiver.
#[derive(Debug)]
pub struct NotifyCollector(pub Vec<Arc<ReceiverStats>>);

impl Collector for NotifyCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let mut sent = Family::counter(
            "notifications",
            "Attempts to send a notification, by receiver and outcome (delivered, retry, failed).",
            None,
        );
        let mut depth = Family::gauge(
            "outbox_depth",
            "Notifications waiting in the outbox for the receiver (failed ones not counted).",
            None,
        );
        let mut age = Family::gauge(
            "outbox_oldest_age",
            "Age of the receiver's oldest undelivered notification (0 when none waits).",
            unit("seconds"),
        );
        let now_ms = now_ms();
        for s in &self.0 {
            let name = || ("receiver", Cow::Owned(s.name.clone()));
            for (outcome, counter) in [
                ("delivered", &s.delivered),
                ("retry", &s.retried),
                ("failed", &s.failed),
            ] {
                sent.push(
                    vec![name(), ("outcome", Cow::Borrowed(outcome))],
                    counter.load(Ordering::Relaxed) as f64,
                );
            }
            depth.push(vec![name()], s.depth.load(Ordering::Relaxed) as f64);
            let oldest = s.oldest_ms.load(Ordering::Relaxed);
            let seconds = if oldest == 0 {
                0.0
            } else {
                (now_ms - oldest).max(0) as f64 / 1000.0
            };
            age.push(vec![name()], seconds);
        }
        sent.encode(&mut encoder)?;
        depth.encode(&mut encoder)?;
        age.encode(&mut encoder)
    }
}
