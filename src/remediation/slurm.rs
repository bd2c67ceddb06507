//! The real Slurm client: `scontrol` and `sinfo` as child processes with
//! a fixed argument list (no shell; the reason is one argument), each with
//! a time limit, killed when it runs over.
//!
//! - list: `sinfo -h -N --all -o %N|%T|%E` (node, long state, reason);
//! - drain: `scontrol update nodename=N state=drain reason=R`;
//! - resume: `scontrol update nodename=N state=resume`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;

use crate::config::SlurmSettings;

use super::policy::NodeView;
use super::scheduler::{Listed, Scheduler, SchedulerError};

/// The Slurm client of one node.
#[derive(Debug, Clone)]
pub struct Slurm {
    node: String,
    settings: SlurmSettings,
}

impl Slurm {
    /// The client for `settings`' node, or this host's short name.
    pub fn new(settings: SlurmSettings) -> Slurm {
        let node = settings.node.clone().unwrap_or_else(short_hostname);
        Slurm { node, settings }
    }

    /// Runs `program` with `args`; its standard output, or why not.
    async fn run(&self, program: &Path, args: &[&str]) -> Result<String, SchedulerError> {
        let shown = program.display().to_string();
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(conf) = &self.settings.slurm_conf {
            command.env("SLURM_CONF", conf);
        }
        let child = command.spawn().map_err(|e| SchedulerError::Missing {
            program: shown.clone(),
            error: e.to_string(),
        })?;
        let output = tokio::time::timeout(self.settings.timeout, child.wait_with_output())
            .await
            .map_err(|_| SchedulerError::Timeout {
                program: shown.clone(),
                timeout: self.settings.timeout,
            })?
            .map_err(|e| SchedulerError::Missing {
                program: shown.clone(),
                error: e.to_string(),
            })?;
        let stderr: String =
            crate::escape::control_chars(String::from_utf8_lossy(&output.stderr).trim())
                .chars()
                .take(500)
                .collect();
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
        }
        Err(classify(
            &shown,
            args,
            &output.status.to_string(),
            stderr,
            &self.node,
        ))
    }
}

/// What a failed call's message says went wrong.
fn classify(
    program: &str,
    args: &[&str],
    status: &str,
    stderr: String,
    node: &str,
) -> SchedulerError {
    let lower = stderr.to_ascii_lowercase();
    let program = program.to_string();
    if [
        "unable to contact slurm controller",
        "connection refused",
        "socket timed out",
        "communication connection failure",
        "zero bytes were transmitted",
    ]
    .iter()
    .any(|m| lower.contains(m))
    {
        SchedulerError::Unreachable { program, stderr }
    } else if [
        "permission denied",
        "access/permission denied",
        "invalid user",
        "user not found",
        "not authorized",
    ]
    .iter()
    .any(|m| lower.contains(m))
    {
        SchedulerError::Permission { program, stderr }
    } else if lower.contains("invalid node name") {
        SchedulerError::UnknownNode {
            node: node.to_string(),
        }
    } else {
        SchedulerError::Failed {
            program: format!("{program} {}", args.first().copied().unwrap_or_default()),
            status: status.to_string(),
            stderr,
        }
    }
}

/// `sinfo`'s lines, each node once (a node in several partitions is listed
/// once per partition).
pub fn parse_sinfo(text: &str) -> Vec<Listed> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let mut fields = line.splitn(3, '|');
        let (Some(name), Some(state)) = (fields.next(), fields.next()) else {
            continue;
        };
        let name = name.trim();
        if name.is_empty() || !seen.insert(name.to_string()) {
            continue;
        }
        let reason = fields
            .next()
            .map(str::trim)
            .filter(|r| !r.is_empty() && *r != "none")
            .map(str::to_string);
        out.push(Listed {
            name: name.to_string(),
            view: NodeView {
                state: state.trim().to_ascii_lowercase(),
                reason,
            },
        });
    }
    out
}

impl Scheduler for Slurm {
    fn node(&self) -> &str {
        &self.node
    }

    async fn list(&self) -> Result<Vec<Listed>, SchedulerError> {
        let text = self
            .run(
                &self.settings.sinfo,
                &["-h", "-N", "--all", "-o", "%N|%T|%E"],
            )
            .await?;
        Ok(parse_sinfo(&text))
    }

    async fn drain(&self, reason: &str) -> Result<(), SchedulerError> {
        let node = format!("nodename={}", self.node);
        let reason = format!("reason={reason}");
        self.run(
            &self.settings.scontrol,
            &["update", &node, "state=drain", &reason],
        )
        .await
        .map(drop)
    }

    async fn resume(&self) -> Result<(), SchedulerError> {
        let node = format!("nodename={}", self.node);
        self.run(&self.settings.scontrol, &["update", &node, "state=resume"])
            .await
            .map(drop)
    }
}

/// This host's name up to the first dot, as Slurm names nodes by default.
pub fn short_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .and_then(|h| h.trim().split('.').next().map(str::to_string))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinfo_lines_give_each_node_once_with_its_reason() {
        let listed = parse_sinfo(
            "gpu-01|idle|none\ngpu-02|drained|gpuwatch: GPU 0 x needs RESET_GPU (a|b)\ngpu-01|idle|none\ngpu-03|down*|Not responding\n\n",
        );
        let names: Vec<_> = listed.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["gpu-01", "gpu-02", "gpu-03"]);
        assert_eq!(listed[0].view.reason, None);
        assert_eq!(
            listed[1].view.reason.as_deref(),
            Some("gpuwatch: GPU 0 x needs RESET_GPU (a|b)")
        );
        assert!(listed[1].view.ours() && !listed[2].view.ours());
        let census = super::super::scheduler::census("gpu-01", &listed).expect("listed");
        assert_eq!((census.drained_elsewhere, census.nodes), (1, 3));
        assert!(matches!(
            super::super::scheduler::census("gpu-09", &listed),
            Err(SchedulerError::UnknownNode { .. })
        ));
    }

    #[test]
    fn failures_are_told_apart_by_what_slurm_says() {
        let c = |stderr: &str| {
            classify(
                "scontrol",
                &["update"],
                "exit status: 1",
                stderr.into(),
                "n1",
            )
        };
        assert!(matches!(
            c("slurm_update error: Unable to contact slurm controller (connect failure)"),
            SchedulerError::Unreachable { .. }
        ));
        assert!(matches!(
            c("slurm_update error: Invalid user id"),
            SchedulerError::Permission { .. }
        ));
        assert!(matches!(
            c("slurm_update error: Invalid node name specified"),
            SchedulerError::UnknownNode { .. }
        ));
        assert!(matches!(c("something else"), SchedulerError::Failed { .. }));
    }

    #[tokio::test]
    async fn a_missing_program_says_what_to_install() {
        let slurm = Slurm::new(SlurmSettings {
            node: Some("n1".into()),
            sinfo: "/nonexistent/sinfo".into(),
            ..SlurmSettings::default()
        });
        let error = slurm.list().await.expect_err("no such program");
        assert!(error.to_string().contains("[remediation.slurm]"), "{error}");
        assert!(matches!(error, SchedulerError::Missing { .. }));
    }
}
