//! The generic webhook receiver: POSTs the outbox message as it is (the
//! Alertmanager webhook v4 shape, so existing receivers work) and says what
//! became of it.

use crate::outbox::OutboxMessage;

use super::http::{post_json, Auth};
use super::{Outcome, WebhookConfig};

/// POSTs `message` to the webhook (blocking: run it on a blocking thread).
/// Errors name the receiver's URL, never its token or headers.
pub fn send(config: &WebhookConfig, message: &OutboxMessage) -> Outcome {
    let body = match message.to_json() {
        Ok(body) => body,
        Err(e) => {
            return Outcome::Permanent(format!("the outbox message cannot be written as JSON: {e}"))
        }
    };
    let auth = config.bearer_token.clone().map(Auth::Bearer);
    post_json(
        &config.url,
        &config.headers,
        auth.as_ref(),
        config.timeout,
        &body,
    )
}
