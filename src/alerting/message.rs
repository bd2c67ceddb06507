//! The outbox rows of planned messages: one [`OutboxMessage`] per planned
//! message, of one alert or of several grouped alerts (see
//! [`OutboxMessage::group`]).

use std::collections::BTreeMap;

use tracing::warn;

use crate::outbox::{Details, OutboxMessage};

use super::plan::Message;
use super::store::Outgoing;

/// The outbox rows for `messages`, whose links point at `external_url`;
/// each alert carries its details (by fingerprint).
pub fn outgoing(
    messages: &[Message],
    external_url: &str,
    details: &BTreeMap<String, Details>,
) -> Vec<Outgoing> {
    messages
        .iter()
        .filter_map(|m| {
            let singles: Vec<OutboxMessage> = m
                .notices
                .iter()
                .filter_map(|n| {
                    OutboxMessage::single(
                        &n.transition,
                        &m.receiver,
                        external_url,
                        details.get(&n.fingerprint).cloned(),
                    )
                })
                .collect();
            let fingerprints: Vec<&str> =
                m.notices.iter().map(|n| n.fingerprint.as_str()).collect();
            let message = OutboxMessage::group(singles)?;
            match message.to_json() {
                Ok(payload) => Some(Outgoing {
                    receiver: m.receiver.clone(),
                    fingerprint: fingerprints.join(","),
                    payload,
                }),
                Err(error) => {
                    warn!(receiver = %m.receiver, error = %error, "Cannot write a notification as JSON; it is left out.");
                    None
                }
            }
        })
        .collect()
}
