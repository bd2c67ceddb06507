//! The scheduler as the remediation task sees it: a small trait, so the
//! task is tested with an in-memory scheduler and the real client
//! ([`super::slurm`]) against a real Slurm.

use std::time::Duration;

use super::policy::NodeView;

/// Why a scheduler call failed; each says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulerError {
    /// The program is not there or cannot be run.
    #[error("cannot run {program}: {error}; install Slurm's client commands (Debian: slurm-client) or set [remediation.slurm] scontrol and sinfo to their paths")]
    Missing {
        /// The program.
        program: String,
        /// Why it did not start.
        error: String,
    },
    /// It did not finish in time.
    #[error("{program} took longer than {timeout:?} and was stopped; check that slurmctld is up and reachable, or raise [remediation.slurm] timeout")]
    Timeout {
        /// The program.
        program: String,
        /// The limit.
        timeout: Duration,
    },
    /// slurmctld cannot be reached.
    #[error("{program} cannot reach slurmctld ({stderr}); check that slurmctld runs and that SLURM_CONF ([remediation.slurm] slurm_conf) names the cluster's slurm.conf")]
    Unreachable {
        /// The program.
        program: String,
        /// What it said.
        stderr: String,
    },
    /// Slurm refused: the agent's user may not change nodes.
    #[error("{program} was refused ({stderr}); run gpuwatch as root or as a Slurm operator (sacctmgr modify user NAME set AdminLevel=Operator)")]
    Permission {
        /// The program.
        program: String,
        /// What it said.
        stderr: String,
    },
    /// Slurm does not know the node.
    #[error("Slurm does not list the node \"{node}\"; set [remediation.slurm] node to the name `sinfo -N` shows for this host")]
    UnknownNode {
        /// The name asked for.
        node: String,
    },
    /// Any other failure.
    #[error("{program} failed ({status}): {stderr}; run it by hand to see why")]
    Failed {
        /// The program and arguments.
        program: String,
        /// Its exit status.
        status: String,
        /// What it said.
        stderr: String,
    },
}

/// One node of the cluster, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its name.
    pub name: String,
    /// Its state and reason.
    pub view: NodeView,
}

/// A scheduler whose nodes gpuwatch drains and resumes.
#[allow(async_fn_in_trait)]
pub trait Scheduler {
    /// This node's name in the scheduler.
    fn node(&self) -> &str;
    /// Every node of the cluster, each once.
    async fn list(&self) -> Result<Vec<Listed>, SchedulerError>;
    /// Drains this node with `reason` (running jobs finish, no new ones).
    async fn drain(&self, reason: &str) -> Result<(), SchedulerError>;
    /// Returns this node to service.
    async fn resume(&self) -> Result<(), SchedulerError>;
}

/// What a listing says about this node and the breaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Census {
    /// This node.
    pub view: NodeView,
    /// Nodes drained by gpuwatch, this one left out.
    pub drained_elsewhere: u64,
    /// Nodes listed.
    pub nodes: u64,
}

/// This node's view and the breaker's count from `listed`.
pub fn census(node: &str, listed: &[Listed]) -> Result<Census, SchedulerError> {
    let view = listed
        .iter()
        .find(|l| l.name == node)
        .map(|l| l.view.clone())
        .ok_or_else(|| SchedulerError::UnknownNode {
            node: node.to_string(),
        })?;
    Ok(Census {
        view,
        drained_elsewhere: listed
            .iter()
            .filter(|l| l.name != node && l.view.ours())
            .count() as u64,
        nodes: listed.len() as u64,
    })
}
