//! The alert state machine (Prometheus semantics): inactive → pending →
//! firing → resolved, with `for`, `keep_firing_for` and hysteresis.

use std::time::{Duration, SystemTime};

use super::condition::{Condition, Direction};
use super::rule::{AlertState, Rule};

/// How long a resolved alert is kept in the state before it is forgotten
/// (Prometheus keeps resolved alerts for 15 minutes too).
pub const RESOLVED_RETENTION: Duration = Duration::from_secs(15 * 60);

/// One step of the state machine. `holds`: the condition is true; `stay`:
/// a firing alert's stay condition (the clear threshold not crossed, or the
/// condition itself without one).
pub(super) fn advance(
    from: AlertState,
    holds: bool,
    stay: bool,
    for_: Duration,
    keep_firing_for: Duration,
    now: SystemTime,
) -> AlertState {
    let elapsed = |since: SystemTime| now.duration_since(since).unwrap_or(Duration::ZERO);
    match from {
        AlertState::Inactive | AlertState::Resolved { .. } if holds => {
            if for_.is_zero() {
                AlertState::Firing {
                    since: now,
                    last_true: now,
                }
            } else {
                AlertState::Pending { since: now }
            }
        }
        AlertState::Inactive => AlertState::Inactive,
        AlertState::Resolved { at } => {
            if elapsed(at) >= RESOLVED_RETENTION {
                AlertState::Inactive
            } else {
                from
            }
        }
        AlertState::Pending { since } if holds => {
            if elapsed(since) >= for_ {
                AlertState::Firing {
                    since,
                    last_true: now,
                }
            } else {
                from
            }
        }
        AlertState::Pending { .. } => AlertState::Inactive,
        AlertState::Firing { since, .. } if stay => AlertState::Firing {
            since,
            last_true: now,
        },
        AlertState::Firing { last_true, .. } => {
            if !keep_firing_for.is_zero() && elapsed(last_true) < keep_firing_for {
                from
            } else {
                AlertState::Resolved { at: now }
            }
        }
    }
}

/// Whether a state change is reported: every change of kind except a
/// resolved alert being forgotten after [`RESOLVED_RETENTION`].
pub(super) fn is_transition(from: AlertState, to: AlertState) -> bool {
    from.as_str() != to.as_str()
        && !matches!(
            (from, to),
            (AlertState::Resolved { .. }, AlertState::Inactive)
        )
}

/// Whether a firing alert stays firing: with a clear threshold, until the
/// value crosses it; otherwise while the condition holds.
pub(super) fn stays(rule: &Rule, holds: bool, value: Option<f64>) -> bool {
    let (Some(clear), Condition::Compare { op, .. }) = (rule.clear, &rule.condition) else {
        return holds;
    };
    match (value, op.direction()) {
        (Some(v), Direction::Up) => v > clear,
        (Some(v), Direction::Down) => v < clear,
        (Some(_), Direction::Neither) => holds,
        (None, _) => false,
    }
}
