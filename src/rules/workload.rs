//! Workload-level rules (`workload_idle`): one alert per live workload of
//! the snapshot's workload table (a Slurm job, a pod, a container, a plain
//! process), judged on its SM-active seconds per GPU-second held over a
//! trailing window; and the words that name workloads in alerts (the
//! workload alert's labels, `{{ .workload }}`, and the `workloads`
//! annotation of per-GPU alerts).
//!
//! The rules read only [`crate::gpu::Snapshot::workloads`], the table the accounting
//! publishes: cumulative GPU-seconds held and SM-active seconds per
//! workload. The window is the rule's `for`: the ratio is the increase of
//! the SM-active seconds over the increase of the held seconds since a
//! sample at least `for` old. While the workload has been watched for
//! less than that, the ratio so far decides and the alert is pending; once
//! the window is full it fires at once. So a workload idle from its start
//! fires `for` after it began, and one that worked and then went idle
//! fires when the last `for` of its held time had SM activity below the
//! threshold (a trailing window: it resolves once the window's activity
//! climbs back over the threshold, or when the workload ends).
//!
//! Bounded: one window per (rule, live workload), at most
//! [`WINDOW_SAMPLES`] + 2 samples each; the workload table is capped by
//! the accounting (512 live workloads), and windows of workloads no longer
//! live are dropped.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use super::rule::Target;
use crate::gpu::{Workload, WorkloadKind, WorkloadTable, MPS_SERVER_NAME};

/// Samples kept per window: the window's start is known to within
/// `for / WINDOW_SAMPLES` (1 minute of a 30-minute window).
pub const WINDOW_SAMPLES: u32 = 30;

/// Workloads named in a per-GPU alert's `workloads` annotation; more are
/// counted ("+N more").
pub const NAMED_ON_GPU: usize = 3;

/// One sample of a workload's cumulative figures.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sample {
    at: SystemTime,
    held: f64,
    active: f64,
}

/// A workload's recent cumulative figures, for its ratio over the window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IdleWindow {
    samples: VecDeque<Sample>,
}

/// What a window says at one evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// SM-active seconds per GPU-second held over the window (or since the
    /// first sample, while the window is not full); `None` before any
    /// second was held.
    pub ratio: Option<f64>,
    /// Whether a sample at least the window old exists.
    pub full: bool,
}

impl IdleWindow {
    /// Adds the workload's totals at `at` (`held` GPU-seconds, `active`
    /// SM-active seconds) and reads the ratio over the `window` before it.
    pub fn observe(&mut self, at: SystemTime, held: f64, active: f64, window: Duration) -> Reading {
        // A clock stepped back, or totals that restarted (a new workload
        // with the same key): start over.
        if self
            .samples
            .back()
            .is_some_and(|b| b.at > at || b.held > held || b.active > active)
        {
            self.samples.clear();
        }
        let start = at.checked_sub(window);
        let earlier = |s: &&Sample| s.at < at;
        let full_base = start.and_then(|start| {
            self.samples
                .iter()
                .rev()
                .filter(earlier)
                .find(|s| s.at <= start)
        });
        let base = full_base.or_else(|| self.samples.iter().find(earlier));
        let reading = Reading {
            ratio: base.and_then(|b| {
                let held = held - b.held;
                (held > 0.0).then(|| ((active - b.active) / held).clamp(0.0, 1.0))
            }),
            full: full_base.is_some(),
        };
        let every = (window / WINDOW_SAMPLES).max(Duration::from_secs(1));
        if self.samples.back().is_none_or(|b| b.at + every <= at) {
            self.samples.push_back(Sample { at, held, active });
        }
        // Keep one sample at or before the window's start, none older.
        while self.samples.len() >= 2 && start.is_some_and(|start| self.samples[1].at <= start) {
            self.samples.pop_front();
        }
        reading
    }

    /// Samples held (for the bound's test).
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether no sample is held.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

/// The alert target of a workload.
pub fn target(workload: &Workload) -> Target {
    Target::Workload {
        kind: workload.key.kind.as_str().to_string(),
        id: workload.key.id.clone(),
    }
}

/// Whether a workload rule judges `workload`: of one of `kinds` (all when
/// empty), and not an MPS server (infrastructure: its clients are the
/// workloads).
pub(super) fn judged(workload: &Workload, kinds: &[WorkloadKind]) -> bool {
    let mps_server = workload.key.kind == WorkloadKind::Process
        && workload.attributes.command.as_deref() == Some(MPS_SERVER_NAME);
    !mps_server && (kinds.is_empty() || kinds.contains(&workload.key.kind))
}

/// The labels a workload alert adds: `kind`, `workload` (the id), `user`,
/// `account` (Slurm), `namespace` (pods) where known, and `gpus`.
pub fn labels(workload: &Workload, labels: &mut BTreeMap<String, String>) {
    labels.insert("kind".into(), workload.key.kind.as_str().into());
    labels.insert("workload".into(), workload.key.id.clone());
    let a = &workload.attributes;
    for (name, value) in [
        ("user", &a.user),
        ("account", &a.account),
        ("namespace", &a.namespace),
    ] {
        if let Some(value) = value.as_ref().filter(|v| !v.is_empty()) {
            labels.insert(name.into(), value.clone());
        }
    }
    labels.insert("gpus".into(), gpus(workload));
}

/// The GPU indexes a workload used, e.g. "0,1".
pub fn gpus(workload: &Workload) -> String {
    let indexes: BTreeSet<u32> = workload.devices.keys().map(|d| d.gpu).collect();
    let list: Vec<String> = indexes.iter().map(u32::to_string).collect();
    list.join(",")
}

/// A workload in words, for `{{ .workload }}`: "Slurm job 1234 of alice
/// (account physics, partition gpu)", "pod ml/trainer-0 of root",
/// "container 1a2b3c4d5e6f of bob (python3)", "process 4242 of bob
/// (python3)".
pub fn describe(workload: &Workload) -> String {
    let a = &workload.attributes;
    let mut out = match workload.key.kind {
        WorkloadKind::SlurmJob => format!("Slurm job {}", workload.key.id),
        WorkloadKind::Pod => format!("pod {}", workload.key.id),
        WorkloadKind::Container => format!("container {}", short_id(workload)),
        WorkloadKind::Process => format!("process {}", workload.key.id),
    };
    if let Some(user) = &a.user {
        let _ = write!(out, " of {user}");
    }
    let mut more = Vec::new();
    if let Some(account) = &a.account {
        more.push(format!("account {account}"));
    }
    if let Some(partition) = &a.partition {
        more.push(format!("partition {partition}"));
    }
    if matches!(
        workload.key.kind,
        WorkloadKind::Container | WorkloadKind::Process
    ) {
        more.extend(a.command.clone());
    }
    if !more.is_empty() {
        let _ = write!(out, " ({})", more.join(", "));
    }
    out
}

/// A container id cut to 12 characters, as docker shows it.
fn short_id(workload: &Workload) -> &str {
    let id = workload.key.id.as_str();
    id.char_indices().nth(12).map_or(id, |(i, _)| &id[..i])
}

/// A workload briefly, for lists: "slurm_job 1234 (alice)".
fn brief(workload: &Workload, ended: bool) -> String {
    let id = match workload.key.kind {
        WorkloadKind::Container => short_id(workload),
        _ => workload.key.id.as_str(),
    };
    let mut out = format!("{} {id}", workload.key.kind.as_str());
    let mut notes: Vec<&str> = workload
        .attributes
        .user
        .iter()
        .map(String::as_str)
        .collect();
    if ended {
        notes.push("ended");
    }
    if !notes.is_empty() {
        let _ = write!(out, " ({})", notes.join(", "));
    }
    out
}

/// The workloads on GPU `index`, for a per-GPU alert's `workloads`
/// annotation: those running, then those that ended within the table's
/// keep (a job an Xid killed), newest first; at most [`NAMED_ON_GPU`]
/// named, then "+N more". `None` when none used the GPU.
pub fn on_gpu(table: &WorkloadTable, index: u32) -> Option<String> {
    let uses = |w: &&Workload| w.devices.keys().any(|d| d.gpu == index);
    let live = table.live.iter().filter(uses).map(|w| (w, false));
    let ended = table.ended.iter().rev().filter(uses).map(|w| (w, true));
    let mut named = Vec::new();
    let mut more = 0usize;
    for (workload, ended) in live.chain(ended) {
        if named.len() < NAMED_ON_GPU {
            named.push(brief(workload, ended));
        } else {
            more += 1;
        }
    }
    if named.is_empty() {
        return None;
    }
    let mut out = named.join(", ");
    if more > 0 {
        let _ = write!(out, " +{more} more");
    }
    Some(out)
}

#[cfg(test)]
#[path = "workload_tests.rs"]
mod tests;
