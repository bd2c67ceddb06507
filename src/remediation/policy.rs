//! The remediation policy, pure: from what it remembers, this snapshot's
//! triggers and the time, what to do next ([`decide`]); from the node as
//! the scheduler shows it, whether that may be done ([`plan_drain`],
//! [`plan_resume`]). No scheduler, no clock: tested with plain values.
//!
//! Damping, so a flapping signal does not drain and resume in a loop:
//! - a trigger must hold for `act_after` (default 0 s: a GPU that needs a
//!   reset should take no new job at once) before the node is drained;
//! - the node must be healthy without a break for `resume_after` (default
//!   5 m) before gpuwatch resumes it;
//! - a node that fails again within `flap_window` (default 1 h) of being
//!   resumed by gpuwatch is drained with "flapping" in its reason and is
//!   not resumed by gpuwatch again: a person looks at it first.

use std::time::{Duration, SystemTime};

use crate::config::remediation::REASON_PREFIX;
use crate::config::RemediationConfig;

use super::judge::Trigger;

/// The longest drain reason written (Slurm keeps reasons short; a person
/// reads them in `sinfo -R`).
pub const MAX_REASON: usize = 200;

/// The marker of a drain gpuwatch will not undo itself.
pub const FLAPPING: &str = "[flapping: resume by hand]";

/// The policy's timing, from `[remediation]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// A trigger holds this long before the drain.
    pub act_after: Duration,
    /// Whether gpuwatch resumes what it drained.
    pub resume: bool,
    /// Healthy this long before the resume.
    pub resume_after: Duration,
    /// Failing again this soon after a resume: flapping.
    pub flap_window: Duration,
}

impl Timing {
    /// The timing `config` asks for.
    pub fn of(config: &RemediationConfig) -> Timing {
        Timing {
            act_after: config.act_after,
            resume: config.resume,
            resume_after: config.resume_after,
            flap_window: config.flap_window,
        }
    }
}

/// What gpuwatch drained (or, in a dry run, would have drained).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drained {
    /// The reason written (or that would have been).
    pub reason: String,
    /// The trigger behind it.
    pub trigger: Option<Trigger>,
    /// Whether gpuwatch leaves the resume to a person.
    pub flapping: bool,
}

/// How an episode of failing ended up without a drain by gpuwatch, so it is
/// recorded once, not on every snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The node was drained or down by someone else: not touched.
    LeftAlone,
}

/// What the policy remembers between snapshots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyState {
    /// Since when the node has had triggers without a break.
    pub failing_since: Option<SystemTime>,
    /// Since when it has had none.
    pub healthy_since: Option<SystemTime>,
    /// What gpuwatch drained and has not resumed.
    pub drained: Option<Drained>,
    /// When gpuwatch last resumed the node.
    pub last_resume: Option<SystemTime>,
    /// This episode's outcome, when it needs no more attempts.
    pub settled: Option<Settled>,
}

/// What the policy asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    /// Drain the node with `reason`.
    Drain {
        /// The reason to write (sanitised, with gpuwatch's prefix).
        reason: String,
        /// The worst trigger (the first).
        trigger: Trigger,
        /// Failing again soon after a resume.
        flapping: bool,
    },
    /// Resume the node gpuwatch drained.
    Resume,
}

impl Intent {
    /// `drain` or `resume`, for the metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Intent::Drain { .. } => "drain",
            Intent::Resume => "resume",
        }
    }
}

fn held(since: Option<SystemTime>, now: SystemTime, span: Duration) -> bool {
    since.is_some_and(|s| now.duration_since(s).unwrap_or_default() >= span)
}

/// Takes in this snapshot's triggers: starts or ends the failing and
/// healthy spells; a healthy snapshot ends the episode (what was settled
/// in it is forgotten).
pub fn observe(state: &mut PolicyState, triggers: &[Trigger], now: SystemTime) {
    if triggers.is_empty() {
        state.failing_since = None;
        state.healthy_since.get_or_insert(now);
        state.settled = None;
    } else {
        state.healthy_since = None;
        state.failing_since.get_or_insert(now);
    }
}

/// What to do now, if anything (call [`observe`] first).
pub fn decide(
    state: &PolicyState,
    triggers: &[Trigger],
    now: SystemTime,
    timing: &Timing,
) -> Option<Intent> {
    if let Some(first) = triggers.first() {
        if state.drained.is_some()
            || state.settled.is_some()
            || !held(state.failing_since, now, timing.act_after)
        {
            return None;
        }
        let flapping = state
            .last_resume
            .is_some_and(|r| now.duration_since(r).unwrap_or_default() <= timing.flap_window);
        return Some(Intent::Drain {
            reason: reason(triggers, flapping),
            trigger: first.clone(),
            flapping,
        });
    }
    let drained = state.drained.as_ref()?;
    (timing.resume && !drained.flapping && held(state.healthy_since, now, timing.resume_after))
        .then_some(Intent::Resume)
}

/// The drain reason: `gpuwatch: GPU 3 GPU-… needs RESET_GPU (text)`, the
/// number of further triggers, the flapping marker; printable ASCII only,
/// at most [`MAX_REASON`] characters.
pub fn reason(triggers: &[Trigger], flapping: bool) -> String {
    let Some(first) = triggers.first() else {
        return REASON_PREFIX.to_string();
    };
    let gpu = match first.gpu {
        Some(index) => format!("GPU {index} {}", first.uuid),
        None => format!("GPU at {}", first.uuid),
    };
    let more = match triggers.len() - 1 {
        0 => String::new(),
        n => format!(" +{n} more"),
    };
    let flap = if flapping {
        format!(" {FLAPPING}")
    } else {
        String::new()
    };
    let tail = format!("{more}{flap}");
    let head = sanitise(&format!(
        "{REASON_PREFIX} {gpu} needs {} ({})",
        first.action, first.text
    ));
    let room = MAX_REASON.saturating_sub(tail.len());
    let head = if head.len() > room {
        format!("{}...", &head[..room.saturating_sub(3)])
    } else {
        head
    };
    format!("{head}{tail}")
}

/// `text` as printable ASCII without quotes or `|` (sinfo's separator):
/// quotes are dropped, `|` becomes `/`, anything else unprintable `?`, runs
/// of white space one space.
pub fn sanitise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let c = match c {
            '"' | '\'' | '`' => continue,
            '|' => '/',
            c if c.is_whitespace() => ' ',
            c if c.is_ascii_graphic() => c,
            _ => '?',
        };
        if c == ' ' && (out.is_empty() || out.ends_with(' ')) {
            continue;
        }
        out.push(c);
    }
    out.trim_end().to_string()
}

/// The node as the scheduler shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// Its state words, lower case (`idle`, `drained`, `draining`, `down*`,
    /// `mixed+drain`, ...).
    pub state: String,
    /// The reason set with a drain or down, if any.
    pub reason: Option<String>,
}

impl NodeView {
    /// Whether the node takes no new work: drained, draining, down, failing.
    pub fn out_of_service(&self) -> bool {
        ["drain", "down", "fail", "maint", "reboot"]
            .iter()
            .any(|w| self.state.contains(w))
    }

    /// Whether gpuwatch took it out (its reason carries the prefix).
    pub fn ours(&self) -> bool {
        self.out_of_service()
            && self
                .reason
                .as_deref()
                .is_some_and(|r| r.starts_with(REASON_PREFIX))
    }
}

/// What to do about a drain, given the node's view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Drain it.
    Drain,
    /// gpuwatch's drain is in place already (a restart, another tick).
    AlreadyOurs,
    /// Someone else drained or downed it: not touched.
    LeaveAlone {
        /// Its state and reason, for the record.
        why: String,
    },
    /// The circuit breaker: too many nodes drained by gpuwatch already.
    Refuse {
        /// Nodes drained by gpuwatch elsewhere.
        drained: u64,
        /// The most allowed.
        max: u64,
    },
    /// Resume it.
    Resume,
    /// gpuwatch's drain is gone (a person resumed it or changed the
    /// reason): gpuwatch forgets it and does not touch the node.
    Forget {
        /// Its state and reason, for the record.
        why: String,
    },
}

fn describe(view: &NodeView) -> String {
    match &view.reason {
        Some(r) => format!("{} with reason \"{r}\"", view.state),
        None => view.state.clone(),
    }
}

/// Whether to drain, given the node's view and, when known, how many other
/// nodes gpuwatch has drained (`None`: the breaker was not asked yet).
pub fn plan_drain(view: &NodeView, drained_elsewhere: u64, max: u64) -> Step {
    if view.ours() {
        Step::AlreadyOurs
    } else if view.out_of_service() {
        Step::LeaveAlone {
            why: describe(view),
        }
    } else if drained_elsewhere >= max {
        Step::Refuse {
            drained: drained_elsewhere,
            max,
        }
    } else {
        Step::Drain
    }
}

/// Whether to resume: only gpuwatch's own drain.
pub fn plan_resume(view: &NodeView) -> Step {
    if view.ours() {
        Step::Resume
    } else {
        Step::Forget {
            why: describe(view),
        }
    }
}

/// The breaker's default: 10 % of `nodes`, at least 1.
pub fn default_max_drained(nodes: u64) -> u64 {
    (nodes / 10).max(1)
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
