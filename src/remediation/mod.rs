//! Acting on health: a task that reads the health verdict of every
//! snapshot and takes a failing node out of scheduling — drains it in
//! Slurm — and puts it back when it is healthy again; dry-run by default.
//!
//! - [`judge`]: the triggers on a snapshot (the verdict every reader uses,
//!   classed by action and filtered by `[remediation]`);
//! - [`policy`]: pure decisions from remembered state, triggers and time,
//!   and whether the node as the scheduler shows it may be touched;
//! - [`scheduler`]: the scheduler trait and its errors; [`slurm`]: the real
//!   client (`scontrol`, `sinfo`);
//! - [`record`]: log, metrics, history events and notifications.
//!
//! The task never holds up the sampler: it reads the latest snapshot from
//! the watch channel, and a slow `scontrol` only delays its own next look.

pub mod judge;
pub mod policy;
pub mod record;
pub mod scheduler;
pub mod slurm;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::config::{RemediationConfig, RemediationMode};
use crate::health::escalation::EscalationSource;
use crate::notify::{random_unit, Backoff};
use crate::sampler::SnapshotReceiver;

use judge::Trigger;
use policy::{Drained, Intent, PolicyState, Settled, Step, Timing};
use record::{Decision, Outcome, RemediationStats, Sinks};
use scheduler::{census, Scheduler, SchedulerError};

/// The remediation of one node: the policy's state and the scheduler.
pub struct Remediation<S> {
    scheduler: S,
    config: RemediationConfig,
    timing: Timing,
    backoff: Backoff,
    state: PolicyState,
    sinks: Sinks,
    stats: Arc<RemediationStats>,
    /// Failed or refused attempts in a row (0: none).
    attempts: u32,
    /// Not before this time is a failed or refused attempt tried again.
    next_try: Option<SystemTime>,
    /// Whether a drain by gpuwatch from before a restart was looked for.
    adopted: bool,
}

impl<S: Scheduler> Remediation<S> {
    /// Remediation of `scheduler`'s node as `config` asks (mode dry-run or
    /// on), recording into `sinks` and `stats`.
    pub fn new(
        scheduler: S,
        config: RemediationConfig,
        sinks: Sinks,
        stats: Arc<RemediationStats>,
    ) -> Remediation<S> {
        // The configuration checks 100 ms <= retry_min <= retry_max.
        let backoff = Backoff::new(config.retry_min, config.retry_max.max(config.retry_min))
            .unwrap_or_else(|_| unreachable!("validated: 0 < retry_min <= retry_max"));
        Remediation {
            scheduler,
            timing: Timing::of(&config),
            config,
            backoff,
            state: PolicyState::default(),
            sinks,
            stats,
            attempts: 0,
            next_try: None,
            adopted: false,
        }
    }

    /// The policy's state (tests).
    pub fn state(&self) -> &PolicyState {
        &self.state
    }

    fn dry(&self) -> bool {
        self.config.mode != RemediationMode::On
    }

    /// Takes in one snapshot's triggers at `now` and acts on them.
    pub async fn tick(&mut self, triggers: &[Trigger], now: SystemTime) {
        if self.next_try.is_some_and(|t| now < t) {
            policy::observe(&mut self.state, triggers, now);
            self.show_state(triggers);
            return;
        }
        if !self.adopted {
            self.adopt(now).await;
        }
        policy::observe(&mut self.state, triggers, now);
        match policy::decide(&self.state, triggers, now, &self.timing) {
            Some(intent @ Intent::Drain { .. }) => self.drain(intent, now).await,
            Some(Intent::Resume) => self.resume(now).await,
            // Still looking for an earlier drain: keep its retry time.
            None if !self.adopted => {}
            None => self.settle(),
        }
        self.show_state(triggers);
    }

    fn show_state(&self, triggers: &[Trigger]) {
        self.stats
            .set_state(match (&self.state.drained, triggers.is_empty()) {
                (Some(_), _) => "drained",
                (None, false) => "failing",
                (None, true) => "ok",
            });
    }

    /// Nothing to do: any streak of failures is over.
    fn settle(&mut self) {
        self.attempts = 0;
        self.next_try = None;
    }

    /// After a restart: a drain by gpuwatch still in place is gpuwatch's to
    /// resume (mode on only: a dry run drained nothing).
    async fn adopt(&mut self, now: SystemTime) {
        if self.dry() {
            self.adopted = true;
            return;
        }
        match self
            .scheduler
            .list()
            .await
            .and_then(|l| census(self.scheduler.node(), &l))
        {
            Ok(c) => {
                self.adopted = true;
                if c.view.ours() {
                    let reason = c.view.reason.unwrap_or_default();
                    info!(node = self.scheduler.node(), reason = %reason, "The node is drained by gpuwatch from before; gpuwatch resumes it when its GPUs are healthy.");
                    self.state.drained = Some(Drained {
                        flapping: reason.contains(policy::FLAPPING),
                        reason,
                        trigger: None,
                    });
                }
            }
            Err(error) => {
                debug!(error = %error, "Cannot look for an earlier drain by gpuwatch yet; trying again later.");
                self.next_try = Some(now + self.config.retry_min);
            }
        }
    }

    fn retry_later(&mut self, now: SystemTime) {
        self.attempts = self.attempts.saturating_add(1);
        self.next_try = Some(now + self.backoff.delay(self.attempts, random_unit()));
    }

    fn decision(
        &self,
        action: &'static str,
        outcome: Outcome,
        trigger: Option<Trigger>,
        detail: String,
        now: SystemTime,
    ) -> Decision {
        Decision {
            at: now,
            action,
            outcome,
            node: self.scheduler.node().to_string(),
            trigger,
            detail,
            notify: !matches!(outcome, Outcome::LeftAlone),
        }
    }

    /// A failed or refused attempt: recorded in full the first time of a
    /// streak, counted and logged after; tried again after the backoff.
    async fn failed(&mut self, decision: Decision, now: SystemTime) {
        if self.attempts == 0 {
            self.sinks.record(&self.stats, &decision).await;
        } else {
            self.stats.count(&decision);
            warn!(action = decision.action, result = decision.outcome.as_str(), node = %decision.node, attempt = self.attempts + 1, "Remediation: {}.", decision.text());
        }
        self.retry_later(now);
        if let Some(next) = self.next_try {
            debug!(retry_in = ?next.duration_since(now).unwrap_or_default(), "Remediation tries again later.");
        }
    }

    async fn drain(&mut self, intent: Intent, now: SystemTime) {
        let Intent::Drain {
            reason,
            trigger,
            flapping,
        } = intent
        else {
            return;
        };
        let listed = self.scheduler.list().await;
        let census = listed.and_then(|l| census(self.scheduler.node(), &l));
        let census = match (census, self.dry()) {
            (Ok(c), _) => c,
            (Err(error), true) => {
                // A dry run on a node whose scheduler cannot be asked still
                // says what it would do.
                let d = self.decision(
                    "drain",
                    Outcome::Would,
                    Some(trigger.clone()),
                    format!("{reason} (the node's state was not read: {error})"),
                    now,
                );
                self.sinks.record(&self.stats, &d).await;
                self.state.drained = Some(Drained {
                    reason,
                    trigger: Some(trigger),
                    flapping,
                });
                self.settle();
                return;
            }
            (Err(error), false) => {
                let d = self.decision(
                    "drain",
                    Outcome::Error,
                    Some(trigger),
                    error_detail(&error),
                    now,
                );
                return self.failed(d, now).await;
            }
        };
        let max = self
            .config
            .slurm
            .max_drained_nodes
            .unwrap_or_else(|| policy::default_max_drained(census.nodes));
        self.stats.set_drained_nodes(census.drained_elsewhere);
        match policy::plan_drain(&census.view, census.drained_elsewhere, max) {
            Step::AlreadyOurs => {
                info!(
                    node = self.scheduler.node(),
                    "The node is drained by gpuwatch already."
                );
                let reason = census.view.reason.unwrap_or(reason);
                self.state.drained = Some(Drained {
                    flapping: reason.contains(policy::FLAPPING),
                    reason,
                    trigger: Some(trigger),
                });
                self.settle();
            }
            Step::LeaveAlone { why } => {
                let d = self.decision("drain", Outcome::LeftAlone, Some(trigger), format!("it is {why}, set by a person or another tool; gpuwatch neither overwrites nor resumes it"), now);
                self.sinks.record(&self.stats, &d).await;
                self.state.settled = Some(Settled::LeftAlone);
                self.settle();
            }
            Step::Refuse { drained, max } => {
                let dry = if self.dry() { "dry-run: " } else { "" };
                let d = self.decision("drain", Outcome::Refused, Some(trigger), format!("{dry}{drained} other node(s) are drained by gpuwatch, at most {max} may be ([remediation.slurm] max_drained_nodes); look at why so many fail (a driver update?) before draining more"), now);
                self.failed(d, now).await;
            }
            Step::Drain => {
                // A dry run records what it would do; only "on" asks Slurm.
                let drained = if self.dry() {
                    Ok(Outcome::Would)
                } else {
                    self.scheduler.drain(&reason).await.map(|()| Outcome::Done)
                };
                match drained {
                    Ok(outcome) => {
                        let d = self.decision(
                            "drain",
                            outcome,
                            Some(trigger.clone()),
                            reason.clone(),
                            now,
                        );
                        self.sinks.record(&self.stats, &d).await;
                        self.state.drained = Some(Drained {
                            reason,
                            trigger: Some(trigger),
                            flapping,
                        });
                        self.settle();
                    }
                    Err(error) => {
                        let d = self.decision(
                            "drain",
                            Outcome::Error,
                            Some(trigger),
                            error_detail(&error),
                            now,
                        );
                        self.failed(d, now).await;
                    }
                }
            }
            Step::Resume | Step::Forget { .. } => {}
        }
    }

    async fn resume(&mut self, now: SystemTime) {
        let trigger = self.state.drained.as_ref().and_then(|d| d.trigger.clone());
        let healthy = format!(
            "its GPUs have been healthy for {}",
            humantime::format_duration(self.timing.resume_after)
        );
        if self.dry() {
            let d = self.decision("resume", Outcome::Would, trigger, healthy, now);
            self.sinks.record(&self.stats, &d).await;
            self.resumed(now);
            return;
        }
        let view = match self
            .scheduler
            .list()
            .await
            .and_then(|l| census(self.scheduler.node(), &l))
        {
            Ok(c) => c.view,
            Err(error) => {
                let d = self.decision("resume", Outcome::Error, trigger, error_detail(&error), now);
                return self.failed(d, now).await;
            }
        };
        match policy::plan_resume(&view) {
            Step::Resume => match self.scheduler.resume().await {
                Ok(()) => {
                    let d = self.decision("resume", Outcome::Done, trigger, healthy, now);
                    self.sinks.record(&self.stats, &d).await;
                    self.resumed(now);
                }
                Err(error) => {
                    let d =
                        self.decision("resume", Outcome::Error, trigger, error_detail(&error), now);
                    self.failed(d, now).await;
                }
            },
            Step::Forget { why } => {
                let d = self.decision("resume", Outcome::LeftAlone, trigger, format!("gpuwatch's drain is gone (the node is {why}); someone else changed it, so gpuwatch does not touch it"), now);
                self.sinks.record(&self.stats, &d).await;
                self.state.drained = None;
                self.settle();
            }
            _ => {}
        }
    }

    fn resumed(&mut self, now: SystemTime) {
        self.state.drained = None;
        self.state.last_resume = Some(now);
        self.settle();
    }
}

fn error_detail(error: &SchedulerError) -> String {
    format!("{error}; the decision is kept and tried again with backoff")
}

/// Runs `remediation` on every snapshot until `shutdown` turns true.
pub async fn run<S: Scheduler>(
    mut remediation: Remediation<S>,
    mut snapshots: SnapshotReceiver,
    escalations: EscalationSource,
    mut shutdown: watch::Receiver<bool>,
) {
    info!(
        mode = remediation.config.mode.as_str(),
        node = remediation.scheduler.node(),
        "Acting on GPU health: {}.",
        if remediation.dry() {
            "dry run, decisions are recorded (gpuwatch events --kind remediation) and nothing is changed in Slurm; set [remediation] mode = \"on\" to drain"
        } else {
            "on, a node whose GPUs fail is drained in Slurm"
        }
    );
    loop {
        tokio::select! {
            changed = snapshots.changed() => if changed.is_err() { return },
            _ = shutdown.changed() => return,
        }
        let Some(snapshot) = snapshots.borrow_and_update().clone() else {
            continue;
        };
        let now = SystemTime::now();
        let triggers = judge::triggers(&snapshot, &escalations.current(), &remediation.config);
        tokio::select! {
            () = remediation.tick(&triggers, now) => {}
            _ = shutdown.changed() => return,
        }
    }
}
