//! Which notifications to write after an evaluation: a pure function of the
//! alert state, the evaluation's transitions, the receivers' routes, what
//! mutes alerts, and what each receiver was already sent ([`Notified`]).
//!
//! - A firing alert that a receiver's route matches, not muted, and not yet
//!   sent to it: a firing notification. This covers a new alert, one that
//!   was silenced or inhibited when it fired and no longer is, and a
//!   receiver added since.
//! - Sent, still firing, and the receiver's `repeat_interval` passed since
//!   the last one: the firing notification again (muted alerts wait).
//! - Resolved, and the receiver was sent its firing: a resolved
//!   notification, even if the alert is muted now (a receiver that was told
//!   an alert fires is always told it ended, so no incident stays open).
//!   An alert that was never sent is never sent resolved.
//!
//! [`Notified`] changes only once the notifications are committed, so a
//! failed save or a crash plans the same notifications again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use crate::rules::{AlertState, EvalState, Transition};

use super::mute::Mutes;
use crate::routing::Destination;

/// What a receiver was last sent about one alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The alert's name (for people reading the table).
    pub alertname: String,
    /// When its firing was last sent (ms since the Unix epoch).
    pub last_ms: i64,
}

/// (receiver, alert fingerprint) → the last firing notification sent.
pub type Notified = BTreeMap<(String, String), Sent>;

/// Why a notification goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The alert fires and the receiver has not been told.
    Firing,
    /// The alert still fires and the repeat interval passed.
    Repeat,
    /// The alert resolved after the receiver was told it fires.
    Resolved,
}

/// One notification to write to the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// The receiver.
    pub receiver: String,
    /// The alert's fingerprint.
    pub fingerprint: String,
    /// Why.
    pub reason: Reason,
    /// The alert as a transition (the real one where this evaluation made
    /// it; otherwise built from the state), which the payload is made of.
    pub transition: Transition,
}

/// A change to [`Notified`], committed with the notifications.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The receiver was sent the alert's firing at `last_ms`.
    Sent {
        /// The receiver.
        receiver: String,
        /// The alert's fingerprint.
        fingerprint: String,
        /// What was sent.
        sent: Sent,
    },
    /// Nothing more to send about the alert (resolved sent, or the alert or
    /// receiver is gone).
    Forget {
        /// The receiver.
        receiver: String,
        /// The alert's fingerprint.
        fingerprint: String,
    },
}

/// Notifications and the bookkeeping that goes with them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// To write to the outbox.
    pub notices: Vec<Notice>,
    /// To apply to [`Notified`] (in the database, in the same transaction).
    pub changes: Vec<Change>,
}

impl Plan {
    #[cfg(test)]
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.notices.is_empty() && self.changes.is_empty()
    }
}

/// Applies committed changes.
pub fn apply(notified: &mut Notified, changes: &[Change]) {
    for change in changes {
        match change {
            Change::Sent {
                receiver,
                fingerprint,
                sent,
            } => {
                notified.insert((receiver.clone(), fingerprint.clone()), sent.clone());
            }
            Change::Forget {
                receiver,
                fingerprint,
            } => {
                notified.remove(&(receiver.clone(), fingerprint.clone()));
            }
        }
    }
}

/// Plans the notifications after an evaluation at `now` (see the module
/// documentation for the rules).
pub fn plan(
    state: &EvalState,
    transitions: &[Transition],
    destinations: &[Destination],
    mutes: &Mutes<'_>,
    notified: &Notified,
    now: SystemTime,
) -> Plan {
    let now_ms = crate::gpu::unix_ms(now);
    let mut plan = Plan::default();
    let mut live = BTreeSet::new();
    for (key, alert) in &state.alerts {
        let fingerprint = crate::rules::fingerprint(&alert.labels);
        let as_transition = || {
            transitions
                .iter()
                .find(|t| t.key == *key && t.to == alert.state)
                .cloned()
                .unwrap_or_else(|| Transition {
                    key: key.clone(),
                    from: alert.state,
                    to: alert.state,
                    at: now,
                    value: alert.value,
                    labels: alert.labels.clone(),
                    annotations: alert.annotations.clone(),
                })
        };
        match alert.state {
            AlertState::Firing { .. } => {
                live.insert(fingerprint.clone());
                if mutes.of(key, alert).is_muted() {
                    continue;
                }
                for d in destinations {
                    if !d.route.matches(&alert.labels) {
                        continue;
                    }
                    let reason = match notified.get(&(d.name.clone(), fingerprint.clone())) {
                        None => Reason::Firing,
                        Some(sent)
                            if d.route.repeat_interval.is_some_and(|every| {
                                now_ms - sent.last_ms >= every.as_millis() as i64
                            }) =>
                        {
                            Reason::Repeat
                        }
                        Some(_) => continue,
                    };
                    plan.notices.push(Notice {
                        receiver: d.name.clone(),
                        fingerprint: fingerprint.clone(),
                        reason,
                        transition: as_transition(),
                    });
                    plan.changes.push(Change::Sent {
                        receiver: d.name.clone(),
                        fingerprint: fingerprint.clone(),
                        sent: Sent {
                            alertname: key.rule.clone(),
                            last_ms: now_ms,
                        },
                    });
                }
            }
            AlertState::Resolved { .. } => {
                for d in destinations {
                    if notified.contains_key(&(d.name.clone(), fingerprint.clone())) {
                        plan.notices.push(Notice {
                            receiver: d.name.clone(),
                            fingerprint: fingerprint.clone(),
                            reason: Reason::Resolved,
                            transition: as_transition(),
                        });
                        plan.changes.push(Change::Forget {
                            receiver: d.name.clone(),
                            fingerprint: fingerprint.clone(),
                        });
                    }
                }
            }
            AlertState::Pending { .. } | AlertState::Inactive => {}
        }
    }
    // Bookkeeping for alerts that are gone, and receivers no longer
    // configured.
    for (receiver, fingerprint) in notified.keys() {
        let resolved_now = plan.changes.iter().any(|c| {
            matches!(c, Change::Forget { receiver: r, fingerprint: f } if r == receiver && f == fingerprint)
        });
        if resolved_now {
            continue;
        }
        if !live.contains(fingerprint) || !destinations.iter().any(|d| &d.name == receiver) {
            plan.changes.push(Change::Forget {
                receiver: receiver.clone(),
                fingerprint: fingerprint.clone(),
            });
        }
    }
    plan
}

/// One outbox message: one notice, or several new firing alerts of the node
/// grouped for a receiver with a `group_wait`.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The receiver.
    pub receiver: String,
    /// The alerts in it (at least one).
    pub notices: Vec<Notice>,
}

/// Open groups: receiver → when its wait ends (ms since the Unix epoch).
pub type Groups = BTreeMap<String, i64>;

/// Turns a plan into messages. For a receiver with a `group_wait`, new
/// firing notices are held back (their bookkeeping too, so the next
/// evaluation plans them again) until the wait that the first of them
/// opened is over; then all that are due go out in one message. Repeats and
/// resolved notices go out at once, one per message. Nothing is held in
/// memory but the deadline: a restart plans the held alerts again.
pub fn group(
    plan: Plan,
    destinations: &[Destination],
    groups: &mut Groups,
    now_ms: i64,
) -> (Vec<Message>, Vec<Change>) {
    let Plan {
        notices,
        mut changes,
    } = plan;
    let mut messages = Vec::new();
    let mut grouped: BTreeMap<String, Vec<Notice>> = BTreeMap::new();
    for notice in notices {
        let wait = destinations
            .iter()
            .find(|d| d.name == notice.receiver)
            .map_or(0, |d| d.route.group_wait.as_millis() as i64);
        if notice.reason == Reason::Firing && wait > 0 {
            grouped
                .entry(notice.receiver.clone())
                .or_default()
                .push(notice);
        } else {
            messages.push(Message {
                receiver: notice.receiver.clone(),
                notices: vec![notice],
            });
        }
    }
    groups.retain(|receiver, _| grouped.contains_key(receiver));
    for (receiver, held) in grouped {
        let wait = destinations
            .iter()
            .find(|d| d.name == receiver)
            .map_or(0, |d| d.route.group_wait.as_millis() as i64);
        let deadline = *groups.entry(receiver.clone()).or_insert(now_ms + wait);
        if now_ms < deadline {
            changes.retain(|c| {
                !matches!(c, Change::Sent { receiver: r, fingerprint: f, .. }
                    if *r == receiver && held.iter().any(|n| n.fingerprint == *f))
            });
        } else {
            groups.remove(&receiver);
            messages.push(Message {
                receiver,
                notices: held,
            });
        }
    }
    (messages, changes)
}

#[cfg(test)]
mod tests;
